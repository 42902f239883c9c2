"""waitForPodsReady in the controller: read each job's readiness, write what
``scheduler.core.kueue.podsready`` decides (through the writer only).

One pass, per Workload (each step is one of Kueue's reconciles; a write ends the Workload's
turn, the next pass continues from what the API server then holds):

1. ``DeactivationTarget=True`` on an active Workload: ``spec.active=false`` (Kueue's workload
   controller). An inactive Workload not yet evicted: evicted ``DeactivatedDueTo<cause>``
   ("The workload is deactivated due to ..."), ``requeueState`` cleared. A Workload held by
   ``Requeued=False`` after a stop whose queue runs again: ``Requeued=True``
   (``ClusterQueueRestarted`` / ``LocalQueueRestarted``).
2. The ``PodsReady`` condition from the job's status (Kueue's job reconciler; only Workloads
   of a job toposched manages).
3. The timeout: evict with ``PodsReadyTimeout`` and a new ``requeueState``, or mark the
   Workload for deactivation when ``backoffLimitCount`` is used up.
4. The backoff over: ``Requeued=True`` reason ``BackoffFinished``, ``requeueAt`` cleared.

Steps 2-4 run only when the Configuration has ``waitForPodsReady``; step 1 always (Kueue
deactivates whatever sets ``spec.active=false`` and lifts every stop's hold).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.core.config import WaitForPodsReady
from scheduler.core.kueue import podsready as pr
from scheduler.k8s.informer import WORKLOADS, object_key
from scheduler.kube import status as st
from scheduler.kube.defrag import REASON as DEFRAGMENTATION
from scheduler.kube.isolation import Isolation
from scheduler.kube.jobs import JobIndex
from scheduler.kube.writer import Obj, Writer

Clock = Callable[[], dt.datetime]


def _seconds(text: str | None) -> float | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def current_condition(wl: Mapping[str, Any], type_: str = pr.PODS_READY) -> pr.PodsReadyCondition | None:
    cond = st.find_condition(wl, type_)
    if cond is None:
        return None
    return pr.PodsReadyCondition(cond.get("status") == "True", str(cond.get("reason") or ""),
                                 str(cond.get("message") or ""))


def is_active(wl: Mapping[str, Any]) -> bool:
    return (wl.get("spec") or {}).get("active") is not False


def readiness(wl: Mapping[str, Any]) -> pr.Readiness:
    """The core's view of one Workload for the timeout."""
    admitted = st.find_condition(wl, st.ADMITTED)
    pods_ready = st.find_condition(wl, pr.PODS_READY) or {}
    admitted_at = _seconds(admitted.get("lastTransitionTime")) if admitted and admitted.get("status") == "True" \
        else None
    return pr.Readiness(object_key(wl), admitted_at, current_condition(wl),
                        _seconds(pods_ready.get("lastTransitionTime")), st.requeue_count(wl),
                        active=is_active(wl), evicted=st.condition_true(wl, st.EVICTED))


