"""Phase 6 of the controller's pass: an admitted Workload's job is unsuspended with its node
selectors (the flavor's nodeLabels and the required domain's labels), once the previous run's
pods are gone (never two copies of a pod)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.adapter.kinds.base import PodSetStart
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.jobs import JobIndex
from scheduler.kube.phase import PassState, Shared
from scheduler.kube.start import start_selectors
from scheduler.kube.workload_index import owner_uid

Obj = dict[str, Any]


class StartAdmitted:
    def __init__(self, shared: Shared, matches: Callable[[Obj, JobIndex], bool] | None = None) -> None:
        """``matches``: the Workload still matches its job (``kube/equivalence.py``); a stale
        admission is never started."""
        self.s = shared
        self.matches = matches

    def run(self, _state: PassState | None = None) -> None:
        jobs = self.s.lookups.job_index()
        self.s.isolation.for_each("start_admitted",
                                  [wl for wl in wi.holding(self.s.cache.workloads)
                                   if st.condition_true(wl, st.ADMITTED) and not st.condition_true(wl, st.EVICTED)],
                                  lambda wl: self._start(wl, jobs), workload_of=lambda wl: wl, concurrent=True,
                                  wanted=lambda wl: self._startable(wl, jobs)
                                  and (self.matches is None or self.matches(wl, jobs)))

    def selectors(self, wl: Mapping[str, Any]) -> list[PodSetStart]:
        return start_selectors(wl, self.s.cache)

    @staticmethod
    def _startable(wl: Obj, jobs: JobIndex) -> bool:
        entry = jobs.get(owner_uid(wl) or "")
        return entry is not None and entry[0].is_suspended(entry[1]) and entry[0].can_restore(entry[1])

    def _start(self, wl: Obj, jobs: JobIndex) -> None:
        integration, job = jobs[owner_uid(wl) or ""]
        for patch in integration.start_writes(job, wl["metadata"]["name"], self.selectors(wl)):
            if not self.s.writer.patch_job(integration, job, patch):
                return  # the next pass starts again from what is stored
        self.s.writer.event(job, "Normal", "Started",
                            f"Admitted by clusterQueue {wl['status']['admission']['clusterQueue']}")
