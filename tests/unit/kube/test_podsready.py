"""waitForPodsReady in the controller against the in-memory API server: the PodsReady
condition from the Job's status, the PodsReadyTimeout eviction with Kueue's requeueState,
the held requeue and BackoffFinished, deactivation after backoffLimitCount, blockAdmission."""

from __future__ import annotations

from typing import Any

from scheduler.core.config import KueueConfig, RequeuingStrategy, WaitForPodsReady
from scheduler.k8s.informer import CLUSTER_QUEUES, JOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.controller import Controller
from scheduler.kube.eviction import evict
from scheduler.kube.settings import ControllerSettings
from tests.unit.kube.test_phases import NS, Harness, job

TIMEOUT = 120.0


def harness_with(limit: int | None = None, block: bool = False) -> Harness:
    h = Harness()
    config = KueueConfig(wait_for_pods_ready=WaitForPodsReady(
        enabled=True, timeout_s=TIMEOUT, block_admission=block,
        requeuing_strategy=RequeuingStrategy(backoff_limit_count=limit, backoff_base_seconds=10)))
    h.controller = Controller(h.api, h.cache, ControllerSettings(clock=h.clock, config=config), is_leader=lambda: True,
                              events=h.events)
    return h


def reconcile(h: Harness, times: int = 3) -> None:
    for _ in range(times):
        h.controller.reconcile()
        h.sync()


def cond(wl: dict[str, Any], type_: str) -> tuple[str, str, str]:
    c = st.find_condition(wl, type_) or {}
    return c.get("status", ""), c.get("reason", ""), c.get("message", "")


def workload_of(h: Harness, name: str) -> dict[str, Any]:
    return next(w for w in h.api.objects(WORKLOADS, NS) if w["metadata"]["ownerReferences"][0]["name"] == name)


def set_ready(h: Harness, name: str, ready: int) -> None:
    h.api.merge_patch(JOBS, name, {"status": {"ready": ready}}, NS, subresource="status")
    h.sync()


def test_pods_ready_follows_the_job_status() -> None:
    h = harness_with()
    h.api.create(JOBS, job("too-big", 5), NS)  # 40 GPUs > the 32 of the ClusterQueue: pending
    h.api.create(JOBS, job("train", 2), NS)
    h.sync()
    reconcile(h)
    assert cond(workload_of(h, "too-big"), "PodsReady") == (
        "False", "WaitForStart", "Not all pods are ready or succeeded")
    wl = workload_of(h, "train")
    assert st.condition_true(wl, st.ADMITTED)
    assert cond(wl, "PodsReady") == ("False", "WaitForStart", "Not all pods are ready or succeeded")
    set_ready(h, "train", 2)
    reconcile(h, 1)
    assert cond(workload_of(h, "train"), "PodsReady") == (
        "True", "Started", "All pods reached readiness and the workload is running")
    set_ready(h, "train", 1)
    reconcile(h, 1)
    assert cond(workload_of(h, "train"), "PodsReady")[:2] == ("False", "WaitForRecovery")
    set_ready(h, "train", 2)
    reconcile(h, 1)
    assert cond(workload_of(h, "train"), "PodsReady")[:2] == ("True", "Recovered")


def test_timeout_evicts_then_requeues_after_the_backoff() -> None:
    h = harness_with()
    h.api.create(JOBS, job("train", 2), NS)
    h.sync()
    reconcile(h)
    name = h.workload()["metadata"]["name"]
    h.clock.advance(TIMEOUT)
    reconcile(h, 1)
    wl = h.workload()
    assert cond(wl, st.EVICTED) == ("True", "PodsReadyTimeout", f"Exceeded the PodsReady timeout {NS}/{name}")
    assert wl["status"]["requeueState"] == {"count": 1, "requeueAt": "2026-01-01T00:02:10Z"}  # + 10 s base
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}]
    reconcile(h, 3)  # the job is stopped, the reservation released, held by Requeued=False
    wl = h.workload()
    assert not st.has_reservation(wl)
    assert cond(wl, st.REQUEUED)[:2] == ("False", "PodsReadyTimeout")
    assert h.job("train")["spec"]["suspend"] is True
    h.clock.advance(10)
    reconcile(h, 1)
    wl = h.workload()
    assert cond(wl, st.REQUEUED) == ("True", "BackoffFinished", "The workload backoff was finished")
    assert wl["status"]["requeueState"] == {"count": 1}
    reconcile(h, 2)
    assert st.condition_true(h.workload(), st.ADMITTED)
    h.clock.advance(TIMEOUT)
    reconcile(h, 1)
    assert h.workload()["status"]["requeueState"]["count"] == 2
    assert h.workload()["status"]["requeueState"]["requeueAt"] == "2026-01-01T00:04:30Z"  # 20 s: 10 * 2^(2-1)


