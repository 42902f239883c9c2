"""Phase 1a of the controller's pass, right after ``ensure_workloads``: what runs is what was
admitted. Kueue's job reconciler checks on every sync that each Workload still matches its job
(``ensureOneWorkload`` / ``EquivalentToWorkload``, v0.17.0 pkg/controller/jobframework/
reconciler.go; the comparison is ``scheduler/adapter/kinds/equivalence.py``); this phase does the
same for every governed suspendable job (every kind in the registry: batch Job, JobSet, PyTorchJob, TrainJob,
RayJob / RayCluster, HyperPodPyTorchJob, ...) and each Workload it owns:

- the job runs and its Workload does not match (it was edited after admission): the job is
  stopped with Kueue's ``Stopped`` event "No matching Workload; restoring pod templates according
  to existent Workload";
- the job is suspended and its Workload, without a reservation, does not match (the tenant
  rewrote the Workload's pod sets, or the job while queued): the Workload is rewritten from the
  job, Kueue's ``UpdatedWorkload`` "Updated not matching Workload for suspended job: ns/name";
- the Workload holds a reservation and does not match even its own spec: it is deleted (Kueue's
  ``DeletedWorkload`` "Deleted not matching Workload: ns/name") and the next pass queues a new
  one built from the job. Stricter than Kueue, which deletes it at once: only once the job's
  pods are gone (its quota stays taken while they hold nodes) and its pod templates are
  restored; until then :meth:`Equivalence.startable` keeps ``start_admitted`` from starting it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.charging import charged_pod_sets
from scheduler.adapter.kinds.equivalence import equivalent, job_pod_sets, only_counts_differ
from scheduler.adapter.kinds.workloads import workload_for_job
from scheduler.adapter.priority_policy import ClassRefused
from scheduler.adapter.workload_checks import workload_problems
from scheduler.core.config import DEFAULT_KUEUE_RELEASE, FeatureGates
from scheduler.core.topology_request import TopologyRequestError
from scheduler.core.workload import WorkloadFormatError
from scheduler.k8s.informer import WORKLOADS, object_key
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.jobs import JobIndex
from scheduler.kube.phase import Shared

log = logging.getLogger(__name__)
Obj = dict[str, Any]

# Kueue's jobframework messages.
NO_MATCHING_RESTORING = "No matching Workload; restoring pod templates according to existent Workload"
UPDATED_NOT_MATCHING = "Updated not matching Workload for suspended job: {}"
DELETED_NOT_MATCHING = "Deleted not matching Workload: {}"
UNREADABLE = (TopologyRequestError, WorkloadFormatError, ValueError, TypeError, KeyError)


def _controlled_by(wl: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """The Workload's controller reference names the job (by uid): Kueue lists a job's
    Workloads by owner reference; a label alone is not ownership."""
    uid = (job.get("metadata") or {}).get("uid")
    return any(isinstance(r, Mapping) and r.get("controller") is True and r.get("uid") == uid
               for r in ((wl.get("metadata") or {}).get("ownerReferences") or ()))


def _versions(kind: JobKind, job: Mapping[str, Any], wl: Mapping[str, Any]) -> tuple[str, ...] | None:
    """What a verdict depends on; None when it cannot be told (no resourceVersion, or pod sets
    read from other objects, a TrainJob's runtime)."""
    jm, wm = job.get("metadata") or {}, wl.get("metadata") or {}
    key = (str(jm.get("uid") or ""), str(jm.get("resourceVersion") or ""), str(wm.get("uid") or ""),
           str(wm.get("resourceVersion") or ""))
    return None if kind.pod_sets_from is not None or not all(key) else key


class Equivalence:
    def __init__(self, shared: Shared, partial_admission: bool = True, release: str = DEFAULT_KUEUE_RELEASE,
                 gates: FeatureGates | None = None) -> None:
        """``partial_admission``: Kueue's PartialAdmission gate (off: a job's minCount is not compared);
        ``release``: the Kueue release whose Workload rules a rebuilt Workload must pass; ``gates``:
        the Configuration's (ElasticJobsViaWorkloadSlices: a scale of an elastic job is no mismatch)."""
        self.release = release
        self.gates = gates if gates is not None else FeatureGates()
        self.cache = shared.cache
        self.writer = shared.writer
        self.isolation = shared.isolation
        self.lookups = shared.lookups
        self.release = shared.release
        self.partial_admission = partial_admission
        # (job uid, its resourceVersion, Workload uid, its resourceVersion) -> matches: a pass
        # compares again only what changed since the last (kept for the pairs of the last pass).
        self._verdicts: dict[tuple[str, ...], bool] = {}

    # ------------------------------------------------------------------ reading
    def matches(self, kind: JobKind, job: Obj, wl: Mapping[str, Any]) -> bool:
        """The Workload matches the job (a job whose pod sets cannot be read is not judged,
        as Kueue's reconciler returns the error and does nothing)."""
        key = _versions(kind, job, wl)
        known = self._verdicts.get(key) if key is not None else None
        if known is not None:
            return known
        try:
            pod_sets = job_pod_sets(charged_pod_sets(kind, job, self.lookups.related, self.release),
                                    self.partial_admission)
        except UNREADABLE as exc:
            log.debug("pod sets of %s unreadable (%s): not compared", object_key(job), exc)
            return True
        verdict = equivalent(pod_sets, wl, kind.is_suspended(job)) or self.scaled(kind, job, pod_sets, wl)
        if key is not None:
            self._verdicts[key] = verdict
        return verdict

    def scaled(self, kind: JobKind, job: Obj, pod_sets: list[dict[str, Any]], wl: Mapping[str, Any]) -> bool:
        """An elastic job (Kueue v0.19's workload slices, ``ElasticJobsViaWorkloadSlices``)
        whose Workload differs from it in pod counts only has scaled, which
        ``ensure_workloads`` serves (``kube/elastic.py``: the Workload rescaled in place, or a
        new slice): never a mismatch, as Kueue's ``EnsureWorkloadSlices`` returns such a slice
        as compatible. Any other change (a template, a pod set renamed) still is."""
        return ws.supported(kind.group, kind.kind) and ws.enabled(job, self.gates) \
            and only_counts_differ(pod_sets, wl)

    def startable(self, wl: Mapping[str, Any], jobs: JobIndex) -> bool:
        """``start_admitted`` starts no job whose admitted Workload does not match it."""
        entry = jobs.get(wi.owner_uid(wl) or "")
        return entry is None or not _controlled_by(wl, entry[1]) or self.matches(entry[0], entry[1], wl)

    def _stale(self, kind: JobKind, job: Obj, wl: Obj) -> bool:
        meta = job.get("metadata") or {}
        if meta.get("deletionTimestamp") or (wl.get("metadata") or {}).get("deletionTimestamp"):
            return False
        if st.is_finished(wl) or kind.finish_state(job).finished or not _controlled_by(wl, job):
            return False
        return not self.matches(kind, job, wl)

    # ------------------------------------------------------------------ the phase
    def run(self) -> None:
        items = [(kind, job, wl) for uid, (kind, job) in self.lookups.job_index().items()
                 for wl in self.cache.workloads.indexed(wi.OWNER, uid)]
        current = {key for key in (_versions(*item) for item in items) if key is not None}
        self._verdicts = {key: v for key, v in self._verdicts.items() if key in current}
        self.isolation.for_each("equivalence", items, lambda item: self._correct(*item),
                                subject=lambda item: item[1], workload_of=lambda item: item[2], concurrent=True,
                                wanted=lambda item: self._stale(*item))

    def _correct(self, kind: JobKind, job: Obj, wl: Obj) -> None:
        reserved = st.has_reservation(wl)
        if not kind.is_suspended(job):
            log.info("%s %s runs and Workload %s does not match it: stopped", kind.kind, object_key(job),
                     object_key(wl))
            if self.writer.patch_job(kind, job, kind.stop_patch(job)):
                self.writer.event(job, "Normal", "Stopped", NO_MATCHING_RESTORING)
            if not reserved:
                self._delete(job, wl)  # nothing held: Kueue deletes it with the stop
            return
        if not reserved:
            self._update(kind, job, wl)
            return
        if not kind.can_restore(job):
            return  # its pods still hold their nodes: the quota stays taken, the job is not started
        restore = kind.restore_patch(job, list((wl.get("spec") or {}).get("podSets") or ()))
        if restore is not None and not self.writer.patch_job(kind, job, restore):
            return
        self._delete(job, wl)

    def _update(self, kind: JobKind, job: Obj, wl: Obj) -> None:
        """Kueue's ``updateWorkloadToMatchJob``: the spec rebuilt from the job, ``active`` kept."""
        priority = self.lookups.resolve_priority(job)
        try:
            body = workload_for_job(kind, job, priority[0], priority[1], self.lookups.related, release=self.release) \
                if not isinstance(priority, ClassRefused) else None
        except UNREADABLE:
            body = None
        if body is None or workload_problems(body, self.release):
            self._delete(job, wl)  # no valid Workload can be built now: ensure_workloads says why
            return
        spec = dict(body["spec"], active=(wl.get("spec") or {}).get("active", True))
        patch = {"spec": {**{k: None for k in (wl.get("spec") or {}) if k not in spec}, **spec}}
        if self.writer.patch(WORKLOADS, wl, patch, self.cache.workloads):
            self.writer.event(job, "Normal", "UpdatedWorkload", UPDATED_NOT_MATCHING.format(object_key(wl)))

    def _delete(self, job: Obj, wl: Obj) -> None:
        meta = wl["metadata"]
        if meta.get("finalizers") and not self.writer.patch(WORKLOADS, wl, {"metadata": {"finalizers": None}},
                                                            self.cache.workloads):
            return
        if self.writer.delete(WORKLOADS, meta["name"], meta.get("namespace")):
            self.cache.forget(self.cache.workloads, wl)
            self.writer.event(job, "Normal", "DeletedWorkload", DELETED_NOT_MATCHING.format(object_key(wl)))
