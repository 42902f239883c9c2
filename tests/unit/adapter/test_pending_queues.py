"""The pending queues kept between passes (scheduler.adapter.pending_queues.QueueMemo) are
exactly the queues built afresh, and the cycle decides the same on either, through adds,
updates (priority, timestamps, queue moves), deletes and priority-class changes."""

from __future__ import annotations

import copy
import datetime as dt
import random
from dataclasses import replace
from typing import Any

from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.objects import ClusterObjects
from scheduler.adapter.pending_queues import QueueMemo
from scheduler.adapter.snapshot import build_snapshot
from scheduler.core.fakecluster import generate_nodes
from scheduler.core.kueue.cycle import run_cycle, run_cycles
from scheduler.core.kueue.decisions import Admit
from scheduler.core.kueue.queueing import PendingQueues, PendingWorkload, pending_queues
from scheduler.core.kueue.snapshot import after_decisions
from scheduler.core.workload import WorkloadSpec

GPU = "nvidia.com/gpu"
LAYER = "topology.k8s.aws/network-node-layer-2"
NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
QUEUES = 3


def cluster() -> ClusterObjects:
    nodes = generate_nodes({"name": "pq", "instanceType": "ml.p5.48xlarge", "layers": [1, 2], "nodesPerDomain": 2})
    for i, n in enumerate(nodes):
        n["metadata"]["resourceVersion"] = str(i + 1)
    cqs = [{"metadata": {"name": f"cq-{q}", "generation": 1}, "spec": {
        "cohortName": "all", "namespaceSelector": {}, "queueingStrategy": "StrictFIFO" if q == 2 else "BestEffortFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "p5", "resources": [
            {"name": GPU, "nominalQuota": "16"}]}]}]}} for q in range(QUEUES)]
    lqs = [{"metadata": {"name": f"lq-{q}", "namespace": "ns"}, "spec": {"clusterQueue": f"cq-{q % QUEUES}"}}
           for q in range(QUEUES + 1)]
    return ClusterObjects(
        nodes=nodes, cluster_queues=cqs, local_queues=lqs, namespaces=[{"metadata": {"name": "ns"}}],
        flavors=[{"metadata": {"name": "p5"}, "spec": {
            "nodeLabels": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}, "topologyName": "t"}}],
        topologies=[{"metadata": {"name": "t"}, "spec": {"levels": [
            {"nodeLabel": "topology.k8s.aws/network-node-layer-1"}, {"nodeLabel": LAYER},
            {"nodeLabel": "kubernetes.io/hostname"}]}}],
        workload_priority_classes=[{"metadata": {"name": "high"}, "value": 5}])


def workload(rng: random.Random, i: int, rv: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"queueName": f"lq-{rng.randrange(QUEUES + 2)}",  # lq-4: no such LocalQueue
                            "priority": rng.randrange(3), "active": True, "podSets": [{
                                "name": "main", "count": rng.choice([1, 2, 4]), "topologyRequest": {
                                    rng.choice(["required", "preferred"]): LAYER},
                                "template": {"spec": {"containers": [{
                                    "name": "c", "resources": {"requests": {GPU: "8"}}}]}}}]}
    if rng.random() < 0.3:  # no spec.priority: the class's value orders it
        del spec["priority"]
        spec["priorityClassName"] = "high"
    return {"metadata": {"name": f"wl-{i}", "namespace": "ns", "uid": f"uid-{i}", "resourceVersion": str(rv),
                         "creationTimestamp": f"2026-01-01T00:{rng.randrange(60):02d}:00Z"}, "spec": spec}


def mutate(rng: random.Random, wls: dict[str, dict[str, Any]], next_id: list[int], rv: list[int]) -> None:
    """One pass's worth of changes: a few adds, deletes and updates (each a new resourceVersion)."""
    for _ in range(rng.randrange(4)):
        next_id[0] += 1
        rv[0] += 1
        wl = workload(rng, next_id[0], rv[0])
        wls[wl["metadata"]["name"]] = wl
    for name in rng.sample(sorted(wls), min(len(wls), rng.randrange(3))):
        del wls[name]
    for name in rng.sample(sorted(wls), min(len(wls), rng.randrange(5))):
        wl = copy.deepcopy(wls[name])
        rv[0] += 1
        wl["metadata"]["resourceVersion"] = str(rv[0])
        change = rng.randrange(4)
        if change == 0:
            wl["spec"]["priority"] = rng.randrange(5)
        elif change == 1:
            wl["metadata"]["creationTimestamp"] = f"2026-01-01T01:{rng.randrange(60):02d}:00Z"
        elif change == 2:
            wl["spec"]["queueName"] = f"lq-{rng.randrange(QUEUES + 2)}"
        else:
            wl["status"] = {"requeueState": {"requeueAt": "2026-01-02T00:00:30Z"}}  # in backoff
        wls[name] = wl


