"""Phase 2 of the controller's pass: a Workload whose job finished is marked Finished (its quota
is free at once). Walked from the jobs' side: a Workload without a job has nothing to sync."""

from __future__ import annotations

from typing import Any

from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.jobs import JobIndex
from scheduler.kube.phase import PassState, Shared
from scheduler.kube.podintegration import PodIntegration
from scheduler.kube.workload_index import owner_uid

Obj = dict[str, Any]


class SyncFinished:
    def __init__(self, shared: Shared, pod_integration: PodIntegration | None) -> None:
        self.s = shared
        self.pod_integration = pod_integration

    def run(self, _state: PassState | None = None) -> None:
        s = self.s
        if self.pod_integration is not None:
            self.pod_integration.sync_finished()
            self.pod_integration.release_finalizers()
        jobs = s.lookups.job_index()
        workloads = s.cache.workloads
        s.isolation.for_each("sync_finished",
                             [wl for uid in jobs for wl in workloads.indexed(wi.OWNER, uid) if not st.is_finished(wl)],
                             lambda wl: self._sync(wl, jobs), workload_of=lambda wl: wl, concurrent=True,
                             wanted=lambda wl: self._job_finished(wl, jobs))

    @staticmethod
    def _job_finished(wl: Obj, jobs: JobIndex) -> bool:
        integration, job = jobs[owner_uid(wl) or ""]
        return integration.finish_state(job).finished

    def _sync(self, wl: Obj, jobs: JobIndex) -> None:
        integration, job = jobs[owner_uid(wl) or ""]
        state = integration.finish_state(job)
        if self.s.writer.patch_workload_status(wl, st.finish_status(wl, state.reason, state.message, self.s.clock())):
            self.s.writer.notify("finished", wl, {"reason": state.reason})
