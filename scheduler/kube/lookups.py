"""What the controller's phases look up in the informer caches about a queued object: the queued
objects of every enabled kind by uid, a job's queued ancestor (resolved by uid: a forged owner
reference is not honoured), and its priority as Kueue resolves it. Reads only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.ownership import OwnerRef, OwnerUnreadable, Resolution, governed_kind, managed_ancestor
from scheduler.core.workload import LABEL_PRIORITY_CLASS
from scheduler.kube.cache import ClusterCache

Obj = dict[str, Any]


class JobLookups:
    def __init__(self, cache: ClusterCache, kinds: Sequence[JobKind], default_priority_class: bool = False) -> None:
        """``default_priority_class``: Kueue's WorkloadPriorityClassDefaulting gate (alpha, off in
        v0.17 and v0.19): a job without a class gets the WorkloadPriorityClass ``default``."""
        self.cache = cache
        self.kinds = kinds
        self.default_priority_class = default_priority_class

    def job_index(self) -> dict[str, tuple[JobKind, Obj]]:
        """uid -> (kind, object) of the queued objects of every enabled suspendable kind."""
        out: dict[str, tuple[JobKind, Obj]] = {}
        for kind in self.kinds:
            informer = self.cache.jobs.get(kind.framework)
            if informer is None or not kind.suspendable:
                continue
            for job in informer.items():
                if not kind.skipped(job):  # a RayJob on an existing cluster is not managed
                    out[str(job["metadata"]["uid"])] = (kind, job)
        return out

    def related(self, kind: str, namespace: str, name: str) -> Obj | None:
        """An object a kind's pod sets are read from (a TrainJob's runtime), from its informer."""
        informer = self.cache.related.get(kind)
        return informer.get(f"{namespace}/{name}" if namespace else name) if informer is not None else None

    def _queued_owner(self, namespace: str, ref: OwnerRef) -> Obj | None:
        """An owner from the informer caches, which hold the queued objects of every governed
        kind: one found there exists and is queued; one that is not is no managed ancestor."""
        kind = governed_kind(ref, self.kinds)
        informer = self.cache.jobs.get(kind.framework) if kind is not None else None
        return informer.get(f"{namespace}/{ref.name}") if informer is not None else None

    def ownership(self, job: Mapping[str, Any]) -> Resolution:
        """The job's queued ancestor of a governed kind, resolved by uid (a forged owner reference
        is not honoured: the job is queued on its own). A cyclic or too long chain: on its own."""
        try:
            return managed_ancestor(job, self._queued_owner, self.kinds)
        except OwnerUnreadable as exc:
            return Resolution(None, str(exc))

    def resolve_priority(self, job: Mapping[str, Any]) -> tuple[int, dict[str, str] | None] | None:
        """Kueue: the WorkloadPriorityClass label wins; else the pod template's PriorityClass;
        else (WorkloadPriorityClassDefaulting on) a WorkloadPriorityClass named ``default`` (if
        any); else 0. A label naming a missing class blocks Workload creation (``None``)."""
        labels = (job.get("metadata") or {}).get("labels") or {}
        name = labels.get(LABEL_PRIORITY_CLASS)
        if name:
            wpc = self.cache.workload_priority_classes.get(name)
            if wpc is None:
                return None
            return int(wpc.get("value") or 0), {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                 "name": name}
        pc_name = ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get("priorityClassName")
        if pc_name:
            pc = self.cache.priority_classes.get(pc_name)
            if pc is not None:
                return int(pc.get("value") or 0), {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                    "name": pc_name}
        default = self.cache.workload_priority_classes.get("default") if self.default_priority_class else None
        if default is not None:
            return int(default.get("value") or 0), {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                     "name": "default"}
        return 0, None
