"""Node failures without duplicates, on the in-memory API server: the hot swap waits for the
failed node's pod to terminate (or its node object to go) before the rank may be placed again,
and an eviction storm holds node-failure handling until the share of failed nodes drops."""

from __future__ import annotations

from typing import Any

from scheduler.core.workload import ANN_WORKLOAD
from scheduler.k8s.informer import JOBS, NODES, PODS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.nodefailures import HELD_CONDITION
from tests.unit.kube.test_phases import HEALTH, NS, Harness, assigned_hosts, job

SPARE = {"n0": "n1", "n1": "n0", "n2": "n3", "n3": "n2"}


def run_pod(harness: Harness, wl: dict[str, Any], node: str, finalizer: bool) -> None:
    meta: dict[str, Any] = {"name": "train-0", "namespace": NS, "annotations": {ANN_WORKLOAD: wl["metadata"]["name"]}}
    if finalizer:  # the kubelet has not confirmed termination yet (a partitioned node)
        meta["finalizers"] = ["test/kubelet"]
    harness.api.create(PODS, {"metadata": meta, "spec": {"nodeName": node, "containers": []},
                              "status": {"phase": "Running"}}, NS)


def fail(harness: Harness, *nodes: str) -> None:
    for name in nodes:
        harness.api.merge_patch(NODES, name, {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}}})
    harness.sync()


def test_the_replacement_waits_until_the_old_pod_is_gone(harness: Harness) -> None:
    wl = harness.admitted("train", 1)
    (failed,) = assigned_hosts(wl)
    run_pod(harness, wl, failed, finalizer=True)
    fail(harness, failed)
    harness.controller.node_failures.run()
    harness.clock.advance(5)
    harness.controller.node_failures.run()  # deleted gracefully, still terminating: no new slot yet
    harness.sync()
    assert harness.api.get(PODS, "train-0", NS)["metadata"]["deletionTimestamp"]
    assert assigned_hosts(harness.workload()) == {failed: 1}
    harness.controller.node_failures.run()  # still there: still waiting, no second delete needed
    assert assigned_hosts(harness.workload()) == {failed: 1}
    harness.api.merge_patch(PODS, "train-0", {"metadata": {"finalizers": None}}, NS)  # terminated
    harness.sync()
    harness.controller.node_failures.run()
    assert assigned_hosts(harness.workload()) == {SPARE[failed]: 1}
    assert "NodeReplaced" in harness.event_reasons()


def test_a_deleted_node_object_ends_the_wait(harness: Harness) -> None:
    wl = harness.admitted("train", 1)
    (failed,) = assigned_hosts(wl)
    run_pod(harness, wl, failed, finalizer=True)
    harness.api.delete(NODES, failed)  # the instance was replaced: its pod cannot run any more
    harness.sync()
    harness.controller.node_failures.run()
    assert assigned_hosts(harness.workload()) == {SPARE[failed]: 1}


def test_an_eviction_storm_holds_then_resumes(harness: Harness) -> None:
    wl = harness.admitted("train", 2)  # a whole block: a failure here evicts (no spare)
    victim = sorted(assigned_hosts(wl))[0]
    others = [n for n in ("n0", "n1", "n2", "n3") if n != victim][:2]
    fail(harness, victim, *others)  # 3 of 4 nodes (75% > 55%) within the window
    harness.controller.node_failures.run()
    harness.clock.advance(5)
    harness.controller.node_failures.run()
    held = harness.workload()
    assert not st.condition_true(held, st.EVICTED)
    cond = st.find_condition(held, HELD_CONDITION)
    assert cond is not None and cond["status"] == "True" and "3 of 4 nodes of all nodes" in cond["message"]
    assert "NodeFailuresHeld" in harness.event_reasons()
    for name in others:  # two recover: 1 of 4 unhealthy, the storm is over
        harness.api.merge_patch(NODES, name, {"metadata": {"labels": {HEALTH: "Schedulable"}}})
    harness.sync()
    harness.controller.node_failures.run()
    resumed = harness.workload()
    assert st.find_condition(resumed, HELD_CONDITION)["status"] == "False"
    assert st.find_condition(resumed, st.EVICTED)["reason"] == "NodeFailures"


def workload_of(harness: Harness, job_name: str) -> dict[str, Any]:
    (wl,) = [w for w in harness.api.objects(WORKLOADS, NS)
             if (w["metadata"].get("ownerReferences") or [{}])[0].get("name") == job_name]
    return wl


def test_a_deleted_nodes_pods_stay_in_its_block_or_the_workload_is_evicted(harness: Harness) -> None:
    # Found by the chaos e2e: every pod of a started Job was on a node that was deleted. The
    # Job's nodeSelector pins the required block it started in, so a replacement in the other
    # block could never be scheduled (pods Pending for good). The node's last-seen labels keep
    # the replacement in its block; with no room there, the workload is evicted (and restarts).
    wl = harness.admitted("train", 1)
    (failed,) = assigned_hosts(wl)
    harness.api.create(JOBS, job("filler", 1), NS)  # takes the spare of the same block (best fit)
    for phase in (harness.controller.ensure_workloads, harness.controller.admit, harness.controller.start_admitted):
        harness.sync()
        phase()
    harness.sync()
    assert set(assigned_hosts(workload_of(harness, "filler"))) == {SPARE[failed]}
    harness.controller.node_failures.run()  # a pass sees the node (and its labels) while it exists
    harness.api.delete(NODES, failed)
    harness.sync()
    harness.controller.node_failures.run()
    after = workload_of(harness, "train")
    assert not st.has_reservation(after) or st.condition_true(after, st.EVICTED), assigned_hosts(after)
