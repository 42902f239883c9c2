"""The pod webhook path: Kueue v0.17.0's pod integration (``pkg/controller/jobs/pod/pod_webhook.go``)
on plain dicts, so a pod with a queue label, a pod of a pod group, and a pod of a Deployment or
StatefulSet (``kueue.x-k8s.io/pod-suspending-parent``) is held until its Workload is admitted and
then placed in its domain, whoever created it. The registry's ``Pod`` kind routes ``pods`` here
(``admission/review.py``; webhook rules in ``admission/configs.py``).

Mutation at CREATE of a pod to be managed (a queue label, the default LocalQueue, or a
suspending-parent annotation; not when its controller owner is a kind toposched governs, whose
job is the managed object; not outside the managed namespaces):

* label ``kueue.x-k8s.io/managed: "true"`` (not for a pod held for its parent),
* finalizer ``kueue.x-k8s.io/managed`` (not for a pod held for its parent: Kueue's
  SkipFinalizersForPodsSuspendedByParent, on by default since v0.16),
* scheduling gates ``kueue.x-k8s.io/admission`` (removed when its Workload is admitted) and
  ``kueue.x-k8s.io/topology`` (removed by the topology ungater with the pod's domain; TAS is
  always on in toposched),
* label ``kueue.x-k8s.io/pod-group-pod-index`` copied from the label that
  ``kueue.x-k8s.io/pod-group-pod-index-label`` names (the pod's rank),
* annotation ``kueue.x-k8s.io/role-hash`` (its pod set in a group), always recomputed (a tenant's
  value is overwritten, as Kueue's ``addRoleHash``),
* ``schedulerName: toposched`` (as the job webhooks do for pod templates), with a warning when
  another scheduler was named.

Validation (CREATE and UPDATE) with Kueue's messages: the managed label may only be ``true``; a
pod group needs both its name label and its total-count annotation, a valid name and a positive
count; the group name is immutable; an unretriable group cannot become retriable; the topology
annotations go through the same checks as a pod template's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.mutation import DEFAULT_LOCAL_QUEUE, Mutation, escape
from admission.view import ClusterView
from scheduler.adapter.kinds.base import Holding
from scheduler.adapter.kinds.identifiers import LABELS_ONLY, Identifiers
from scheduler.adapter.kinds.ownership import managed_ancestor
from scheduler.adapter.kinds.pod import PodGroupError, group_total_count, role_hash
from scheduler.adapter.kinds.registry import KINDS
from scheduler.adapter.manifest.annotations import validate_topology_annotations
from scheduler.adapter.manifest.fielderrors import FieldError, Verdict, forbidden, invalid, required
from scheduler.adapter.manifest.labelkeys import dns1123_subdomain_problems
from scheduler.core.kueue_names import (
    ANN_POD_GROUP_POD_INDEX_LABEL,
    ANN_POD_GROUP_TOTAL_COUNT,
    ANN_POD_SUSPENDING_PARENT,
    ANN_RETRIABLE_IN_GROUP,
    FINALIZER_MANAGED,
    GATE_ADMISSION,
    GATE_TOPOLOGY,
    LABEL_MANAGED,
    LABEL_POD_GROUP_NAME,
    LABEL_POD_GROUP_POD_INDEX,
    MANAGED_VALUE,
)
from scheduler.core.workload import ANN_ROLE_HASH, LABEL_QUEUE_NAME, SCHEDULER_NAME

LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
GROUP_METADATA_DETAIL = (f"both the '{ANN_POD_GROUP_TOTAL_COUNT}' annotation and the '{LABEL_POD_GROUP_NAME}' label "
                         "should be set")
GROUP_METADATA_DETAIL_ANNOTATION = (f"both the '{ANN_POD_GROUP_TOTAL_COUNT}' annotation and the "
                                    f"'{LABEL_POD_GROUP_NAME}' annotation should be set")


@dataclass(frozen=True)
class PodContext:
    """What the pod webhook needs to know of the cluster and the configuration.

    ``governed_owner``: the pod's controller owner is an object of a kind toposched governs (a
    Job, a JobSet's Job, the launcher of an MPI job ...): the job is managed, the pod left alone.
    ``default_local_queue``: the namespace has a LocalQueue named ``default``.
    ``namespace_managed``: the namespace matches ``managedJobsNamespaceSelector``.
    ``parents_held_elsewhere``: suspending parents whose pods toposched holds another way (today
    the LeaderWorkerSet's pods, held by the extender until their group is admitted)."""

    governed_owner: bool = False
    default_local_queue: bool = False
    manage_without_queue_name: bool = False
    namespace_managed: bool = True
    parents_held_elsewhere: frozenset[str] = field(default_factory=lambda: frozenset({LWS_FRAMEWORK}))


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


# Kinds whose objects are the managed job of their pods: a pod under one of them is left alone.
JOB_KINDS = tuple(k for k in KINDS if k.holding is not Holding.PODS)


def pod_context(pod: Mapping[str, Any], view: ClusterView | None,
                external: Collection[tuple[str, str, str]] = ()) -> PodContext:
    """The pod's context from the webhook's view: its controller owner chain resolved by uid
    (a queued ancestor of a governed kind, or of an external framework's kind, whose controller
    creates the Workload, makes it that job's pod, never one of its own). Raises
    ``OwnerUnreadable``."""
    ancestor = managed_ancestor(pod, view.owners if view else None, JOB_KINDS, interim=True,
                                external=external).ancestor
    return PodContext(governed_owner=ancestor is not None)


def _add_map_entry(pod: Mapping[str, Any], ops: list[dict[str, Any]], where: str, key: str, value: str) -> None:
    """Add ``key: value`` to ``metadata.<where>`` (creating the map when the pod has none)."""
    current = _meta(pod).get(where)
    pending = next((o for o in ops if o["path"] == f"/metadata/{where}"), None)
    if pending is not None:
        pending["value"][key] = value
    elif current is None:
        ops.append({"op": "add", "path": f"/metadata/{where}", "value": {key: value}})
    elif current.get(key) != value:
        ops.append({"op": "add", "path": f"/metadata/{where}/{escape(key)}", "value": value})


def _gates_op(pod: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any] | None:
    gates = list((pod.get("spec") or {}).get("schedulingGates") or [])
    have = {g.get("name") for g in gates}
    missing = [{"name": n} for n in names if n not in have]
    if not missing:
        return None
    return {"op": "add", "path": "/spec/schedulingGates", "value": gates + missing}


def should_manage(pod: Mapping[str, Any], ctx: PodContext) -> tuple[bool, bool]:
    """(managed, held for its parent) of a pod at creation, as Kueue's pod webhook decides."""
    parent = (_meta(pod).get("annotations") or {}).get(ANN_POD_SUSPENDING_PARENT)
    if parent is not None:
        return parent not in ctx.parents_held_elsewhere, True
    if not ctx.namespace_managed or ctx.governed_owner:
        return False, False
    labels = _meta(pod).get("labels") or {}
    return bool(labels.get(LABEL_QUEUE_NAME)) or ctx.default_local_queue or ctx.manage_without_queue_name, False


def mutate_pod(pod: Mapping[str, Any], operation: str, ctx: PodContext,
               scheduler_name: str = SCHEDULER_NAME) -> Mutation:
    out = Mutation()
    if operation != "CREATE":
        return out
    managed, for_parent = should_manage(pod, ctx)
    if not managed:
        return out
    ops = out.patch
    meta = _meta(pod)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if not for_parent:
        if not labels.get(LABEL_QUEUE_NAME) and ctx.default_local_queue:
            _add_map_entry(pod, ops, "labels", LABEL_QUEUE_NAME, DEFAULT_LOCAL_QUEUE)
        _add_map_entry(pod, ops, "labels", LABEL_MANAGED, MANAGED_VALUE)
        finalizers = list(meta.get("finalizers") or [])
        if FINALIZER_MANAGED not in finalizers:
            ops.append({"op": "add", "path": "/metadata/finalizers", "value": finalizers + [FINALIZER_MANAGED]})
    index_label = annotations.get(ANN_POD_GROUP_POD_INDEX_LABEL)
    if index_label is not None:
        _add_map_entry(pod, ops, "labels", LABEL_POD_GROUP_POD_INDEX, str(labels.get(index_label, "")))
    gates = _gates_op(pod, (GATE_ADMISSION, GATE_TOPOLOGY))
    if gates is not None:
        ops.append(gates)
    # Always recomputed (Kueue's addRoleHash overwrites): a tenant's own value would choose the
    # pod set its pod is counted in.
    _add_map_entry(pod, ops, "annotations", ANN_ROLE_HASH, role_hash(pod.get("spec") or {}))
    current = (pod.get("spec") or {}).get("schedulerName")
    if current != scheduler_name:
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": scheduler_name})
        if current and current != "default-scheduler":
            out.warnings.append(f"toposched: spec.schedulerName {current!r} replaced by {scheduler_name!r} "
                                "(pods of a Kueue queue are placed by toposched)")
    return out


def _group_errors(pod: Mapping[str, Any], ids: Identifiers = LABELS_ONLY) -> list[FieldError]:
    """Kueue's ``validatePodGroupMetadata``; under WorkloadIdentifierAnnotations (``ids``) a group
    may be named by the annotation, judged where it was read (``getGroupNamePath``)."""
    annotations = _meta(pod).get("annotations") or {}
    name = ids.group_name(pod)
    has_count = ANN_POD_GROUP_TOTAL_COUNT in annotations
    name_path = ids.group_name_path(pod)
    count_path = f"metadata.annotations[{ANN_POD_GROUP_TOTAL_COUNT}]"
    by_annotation = name_path.startswith("metadata.annotations")
    detail = GROUP_METADATA_DETAIL_ANNOTATION if by_annotation else GROUP_METADATA_DETAIL
    if not name:
        return [required(name_path, detail)] if has_count else []
    errors: list[FieldError] = []
    problems = dns1123_subdomain_problems(str(name))
    if problems:
        errors.append(invalid(name_path, name, ",".join(problems)))
    if not has_count:
        return errors + [required(count_path, detail)]
    try:
        group_total_count(pod, ids)
    except PodGroupError as exc:
        errors.append(invalid(count_path, annotations[ANN_POD_GROUP_TOTAL_COUNT], str(exc)))
    return errors


def validate_pod(pod: Mapping[str, Any], old: Mapping[str, Any] | None = None,
                 ids: Identifiers = LABELS_ONLY) -> Verdict:
    """Kueue's pod webhook validation (``old`` given on UPDATE); ``ids``: where a pod names its
    group (the label, or under WorkloadIdentifierAnnotations the annotation first)."""
    verdict = Verdict()
    labels = _meta(pod).get("labels") or {}
    managed = labels.get(LABEL_MANAGED)
    if managed is not None and managed != MANAGED_VALUE:
        verdict.errors.append(forbidden(f"metadata.labels[{LABEL_MANAGED}]",
                                        f"managed label value can only be '{MANAGED_VALUE}'"))
    verdict.errors.extend(_group_errors(pod, ids))
    # A pod is one member of its pod set (Kueue's ValidateTASPodSetRequest): a group name (an LWS
    # leader's and workers' pods carry their template's) pairs pod sets, judged on their owner.
    verdict.errors.extend(validate_topology_annotations(_meta(pod).get("annotations") or {}, 1, "metadata.annotations",
                                                        single_pod_set=False))
    if old is not None:
        old_group = ids.group_name(old)
        if old_group and ids.group_name(pod) != old_group:
            verdict.errors.append(invalid(ids.group_name_path(pod), ids.group_name(pod), "field is immutable"))
        was_unretriable = (_meta(old).get("annotations") or {}).get(ANN_RETRIABLE_IN_GROUP) == "false"
        now_unretriable = (_meta(pod).get("annotations") or {}).get(ANN_RETRIABLE_IN_GROUP) == "false"
        if ids.group_name(pod) and was_unretriable and not now_unretriable:
            verdict.errors.append(forbidden(f"metadata.annotations[{ANN_RETRIABLE_IN_GROUP}]",
                                            "unretriable pod group can't be converted to retriable"))
    return verdict
