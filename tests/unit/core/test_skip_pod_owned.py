"""SkipReassignmentForPodOwnedWorkloads (beta on in Kueue v0.19, not in v0.17.0): a Workload
owned by one plain Pod keeps its topology assignment when its node fails (no hot swap, no
NodeFailures eviction), and is not requeued after an eviction. Restated from Kueue v0.19.2's
``pkg/cache/scheduler/tas_cache_test.go`` (the node-replacement table): "node replacement
skipped for single-Pod-owned workload; gate on", "node replaced for Job-owned workload; gate
on", "node replaced for pod-group workload with two Pod owners; gate on", "node replaced for
size-1 pod-group workload (is-group-workload annotation); gate on", "node replaced for
single-Pod-owned workload; gate off"; and ``pkg/controller/jobframework/reconciler.go``
(``setRequeued = false``)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.adapter.kinds.pod import owned_by_single_pod
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates
from scheduler.core.kueue.admitted import TASUsage
from scheduler.core.kueue.failures import FailureTracker, PlacedWorkload, ReplaceNodes, node_failure_decisions
from scheduler.core.nodes import HOSTNAME_LABEL, NodeCondition, NodeInfo
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import TopologyRequest

POD = {"apiVersion": "v1", "kind": "Pod", "name": "owner-0", "uid": "uid-0"}
JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "owner-0", "uid": "uid-0"}
GROUP = {"kueue.x-k8s.io/is-group-workload": "true"}


def workload(owners: list[dict[str, str]], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "wl", "namespace": "ns", "ownerReferences": owners}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta}


RACK = "cloud.com/topology-rack"


def host(name: str) -> NodeInfo:
    return NodeInfo(name=name, labels={RACK: "r1", HOSTNAME_LABEL: name}, allocatable={"cpu": 1000, "pods": 10},
                    conditions=(NodeCondition("Ready", "True"),))


def decide(wl: dict[str, Any], skip: bool) -> dict[str, int] | None:
    """x1 (holding the pod) failed, x2 free: where the pod goes (None: nowhere, kept on x1).
    Kueue's table uses one hostname level with a required hostname; toposched keeps a required
    hostname pod on its host (no replacement), so the same two hosts sit in one required rack."""
    tree = TopologyTree.build("default", (RACK, HOSTNAME_LABEL), [host("x2")])  # a failed node is not in the tree
    placement = PodSetPlacement("main", 1, (HOSTNAME_LABEL,), (DomainAssignment(("x1",), 1),))
    placed = PlacedWorkload("ns/wl", (TASUsage("tas", placement, {"cpu": 1000}),),
                            {"main": TopologyRequest(required=RACK)}, owned_by_single_pod(wl))
    tracker = FailureTracker(grace_s=0)
    tracker.observe_deleted("x1")
    decisions = node_failure_decisions([placed], tracker, {"tas": tree}, 10.0, {"x1": {RACK: "r1"}},
                                       skip_pod_owned=skip)
    if not decisions:
        return None
    (decision,) = decisions
    assert isinstance(decision, ReplaceNodes)
    return {d.values[0]: d.count for d in decision.placements[0].domains}


@pytest.mark.parametrize(("owners", "annotations", "skip", "want"), [
    ([POD], None, True, None),  # node replacement skipped for single-Pod-owned workload; gate on
    ([JOB], None, True, {"x2": 1}),  # node replaced for Job-owned workload; gate on
    ([POD, {**POD, "name": "owner-1", "uid": "uid-1"}], None, True, {"x2": 1}),  # two Pod owners
    ([POD], GROUP, True, {"x2": 1}),  # size-1 pod-group workload (is-group-workload annotation)
    ([POD], None, False, {"x2": 1}),  # node replaced for single-Pod-owned workload; gate off
], ids=["single Pod owner, gate on", "Job owner", "two Pod owners", "pod group of one", "gate off"])
def test_a_pod_owned_workload_keeps_its_node(owners: list[dict[str, str]], annotations: dict[str, str] | None,
                                             skip: bool, want: dict[str, int] | None) -> None:
    assert decide(workload(owners, annotations), skip) == want


def test_the_gate_is_on_in_v019_only() -> None:
    assert FeatureGates(release=KUEUE_V019).enabled("SkipReassignmentForPodOwnedWorkloads")
    assert not FeatureGates(release=KUEUE_V017).enabled("SkipReassignmentForPodOwnedWorkloads")


def test_a_pod_of_another_api_group_is_not_a_plain_pod() -> None:
    assert not owned_by_single_pod(workload([{**POD, "apiVersion": "example.com/v1"}]))
    assert not owned_by_single_pod({"metadata": {"ownerReferences": "not a list"}})
