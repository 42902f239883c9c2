"""The admission gate: a pod of a queued job runs only once toposched's controller started it.

The controller starts a job by writing, in one patch, ``suspend: false`` and the
``kueue.x-k8s.io/workload`` annotation into its pod templates; every pod of a job started that
way names its Workload, and the slot book checks that Workload is admitted and where its pods
go. A pod routed to toposched *without* that annotation is either genuinely unmanaged (a
bare pod or a Deployment someone pointed at the toposched profile: it passes through, as it
always did) or a pod of a queued job that was started some other way (a user flipped
``suspend``): that one must not run past quota and topology, so filter refuses it.

Which pods count as managed (docs/extender.md, "Whose pods"): a pod routed to toposched that

1. carries ``kueue.x-k8s.io/workload``: the slot book decides (admitted Workload or not);
2. carries the ``kueue.x-k8s.io/queue-name`` label itself; or
3. whose controller owner chain (objects of the suspendable governed kinds of the job-kind
   registry: a Job, the JobSet that owns that Job, ...) carries the ``kueue.x-k8s.io/queue-name``
   label;
4. a pod of a queued LeaderWorkerSet (``kueue.x-k8s.io/pod-suspending-parent`` set by the
   webhook in its templates): held until the controller has labelled it with its group's
   Workload (``kueue.x-k8s.io/prebuilt-workload-name``), then the slot book decides. This is
   toposched's stand-in for Kueue's ``kueue.x-k8s.io/admission`` scheduling gate.

Fail closed: when the owner cannot be read (API unreachable, no RBAC) or no longer exists, the
pod is refused with a "retrying" message rather than let through unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from scheduler.adapter.kinds.ownership import OwnerLookup, OwnerRef, controller_ref
from scheduler.adapter.kinds.registry import BY_GROUP_KIND, suspendable
from scheduler.core.kueue_names import ANN_POD_SUSPENDING_PARENT
from scheduler.core.workload import ANN_WORKLOAD, LABEL_QUEUE_NAME
from scheduler.k8s.owners import CachedOwners

# (API group, kind) of the owners whose queue label makes their pods managed: the suspendable
# kinds of the registry, whatever version the reference names (a wider net than Kueue's).
QUEUED_OWNER_KINDS = frozenset((k.group, k.kind) for k in suspendable())
# pod -> child Job -> its parent (the parent role) is the longest chain among them.
MAX_OWNER_DEPTH = 3


class Refusal(StrEnum):
    """Why the gate refused a pod; the message kube-scheduler shows is rendered next to it."""

    QUEUE_LABEL = "QueueLabelWithoutWorkload"
    QUEUED_OWNER = "QueuedOwnerWithoutWorkload"
    OWNER_NOT_FOUND = "OwnerNotFound"
    OWNER_UNREADABLE = "OwnerUnreadable"
    GROUP_UNLABELLED = "PodGroupWithoutWorkload"


@dataclass(frozen=True)
class GateVerdict:
    reason: Refusal
    message: str


def controller_owner(obj: Mapping[str, Any]) -> OwnerRef | None:
    """The object's controller owner reference when it is of a queued kind."""
    ref = controller_ref(obj)
    return ref if ref is not None and (ref.group, ref.kind) in QUEUED_OWNER_KINDS else None


def _queue_label(obj: Mapping[str, Any]) -> str:
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_QUEUE_NAME)
    return value if isinstance(value, str) else ""


def _unstarted(pod_name: str, what: str, queue: str, where: str) -> str:
    return (f"toposched: pod {pod_name} belongs to {what} (queue \"{queue}\") but has no admitted Workload: it "
            f"carries no {ANN_WORKLOAD} annotation, so toposched's controller did not start it (was spec.suspend "
            f"set to false by hand?). The controller starts queued jobs when their Workload is admitted; to run "
            f"this one outside the queue, remove the {LABEL_QUEUE_NAME} label from {where} and recreate its pods")


def judge(pod: Mapping[str, Any], lookup: OwnerLookup | None) -> GateVerdict | None:
    """None when a pod routed to toposched without the workload annotation may pass through
    (it is not managed); else why it is refused. Pods with the annotation are the slot book's."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    pod_name = f"{namespace}/{meta.get('name') or ''}"
    parent = (meta.get("annotations") or {}).get(ANN_POD_SUSPENDING_PARENT)
    if parent:
        return GateVerdict(Refusal.GROUP_UNLABELLED, (
            f"toposched: pod {pod_name} belongs to a pod group of {parent} and waits for toposched's controller "
            "to name its group's Workload (label kueue.x-k8s.io/prebuilt-workload-name); retrying"))
    queue = _queue_label(pod)
    if queue:
        return GateVerdict(Refusal.QUEUE_LABEL, _unstarted(pod_name, "a queue", queue, "the pod"))
    obj: Mapping[str, Any] = pod
    for _ in range(MAX_OWNER_DEPTH):
        ref = controller_owner(obj)
        if ref is None:
            return None
        what = f"{ref.kind} {namespace}/{ref.name}"
        if lookup is None:
            return GateVerdict(Refusal.OWNER_UNREADABLE, f"toposched: cannot tell whether {what}, the owner of pod "
                               f"{pod_name}, is queued (the extender reads no owners); refusing it")
        try:
            owner = lookup(namespace, ref)
        except Exception as exc:  # unreachable API, missing RBAC: fail closed, retry
            return GateVerdict(Refusal.OWNER_UNREADABLE, f"toposched: cannot read {what}, the owner of pod "
                               f"{pod_name}, to tell whether it is queued ({exc}); retrying (the extender needs get "
                               f"on {BY_GROUP_KIND[(ref.group, ref.kind)].plural}.{ref.group})")
        if owner is None:
            return GateVerdict(Refusal.OWNER_NOT_FOUND, f"toposched: {what}, the owner of pod {pod_name}, was not "
                               "found (deleted, or recreated under the same name); retrying")
        queue = _queue_label(owner)
        if queue:
            return GateVerdict(Refusal.QUEUED_OWNER, _unstarted(pod_name, what, queue, f"the {ref.kind}"))
        obj = owner
    return None


__all__ = ["CachedOwners", "GateVerdict", "OwnerLookup", "OwnerRef", "Refusal", "controller_owner", "judge"]
