"""Elastic jobs in the controller's ``ensure_workloads`` phase: Kueue v0.19.2's
``EnsureWorkloadSlices`` (``ensureOneWorkload``'s slice path) for a job annotated
``kueue.x-k8s.io/elastic-job: "true"`` while ``ElasticJobsViaWorkloadSlices`` is on. The
decision is ``adapter/kinds/workload_slicing.py``'s; this module only writes it: slices to
finish (``OutOfSync`` / ``WorkloadSliceReplaced``), pod counts rewritten in place (a scale-down,
or any change before the slice holds quota: the quota is released at once), and whether a new
slice is to be created (a scale-up of an admitted slice: ``EnsureWorkloads`` creates it)."""

from __future__ import annotations

import logging
from typing import Any, cast

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.workloads import workload_pod_sets
from scheduler.core.config import FeatureGates
from scheduler.core.workload import ANN_WORKLOAD
from scheduler.k8s.informer import PODS, WORKLOADS, object_key
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.phase import Shared

log = logging.getLogger(__name__)
Obj = dict[str, Any]


class ElasticSlices:
    def __init__(self, shared: Shared, gates: FeatureGates) -> None:
        self.s = shared
        self.gates = gates

    def elastic(self, kind: JobKind, job: Obj) -> bool:
        """The job scales through workload slices (Kueue's ``WorkloadSliceEnabled``; the kinds
        Kueue's webhook lets carry the annotation)."""
        return ws.supported(kind.group, kind.kind) and ws.enabled(job, self.gates)

    def owned(self, job: Obj) -> list[Obj]:
        """The job's Workloads as Kueue lists them (``FindNotFinishedWorkloads``: in the job's
        namespace, by controller owner reference): a Workload elsewhere that only carries the
        job's uid in a label is no slice of it (docs/security.md, boundary 10)."""
        meta = job.get("metadata") or {}
        uid, namespace = str(meta.get("uid") or ""), meta.get("namespace")
        return [wl for wl in self.s.cache.workloads.indexed(wi.OWNER, uid)
                if (wl.get("metadata") or {}).get("namespace") == namespace and ws.controller_uid(wl) == uid]

    def live(self, job: Obj) -> list[Obj]:
        return [cast(Obj, wl) for wl in ws.not_finished(self.owned(job))]

    def settle(self, kind: JobKind, job: Obj) -> bool:
        """Apply the slice plan; True when the job needs a new slice (Kueue: no compatible
        slice to return). An incompatible plan (pod sets renamed or added) is the equivalence
        phase's, as Kueue falls back to its ordinary reconcile."""
        counts = ws.counts_of(workload_pod_sets(kind, job, self.s.lookups.related))
        plan = ws.ensure_slices(counts, self.owned(job))
        for finish in plan.finish:
            self._finish(finish)
        if plan.workload is not None and plan.counts is not None:
            self._rescale(job, cast(Obj, plan.workload), plan.counts)
        return plan.compatible and plan.workload is None

    def _finish(self, finish: ws.Finish) -> None:
        wl = cast(Obj, finish.workload)  # one of the cache's Workloads
        if self.s.writer.patch_workload_status(wl, st.finish_status(wl, finish.reason, finish.message,
                                                                    self.s.clock())):
            log.info("workload slice %s finished: %s", object_key(wl), finish.reason)

    def _rescale(self, job: Obj, wl: Obj, counts: ws.Counts) -> None:
        """``ApplyPodSetCounts`` + update: only the counts change (the whole list is written:
        a merge patch replaces lists)."""
        pod_sets = [dict(ps, count=counts.get(str(ps.get("name")), ps.get("count")))
                    for ps in (wl.get("spec") or {}).get("podSets") or ()]
        if self.s.writer.patch(WORKLOADS, wl, {"spec": {"podSets": pod_sets}}, self.s.cache.workloads):
            log.info("elastic %s: Workload %s scaled in place to %s", object_key(job), object_key(wl), counts)


class ElasticUngater:
    """Kueue's ElasticJobUngater (v0.19.2 ``pkg/controller/elasticjobs/elastic_job_ungater.go``):
    a controller phase after ``start_admitted``. An elastic job's pods carry the scheduling gate
    ``kueue.x-k8s.io/elastic-job`` (the job webhook puts it in the templates); for the newest
    admitted slice of each chain the gate is lifted from as many pods as it grants
    (``workload_slicing.pods_to_ungate``), so a scale-up's new pods wait for their slice."""

    def __init__(self, shared: Shared) -> None:
        self.s = shared

    def _chains(self) -> dict[tuple[str, str], Obj]:
        """(namespace, slice name) -> the chain's newest admitted, not evicted slice."""
        out: dict[tuple[str, str], Obj] = {}
        for wl in wi.holding(self.s.cache.workloads):
            ann = (wl.get("metadata") or {}).get("annotations") or {}
            if ann.get(ws.ELASTIC_ANNOTATION) != ws.ELASTIC_VALUE or not st.condition_true(wl, st.ADMITTED) \
                    or st.condition_true(wl, st.EVICTED):
                continue
            key = (str(wl["metadata"].get("namespace")), ws.slice_name(wl))
            known = out.get(key)
            if known is None or ws.not_finished([known, wl])[-1] is wl:
                out[key] = wl
        return out

    def run(self) -> None:
        pods: dict[tuple[str, str], list[Obj]] = {}
        for pod in self.s.cache.pods.items():
            meta = pod.get("metadata") or {}
            workload = (meta.get("annotations") or {}).get(ANN_WORKLOAD)
            if workload and not meta.get("deletionTimestamp"):
                pods.setdefault((str(meta.get("namespace")), str(workload)), []).append(pod)
        # A pod names the slice its job was started with: the chain's first, or (started again
        # after an eviction) a later one.
        items = [(wl, [*pods.get(key, []), *(pods.get((key[0], wl["metadata"]["name"]), [])
                                              if wl["metadata"]["name"] != key[1] else [])])
                 for key, wl in sorted(self._chains().items())]
        self.s.isolation.for_each("elastic_ungate", items, lambda item: self._ungate(*item),
                                  subject=lambda item: item[0], workload_of=lambda item: item[0],
                                  wanted=lambda item: any(ws.gated(p) for p in item[1]))

    def _ungate(self, wl: Obj, pods: list[Obj]) -> None:
        for pod in ws.pods_to_ungate(ws.workload_counts(wl), pods):
            gates = [g for g in (pod.get("spec") or {}).get("schedulingGates") or ()
                     if g.get("name") != ws.SCHEDULING_GATE]
            if self.s.writer.patch(PODS, pod, {"spec": {"schedulingGates": gates or None}}, self.s.cache.pods):
                log.info("elastic pod %s ungated for Workload %s", object_key(pod), object_key(wl))
