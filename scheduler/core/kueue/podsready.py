"""Kueue's ``waitForPodsReady``: the PodsReady condition, the timeout eviction, the requeuing
backoff and the deactivation after ``backoffLimitCount``. Pure decisions on plain values; the
shell (``scheduler/kube/podsready.py``) reads the job's status and writes what is decided here.

Restated from Kueue v0.17.0 (read, not copied):

* ``pkg/controller/jobframework/reconciler.go`` ``generatePodsReadyCondition``: a Workload that
  is not admitted has ``PodsReady=False`` reason ``WaitForStart``; an admitted one whose job
  reports every pod ready (or succeeded) has ``PodsReady=True`` reason ``Started`` (or
  ``Recovered`` after a ``WaitForRecovery``); a ready workload that loses a pod goes
  ``WaitForRecovery``.
* ``pkg/controller/core/workload_controller.go`` ``admittedNotReadyWorkload`` /
  ``reconcileNotReadyTimeout``: an admitted, active, not evicted Workload waiting for start is
  evicted ``timeout`` after its ``Admitted`` condition's last transition (a recovering one
  ``recoveryTimeout`` after the ``PodsReady`` transition), reason ``PodsReadyTimeout``,
  message ``Exceeded the PodsReady timeout <ns>/<name>``, the underlying cause (``WaitForStart``
  or ``WaitForRecovery``) counted in ``schedulingStats.evictions``. Before that, when
  ``requeueState.count + 1`` exceeds ``backoffLimitCount`` the Workload gets
  ``DeactivationTarget=True`` (reason ``RequeuingLimitExceeded``) instead, then
  ``spec.active=false``, then the deactivation eviction.
* ``pkg/workload/workload.go`` ``UpdateRequeueState``: the n-th requeue waits
  ``backoffBaseSeconds * 2^(n-1)`` seconds, capped at ``backoffMaxSeconds`` (Kueue adds a
  0.01 % jitter; toposched is deterministic).
* The backoff over, the Workload's ``Requeued=False`` becomes ``Requeued=True`` reason
  ``BackoffFinished``, ``requeueState.requeueAt`` cleared (``count`` kept).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.config import WaitForPodsReady

# PodsReady condition reasons and messages (Kueue v0.17 ``apis/kueue/v1beta2``).
PODS_READY = "PodsReady"
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
STARTED = "Started"
RECOVERED = "Recovered"
NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
WAITING_FOR_RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
READY_MESSAGE = "All pods reached readiness and the workload is running"

# Eviction, requeue and deactivation (Kueue's reasons and messages).
PODS_READY_TIMEOUT = "PodsReadyTimeout"
BACKOFF_FINISHED = "BackoffFinished"
BACKOFF_FINISHED_MESSAGE = "The workload backoff was finished"
DEACTIVATION_TARGET = "DeactivationTarget"
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
REQUEUING_LIMIT_MESSAGE = "exceeding the maximum number of re-queuing retries"
DEACTIVATED = "Deactivated"
DEACTIVATED_MESSAGE = "The workload is deactivated"

# blockAdmission: the head that would be admitted waits (QuotaReserved=False).
WAITING = "Waiting"
WAITING_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"


def timeout_message(workload: str) -> str:
    """Kueue's eviction message; ``workload`` is ``<namespace>/<name>``."""
    return f"Exceeded the PodsReady timeout {workload}"


def deactivated_reason(cause: str) -> str:
    """The Evicted reason of a deactivation with an underlying cause (``DeactivatedDueTo<cause>``)."""
    return f"{DEACTIVATED}DueTo{cause}" if cause else DEACTIVATED


def deactivated_message(cause_message: str) -> str:
    return f"{DEACTIVATED_MESSAGE} due to {cause_message}" if cause_message else DEACTIVATED_MESSAGE


def backoff_s(count: int, base_s: float, max_s: float) -> float:
    """Kueue's requeuing backoff before the ``count``-th requeue: ``base * 2^(count-1)``,
    capped at ``max`` (``wait.Backoff`` stepped ``count`` times, no jitter)."""
    if count <= 0:
        return 0.0
    exponent = min(count - 1, 62)  # beyond this the cap has long applied
    return float(min(base_s * 2**exponent, max_s))


@dataclass(frozen=True)
class PodsReadyCondition:
    status: bool
    reason: str
    message: str