def test_the_backoff_limit_deactivates_the_workload() -> None:
    h = harness_with(limit=0)
    h.api.create(JOBS, job("train", 2), NS)
    h.sync()
    reconcile(h)
    h.clock.advance(TIMEOUT)
    reconcile(h, 1)
    assert cond(h.workload(), "DeactivationTarget") == (
        "True", "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries")
    reconcile(h, 4)
    wl = h.workload()
    assert wl["spec"]["active"] is False
    assert st.find_condition(wl, "DeactivationTarget") is None
    message = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    assert cond(wl, st.EVICTED) == ("True", "DeactivatedDueToRequeuingLimitExceeded", message)
    assert cond(wl, st.REQUEUED) == ("False", "DeactivatedDueToRequeuingLimitExceeded", message)
    assert not st.has_reservation(wl)
    assert {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1} in \
        wl["status"]["schedulingStats"]["evictions"]


def test_block_admission_waits_for_the_admitted_workload_to_be_ready() -> None:
    h = harness_with(block=True)
    h.api.create(JOBS, job("first", 1), NS)
    h.sync()
    reconcile(h)
    h.api.create(JOBS, job("second", 1), NS)
    h.sync()
    reconcile(h)
    second = workload_of(h, "second")
    assert cond(second, st.QUOTA_RESERVED) == (
        "False", "Waiting", "waiting for all admitted workloads to be in PodsReady condition")
    set_ready(h, "first", 1)
    reconcile(h)
    assert st.condition_true(workload_of(h, "second"), st.ADMITTED)


# ---------------------------------------------------------------------- partial admission

def test_partial_admission_runs_the_job_with_the_admitted_count_and_restores_it() -> None:
    h = Harness()
    big = job("wide", 6)  # 6 pods x 8 GPUs in one block; a block holds 2
    big["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    h.api.create(JOBS, big, NS)
    h.sync()
    reconcile(h)
    wl = h.workload()
    assert wl["spec"]["podSets"][0]["count"] == 6 and wl["spec"]["podSets"][0]["minCount"] == 1
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert psa["count"] == 2 and psa["resourceUsage"]["nvidia.com/gpu"] == "16"
    started = h.job("wide")
    assert started["spec"]["suspend"] is False and started["spec"]["parallelism"] == 2
    assert started["spec"]["completions"] == 6  # no completions-equal-parallelism annotation
    assert evict(h.controller.writer, wl, "Preempted", "test", h.clock()) is not None
    h.sync()
    h.controller.progress_evictions()
    h.sync()
    h.controller.progress_evictions()
    h.sync()
    assert h.job("wide")["spec"]["parallelism"] == 6


# ---------------------------------------------------------------------- stop and restart

def test_a_drained_workload_is_held_until_its_cluster_queue_restarts() -> None:
    h = Harness()
    h.api.create(JOBS, job("train", 1), NS)
    h.sync()
    reconcile(h)
    assert st.condition_true(h.workload(), st.ADMITTED)
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"stopPolicy": "HoldAndDrain"}})
    h.sync()
    reconcile(h, 4)
    wl = h.workload()
    assert cond(wl, st.EVICTED)[:2] == ("True", "ClusterQueueStopped")
    assert cond(wl, st.REQUEUED)[:2] == ("False", "ClusterQueueStopped")
    assert not st.has_reservation(wl)
    assert "EvictedDueToClusterQueueStopped" in h.event_reasons()  # Kueue's ReasonWithCause
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"stopPolicy": "None"}})
    h.sync()
    reconcile(h, 1)
    assert cond(h.workload(), st.REQUEUED) == (
        "True", "ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped")
    reconcile(h, 3)
    assert st.condition_true(h.workload(), st.ADMITTED)


def test_a_deactivated_workload_is_evicted_and_reactivated() -> None:
    h = Harness()
    h.api.create(JOBS, job("train", 1), NS)
    h.sync()
    reconcile(h)
    name = h.workload()["metadata"]["name"]
    h.api.merge_patch(WORKLOADS, name, {"spec": {"active": False}}, NS)
    h.sync()
    reconcile(h, 4)
    wl = h.workload()
    assert cond(wl, st.EVICTED) == ("True", "Deactivated", "The workload is deactivated")
    assert cond(wl, st.REQUEUED)[:2] == ("False", "Deactivated") and not st.has_reservation(wl)
    h.api.merge_patch(WORKLOADS, name, {"spec": {"active": True}}, NS)
    h.sync()
    reconcile(h, 1)
    assert cond(h.workload(), st.REQUEUED) == ("True", "Reactivated", "The workload was reactivated")
    reconcile(h, 3)
    assert st.condition_true(h.workload(), st.ADMITTED)
