"""waitForPodsReady decisions (scheduler.core.kueue.podsready), on plain values, against Kueue
v0.17.0's generatePodsReadyCondition, admittedNotReadyWorkload, triggerDeactivation and
UpdateRequeueState."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.core.config import KueueConfig, RequeuingStrategy, WaitForPodsReady
from scheduler.core.kueue import podsready as pr
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit, Pending
from scheduler.core.kueue.failures import RequeueBackoff
from scheduler.core.kueue.queueing import LocalQueueSpec, PendingWorkload
from scheduler.core.kueue.quota import ClusterQueueSpec, FlavorQuotas, FlavorSpec, ResourceGroup, ResourceQuota
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.workload import PodSetSpec, WorkloadSpec

READY = pr.PodsReadyCondition(True, pr.STARTED, pr.READY_MESSAGE)
RECOVERING = pr.PodsReadyCondition(False, pr.WAIT_FOR_RECOVERY, pr.WAITING_FOR_RECOVERY_MESSAGE)
WAITING = pr.PodsReadyCondition(False, pr.WAIT_FOR_START, pr.NOT_READY_MESSAGE)


@pytest.mark.parametrize(("admitted", "ready", "current", "reason", "status"), [
    (False, False, None, pr.WAIT_FOR_START, False),
    (False, True, READY, pr.WAIT_FOR_START, False),  # evicted and requeued: waits again
    (True, False, None, pr.WAIT_FOR_START, False),
    (True, True, WAITING, pr.STARTED, True),
    (True, False, READY, pr.WAIT_FOR_RECOVERY, False),  # a pod failed after the start
    (True, False, RECOVERING, pr.WAIT_FOR_RECOVERY, False),
    (True, True, RECOVERING, pr.RECOVERED, True),
    (True, True, pr.PodsReadyCondition(True, pr.RECOVERED, ""), pr.RECOVERED, True),
])
def test_the_pods_ready_condition(admitted: bool, ready: bool, current: pr.PodsReadyCondition | None,
                                  reason: str, status: bool) -> None:
    cond = pr.pods_ready_condition(admitted, ready, current)
    assert (cond.reason, cond.status) == (reason, status)
    assert cond.message == {pr.WAIT_FOR_START: pr.NOT_READY_MESSAGE, pr.WAIT_FOR_RECOVERY:
                            pr.WAITING_FOR_RECOVERY_MESSAGE}.get(reason, pr.READY_MESSAGE)


def test_kueue_backoff_doubles_from_the_base_and_is_capped() -> None:
    assert [pr.backoff_s(n, 60, 3600) for n in range(1, 8)] == [60, 120, 240, 480, 960, 1920, 3600]
    assert pr.backoff_s(10_000, 60, 3600) == 3600


def test_the_node_failure_backoff_is_the_same_backoff_one_step_behind() -> None:
    backoff = RequeueBackoff(60, 3600)
    assert [backoff.delay_s(n) for n in range(1, 6)] == [0.0, 60.0, 120.0, 240.0, 480.0]


CFG = WaitForPodsReady(enabled=True, timeout_s=300, recovery_timeout_s=100)


def readiness(**kw: object) -> pr.Readiness:
    base: dict[str, object] = {"workload": "ns/wl", "admitted_at": 1000.0, "pods_ready": WAITING,
                               "pods_ready_since": 1000.0}
    base.update(kw)
    return pr.Readiness(**base)  # type: ignore[arg-type]


def test_a_workload_not_ready_within_the_timeout_is_evicted_with_a_backoff() -> None:
    assert pr.timeout_decision(readiness(), CFG, 1299.0) == pr.Wait(1.0)
    decision = pr.timeout_decision(readiness(requeue_count=2), CFG, 1300.0)
    assert decision == pr.EvictForPodsReadyTimeout(
        "ns/wl", pr.WAIT_FOR_START, "Exceeded the PodsReady timeout ns/wl", 3, 1300.0 + 240)


def test_recovery_has_its_own_timeout_from_the_pods_ready_transition() -> None:
    w = readiness(pods_ready=RECOVERING, pods_ready_since=2000.0)
    assert pr.timeout_decision(w, CFG, 2050.0) == pr.Wait(50.0)
    decision = pr.timeout_decision(w, CFG, 2100.0)
    assert isinstance(decision, pr.EvictForPodsReadyTimeout) and decision.underlying_cause == pr.WAIT_FOR_RECOVERY


@pytest.mark.parametrize("w", [
    readiness(admitted_at=None), readiness(pods_ready=READY), readiness(active=False), readiness(evicted=True)])
def test_no_timeout_for_workloads_not_waiting(w: pr.Readiness) -> None:
    assert pr.timeout_decision(w, CFG, 10_000.0) is None


def test_no_timeout_without_wait_for_pods_ready() -> None:
    assert pr.timeout_decision(readiness(), WaitForPodsReady(), 10_000.0) is None


def test_the_backoff_limit_deactivates_instead_of_evicting() -> None:
    cfg = WaitForPodsReady(enabled=True, timeout_s=300, requeuing_strategy=RequeuingStrategy(backoff_limit_count=2))
    assert isinstance(pr.timeout_decision(readiness(requeue_count=1), cfg, 1300.0), pr.EvictForPodsReadyTimeout)
    assert pr.timeout_decision(readiness(requeue_count=2), cfg, 1300.0) == pr.Deactivate("ns/wl")
    assert pr.deactivated_reason(pr.REQUEUING_LIMIT_EXCEEDED) == "DeactivatedDueToRequeuingLimitExceeded"
    assert pr.deactivated_message(pr.REQUEUING_LIMIT_MESSAGE) == (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries")


def test_backoff_finished_only_after_requeue_at() -> None:
    held = pr.PodsReadyCondition(False, pr.PODS_READY_TIMEOUT, "")
    assert not pr.backoff_finished(held, 100.0, 99.0)
    assert pr.backoff_finished(held, 100.0, 100.0)
    assert not pr.backoff_finished(pr.PodsReadyCondition(True, "Preempted", ""), None, 100.0)


# ---------------------------------------------------------------------- blockAdmission in the cycle

def _snapshot(admitted_ready: bool, block: bool) -> Snapshot:
    cq = ClusterQueueSpec("cq", (ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": ResourceQuota(10)}),)),))
    def spec(name: str) -> WorkloadSpec:
        return WorkloadSpec("ns", name, (PodSetSpec("main", 1, {"cpu": 1}),), uid=name, queue_name="lq")
    running = AdmittedWorkload(spec("running"), "cq", {("f", "cpu"): 1}, pods_ready=admitted_ready)
    config = KueueConfig(wait_for_pods_ready=WaitForPodsReady(enabled=True, timeout_s=60, block_admission=block))
    return Snapshot(now=0.0, cluster_queues={"cq": cq}, local_queues={"ns/lq": LocalQueueSpec("ns", "lq", "cq")},
                    flavors={"f": FlavorSpec("f")}, pending=(PendingWorkload(spec("next")),),
                    admitted=(running,), config=config)


def test_block_admission_holds_new_admissions_until_every_admitted_workload_is_ready() -> None:
    (decision,) = run_cycle(_snapshot(admitted_ready=False, block=True))
    assert isinstance(decision, Pending)
    assert (decision.reason, decision.message) == ("Waiting",
                                                   "waiting for all admitted workloads to be in PodsReady condition")
    assert isinstance(run_cycle(_snapshot(admitted_ready=True, block=True))[0], Admit)
    assert isinstance(run_cycle(_snapshot(admitted_ready=False, block=False))[0], Admit)


def test_a_held_workload_is_not_a_head() -> None:
    snap = _snapshot(admitted_ready=True, block=False)
    held = PendingWorkload(snap.pending[0].spec, held=True)
    assert run_cycle(dataclasses.replace(snap, pending=(held,))) == []