def requeue_state_at(wl: Mapping[str, Any]) -> float | None:
    return _seconds(((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt"))


class PodsReadyHandler:
    def __init__(self, writer: Writer, clock: Clock, config: WaitForPodsReady, isolation: Isolation) -> None:
        self.writer = writer
        self.clock = clock
        self.config = config
        self.isolation = isolation

    def run(self, workloads: list[Obj], jobs: JobIndex, owner_of: Callable[[Obj], str | None]) -> None:
        live = [wl for wl in workloads if not st.is_finished(wl)]
        self.isolation.for_each("pods_ready", live, lambda wl: self.step(wl, jobs.get(owner_of(wl) or "")),
                                workload_of=lambda wl: wl)

    def step(self, wl: Obj, job: tuple[JobKind, Obj] | None) -> None:
        if self._deactivation(wl) or self._restarted(wl) or not self.config.enabled:
            return
        if job is not None and self._condition(wl, *job):
            return
        if self._timeout(wl):
            return
        self._backoff_finished(wl)

    # ------------------------------------------------------------------ 1. deactivation
    def _deactivation(self, wl: Obj) -> bool:
        target = st.find_condition(wl, pr.DEACTIVATION_TARGET)
        if is_active(wl):
            if target is None or target.get("status") != "True":
                return False
            self.writer.patch(WORKLOADS, wl, {"spec": {"active": False}}, self.writer.cache.workloads)
            return True
        if st.condition_true(wl, st.EVICTED):
            return False
        marked = target is not None and target.get("status") == "True"
        cause = str(target.get("reason") or "") if target is not None and marked else ""
        cause_message = str(target.get("message") or "") if target is not None and marked else ""
        reason, message = pr.deactivated_reason(cause), pr.deactivated_message(cause_message)
        now = self.clock()
        body = st.evict_status(wl, reason, message, now, underlying_cause=cause, stats_reason=pr.DEACTIVATED)
        body["conditions"] = [c for c in body["conditions"] if c.get("type") != pr.DEACTIVATION_TARGET]
        if (wl.get("status") or {}).get("requeueState") is not None:
            body["requeueState"] = None
        if self.writer.patch_workload_status(wl, body) is not None:
            self.writer.event(wl, "Normal", f"{st.EVICTED}DueTo{reason}", message)
            self.writer.notify("evicted", wl, {"reason": pr.DEACTIVATED, "message": message})
        return True

    def _restarted(self, wl: Obj) -> bool:
        """``Requeued=False`` after a stop: ``True/ClusterQueueRestarted`` (``LocalQueueRestarted``)
        once the queue's ``stopPolicy`` is ``None`` again; after a deactivation:
        ``True/Reactivated`` once ``spec.active`` is true again."""
        requeued = st.find_condition(wl, st.REQUEUED)
        if requeued is None or requeued.get("status") != "False" or requeued.get("reason") not in RESTARTED:
            return False
        if st.has_reservation(wl) or not is_active(wl):
            return False
        namespace = (wl.get("metadata") or {}).get("namespace")
        lq = self.writer.cache.local_queues.get(f"{namespace}/{(wl.get('spec') or {}).get('queueName')}")
        if requeued.get("reason") == pr.DEACTIVATED:
            running = True  # active again (checked above)
        elif requeued.get("reason") == LOCAL_QUEUE_STOPPED:
            running = lq is not None and (lq.get("spec") or {}).get("stopPolicy", "None") == "None"
        else:
            cq_name = ((lq or {}).get("spec") or {}).get("clusterQueue", "")
            cq = self.writer.cache.cluster_queues.get(cq_name) if cq_name else None
            running = cq is not None and (cq.get("spec") or {}).get("stopPolicy", "None") == "None"
        if not running:
            return False
        reason, message = RESTARTED[str(requeued["reason"])]
        gen = (wl.get("metadata") or {}).get("generation")
        conds = st.set_condition(st.conditions_of(wl), st.REQUEUED, "True", reason, message, self.clock(), gen)
        self.writer.patch_workload_status(wl, {"conditions": conds})
        return True

    # ------------------------------------------------------------------ 2. the condition
    def _condition(self, wl: Obj, integration: JobKind, job: Obj) -> bool:
        admitted = st.condition_true(wl, st.ADMITTED)
        ready = admitted and not integration.is_suspended(job) and integration.pods_ready(job)
        current = current_condition(wl)
        wanted = pr.pods_ready_condition(admitted, ready, current)
        if current is not None and (current.status, current.reason) == (wanted.status, wanted.reason):
            return False
        gen = (wl.get("metadata") or {}).get("generation")
        conds = st.set_condition(st.conditions_of(wl), pr.PODS_READY, "True" if wanted.status else "False",
                                 wanted.reason, wanted.message, self.clock(), gen)
        self.writer.patch_workload_status(wl, {"conditions": conds})
        return True

    # ------------------------------------------------------------------ 3. the timeout
    def _timeout(self, wl: Obj) -> bool:
        now = self.clock()
        decision = pr.timeout_decision(readiness(wl), self.config, now.timestamp())
        if isinstance(decision, pr.Deactivate):
            gen = (wl.get("metadata") or {}).get("generation")
            conds = st.set_condition(st.conditions_of(wl), pr.DEACTIVATION_TARGET, "True", decision.reason,
                                     decision.message, now, gen)
            self.writer.patch_workload_status(wl, {"conditions": conds})
            return True
        if not isinstance(decision, pr.EvictForPodsReadyTimeout):
            return False
        body = st.evict_status(wl, pr.PODS_READY_TIMEOUT, decision.message, now,
                               underlying_cause=decision.underlying_cause)
        body["requeueState"] = {"count": decision.requeue_count,
                                "requeueAt": st.timestamp(dt.datetime.fromtimestamp(decision.requeue_at, dt.UTC))}
        if self.writer.patch_workload_status(wl, body) is not None:
            self.writer.event(wl, "Normal", f"{st.EVICTED}DueTo{pr.PODS_READY_TIMEOUT}", decision.message)
            self.writer.notify("evicted", wl, {"reason": pr.PODS_READY_TIMEOUT, "message": decision.message})
        return True

    # ------------------------------------------------------------------ 4. the backoff
    def _backoff_finished(self, wl: Obj) -> bool:
        if st.has_reservation(wl) or not is_active(wl):
            return False
        now = self.clock()
        if not pr.backoff_finished(current_condition(wl, st.REQUEUED), requeue_state_at(wl), now.timestamp()):
            return False
        gen = (wl.get("metadata") or {}).get("generation")
        conds = st.set_condition(st.conditions_of(wl), st.REQUEUED, "True", pr.BACKOFF_FINISHED,
                                 pr.BACKOFF_FINISHED_MESSAGE, now, gen)
        body: dict[str, Any] = {"conditions": conds}
        if requeue_state_at(wl) is not None:
            body["requeueState"] = {"requeueAt": None}
        self.writer.patch_workload_status(wl, body)
        return True


def requeues_at_once(evicted_reason: str) -> bool:
    """Kueue's job reconciler sets ``Requeued=True`` on release only after a preemption or a
    node failure; any other eviction (a stop, a PodsReady timeout, a deactivation) leaves
    ``Requeued=False``, held until the queue restarts or the backoff ends. A toposched
    defragmentation move is a preemption in all but name: the moved job queues again at once."""
    return evicted_reason in ("Preempted", "NodeFailures", DEFRAGMENTATION)


# Kueue's workload controller lifts a stop's hold when the queue runs again.
CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
RESTARTED = {CLUSTER_QUEUE_STOPPED: ("ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped"),
             LOCAL_QUEUE_STOPPED: ("LocalQueueRestarted", "The LocalQueue was restarted after being stopped"),
             # exactly "Deactivated" (a user's spec.active=false), as Kueue v0.17 matches it: a
             # DeactivatedDueTo<cause> hold is not lifted by reactivation there either
             pr.DEACTIVATED: ("Reactivated", "The workload was reactivated")}
