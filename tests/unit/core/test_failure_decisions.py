"""Node failures as decisions: replace-or-evict from (placed workloads, the record of
unhealthy nodes, trees), the same function for the controller and the simulator."""

from __future__ import annotations

from scheduler.core.kueue.admitted import TASUsage
from scheduler.core.kueue.failures import (
    EvictForNodeFailure,
    FailureTracker,
    PlacedWorkload,
    ReplaceNodes,
    apply_replacement,
    multiple_failures_message,
    no_replacement_message,
    node_failure_decisions,
    pods_per_node,
)
from scheduler.core.nodes import HOSTNAME_LABEL, NodeCondition, NodeInfo
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import TopologyRequest

RACK = "rack"
LEVELS = (RACK, HOSTNAME_LABEL)
PER_POD = {"nvidia.com/gpu": 8}
READY = (NodeCondition("Ready", "True"),)
NODES = {name: NodeInfo(name=name, labels={RACK: rack, HOSTNAME_LABEL: name},
                        allocatable={"nvidia.com/gpu": 8, "pods": 110}, conditions=READY)
         for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r1"), ("n4", "r2"))}


def workload(key: str, hosts: dict[str, int]) -> PlacedWorkload:
    placement = PodSetPlacement("main", sum(hosts.values()), (HOSTNAME_LABEL,),
                                tuple(DomainAssignment((h,), c) for h, c in sorted(hosts.items())))
    return PlacedWorkload(key, (TASUsage("gpu", placement, PER_POD),), {"main": TopologyRequest(required=RACK)})


def trees(workloads: list[PlacedWorkload], failed: set[str]) -> dict[str, TopologyTree]:
    tree = TopologyTree.build("topo", LEVELS, [n for name, n in NODES.items() if name not in failed])
    for w in workloads:
        for u in w.tas:
            tree.add_usage(u.placement, u.per_pod)
    return {"gpu": tree}


def failed_at(nodes: set[str], since: float = 0.0) -> FailureTracker:
    tracker = FailureTracker(grace_s=3.0)
    for name in NODES:
        tracker.observe(name, name not in nodes, since)
    return tracker


LABELS = {name: n.labels for name, n in NODES.items()}


def test_nothing_is_decided_inside_the_grace_period() -> None:
    ws = [workload("ns/a", {"n1": 1})]
    assert node_failure_decisions(ws, failed_at({"n1"}), trees(ws, {"n1"}), 2.0, LABELS) == []


def test_two_workloads_never_take_the_same_spare() -> None:
    ws = [workload("ns/a", {"n1": 1}), workload("ns/b", {"n1": 1})]
    given = trees(ws, {"n1"})
    free_before = given["gpu"].free.copy()
    decisions = node_failure_decisions(ws, failed_at({"n1"}), given, 10.0, LABELS)
    # r1 has two spares (n2, n3): both replaced, on different nodes; the trees are untouched.
    assert [type(d) for d in decisions] == [ReplaceNodes, ReplaceNodes]
    moved = [pods_per_node(d.placements[0]) for d in decisions if isinstance(d, ReplaceNodes)]
    assert moved[0] != moved[1] and {h for m in moved for h in m} <= {"n2", "n3"}
    assert (given["gpu"].free == free_before).all()


def test_no_spare_in_the_required_rack_evicts_with_kueues_message() -> None:
    ws = [workload("ns/a", {"n1": 1, "n2": 1, "n3": 1})]
    (decision,) = node_failure_decisions(ws, failed_at({"n1"}), trees(ws, {"n1"}), 10.0, LABELS)
    assert decision == EvictForNodeFailure("ns/a", ("n1",), no_replacement_message(["n1"]))
    ws = [workload("ns/a", {"n1": 1, "n2": 1, "n3": 1})]
    (decision,) = node_failure_decisions(ws, failed_at({"n1", "n2"}), trees(ws, {"n1", "n2"}), 10.0, LABELS)
    assert decision == EvictForNodeFailure("ns/a", ("n1", "n2"), multiple_failures_message(["n1", "n2"]))


def test_release_evicted_frees_capacity_for_the_next_workload() -> None:
    # a fills r1's spare capacity and cannot be replaced; b (on n1 too) can use a's freed slots
    # only when evictions release at once (the simulator), not while pods terminate (controller).
    ws = [workload("ns/a", {"n1": 1, "n2": 1}), workload("ns/b", {"n1": 1})]
    extra = trees(ws, {"n1"})
    extra["gpu"].add_usage(PodSetPlacement("x", 1, (HOSTNAME_LABEL,), (DomainAssignment(("n3",), 1),)), PER_POD)
    kept = node_failure_decisions(ws, failed_at({"n1"}), extra, 10.0, LABELS)
    freed = node_failure_decisions(ws, failed_at({"n1"}), extra, 10.0, LABELS, release_evicted=True)
    assert [type(d) for d in kept] == [EvictForNodeFailure, EvictForNodeFailure]
    assert [type(d) for d in freed] == [EvictForNodeFailure, ReplaceNodes]


def test_apply_replacement_changes_only_the_moved_pod_set() -> None:
    moved = PodSetPlacement("main", 1, (HOSTNAME_LABEL,), (DomainAssignment(("n2",), 1),))
    other = PodSetPlacement("side", 1, (HOSTNAME_LABEL,), (DomainAssignment(("n4",), 1),))
    decision = ReplaceNodes("ns/a", ("n1",), (moved,))
    before = PodSetPlacement("main", 1, (HOSTNAME_LABEL,), (DomainAssignment(("n1",), 1),))
    assert apply_replacement(before, decision) == moved
    assert apply_replacement(other, decision) is other
