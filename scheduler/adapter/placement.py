"""Build a tree and compute a placement from objects: ``toposched place`` and gRPC ``Place``.

Both doors call these functions (the CLI with files read by :mod:`scheduler.adapter.files`,
the servicer with the request's bytes or the live snapshot's tree), so they give the same
answers and the same JSON document. Pod sets without a topology request are placed as
Kueue's implicit TAS does on a TAS-only ClusterQueue (unconstrained).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.core.nodes import NodeInfo, PodInfo
from scheduler.core.placement.planner import Placement, PodSetPlacement, place_workload
from scheduler.core.topology import DEFAULT_TOPOLOGY_NAME, TopologyTree, default_levels_for
from scheduler.core.workload import WorkloadSpec


def touched_domains(tree: TopologyTree, ps: PodSetPlacement) -> dict[str, list[str]]:
    """Distinct domain values touched at every topology level."""
    out: dict[str, set[str]] = {level: set() for level in tree.levels}
    for dom in ps.domains:
        leaf = tree.leaf_for_values(ps.levels, dom.values)
        if leaf is None:
            continue
        path = tree.paths[-1][leaf]
        for level, value in zip(tree.levels, path, strict=True):
            out[level].add(value)
    return {level: sorted(values) for level, values in out.items()}


def node_assignments(tree: TopologyTree, ps: PodSetPlacement) -> list[dict[str, Any]]:
    rows = []
    for dom in ps.domains:
        leaf = tree.leaf_for_values(ps.levels, dom.values)
        nodes = tree.leaf_nodes[leaf] if leaf is not None else ()
        # A leaf is one node when hostname is the lowest level; otherwise name the leaf domain.
        name = nodes[0] if len(nodes) == 1 else "/".join(dom.values)
        rows.append({"node": name, "count": dom.count})
    return rows


def to_json(tree: TopologyTree, placement: Placement) -> dict[str, Any]:
    return {
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


def compute_placement(tree: TopologyTree, workload: WorkloadSpec, solver: str, time_budget_ms: float) -> Placement:
    """``toposched place`` semantics: implicit TAS for pod sets without a topology request."""
    return place_workload(
        tree,
        workload.pod_sets,
        solver=solver,
        time_budget_s=max(time_budget_ms, 0) / 1000.0,
        implied_tas=True,
    )
