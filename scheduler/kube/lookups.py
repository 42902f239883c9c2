"""What the controller's phases look up in the informer caches about a queued object: the queued
objects of every enabled kind by uid, a job's queued ancestor (resolved by uid: a forged owner
reference is not honoured), and its priority as Kueue resolves it. Reads only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.ownership import OwnerRef, OwnerUnreadable, Resolution, governed_kind, managed_ancestor
from scheduler.adapter.priority_policy import ClassRefused, class_refused, class_value, template_priority_class
from scheduler.core.workload import LABEL_PRIORITY_CLASS
from scheduler.kube.cache import ClusterCache

Obj = dict[str, Any]
Resolved = tuple[int, dict[str, str] | None]  # (priority, spec.priorityClassRef)


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

    def _namespace(self, name: str) -> Obj | None:
        return self.cache.namespaces.get(name)

    def _quotas(self, namespace: str) -> list[Obj]:
        informer = self.cache.resource_quotas
        return [q for q in informer.items() if (q.get("metadata") or {}).get("namespace") == namespace] \
            if informer is not None else []

    def _refused(self, kind: str, name: str, found: Obj | None, namespace: str, where: str) -> ClassRefused | None:
        return class_refused(kind, name, found, namespace, self._namespace(namespace),
                             self._quotas(namespace) if found is not None else (), where)

    def resolve_priority(self, job: Mapping[str, Any]) -> Resolved | ClassRefused:
        """Kueue: the WorkloadPriorityClass label wins; else the pod template's PriorityClass;
        else (WorkloadPriorityClassDefaulting on) a WorkloadPriorityClass named ``default`` (if
        any); else 0. A class the job's namespace may not use (missing, outside the Namespace's
        allow-list, a system class without a covering ResourceQuota: ``adapter.priority_policy``)
        holds the job: no Workload, and the caller tells the job why (``ClassRefused.event``).
        Held rather than run at priority 0: the tenant asked for a priority it may not have, and
        a job that quietly runs at the lowest one is a surprise found only once it is preempted."""
        meta = job.get("metadata") or {}
        labels = meta.get("labels") or {}
        namespace = str(meta.get("namespace") or "default")
        name = labels.get(LABEL_PRIORITY_CLASS)
        if name:
            wpc = self.cache.workload_priority_classes.get(name)
            if wpc is None:  # Kueue's own Event, word for word
                return ClassRefused("WorkloadPriorityClassNotFound", f"workloadPriorityClass \"{name}\" not found",
                                    f"create it or fix label {LABEL_PRIORITY_CLASS}")
            refused = self._refused("WorkloadPriorityClass", name, wpc, namespace, f"label {LABEL_PRIORITY_CLASS}")
            if refused is not None:
                return refused
            return class_value(wpc), {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
        pc_name = template_priority_class(job)
        if pc_name:
            pc = self.cache.priority_classes.get(pc_name)
            refused = self._refused("PriorityClass", pc_name, pc, namespace, "spec.template.spec.priorityClassName")
            if refused is not None:
                return refused
            assert pc is not None  # a missing class is always refused
            return class_value(pc), {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pc_name}
        default = self.cache.workload_priority_classes.get("default") if self.default_priority_class else None
        if default is not None:  # the admin's default: not the tenant's choice, so no allow-list
            return class_value(default), {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                          "name": "default"}
        return 0, None
