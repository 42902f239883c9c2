"""Kueue's PreemptionConfigs (KEP-13396, alpha in Kueue v0.20) and toposched's PreemptionLimits
(``toposched.io/v1alpha1``) in the controller (core/preemption/rules.py):

* :class:`PreemptionRules` reads them from the informer caches each pass (the adapter's
  conversion, kept between passes in the controller's ``SnapshotCaches``) with the evictions
  the ledger counts; a problem with one (what the CRD would refuse, a ClusterQueue naming a
  PreemptionConfig that does not exist) is logged once.
* :class:`PreemptionLedger` keeps the evictions toposched's own preemptions made (domain
  clearing, read from the writer's decision observers; defragmentation moves, recorded by the
  executor) in memory, trimmed to the longest window, as Kueue keeps its map in memory: after a
  restart the count starts again (defragmentation reseeds its own from Evicted conditions).
* :meth:`PreemptionLedger.write_status` writes each PreemptionLimit's ``status.counts`` (the
  top 1000 keys), at most once a minute, as Kueue refreshes it.
* :func:`sync_blocked_condition` sets the preemptor Workload's ``PreemptionBlockedByLimit``
  condition (reason ``PreemptionLimitExceeded``, "Preemption was blocked by PreemptionLimit
  <name>") with the Event ``PreemptionThrottled`` while a limit holds its preemption back, and
  turns it False once none does.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.objects import ClusterObjects
from scheduler.adapter.preemption_rules import config_name_of, configured_preemption
from scheduler.core.preemption.rules import (
    BLOCKED_CONDITION,
    BLOCKED_REASON,
    THROTTLED_EVENT,
    ConfiguredPreemption,
    PreemptionEvent,
    blocked_message,
    limit_counts,
)
from scheduler.k8s.informer import PREEMPTION_LIMITS, object_key
from scheduler.kube import status as st
from scheduler.kube.cache import ClusterCache
from scheduler.kube.writer import Obj, Writer

log = logging.getLogger(__name__)

STATUS_INTERVAL_S = 60.0
MAX_COUNTS = 1000
MAX_EVENTS = 100_000  # a bound on memory whatever the limits say
NOT_BLOCKED_REASON = "PreemptionLimitNotReached"


def sync_blocked_condition(writer: Writer, wl: Obj, limit: str, now: dt.datetime) -> Obj:
    """The preemptor's PreemptionBlockedByLimit condition for this cycle's answer (``limit``:
    the PreemptionLimit that held it back, "" none); written only when it changes."""
    current = st.find_condition(wl, BLOCKED_CONDITION)
    if not limit:
        if current is None or current.get("status") != "True":
            return wl
        conditions = st.set_condition(st.conditions_of(wl), BLOCKED_CONDITION, "False", NOT_BLOCKED_REASON,
                                      "No PreemptionLimit blocks this workload's preemptions", now)
        return writer.patch_workload_status(wl, {"conditions": conditions}) or wl
    message = blocked_message(limit)
    if current is not None and (current.get("status"), current.get("message")) == ("True", message):
        return wl
    conditions = st.set_condition(st.conditions_of(wl), BLOCKED_CONDITION, "True", BLOCKED_REASON, message, now)
    updated = writer.patch_workload_status(wl, {"conditions": conditions}) or wl
    writer.event(updated, "Warning", THROTTLED_EVENT, message)
    cq = writer.cache.cluster_queues.get(_cluster_queue_of(writer, updated))
    if cq is not None:
        writer.event(cq, "Warning", THROTTLED_EVENT, f"{message} (workload {object_key(updated)})")
    return updated


def _cluster_queue_of(writer: Writer, wl: Obj) -> str:
    queue = (wl.get("spec") or {}).get("queueName", "")
    ns = (wl.get("metadata") or {}).get("namespace", "")
    lq = writer.cache.local_queues.get(f"{ns}/{queue}") or {}
    return str((lq.get("spec") or {}).get("clusterQueue") or "")


class PreemptionLedger:
    def __init__(self, writer: Writer, clock: Callable[[], dt.datetime]) -> None:
        self.writer = writer
        self.clock = clock
        self._events: list[PreemptionEvent] = []
        self._status_at: float | None = None
        self._dirty = False  # evictions recorded since the last status write
        writer.observers.append(self._observe)

    def _observe(self, kind: str, wl: Obj, detail: Mapping[str, Any]) -> None:
        """A written Preempt decision of toposched's domain clearing counts (Kueue's classical ones do not)."""
        if kind != "preempted" or not detail.get("counted"):
            return
        victim_cq = str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")
                        or _cluster_queue_of(self.writer, wl))
        self.record(PreemptionEvent(self.clock().timestamp(), str(detail.get("preemptorClusterQueue", "")),
                                    victim_cq, object_key(wl), str(detail.get("preemptionConfig") or "")))

    def record(self, event: PreemptionEvent) -> None:
        self._events.append(event)
        self._dirty = True
        if len(self._events) > MAX_EVENTS:
            del self._events[: len(self._events) - MAX_EVENTS]

    def events(self, rules: ConfiguredPreemption) -> tuple[PreemptionEvent, ...]:
        """The evictions still inside the longest limit's window (all of them are dropped when
        there are no limits: nothing counts them)."""
        now = self.clock().timestamp()
        longest = max((lim.window_s for lim in rules.limits), default=0.0)
        self._events = [e for e in self._events if now - e.at < longest]
        return tuple(self._events)

    def write_status(self, rules: ConfiguredPreemption, limits: Sequence[Obj]) -> None:
        """Each PreemptionLimit's ``status.counts`` (top keys by count): after new evictions,
        else once a minute (the windows slide)."""
        now = self.clock().timestamp()
        if not self._dirty and self._status_at is not None and now - self._status_at < STATUS_INTERVAL_S:
            return
        self._status_at, self._dirty = now, False
        informer = self.writer.cache.preemption_limits
        if informer is None:
            return
        rules = replace(rules, events=tuple(self._events))  # with this pass's evictions
        by_name = {lim.name: lim for lim in rules.limits}
        for obj in limits:
            limit = by_name.get(str((obj.get("metadata") or {}).get("name") or ""))
            if limit is None:
                continue  # invalid: reported by the adapter, never counted
            counts = limit_counts(limit, rules, now)
            top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_COUNTS]
            body = [{"key": k, "count": n} for k, n in top]
            if ((obj.get("status") or {}).get("counts") or []) == body:
                continue
            self.writer.patch(PREEMPTION_LIMITS, obj, {"status": {"counts": body}}, informer, subresource="status")


class PreemptionRules:
    """What the PreemptionConfigs and PreemptionLimits configure, read each pass."""

    def __init__(self, cache: ClusterCache, ledger: PreemptionLedger, caches: SnapshotCaches) -> None:
        self.cache = cache
        self.ledger = ledger
        self.caches = caches
        self._problems: frozenset[str] = frozenset()  # reported already

    def read(self) -> ConfiguredPreemption:
        """The PreemptionConfigs and PreemptionLimits with the evictions they count; problems
        with them are logged once each."""
        cache = self.cache
        objects = ClusterObjects(  # only what the adapter reads for this: no Workload list per pass
            cluster_queues=cache.cluster_queues.items(),
            preemption_configs=cache.preemption_configs.items() if cache.preemption_configs else (),
            preemption_limits=cache.preemption_limits.items() if cache.preemption_limits else ())
        configured = configured_preemption(objects, caches=self.caches)
        for problem in sorted(set(configured.problems) - self._problems):
            log.warning("%s", problem)
        self._problems = frozenset(configured.problems)
        rules = configured.rules
        return replace(rules, events=self.ledger.events(rules))

    def fingerprint(self) -> frozenset[tuple[str | int | None, ...]]:
        """Changes when a preemption rule or limit may have: which PreemptionConfig each
        ClusterQueue names (an annotation: no generation bump), and the PreemptionConfigs and
        PreemptionLimits by generation."""
        cache = self.cache
        named = [(object_key(o), config_name_of(o)) for o in cache.cluster_queues.items()]
        objects = [(inf.resource.plural, object_key(o), o["metadata"].get("generation"))
                   for inf in (cache.preemption_configs, cache.preemption_limits) if inf is not None
                   for o in inf.items()]
        return frozenset([*named, *objects])

    def write_status(self, rules: ConfiguredPreemption) -> None:
        """Each PreemptionLimit's ``status.counts`` (the ledger's schedule)."""
        if self.cache.preemption_limits is not None:
            self.ledger.write_status(rules, self.cache.preemption_limits.items())


__all__ = ["PreemptionLedger", "PreemptionRules", "sync_blocked_condition"]