def pods_ready_condition(admitted: bool, pods_ready: bool, current: PodsReadyCondition | None) -> PodsReadyCondition:
    """The PodsReady condition Kueue's job reconciler wants on the Workload now."""
    if not admitted:
        return PodsReadyCondition(False, WAIT_FOR_START, NOT_READY_MESSAGE)
    if pods_ready:
        recovering = current is not None and current.reason in (WAIT_FOR_RECOVERY, RECOVERED)
        return PodsReadyCondition(True, RECOVERED if recovering else STARTED, READY_MESSAGE)
    if current is not None and (current.status or current.reason == WAIT_FOR_RECOVERY):
        return PodsReadyCondition(False, WAIT_FOR_RECOVERY, WAITING_FOR_RECOVERY_MESSAGE)
    return PodsReadyCondition(False, WAIT_FOR_START, NOT_READY_MESSAGE)


@dataclass(frozen=True)
class Readiness:
    """What the timeout looks at for one Workload (times on the injected clock, seconds)."""

    workload: str  # "<namespace>/<name>"
    admitted_at: float | None  # Admitted=True lastTransitionTime; None when not admitted
    pods_ready: PodsReadyCondition | None
    pods_ready_since: float | None  # PodsReady lastTransitionTime
    requeue_count: int = 0  # status.requeueState.count
    active: bool = True
    evicted: bool = False


@dataclass(frozen=True)
class EvictForPodsReadyTimeout:
    workload: str
    underlying_cause: str  # WaitForStart | WaitForRecovery
    message: str
    requeue_count: int  # the new status.requeueState.count
    requeue_at: float  # the new status.requeueState.requeueAt


@dataclass(frozen=True)
class Deactivate:
    """``backoffLimitCount`` is used up: ``DeactivationTarget=True``, then ``spec.active=false``."""

    workload: str
    reason: str = REQUEUING_LIMIT_EXCEEDED
    message: str = REQUEUING_LIMIT_MESSAGE


@dataclass(frozen=True)
class Wait:
    """Not yet timed out: look again after ``seconds``."""

    seconds: float


TimeoutDecision = EvictForPodsReadyTimeout | Deactivate | Wait | None


def _waiting_since(w: Readiness, cfg: WaitForPodsReady) -> tuple[str, float, float] | None:
    """(underlying cause, since, timeout) when the workload counts toward a timeout."""
    cond = w.pods_ready
    if w.admitted_at is None or (cond is not None and cond.status):
        return None
    if cond is None or cond.reason in (WAIT_FOR_START, PODS_READY):
        return WAIT_FOR_START, w.admitted_at, cfg.timeout_s
    if cond.reason == WAIT_FOR_RECOVERY and w.pods_ready_since is not None:
        recovery = cfg.recovery_timeout_s if cfg.recovery_timeout_s is not None else cfg.timeout_s
        return WAIT_FOR_RECOVERY, w.pods_ready_since, recovery
    return None


def timeout_decision(w: Readiness, cfg: WaitForPodsReady, now: float) -> TimeoutDecision:
    """Kueue's ``reconcileNotReadyTimeout`` for one Workload."""
    if not cfg.enabled or not w.active or w.evicted:
        return None
    waiting = _waiting_since(w, cfg)
    if waiting is None:
        return None
    cause, since, timeout = waiting
    left = timeout - (now - since)
    if left > 0:
        return Wait(left)
    strategy = cfg.requeuing_strategy
    if strategy.backoff_limit_count is not None and w.requeue_count + 1 > strategy.backoff_limit_count:
        return Deactivate(w.workload)
    count = w.requeue_count + 1
    delay = backoff_s(count, strategy.backoff_base_seconds, strategy.backoff_max_seconds)
    return EvictForPodsReadyTimeout(w.workload, cause, timeout_message(w.workload), count, now + delay)


def backoff_finished(requeued: PodsReadyCondition | None, requeue_at: float | None, now: float) -> bool:
    """A Workload held by ``Requeued=False`` after a PodsReady timeout may queue again
    (Kueue sets ``Requeued=True`` reason ``BackoffFinished`` and clears ``requeueAt``)."""
    if requeued is None or requeued.status or requeued.reason != PODS_READY_TIMEOUT:
        return False
    return requeue_at is None or requeue_at <= now


def blocks_admission(cfg: WaitForPodsReady, all_ready: bool) -> bool:
    """``blockAdmission``: nothing new is admitted while an admitted workload is not ready."""
    return cfg.enabled and cfg.block_admission and not all_ready