def test_kept_queues_equal_fresh_ones_and_decide_the_same_through_changes() -> None:
    rng = random.Random(7)
    base = cluster()
    caches = SnapshotCaches()  # one builder, snapshot after snapshot: its queues are kept
    rv, next_id = [1000], [0]
    wls: dict[str, dict[str, Any]] = {}
    for _ in range(40):
        next_id[0] += 1
        rv[0] += 1
        wl = workload(rng, next_id[0], rv[0])
        wls[wl["metadata"]["name"]] = wl
    wpc = base.workload_priority_classes
    for step in range(30):
        mutate(rng, wls, next_id, rv)
        if step % 10 == 9:  # a priority class changes value: every queue may re-order
            wpc = [{"metadata": {"name": "high"}, "value": step}]
        objects = replace(base, workloads=list(wls.values()), workload_priority_classes=wpc)
        snap = build_snapshot(objects, NOW, solver="greedy", caches=caches)
        assert snap.queues is not None
        assert snap.queues.describes(snap.pending, snap.workload_priority_classes, snap.priority_classes)
        fresh = pending_queues(snap.pending, snap.workload_priority_classes, snap.priority_classes)
        assert snap.queues.by_local_queue == fresh.by_local_queue, step
        inadmissible = frozenset(rng.sample(sorted(wls), 3))
        kept, rebuilt = replace(snap, inadmissible=inadmissible), replace(snap, inadmissible=inadmissible, queues=None)
        assert run_cycle(kept) == run_cycle(rebuilt), step
        assert run_cycles(kept) == run_cycles(rebuilt), step


def pw(name: str, priority: int, created: float, queue: str = "lq") -> PendingWorkload:
    return PendingWorkload(WorkloadSpec(name=name, namespace="ns", pod_sets=(), queue_name=queue, created_at=created),
                           priority=priority)


def test_only_the_changed_local_queues_are_rebuilt() -> None:
    memo = QueueMemo()
    a, b, c = pw("a", 1, 10.0), pw("b", 2, 20.0), pw("c", 0, 5.0, queue="other")
    first = memo.queues((a, b, c), {}, {})
    assert [item[1].key for item in first.by_local_queue["ns/lq"]] == ["ns/b", "ns/a"]  # priority first
    a2 = replace(a, priority=3)  # an update: a new conversion of the same key
    second = memo.queues((a2, b, c), {}, {})
    assert [item[1] for item in second.by_local_queue["ns/lq"]] == [a2, b]
    assert second.by_local_queue["ns/other"] is first.by_local_queue["ns/other"]  # untouched: kept as is
    third = memo.queues((a2, b), {}, {})  # c deleted: its LocalQueue has nothing left
    assert "ns/other" not in third.by_local_queue
    assert third.by_local_queue == pending_queues((a2, b), {}, {}).by_local_queue


def test_a_cycle_ignores_queues_made_for_other_pending_workloads() -> None:
    base = cluster()
    rng = random.Random(3)
    objects = replace(base, workloads=[workload(rng, i, 100 + i) for i in range(12)])
    snap = build_snapshot(objects, NOW, solver="greedy")
    stale = PendingQueues((), {}, {}, {})  # e.g. a snapshot whose pending was replaced afterwards
    assert run_cycle(replace(snap, queues=stale)) == run_cycle(replace(snap, queues=None))
    assert not stale.describes(snap.pending, snap.workload_priority_classes, snap.priority_classes)


def test_after_decisions_keeps_the_queues_of_the_workloads_left() -> None:
    base = cluster()
    rng = random.Random(5)
    objects = replace(base, workloads=[workload(rng, i, 200 + i) for i in range(20)])
    snap = build_snapshot(objects, NOW, solver="greedy")
    decisions = run_cycle(snap)
    assert any(isinstance(d, Admit) for d in decisions)
    after = after_decisions(snap, decisions)
    assert after.queues is not None
    assert after.queues.describes(after.pending, after.workload_priority_classes, after.priority_classes)
    assert after.queues.by_local_queue == pending_queues(
        after.pending, after.workload_priority_classes, after.priority_classes).by_local_queue
