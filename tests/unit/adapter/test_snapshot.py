"""scheduler.adapter on plain dicts: objects -> core values once, build_snapshot."""

from __future__ import annotations

import datetime as dt
from typing import Any

from scheduler.adapter import objects, workloads
from scheduler.adapter.cluster import admitted_placements, core_pods, flavor_trees
from scheduler.adapter.objects import ClusterObjects, holds_reservation
from scheduler.adapter.queues import cluster_queue_spec, empty_quota_state, priority_values, topology_levels
from scheduler.adapter.snapshot import build_snapshot, split_workloads
from scheduler.adapter.workloads import admitted_workload, pending_workload
from scheduler.extender import workload_view
from scheduler.kube import status

HOST = "kubernetes.io/hostname"
RACK = "topology.k8s.aws/network-node-layer-3"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def node(name: str, rack: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {HOST: name, RACK: rack, "pool": "gpu"}},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def condition(type_: str, status: str = "True", reason: str = "", at: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "lastTransitionTime": at}


def workload(name: str, gpus: int = 8, count: int = 2, **status: Any) -> dict[str, Any]:
    return {"kind": "Workload", "metadata": {"name": name, "namespace": "ns", "uid": name,
                                             "creationTimestamp": "2025-12-31T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": count, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}}]},
            "status": status}


ADMITTED = workload("running", conditions=[condition("QuotaReserved"), condition("Admitted")], admission={
    "clusterQueue": "cq", "podSetAssignments": [{
        "name": "main", "flavors": {"nvidia.com/gpu": "p5"}, "resourceUsage": {"nvidia.com/gpu": "16"}, "count": 2,
        "topologyAssignment": {"levels": [HOST], "domains": [{"values": ["n0"], "count": 1},
                                                             {"values": ["n1"], "count": 1}]}}]})
PENDING = workload("waiting", conditions=[condition("Evicted", reason="PodsReadyTimeout",
                                                    at="2026-01-01T00:01:00Z")],
                   requeueState={"requeueAt": "2026-01-01T00:05:00Z"})
FINISHED = workload("done", conditions=[condition("QuotaReserved"), condition("Finished")],
                    admission=ADMITTED["status"]["admission"])
INACTIVE = workload("off") | {"spec": {**workload("off")["spec"], "active": False}}
FLAVOR = {"metadata": {"name": "p5"}, "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": "t"}}
PLAIN = {"metadata": {"name": "cpu"}, "spec": {}}
TOPOLOGY = {"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}}
CQ_V1BETA1 = {"apiVersion": "kueue.x-k8s.io/v1beta1", "metadata": {"name": "cq"}, "spec": {
    "cohort": "all", "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "p5", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 32}]}]}]}}
OBJECTS = ClusterObjects(
    nodes=[node(f"n{i}", f"r{i // 2}") for i in range(4)],
    pods=[{"metadata": {"name": "p", "namespace": "x"}, "spec": {"nodeName": "n3", "containers": [
        {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]}, "status": {"phase": "Running"}},
          {"metadata": {"name": "old", "namespace": "x"}, "spec": {"nodeName": "n3"}, "status": {"phase": "Succeeded"}},
          {"metadata": {"name": "unbound", "namespace": "x"}, "spec": {}}],
    workloads=[ADMITTED, PENDING, FINISHED, INACTIVE],
    cluster_queues=[CQ_V1BETA1],
    local_queues=[{"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}],
    flavors=[FLAVOR, PLAIN], topologies=[TOPOLOGY],
    namespaces=[{"metadata": {"name": "ns", "labels": {"team": "a"}}}],
    workload_priority_classes=[{"metadata": {"name": "high"}, "value": 100}],
)


def test_split_and_reservation() -> None:
    split = split_workloads(list(OBJECTS.workloads))
    assert [w["metadata"]["name"] for w in split.holding] == ["running"]
    assert [w["metadata"]["name"] for w in split.pending] == ["waiting"]
    assert holds_reservation(ADMITTED) and not holds_reservation(FINISHED) and not holds_reservation(PENDING)


def test_build_snapshot_converts_every_kind_once() -> None:
    snap = build_snapshot(OBJECTS, NOW, solver="greedy", time_budget_s=0.5)
    assert snap.now == NOW.timestamp() and snap.solver == "greedy" and snap.time_budget_s == 0.5
    assert snap.cluster_queues["cq"].cohort == "all"  # v1beta1 spelling
    assert snap.local_queues["ns/lq"].cluster_queue == "cq"
    assert set(snap.flavors) == {"p5", "cpu"} and set(snap.trees) == {"p5"}
    assert snap.workload_priority_classes == {"high": 100}
    assert snap.namespace_labels == {"ns": {"team": "a"}}
    (pending,) = snap.pending
    assert pending.key == "ns/waiting" and pending.namespace_labels == {"team": "a"}
    assert pending.queued_at == dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.UTC).timestamp()
    (admitted,) = snap.admitted
    assert admitted.usage == {("p5", "nvidia.com/gpu"): 16}
    assert admitted.tas[0].flavor == "p5" and admitted.tas[0].placement.count == 2
    tree = snap.trees["p5"]
    gpu = tree.resources.index("nvidia.com/gpu")
    free = {tree.leaf_nodes[leaf][0]: int(tree.free[leaf, gpu]) for leaf in range(tree.n_leaves)}
    assert free == {"n0": 0, "n1": 0, "n2": 8, "n3": 4}  # admitted TAS usage and the running pod


def test_workload_converters() -> None:
    pending = pending_workload(PENDING, {"a": "b"})
    assert pending.requeue_at is not None and pending.priority is None and pending.namespace_labels == {"a": "b"}
    admitted = admitted_workload(ADMITTED, {"p5"})
    assert admitted.cluster_queue == "cq" and admitted.reserved_at > 0 and not admitted.evicted
    placement, per_pod, flavor = admitted_placements(ADMITTED)[0]
    assert flavor == "p5" and per_pod == {"nvidia.com/gpu": 8} and placement.count == 2
    assert admitted_placements(PENDING) == []


def test_pods_and_trees() -> None:
    assert [p.name for p in core_pods(OBJECTS.pods)] == ["p"]
    trees = flavor_trees([FLAVOR], {"t": TOPOLOGY}, [], [], [ADMITTED])
    assert trees["p5"].n_leaves == 0
    assert flavor_trees([PLAIN], {"t": TOPOLOGY}, [], [], []) == {}


def test_queue_helpers() -> None:
    assert topology_levels(TOPOLOGY) == (RACK, HOST)
    assert priority_values([{"metadata": {"name": "x"}}]) == {"x": 0}
    quota = empty_quota_state([cluster_queue_spec(CQ_V1BETA1)])
    assert quota.potential_available("cq", ("p5", "nvidia.com/gpu")) == 32


def test_one_reader_of_a_reservation_for_the_controller_the_snapshot_and_the_extender() -> None:
    """kube.status, the snapshot and the extender read a Workload's reservation and topology
    assignments through the adapter's one reader each (issue 33)."""
    assert status.has_reservation is objects.has_reservation
    assert holds_reservation(ADMITTED) and objects.has_reservation(FINISHED) and not holds_reservation(FINISHED)
    assert workload_view.topology_assignments is workloads.topology_assignments
