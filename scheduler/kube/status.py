"""Workload status as Kueue writes it: conditions with Kueue's types, reasons and messages,
and the ``status.admission`` block. Pure functions of (workload dict, decision, clock) that
return status dicts; the controller sends them through the status subresource.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.objects import (
    ADMITTED,
    EVICTED,
    FINISHED,
    QUOTA_RESERVED,
    REQUEUED,
    condition_true,
    find_condition,
    has_reservation,
)

# The reading side (condition lookup, the type names every converter asks about) is the
# adapter's, the clock the plumbing's; this module adds the writing side.
from scheduler.k8s.clock import timestamp, utcnow

__all__ = ["ADMITTED", "EVICTED", "FINISHED", "PREEMPTED", "QUOTA_RESERVED", "REQUEUED", "condition_true",
           "find_condition", "has_reservation", "timestamp", "utcnow"]

PREEMPTED = "Preempted"


def conditions_of(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in ((workload.get("status") or {}).get("conditions") or ())]


def is_finished(workload: Mapping[str, Any]) -> bool:
    return condition_true(workload, FINISHED)


def is_evicting(workload: Mapping[str, Any]) -> bool:
    return has_reservation(workload) and condition_true(workload, EVICTED)


def set_condition(conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str,
                  now: dt.datetime, generation: int | None = None) -> list[dict[str, Any]]:
    """meta.SetStatusCondition semantics: lastTransitionTime changes only with the status."""
    out = []
    found = False
    for cond in conditions:
        if cond.get("type") == type_:
            found = True
            new = dict(cond, reason=reason, message=message[:32768])
            if cond.get("status") != status:
                new["status"] = status
                new["lastTransitionTime"] = timestamp(now)
            if generation is not None:
                new["observedGeneration"] = generation
            out.append(new)
        else:
            out.append(cond)
    if not found:
        new = {"type": type_, "status": status, "reason": reason, "message": message[:32768],
               "lastTransitionTime": timestamp(now)}
        if generation is not None:
            new["observedGeneration"] = generation
        out.append(new)
    return out


def _previously(conditions: list[dict[str, Any]], type_: str, now: dt.datetime) -> list[dict[str, Any]]:
    """On a new reservation Kueue flips Evicted/Preempted to False, keeping the old message."""
    for cond in conditions:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return set_condition(conditions, type_, "False", QUOTA_RESERVED,
                                 f"Previously: {cond.get('message', '')}", now)
    return conditions


def admit_status(workload: Mapping[str, Any], cluster_queue: str,
                 pod_set_assignments: Sequence[Mapping[str, Any]], now: dt.datetime,
                 waited_s: float | None = None) -> dict[str, Any]:
    gen = (workload.get("metadata") or {}).get("generation")
    conds = conditions_of(workload)
    conds = set_condition(conds, QUOTA_RESERVED, "True", "QuotaReserved",
                          f"Quota reserved in ClusterQueue {cluster_queue}", now, gen)
    conds = set_condition(conds, ADMITTED, "True", "Admitted", "The workload is admitted", now, gen)
    conds = _previously(conds, EVICTED, now)
    conds = _previously(conds, PREEMPTED, now)
    out: dict[str, Any] = {
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": [dict(a) for a in pod_set_assignments]},
        "conditions": conds,
    }
    if ((workload.get("status") or {}).get("requeueState") or {}).get("requeueAt"):
        out["requeueState"] = {"requeueAt": None}  # the backoff is over (Kueue keeps the count)
    return out


def pending_status(workload: Mapping[str, Any], reason: str, message: str, now: dt.datetime) -> dict[str, Any]:
    gen = (workload.get("metadata") or {}).get("generation")
    conds = set_condition(conditions_of(workload), QUOTA_RESERVED, "False", reason, message, now, gen)
    return {"conditions": conds}


def evict_status(workload: Mapping[str, Any], reason: str, message: str, now: dt.datetime,
                 preempted_reason: str | None = None, underlying_cause: str = "",
                 stats_reason: str | None = None) -> dict[str, Any]:
    """Step one of an eviction: Evicted=True (and Preempted=True). Quota stays reserved until the
    job's pods are gone (:func:`release_status`), so the freed capacity is never double-booked.
    ``schedulingStats.evictions`` counts (``stats_reason`` or ``reason``, ``underlying_cause``)."""
    gen = (workload.get("metadata") or {}).get("generation")
    already = condition_true(workload, EVICTED)
    conds = set_condition(conditions_of(workload), EVICTED, "True", reason, message, now, gen)
    if preempted_reason:
        conds = set_condition(conds, PREEMPTED, "True", preempted_reason, message, now, gen)
    if already:  # the same eviction written again: count it once
        return {"conditions": conds}
    evictions = count_eviction(workload, stats_reason or reason, underlying_cause)
    return {"conditions": conds, "schedulingStats": {"evictions": evictions}}


def count_eviction(workload: Mapping[str, Any], reason: str, underlying_cause: str = "") -> list[dict[str, Any]]:
    """``status.schedulingStats.evictions`` with one more eviction for (reason, underlyingCause),
    as Kueue v0.17 keeps it (``workloadEvictionStateInc``); every toposched eviction has an
    empty underlying cause, as Kueue's preemption, node-failure and stop evictions do."""
    stats = ((workload.get("status") or {}).get("schedulingStats") or {}).get("evictions") or ()
    out = [dict(e) for e in stats]
    for entry in out:
        if entry.get("reason") == reason and entry.get("underlyingCause", "") == underlying_cause:
            entry["count"] = int(entry.get("count") or 0) + 1
            return out
    return [*out, {"reason": reason, "underlyingCause": underlying_cause, "count": 1}]


