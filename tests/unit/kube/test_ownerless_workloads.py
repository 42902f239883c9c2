"""Workloads created directly, with no owner Job (issue 18: Kueue's perf runner creates them, so
do external job frameworks), go through the controller's phases as Kueue treats them: admitted,
never started, finished by whoever sets ``Finished`` (quota released at once), and a node
failure neither evicts because a node's name differs from its hostname label nor re-admits in
a loop; an evicted one keeps its quota until whoever created it releases it, as under Kueue."""

from __future__ import annotations

from typing import Any

from scheduler.k8s.informer import CLUSTER_QUEUES, NODES, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.snapshot import build_snapshot
from tests.unit.kube.test_phases import BLOCK, GPU, HOST, NS, Harness, assigned_hosts, node


def ownerless(name: str, pods: int) -> dict[str, Any]:
    """A Workload as the runner writes it: queueName, one pod set, no ownerReferences."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"queueName": "lq", "podSets": [{
                "name": "main", "count": pods, "topologyRequest": {"required": BLOCK},
                "template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "c", "image": "busybox", "resources": {"requests": {GPU: "8"}}}]}}}]}}


def workload(harness: Harness, name: str) -> dict[str, Any]:
    return harness.api.get(WORKLOADS, name, NS)


def reconcile(harness: Harness, times: int = 1) -> None:
    for _ in range(times):
        harness.controller.reconcile()
        harness.sync()


def finish(harness: Harness, name: str) -> None:
    """What the runner does after the workload's runtime: set Finished itself."""
    wl = workload(harness, name)
    conditions = st.set_condition(st.conditions_of(wl), st.FINISHED, "True", "ByTest", "By test runner",
                                  harness.clock())
    harness.api.merge_patch(WORKLOADS, name, {"status": {"conditions": conditions}}, NS, subresource="status")
    harness.sync()


def test_ownerless_workload_is_admitted_and_never_started(harness: Harness) -> None:
    harness.api.create(WORKLOADS, ownerless("direct", 2), NS)
    harness.sync()
    reconcile(harness, 3)
    wl = workload(harness, "direct")
    assert st.condition_true(wl, st.QUOTA_RESERVED) and st.condition_true(wl, st.ADMITTED)
    assert sum(assigned_hosts(wl).values()) == 2
    assert "Started" not in harness.event_reasons()  # nothing to unsuspend


def test_finished_ownerless_workload_releases_its_quota_at_once(harness: Harness) -> None:
    for name in ("first", "second"):  # 2 x 16 GPUs: all 32 of the queue
        harness.api.create(WORKLOADS, ownerless(name, 2), NS)
    harness.sync()
    reconcile(harness)
    harness.api.create(WORKLOADS, ownerless("third", 2), NS)
    harness.sync()
    reconcile(harness)
    assert not st.has_reservation(workload(harness, "third"))
    finish(harness, "first")
    reconcile(harness)  # the very next pass admits the waiting one
    assert st.condition_true(workload(harness, "third"), st.ADMITTED)
    assert st.has_reservation(workload(harness, "first"))  # Kueue keeps the record; it counts nowhere


def test_node_named_otherwise_than_its_hostname_label_is_not_failed(harness: Harness) -> None:
    """The runner's nodes: name node-b0-r0-n0, hostname label node-0, Ready a moment after
    creation. Placement assigns the label value; failure handling must look it up the same
    way, or every assigned host looks deleted (756 evictions of one Workload in two minutes)."""
    for existing in harness.api.objects(NODES):
        harness.api.delete(NODES, existing["metadata"]["name"])
    for i in range(4):
        runner_node = node(f"node-b{i // 2}-n{i}", f"b{i // 2}")
        runner_node["metadata"]["labels"][HOST] = f"node-{i}"
        runner_node["status"]["conditions"] = []  # created first, patched Ready later
        harness.api.create(NODES, runner_node)
    harness.api.create(WORKLOADS, ownerless("direct", 2), NS)
    harness.sync()
    reconcile(harness)
    assert not st.has_reservation(workload(harness, "direct"))  # no Ready node: nothing placed
    for i in range(4):
        harness.api.merge_patch(NODES, f"node-b{i // 2}-n{i}",
                                {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, subresource="status")
    harness.sync()
    for _ in range(5):
        harness.clock.advance(2)
        reconcile(harness)
    wl = workload(harness, "direct")
    assert st.condition_true(wl, st.ADMITTED) and not st.condition_true(wl, st.EVICTED)
    assert set(assigned_hosts(wl)) <= {f"node-{i}" for i in range(4)}
    assert not {"EvictedDueToNodeFailures", "NodeReplaced"} & set(harness.event_reasons())


def release_as_owner(harness: Harness, name: str) -> None:
    """What the runner (and Kueue's ``FinishEvictionForWorkloads``) does with an evicted Workload:
    QuotaReserved=False, no admission."""
    wl = workload(harness, name)
    conditions = st.set_condition(st.conditions_of(wl), st.QUOTA_RESERVED, "False", "Pending",
                                  "Evicted by the test runner", harness.clock())
    conditions = st.set_condition(conditions, st.ADMITTED, "False", "NoReservation",
                                  "The workload has no reservation", harness.clock())
    harness.api.merge_patch(WORKLOADS, name, {"status": {"conditions": conditions, "admission": None}}, NS,
                            subresource="status")
    harness.sync()


def test_evicted_ownerless_workload_keeps_its_quota_until_its_owner_releases_it(harness: Harness) -> None:
    """Kueue clears an evicted Workload's reservation only from the job reconciler of its owner;
    an ownerless one keeps it (and its quota) until whoever created it releases it."""
    harness.api.create(WORKLOADS, ownerless("direct", 2), NS)
    harness.sync()
    reconcile(harness)
    (host, *_rest) = sorted(assigned_hosts(workload(harness, "direct")))
    harness.api.merge_patch(NODES, host, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                            subresource="status")
    harness.sync()
    for _ in range(10):  # 20 s: evicted once, and still holding
        harness.clock.advance(2)
        reconcile(harness)
    wl = workload(harness, "direct")
    assert harness.event_reasons().count("EvictedDueToNodeFailures") == 1
    assert st.condition_true(wl, st.EVICTED) and st.has_reservation(wl)

    release_as_owner(harness, "direct")
    for _ in range(10):  # re-admitted away from the failed node, not evicted again
        harness.clock.advance(2)
        reconcile(harness)
    wl = workload(harness, "direct")
    assert harness.event_reasons().count("EvictedDueToNodeFailures") == 1
    assert st.has_reservation(wl)
    assert host not in assigned_hosts(wl)


def test_idle_cluster_queue_reports_new_work_before_the_pass_writes(harness: Harness) -> None:
    """Kueue's perf recorder stops once no ClusterQueue reports pending or reserving work:
    a queue that was idle shows its new Workloads before the pass spends time on writes."""
    harness.api.create(WORKLOADS, ownerless("direct", 2), NS)
    harness.sync()
    harness.controller.queue_objects.announce_work(build_snapshot(harness.cache, harness.clock()))
    harness.sync()
    assert harness.api.get(CLUSTER_QUEUES, "cq")["status"]["pendingWorkloads"] == 1
