"""Phase 4 of the controller's pass: an evicted Workload's job is stopped (suspended; the pods
of a pod group or a plain pod deleted, as Kueue's Stop); once its pods are gone the reservation
is dropped and the Workload requeued (or, past its HyperPod auto-resume retries, finished as
Failed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.pod import owned_by_single_pod
from scheduler.core.kueue.failures import EVICTION_REASON, RequeueBackoff
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.jobs import JobIndex
from scheduler.kube.nodefailures import requeue_or_fail
from scheduler.kube.phase import PassState, Shared
from scheduler.kube.podgroups import PodGroupPhases, is_group_workload
from scheduler.kube.podintegration import PodIntegration
from scheduler.kube.podsready import requeues_at_once
from scheduler.kube.workload_index import owner_uid

Obj = dict[str, Any]


class ProgressEvictions:
    def __init__(self, shared: Shared, pod_groups: PodGroupPhases, pod_integration: PodIntegration | None,
                 requeue_backoff: RequeueBackoff) -> None:
        self.s = shared
        self.pod_groups = pod_groups
        self.pod_integration = pod_integration
        self.requeue_backoff = requeue_backoff

    def run(self, _state: PassState | None = None) -> None:
        jobs = self.s.lookups.job_index()
        self.s.isolation.for_each("progress_evictions",
                                  [wl for wl in wi.holding(self.s.cache.workloads) if st.is_evicting(wl)],
                                  lambda wl: self._progress(wl, jobs), workload_of=lambda wl: wl, concurrent=True)

    def _progress(self, wl: Obj, jobs: JobIndex) -> None:
        entry = jobs.get(owner_uid(wl) or "")
        if entry is None and is_group_workload(wl):
            if self.pod_groups.stop_group(wl):  # a pod group (LeaderWorkerSet, StatefulSet): its pods go first
                self._release(wl, None)
            return
        if entry is None and self.pod_integration is not None and self.pod_integration.owns(wl):
            if self.pod_integration.stop(wl):  # a pod cannot be suspended: deleted, as Kueue's Stop
                self._release(wl, None)
            return
        if entry is None:
            # An ownerless Workload (created directly, as Kueue's perf runner, Kueue's own
            # integration tests and external frameworks do) is released by whoever owns it, as
            # under Kueue: only Kueue's job reconciler clears an evicted Workload's reservation
            # (v0.17 jobframework/reconciler.go), so until then it keeps its quota.
            return
        integration, job = entry
        if not integration.is_suspended(job):
            self._suspend(integration, job, wl)
            return
        if not integration.can_restore(job):
            return  # pods still going, or the Job controller has not cleared startTime yet
        restore = integration.restore_patch(job, list((wl.get("spec") or {}).get("podSets") or ()))
        if restore is not None and not self.s.writer.patch_job(integration, job, restore):
            return
        self._release(wl, job)

    def _release(self, wl: Obj, job: Obj | None) -> None:
        """The evicted job's pods are gone: drop the reservation. Preempted evictions requeue at
        once (Kueue); NodeFailures evictions after Kueue's requeuing backoff (``requeueState``),
        unless HyperPod auto-resume retries are used up."""
        writer = self.s.writer
        now = self.s.clock()
        requeue, failure = requeue_or_fail(wl)
        evicted = st.find_condition(wl, st.EVICTED) or {}
        requeue = requeue and requeues_at_once(str(evicted.get("reason") or ""))
        if self.s.gates.enabled("SkipReassignmentForPodOwnedWorkloads") and owned_by_single_pod(wl):
            # Kueue v0.19's job reconciler: a pod-owned Workload dies with its pod; requeued, it
            # would get an assignment nothing can use (Requeued=False, the eviction's reason).
            requeue = False
        backoff = (self.requeue_backoff.delay_s(st.requeue_count(wl) + 1)
                   if evicted.get("reason") == EVICTION_REASON else None)
        status = st.release_status(wl, now, requeue=requeue, requeue_after_s=backoff)
        if failure:
            status["conditions"] = st.finish_status(st.merged(wl, status), "Failed", failure, now)["conditions"]
        if writer.patch_workload_status(wl, status):
            if failure:
                writer.event(job if job is not None else wl, "Warning", "AutoResumeRetriesExhausted", failure)
                writer.notify("finished", wl, {"reason": "Failed", "message": failure})
            else:
                # quota released: Kueue v0.19's workload_eviction_latency_seconds ends here
                writer.notify("requeued", wl, {"at": now.isoformat()})

    def _suspend(self, integration: JobKind, job: Obj, wl: Mapping[str, Any]) -> None:
        if self.s.writer.patch_job(integration, job, integration.stop_patch(job)):
            evicted = st.find_condition(wl, st.EVICTED) or {}
            self.s.writer.event(job, "Normal", "Stopped", evicted.get("message", "Workload evicted"))