def release_status(workload: Mapping[str, Any], now: dt.datetime, requeue: bool = True,
                   requeue_after_s: float | None = None) -> dict[str, Any]:
    """Step two: the job is stopped; drop the reservation and requeue. ``requeue_after_s``:
    a backoff, written as Kueue writes it (``status.requeueState``: one more ``count``,
    ``requeueAt`` = now + the backoff); the cycle admits the workload no earlier."""
    evicted = find_condition(workload, EVICTED) or {}
    reason = evicted.get("reason", "Preempted")
    message = evicted.get("message", "")
    conds = set_condition(conditions_of(workload), QUOTA_RESERVED, "False", "Pending", message, now)
    conds = set_condition(conds, ADMITTED, "False", "NoReservation", "The workload has no reservation", now)
    if requeue:
        conds = set_condition(conds, REQUEUED, "True", reason, message, now)
    else:
        conds = set_condition(conds, REQUEUED, "False", reason, message, now)
    out: dict[str, Any] = {"admission": None, "conditions": conds}
    if requeue and requeue_after_s is not None:
        out["requeueState"] = {"count": requeue_count(workload) + 1}
        if requeue_after_s > 0:  # no wait: no requeueAt, the count still remembers the eviction
            out["requeueState"]["requeueAt"] = timestamp(now + dt.timedelta(seconds=requeue_after_s))
    return out


def without_condition(workload: Mapping[str, Any], type_: str) -> list[dict[str, Any]]:
    return [c for c in conditions_of(workload) if c.get("type") != type_]


def requeue_count(workload: Mapping[str, Any]) -> int:
    """``status.requeueState.count``: how many backoff requeues the workload has had."""
    return int(((workload.get("status") or {}).get("requeueState") or {}).get("count") or 0)


def finish_status(workload: Mapping[str, Any], reason: str, message: str, now: dt.datetime) -> dict[str, Any]:
    conds = set_condition(conditions_of(workload), FINISHED, "True", reason, message, now)
    return {"conditions": conds}


def merged(workload: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """The workload as it will look after ``status`` is applied (for in-memory bookkeeping)."""
    out = copy.deepcopy(dict(workload))
    st = dict(out.get("status") or {})
    for key, value in status.items():
        if value is None:
            st.pop(key, None)
        else:
            st[key] = copy.deepcopy(value)
    out["status"] = st
    return out
