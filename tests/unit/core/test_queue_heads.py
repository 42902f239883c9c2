"""queueing.heads on queues grouped by LocalQueue: the head is the least workload by (LocalQueue
usage, priority desc, timestamp, UID, key) among those not in backoff and (BestEffortFIFO)
not parked; StrictFIFO ignores parking."""

from __future__ import annotations

from scheduler.core.kueue.queueing import PendingWorkload, heads, pending_queues
from scheduler.core.workload import WorkloadSpec


def pw(name: str, priority: int, created: float, queue: str, requeue_at: float | None = None,
       uid: str = "") -> PendingWorkload:
    spec = WorkloadSpec(name=name, namespace="ns", pod_sets=(), queue_name=queue, created_at=created, uid=uid)
    return PendingWorkload(spec, priority=priority, requeue_at=requeue_at)


def test_heads_across_local_queues() -> None:
    pending = (pw("a1", 1, 1.0, "a"), pw("a2", 5, 9.0, "a"), pw("b1", 5, 3.0, "b"), pw("b2", 0, 0.0, "b"),
               pw("c1", 9, 0.0, "c", requeue_at=100.0))
    groups = pending_queues(pending, {}, {}).by_local_queue
    assert [i[1].key for i in groups["ns/a"]] == ["ns/a2", "ns/a1"]
    queued = {"cq": [(0.0, groups["ns/a"]), (0.0, groups["ns/b"]), (0.0, groups["ns/c"])]}
    best = {"cq": "BestEffortFIFO"}
    # c1 is in backoff; b1 and a2 have priority 5, b1 is older
    assert heads(queued, frozenset(), best, now=50.0)["cq"].key == "ns/b1"
    assert heads(queued, frozenset(), best, now=100.0)["cq"].key == "ns/c1"  # backoff over
    assert heads(queued, frozenset({"ns/b1"}), best, now=50.0)["cq"].key == "ns/a2"  # parked
    assert heads(queued, frozenset({"ns/b1"}), {"cq": "StrictFIFO"}, now=50.0)["cq"].key == "ns/b1"
    assert heads(queued, frozenset({"ns/b1", "ns/a2"}), best, now=50.0)["cq"].key == "ns/a1"
    # AFS: a LocalQueue with less usage goes first whatever the priorities
    afs = {"cq": [(2.0, groups["ns/a"]), (1.0, groups["ns/b"])]}
    assert heads(afs, frozenset({"ns/b1"}), best, now=50.0)["cq"].key == "ns/b2"


def test_same_priority_and_second_goes_by_uid_as_kueue_not_by_name() -> None:
    # Kueue v0.17 baseCompareFunc: priority, queue-order timestamp, then UID. Creation
    # timestamps have whole seconds, so a burst of Workloads ties on them; by name, the
    # "...-required-..." Workloads of Kueue's perf test always lost to "...-balanced-...".
    pending = (pw("balanced-0", 50, 7.0, "a", uid="f0"), pw("required-0", 50, 7.0, "a", uid="0f"),
               pw("preferred-0", 50, 7.0, "a", uid="a0"))
    (items,) = pending_queues(pending, {}, {}).by_local_queue.values()
    assert [i[1].spec.name for i in items] == ["required-0", "preferred-0", "balanced-0"]
    without_uid = (pw("b", 50, 7.0, "a"), pw("a", 50, 7.0, "a"))  # files, tests: by key
    (items,) = pending_queues(without_uid, {}, {}).by_local_queue.values()
    assert [i[1].spec.name for i in items] == ["a", "b"]
