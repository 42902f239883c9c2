"""QuotaReserved=False reasons as Kueue writes them with and without
``UnadmittedWorkloadsObservability`` (beta, off in v0.19.2, on by default only in v0.20): the
table restates v0.19.2's ``pkg/util/testing/observability.go`` (what the granular reasons become
with the gate off, for conditions the scheduler and the workload controller write) and
``pkg/scheduler/scheduler.go`` (namespace mismatch is the scheduler's ``Misconfigured``)."""

from __future__ import annotations

import pytest

from scheduler.core.reasons import (
    BY_WORKLOAD_CONTROLLER,
    NotAdmitted,
    PendingReason,
    not_admitted_reason,
    written_reason,
)

R = PendingReason


@pytest.mark.parametrize(("reason", "by_controller", "legacy"), [
    (R.WAITING_FOR_QUOTA, False, "Pending"),
    (R.EXCEEDS_MAX_QUOTA, False, "Pending"),
    (R.NO_MATCHING_FLAVOR, False, "Pending"),
    (R.TOPOLOGY_FAILED, False, "Pending"),
    (R.WAITING_FOR_PREEMPTION, False, "Pending"),
    (R.PENDING, False, "Pending"),
    (R.MISCONFIGURED, False, "Pending"),  # the scheduler's (namespace mismatch)
    (R.MISCONFIGURED, True, "Inadmissible"),  # the workload controller's (LocalQueue missing)
    (R.SUSPENDED, True, "Inadmissible"),
    (R.WAITING_FOR_PODS_READY, False, "Waiting"),
    ("Waiting", False, "Waiting"),
])
def test_without_the_gate_kueue_writes_its_legacy_reasons(reason: str, by_controller: bool, legacy: str) -> None:
    assert written_reason(reason, observability=False, by_workload_controller=by_controller) == legacy


@pytest.mark.parametrize("reason", [r for r in R if r != R.WAITING_FOR_PODS_READY])
def test_with_the_gate_the_granular_reason_is_written(reason: str) -> None:
    assert written_reason(reason, observability=True) == reason
    assert written_reason(reason, observability=True, by_workload_controller=True) == reason


def test_waiting_for_pods_ready_is_the_granular_name_of_waiting() -> None:
    assert written_reason("Waiting", observability=True) == "WaitingForPodsReady"


def test_toposched_own_reasons_are_written_as_they_are() -> None:
    for own in ("WaitingForCompactPlacement", "CapacityHeldForCompactPlacement"):
        assert written_reason(own, observability=False) == own == written_reason(own, observability=True)


def test_routing_failures_name_who_decides_them_in_kueue() -> None:
    assert not_admitted_reason(NotAdmitted.NAMESPACE_MISMATCH) == R.MISCONFIGURED
    assert NotAdmitted.NAMESPACE_MISMATCH not in BY_WORKLOAD_CONTROLLER
    assert {NotAdmitted.LOCAL_QUEUE_MISSING, NotAdmitted.CLUSTER_QUEUE_INACTIVE} <= BY_WORKLOAD_CONTROLLER
