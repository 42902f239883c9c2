"""Phase 1b of the controller's pass, Kueue's re-suspension (jobframework): a managed job that runs
while its Workload is not admitted (a user patched ``suspend: false`` on a pending job) is
suspended again, with Kueue's ``Stopped`` event and message; a child whose queued ancestor (resolved
by uid) has no admitted Workload is suspended, whether it carries the queue label or not, with
Kueue's ``Suspended`` "Kueue managed child job suspended" (``shouldSuspendChildJob``)."""

from __future__ import annotations

import logging
from typing import Any

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.adapter.kinds.base import JobKind
from scheduler.core.config import FeatureGates
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import object_key
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.cache import ClusterCache
from scheduler.kube.isolation import Isolation
from scheduler.kube.jobs import resource_of
from scheduler.kube.lookups import JobLookups
from scheduler.kube.writer import Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]

# Kueue's jobframework stop messages (event reason "Stopped").
NOT_ADMITTED_MESSAGE = "Not admitted by cluster queue"
NO_MATCHING_WORKLOAD_MESSAGE = "No matching Workload"
CHILD_SUSPENDED_MESSAGE = "Kueue managed child job suspended"  # event reason "Suspended"


class Resuspension:
    def __init__(self, cache: ClusterCache, writer: Writer, isolation: Isolation, lookups: JobLookups,
                 gates: FeatureGates | None = None) -> None:
        """``gates``: the Configuration's (ElasticJobsViaWorkloadSlices: an elastic job is never
        suspended for a slice that waits for quota)."""
        self.gates = gates if gates is not None else FeatureGates()
        self.cache = cache
        self.writer = writer
        self.isolation = isolation
        self.lookups = lookups

    def run(self) -> None:
        """Kueue's jobframework: a managed job that runs while its Workload is not admitted (a
        user patched ``suspend: false`` on a pending job) is suspended again, with Kueue's
        ``Stopped`` event and message; without any Workload, Kueue's "No matching Workload"."""
        # (integration, job, its Workload or None), the Workload looked up once per job.
        items = [(*entry, wi.owned_by(self.cache.workloads, uid)) for uid, entry in self.lookups.job_index().items()]
        self.isolation.for_each("suspend_unadmitted", items, lambda item: self._suspend_unadmitted(*item),
                                subject=lambda item: item[1], workload_of=lambda item: item[2], concurrent=True,
                                wanted=lambda item: self._runs_unadmitted(*item))
        # Children without the queue label (a tenant's Job owned by its own queued JobSet).
        children = [(kind, job) for kind in self.lookups.kinds if kind.suspendable
                    for job in (self.cache.unqueued[kind.framework].items() if kind.framework in self.cache.unqueued
                                else ())]
        self.isolation.for_each("suspend_unadmitted", children, lambda item: self._suspend_child(*item),
                                subject=lambda item: item[1], wanted=lambda item: self._child_runs_unadmitted(*item))

    def _child_runs_unadmitted(self, integration: JobKind, job: Obj) -> bool:
        """Kueue's ``shouldSuspendChildJob``: running, not finished, and its managed ancestor's
        latest Workload missing, finished or not admitted."""
        meta = job.get("metadata") or {}
        if integration.is_suspended(job) or meta.get("deletionTimestamp") or integration.finish_state(job).finished:
            return False
        ancestor = self.lookups.ownership(job).ancestor
        if ancestor is None:
            return False
        wl = wi.owned_by(self.cache.workloads, ancestor.uid)
        return wl is None or st.is_finished(wl) or not st.condition_true(wl, st.ADMITTED)

    def _runs_unadmitted(self, integration: JobKind, job: Obj, wl: Obj | None) -> bool:
        meta = job.get("metadata") or {}
        if integration.is_suspended(job) or meta.get("deletionTimestamp"):
            return False
        if not (meta.get("labels") or {}).get(LABEL_QUEUE_NAME) or integration.finish_state(job).finished:
            return False  # not managed (Kueue's manageJobsWithoutQueueName: false), or done
        if self.lookups.ownership(job).ancestor is not None:
            return self._child_runs_unadmitted(integration, job)
        if wl is not None and ws.supported(integration.group, integration.kind) and ws.enabled(job, self.gates):
            # Kueue's reconciler: "unless this job is workload-slicing enabled" (a scale-up's new
            # slice waits for quota while the job runs on the slice admitted before it).
            return False
        # Admitted (or evicted: the eviction phase stops it with the eviction's message).
        return wl is None or not (st.condition_true(wl, st.ADMITTED) or st.is_finished(wl))

    def _suspend_unadmitted(self, integration: JobKind, job: Obj, wl: Obj | None) -> None:
        if self.lookups.ownership(job).ancestor is not None:
            self._suspend_child(integration, job)
            return
        message = NOT_ADMITTED_MESSAGE if wl is not None else NO_MATCHING_WORKLOAD_MESSAGE
        if self.writer.patch_job(integration, job, integration.stop_patch(job)):
            log.info("%s %s runs without an admitted Workload: suspended (%s)", integration.kind, object_key(job),
                     message)
            self.writer.event(job, "Normal", "Stopped", message)

    def _suspend_child(self, integration: JobKind, job: Obj) -> None:
        labelled = bool(((job.get("metadata") or {}).get("labels") or {}).get(LABEL_QUEUE_NAME))
        into = self.cache.jobs[integration.framework] if labelled else self.cache.unqueued[integration.framework]
        if self.writer.patch(resource_of(integration), job, integration.stop_patch(job), into):
            log.info("%s %s runs while its queued ancestor is not admitted: suspended", integration.kind,
                     object_key(job))
            self.writer.event(job, "Normal", "Suspended", CHILD_SUSPENDED_MESSAGE)
