"""Build a tree and compute a placement from objects: ``toposched place`` and gRPC ``Place``.

Both doors call these functions (the CLI with files read by :mod:`scheduler.adapter.files`,
the servicer with the request's bytes or the live snapshot's tree), so they give the same
answers and the same JSON document. Pod sets without a topology request are placed as
Kueue's implicit TAS does on a TAS-only ClusterQueue (unconstrained).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.core.config import KueueConfig
from scheduler.core.nodes import NodeInfo, PodInfo
from scheduler.core.placement.planner import Placement, PlacementGates, PodSetPlacement, place_workload
from scheduler.core.topology import DEFAULT_TOPOLOGY_NAME, TopologyTree, default_levels_for
from scheduler.core.workload import WorkloadSpec

# The version of the JSON document below (``toposched place --output json`` and gRPC ``Place``);
# docs/placement.md "The place contract" says what each field means and when it changes.
PLACE_API_VERSION = "toposched.io/place/v1"
# Separator of the values in a domain path. Label values cannot contain "/", so a path is
# never ambiguous (two racks "r1" in different blocks are "b1/r1" and "b2/r1").
PATH_SEPARATOR = "/"


def domain_path(values: Sequence[str]) -> str:
    return PATH_SEPARATOR.join(values)


def touched_domains(tree: TopologyTree, ps: PodSetPlacement) -> dict[str, list[str]]:
    """Per topology level, the domains the pod set touches, each as its full value path from
    the top level down to that level (sorted)."""
    out: dict[str, set[str]] = {level: set() for level in tree.levels}
    for dom in ps.domains:
        leaf = tree.leaf_for_values(ps.levels, dom.values)
        if leaf is None:
            continue
        path = tree.paths[-1][leaf]
        for depth, level in enumerate(tree.levels, 1):
            out[level].add(domain_path(path[:depth]))
    return {level: sorted(values) for level, values in out.items()}


def node_assignments(tree: TopologyTree, ps: PodSetPlacement) -> list[dict[str, Any]]:
    """One row per leaf domain, named the same way whatever the lowest level is: its full
    value path, the nodes in it (sorted) and the pods placed there."""
    rows = []
    for dom in ps.domains:
        leaf = tree.leaf_for_values(ps.levels, dom.values)
        path = tree.paths[-1][leaf] if leaf is not None else tuple(dom.values)
        nodes = sorted(tree.leaf_nodes[leaf]) if leaf is not None else []
        rows.append({"domain": domain_path(path), "nodes": nodes, "count": dom.count})
    return rows


def to_json(tree: TopologyTree, placement: Placement) -> dict[str, Any]:
    return {
        "apiVersion": PLACE_API_VERSION,
        "topology": tree.name,
        "levels": list(tree.levels),
        "fits": placement.fits,
        "reason": placement.reason,
        "solver": placement.solver,
        "optimal": placement.optimal,
        "podSets": [
            {
                "name": ps.name,
                "count": ps.count,
                "assignments": node_assignments(tree, ps),
                "domains": touched_domains(tree, ps),
            }
            for ps in placement.pod_sets
        ],
    }


def build_tree(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
               topology: tuple[str, tuple[str, ...]] | None) -> TopologyTree:
    """The tree ``toposched place`` places on: the Topology's levels, else the HyperPod default."""
    name, levels = topology if topology else (DEFAULT_TOPOLOGY_NAME, default_levels_for(nodes))
    return TopologyTree.build(name, levels, nodes, pods)


def compute_placement(tree: TopologyTree, workload: WorkloadSpec, solver: str, time_budget_ms: float,
                      config: KueueConfig | None = None) -> Placement:
    """``toposched place`` semantics: implicit TAS for pod sets without a topology request;
    the feature gates of ``config`` (Kueue's defaults without one)."""
    gates = (config or KueueConfig()).feature_gates
    return place_workload(
        tree,
        workload.pod_sets,
        solver=solver,
        time_budget_s=max(time_budget_ms, 0) / 1000.0,
        implied_tas=True,
        gates=PlacementGates.from_gates(gates.enabled),
    )
