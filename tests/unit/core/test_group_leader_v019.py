"""Kueue v0.19.1 places a PodSet group's leader so that its workers still fit (#13766, with
v0.18's counting of what hosting the leader costs, #10783); v0.17.0 does not. Restated from
Kueue v0.19.2's ``pkg/cache/scheduler/tas_cache_test.go`` TestFindTopologyAssignments, the
cases the fix added (names below). Not gated in Kueue: toposched follows ``--kueue-version``
(``PlacementGates.leader_keeps_worker_capacity``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates
from scheduler.core.nodes import NodeInfo
from scheduler.core.placement.planner import place_workload
from scheduler.core.placement.types import PlacementGates
from scheduler.core.topology_request import SliceConstraint, TopologyRequest
from scheduler.core.workload import PodSetSpec
from tests.unit.core._helpers import HOST, RACK, node, per_node, tree_of

GPU = "example.com/gpu"


def host(name: str, cpu: int = 0, gpu: int = 0) -> NodeInfo:
    return node(name, "b1", "r1", cpu, pods=10, extra={GPU: gpu} if gpu else None)


def pod_set(name: str, count: int, cpu_milli: int = 0, gpu: int = 0, **topo: object) -> PodSetSpec:
    requests = {**({"cpu": cpu_milli} if cpu_milli else {}), **({GPU: gpu} if gpu else {})}
    return PodSetSpec(name, count, requests, TopologyRequest(group_name="sameGroup", **topo))  # type: ignore[arg-type]


def gates(release: str) -> PlacementGates:
    return PlacementGates.from_gates(FeatureGates(release=release).enabled, release)


@dataclass
class Case:
    id: str
    nodes: list[NodeInfo]
    levels: tuple[str, ...]
    leader: PodSetSpec
    workers: PodSetSpec
    want_leader: dict[str, int]
    want_workers: dict[str, int]


CASES = [
    Case("find topology assignment for grouped podsets preserves worker capacity when placing leader",
         [host("h1", 2), host("h2", 4), host("h3", 3)], (RACK, HOST),
         pod_set("leader", 1, 1000, required=RACK), pod_set("workers", 4, 2000, required=RACK),
         {"h3": 1}, {"h1": 1, "h2": 2, "h3": 1}),
    Case("find topology assignment for sliced grouped podsets preserves worker capacity when placing leader",
         [host("h1", 2), host("h2", 4), host("h3", 3)], (RACK, HOST),
         pod_set("leader", 1, 1000, required=RACK),
         pod_set("workers", 8, 1000, required=RACK, slice_constraints=(SliceConstraint(HOST, 2),)),
         {"h3": 1}, {"h1": 2, "h2": 4, "h3": 2}),
    Case("find topology assignment for preferred grouped podsets preserves capacity across domains",
         [host("h1", 8), host("h2", 3)], (HOST,),
         pod_set("leader", 1, 1000, preferred=HOST), pod_set("workers", 5, 2000, preferred=HOST),
         {"h2": 1}, {"h1": 4, "h2": 1}),
    Case("find topology assignment for unconstrained grouped podsets spreads leader and worker across domains "
         "with TASProfileMixed",
         [host("h1", cpu=1), host("h2", gpu=1)], (HOST,),
         pod_set("leader", 1, 1000, unconstrained=True), pod_set("workers", 1, gpu=1, unconstrained=True),
         {"h1": 1}, {"h2": 1}),
    Case("find topology assignment for grouped podsets preserves leader below the slice level",
         [host("leader-host", cpu=1), host("worker-host", gpu=1)], (RACK, HOST),
         pod_set("leader", 1, 1000, required=RACK, slice_constraints=(SliceConstraint(RACK, 1),)),
         pod_set("workers", 1, gpu=1, required=RACK, slice_constraints=(SliceConstraint(RACK, 1),)),
         {"leader-host": 1}, {"worker-host": 1}),
]


@pytest.mark.parametrize("solver", ["greedy", "auto"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_v019_places_the_leader_where_the_workers_still_fit(case: Case, solver: str) -> None:
    tree = tree_of(case.nodes, case.levels)
    placement = place_workload(tree, [case.leader, case.workers], solver=solver, gates=gates(KUEUE_V019))
    assert placement.fits, placement.reason
    assert per_node(placement, 0) == case.want_leader
    assert per_node(placement, 1) == case.want_workers


@pytest.mark.parametrize("case", CASES[:4], ids=[c.id for c in CASES[:4]])
def test_v017_keeps_kueue_v017s_answer(case: Case) -> None:
    # Kueue v0.17.0 has none of the fix: the same groups do not fit there (its answer, kept).
    tree = tree_of(case.nodes, case.levels)
    assert not place_workload(tree, [case.leader, case.workers], solver="greedy", gates=gates(KUEUE_V017)).fits


@pytest.mark.parametrize("solver", ["greedy", "auto"])
def test_a_leader_v017_drops_below_the_slice_level_does_not_crash_the_placement(solver: str) -> None:
    # Found restating "preserves leader below the slice level": under v0.17 the CP-SAT pass
    # unpacked a leader Kueue's descent had not placed (ValueError on main).
    case = CASES[4]
    placement = place_workload(tree_of(case.nodes, case.levels), [case.leader, case.workers], solver=solver,
                               gates=gates(KUEUE_V017))
    assert placement.fits
    for solver_v019 in ("greedy", "auto"):
        p = place_workload(tree_of(case.nodes, case.levels), [case.leader, case.workers], solver=solver_v019,
                           gates=gates(KUEUE_V019))
        assert (per_node(p, 0), per_node(p, 1)) == (case.want_leader, case.want_workers)
