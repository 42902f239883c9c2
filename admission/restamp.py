"""The template stamps re-applied on UPDATE of a queued object (issue 39), as Kueue's
Deployment, StatefulSet and LeaderWorkerSet webhooks default on CREATE and UPDATE: a tenant
who writes ``schedulerName: default-scheduler`` or strips ``pod-suspending-parent`` from a
template gets it back (with a warning), so the pods rolled from it are still held by the queue.

* LeaderWorkerSet, StatefulSet (pod groups): the kind's ``template_defaults`` and
  ``schedulerName``, whenever the new object is queued (Kueue's ``WorkloadShouldBeSuspended``).
* Deployment: its template stamp (managed, queue and priority-class labels,
  ``pod-suspending-parent``) and ``schedulerName``, likewise.
* Kinds with a suspend flag: ``schedulerName`` only, and only when the old object was queued
  too: only such a job was stamped at CREATE (a batch Job's template is immutable, so stamping
  one that was created unqueued would make the API server refuse the tenant's update).

Idempotent: applying the patch and mutating again yields ``[]`` (reinvocationPolicy IfNeeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.mutation import Mutation, scheduler_names
from admission.view import ClusterView
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.ownership import managed_ancestor
from scheduler.adapter.kinds.registry import KINDS
from scheduler.core.workload import LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME, SCHEDULER_NAME


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def restamp(kind: JobKind, obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView | None,
            scheduler_name: str = SCHEDULER_NAME) -> Mutation:
    """The mutation of an UPDATE of a governed object (not a pod). Raises ``OwnerUnreadable``."""
    out = Mutation()
    labels = _labels(obj)
    if not labels.get(LABEL_QUEUE_NAME) or kind.skipped(obj):
        return out
    if kind.suspendable and not _labels(old).get(LABEL_QUEUE_NAME):
        return out
    if managed_ancestor(obj, view.owners if view else None, KINDS).ancestor is not None:
        return out  # its queued parent is the managed object
    ops = out.patch
    if kind.pod_groups is not None:
        kind.pod_groups.template_defaults(obj, ops, labels.get(LABEL_PRIORITY_CLASS) or None)
    elif not kind.suspendable and kind.create_defaults is not None:
        kind.create_defaults(obj, ops, labels)
    if ops:
        out.warnings.append(f"toposched: the pod templates' queue stamps were restored ({kind.kind} of a Kueue queue: "
                            "its pods are held until admitted)")
    scheduler_names(kind, obj, ops, out.warnings, scheduler_name, warn_any=True)
    return out
