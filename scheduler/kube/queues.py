"""Writes what Kueue's ClusterQueue, LocalQueue, ResourceFlavor and Topology controllers write,
so ``kubectl get clusterqueues,localqueues`` and the HyperPod console read the same columns
under toposched as under Kueue:

* ``status`` of every ClusterQueue and LocalQueue (``core.queue_status`` computes it; written
  through the status subresource only when it changed, with Kueue's condition semantics), and
  ``status.fairSharing`` of ClusterQueues and Cohort objects (fair sharing on; removed when off),
  and LocalQueue ``status.fairSharing.admissionFairSharingStatus`` (Admission Fair Sharing on:
  ``consumedResources`` decayed with ``usageHalfLifeTime``, sampled every
  ``usageSamplingInterval`` or right after an admission in that LocalQueue; ``core.afs``).
* the ``kueue.x-k8s.io/resource-in-use`` finalizer: added to ClusterQueues, ResourceFlavors and
  Topologies; removed from one being deleted only when nothing uses it any more (a ClusterQueue
  holds no reservation, no ClusterQueue names the flavor, no flavor names the topology), so
  deleting a queue under running jobs neither loses their accounting nor strands them.

Writes only; every decision is in ``scheduler.core``.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.adapter.afs import admitted_usage, by_local_queue, newly_admitted, state_of
from scheduler.core.beyond.healthy_capacity import CONDITION as HEALTHY_CAPACITY_CONDITION
from scheduler.core.beyond.healthy_capacity import REASON as HEALTHY_CAPACITY_REASON
from scheduler.core.beyond.healthy_capacity import EffectiveQuota, condition_message
from scheduler.core.config import KueueConfig
from scheduler.core.kueue import afs
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.queue_status import FlavorUsage, QueueStatus, cohort_shares, queue_statuses
from scheduler.core.kueue.queueing import ACTIVE
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.k8s import informer as inf
from scheduler.kube import status as st
from scheduler.kube.cache import ClusterCache
from scheduler.kube.isolation import Isolation
from scheduler.kube.writer import Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]

RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"


def _table(rows: Sequence[FlavorUsage]) -> list[dict[str, Any]] | None:
    """A usage table in Kueue's JSON shape; None (field removed) when empty, as Kueue's omitempty."""
    if not rows:
        return None
    return [{"name": row.name,
             "resources": [{"name": r.name, "total": r.total, **({"borrowed": r.borrowed} if r.borrowed else {})}
                           for r in row.resources]}
            for row in rows]


def status_fields(obj: Mapping[str, Any], qs: QueueStatus, now: dt.datetime) -> dict[str, Any]:
    """The status Kueue would write for this queue object, carrying over its other conditions."""
    meta = obj.get("metadata") or {}
    conditions = st.set_condition([dict(c) for c in (obj.get("status") or {}).get("conditions") or ()], ACTIVE,
                                  "True" if qs.active.active else "False", qs.active.reason, qs.active.message,
                                  now, meta.get("generation"))
    return {"conditions": conditions, "pendingWorkloads": qs.pending_workloads,
            "reservingWorkloads": qs.reserving_workloads, "admittedWorkloads": qs.admitted_workloads,
            "flavorsReservation": _table(qs.flavors_reservation), "flavorsUsage": _table(qs.flavors_usage)}


def healthy_capacity_condition(conditions: list[dict[str, Any]], report: Sequence[EffectiveQuota] | None,
                               now: dt.datetime) -> list[dict[str, Any]]:
    """The ClusterQueue's ``toposched.io/QuotaFollowsHealthyCapacity`` condition while it opts in
    (core/beyond/healthy_capacity.py): True, the effective quotas in the message; gone once it opts out."""
    if report is None:
        return [c for c in conditions if c.get("type") != HEALTHY_CAPACITY_CONDITION]
    return st.set_condition(conditions, HEALTHY_CAPACITY_CONDITION, "True", HEALTHY_CAPACITY_REASON,
                            condition_message(report), now)


def _fair_sharing(share: int | None) -> dict[str, int] | None:
    return None if share is None else {"weightedShare": share}


def cluster_queue_status_fields(obj: Mapping[str, Any], qs: QueueStatus, now: dt.datetime) -> dict[str, Any]:
    """:func:`status_fields` plus ``fairSharing`` (a ClusterQueue's own field)."""
    return {**status_fields(obj, qs, now), "fairSharing": _fair_sharing(qs.weighted_share)}


def afs_status_fields(obj: Mapping[str, Any], admitted: Sequence[AdmittedWorkload], now: dt.datetime,
                      config: KueueConfig) -> dict[str, Any]:
    """``status.fairSharing.admissionFairSharingStatus`` of a LocalQueue when a sample is due
    (Kueue's LocalQueue controller, ``core.afs.sample``); {} when nothing changes."""
    state = state_of(obj)
    due = afs.sample(state, admitted_usage(admitted), newly_admitted(admitted, state.last_update if state else None),
                     now.timestamp(), config)
    if due is None:
        return {}
    # Kueue writes the whole LocalQueueFairSharingStatus: weightedShare (required) stays 0 on
    # LocalQueues; consumedResources is required too ({} when nothing was consumed).
    current = {"weightedShare": 0, **((obj.get("status") or {}).get("fairSharing") or {})}
    consumed = {name: afs.format_decimal_si(value) for name, value in sorted(due.consumed.items())}
    current["admissionFairSharingStatus"] = {
        "consumedResources": consumed,
        "lastUpdate": st.timestamp(dt.datetime.fromtimestamp(due.last_update, dt.UTC))}
    return {"fairSharing": current}


def _changed(obj: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    current = obj.get("status") or {}
    return any(current.get(k) != v for k, v in fields.items())


class QueueObjectsWriter:
    """Keeps queue status and resource-in-use finalizers in step with the cluster."""

    def __init__(self, writer: Writer, cache: ClusterCache, clock: Callable[[], dt.datetime]) -> None:
        self.writer = writer
        self.cache = cache
        self.clock = clock

    def sync(self, snapshot: Snapshot, isolation: Isolation | None = None) -> None:
        """Queue status and finalizers; with ``isolation``, one queue object that cannot be
        written is reported and the others are still brought up to date."""
        cq_status, lq_status = queue_statuses(snapshot)
        now = self.clock()
        def each(phase: str, objects: Sequence[Obj], step: Callable[[Obj], object]) -> None:
            if isolation is None:
                for obj in objects:
                    step(obj)
            else:
                isolation.for_each(phase, objects, step, concurrent=True)

        def cluster_queue(obj: Obj) -> None:
            qs = cq_status.get(obj["metadata"]["name"])
            if qs is not None:
                fields = cluster_queue_status_fields(obj, qs, now)
                fields["conditions"] = healthy_capacity_condition(
                    fields["conditions"], snapshot.effective_quotas.get(obj["metadata"]["name"]), now)
                self._write_status(self.cache.cluster_queues, inf.CLUSTER_QUEUES, obj, fields)

        per_lq = by_local_queue(snapshot.admitted) if afs.enabled(snapshot.config) else {}

        def local_queue(obj: Obj) -> None:
            qs = lq_status.get(inf.object_key(obj))
            if qs is not None:
                fields = status_fields(obj, qs, now)
                if afs.enabled(snapshot.config) and qs.active.active:  # Kueue: Active LocalQueues only
                    fields.update(afs_status_fields(obj, per_lq.get(inf.object_key(obj), []), now, snapshot.config))
                self._write_status(self.cache.local_queues, inf.LOCAL_QUEUES, obj, fields)

        shares = cohort_shares(snapshot)

        def cohort(obj: Obj) -> None:
            name = obj["metadata"]["name"]
            if name in shares:
                fields = {"fairSharing": _fair_sharing(shares[name])}
                self._write_status(self.cache.cohorts, inf.COHORTS, obj, fields)

        each("queue status", self.cache.cluster_queues.items(), cluster_queue)
        each("queue status", self.cache.local_queues.items(), local_queue)
        each("queue status", self.cache.cohorts.items(), cohort)
        self._sync_finalizers(snapshot, each)

    def announce_work(self, snapshot: Snapshot, isolation: Isolation | None = None) -> None:
        """ClusterQueues whose status says "idle" (nothing pending or reserving) while the
        snapshot has Workloads pending in them get their status now, before the pass's writes:
        Kueue's queue manager counts a new Workload as soon as it is queued, and whoever
        watches ClusterQueue status (Kueue's perf recorder stops when no queue reports work)
        must not see a burst of new Workloads as an idle cluster for the length of a pass."""
        def says_idle(obj: Obj) -> bool:
            current = obj.get("status") or {}
            return not current.get("pendingWorkloads") and not current.get("reservingWorkloads")

        idle = [obj for obj in self.cache.cluster_queues.items() if says_idle(obj)]
        if not idle:
            return  # the usual case in a backlog: no status to compute
        cq_status, _lq_status = queue_statuses(snapshot)
        now = self.clock()

        def write(obj: Obj) -> None:
            fields = cluster_queue_status_fields(obj, cq_status[obj["metadata"]["name"]], now)
            self._write_status(self.cache.cluster_queues, inf.CLUSTER_QUEUES, obj, fields)

        announced = [obj for obj in idle if (qs := cq_status.get(obj["metadata"]["name"])) is not None
                     and qs.pending_workloads > 0]
        if isolation is None:
            for obj in announced:
                write(obj)
        else:
            isolation.for_each("queue status", announced, write, concurrent=True)

    def _write_status(self, informer: inf.Informer, resource: inf.Resource, obj: Obj, fields: dict[str, Any]) -> None:
        if not _changed(obj, fields):
            return
        self.writer.patch(resource, obj, {"status": fields}, informer, subresource="status")

    # ------------------------------------------------------------------ finalizers
    def _sync_finalizers(self, snapshot: Snapshot,
                         each: Callable[[str, Sequence[Obj], Callable[[Obj], object]], None]) -> None:
        holding = {w.cluster_queue for w in snapshot.admitted}
        used_flavors = {f for obj in self.cache.cluster_queues.items() for f in _flavor_names(obj)}
        used_topologies = {(o.get("spec") or {}).get("topologyName") for o in self.cache.flavors.items()}
        in_use_by_kind: tuple[tuple[inf.Informer, inf.Resource, set[str | None]], ...] = (
            (self.cache.cluster_queues, inf.CLUSTER_QUEUES, set(holding)),
            (self.cache.flavors, inf.RESOURCE_FLAVORS, set(used_flavors)),
            (self.cache.topologies, inf.TOPOLOGIES, used_topologies),
        )
        for informer, resource, in_use in in_use_by_kind:
            def finalizer(obj: Obj, informer: inf.Informer = informer, resource: inf.Resource = resource,
                          in_use: set[str | None] = in_use) -> None:
                meta = obj["metadata"]
                finalizers = list(meta.get("finalizers") or ())
                deleting = bool(meta.get("deletionTimestamp"))
                if not deleting and RESOURCE_IN_USE not in finalizers:
                    self._set_finalizers(informer, resource, obj, [*finalizers, RESOURCE_IN_USE])
                elif deleting and RESOURCE_IN_USE in finalizers and meta["name"] not in in_use:
                    log.info("%s %s is no longer in use: removing %s", resource.plural, meta["name"], RESOURCE_IN_USE)
                    self._set_finalizers(informer, resource, obj, [f for f in finalizers if f != RESOURCE_IN_USE])

            each("queue finalizers", informer.items(), finalizer)

    def _set_finalizers(self, informer: inf.Informer, resource: inf.Resource, obj: Obj, finalizers: list[str]) -> None:
        # Versioned: a finalizer list computed from a stale copy must not drop another's entry.
        self.writer.patch(resource, obj, {"metadata": {"finalizers": finalizers}}, informer)


def _flavor_names(cluster_queue: Mapping[str, Any]) -> list[str]:
    return [str(f.get("name")) for g in (cluster_queue.get("spec") or {}).get("resourceGroups") or ()
            for f in g.get("flavors") or ()]
