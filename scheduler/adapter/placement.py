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
from scheduler.core.topology_request import UNKNOWN_LEVEL_FIX, levels_used, unknown_level_detail
from scheduler.core.workload import WorkloadSpec
from scheduler.errors import UserError

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
    """The tree ``toposched place`` places on: the Topology's levels, else the HyperPod default.
    Every bound pod given uses capacity, those of topology-admitted workloads included (the
    controller counts those from their Workloads' assignments; a pod list has no Workloads).
    What no pod list shows: quota Kueue admitted whose pods are not bound yet."""
    name, levels = topology if topology else (DEFAULT_TOPOLOGY_NAME, default_levels_for(nodes))
    return TopologyTree.build(name, levels, nodes, pods, count_tas_pods=True)


# CP-SAT's time budget for one placement: a positive number of milliseconds, at most 10 minutes.
MAX_TIME_BUDGET_MS = 600_000


def check_time_budget_ms(value: float, flag: str = "--time-budget-ms") -> None:
    if not 1 <= value <= MAX_TIME_BUDGET_MS:  # NaN fails too
        raise UserError(f"{flag}: must be between 1 and {MAX_TIME_BUDGET_MS} milliseconds (10 minutes), got {value}")


def check_levels(tree: TopologyTree, workload: WorkloadSpec, where: str) -> None:
    """UserError (the webhook's words, listing the tree's levels) for a level a pod set asks
    for that the tree does not have: Kueue would never admit it, so it is the input's mistake,
    not a placement that does not fit."""
    for ps in workload.pod_sets:
        for level in levels_used(ps.topology) if ps.topology is not None else ():
            if not tree.has_level(level):
                raise UserError(f"{where}: pod set {ps.name}: {unknown_level_detail(level, tree.name, tree.levels)}; "
                                f"{UNKNOWN_LEVEL_FIX}")


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
        gates=PlacementGates.from_gates(gates.enabled, gates.release),
    )
