"""What runs is what was admitted (issue 39): the UPDATE guards, so a tenant cannot unhook its
work from the queue after CREATE. Plain dicts in, field errors out; no I/O.

* Pods (Kueue v0.17.0 ``pkg/controller/jobs/pod/pod_webhook.go``): a pod Kueue holds (managed
  label, queue label, or one of Kueue's gates) keeps the keys that tie it to its Workload
  (managed and queue labels, pod-group index and prebuilt-workload labels, total-count and
  role-hash annotations) and its gates until the controller changes them. The gates are judged
  on the gates alone: removing the labels first and the gates next is refused at either step.
  The group-name label is Kueue's own rule for everyone (``admission/pods.py validate_pod``).
* Jobs with a suspend flag (``jobframework/validation.go validateUpdateForQueueName``): the
  queue label is immutable while the job is not suspended; it may not be emptied in a
  namespace with a ``default`` LocalQueue.
* LeaderWorkerSet (``leaderworkerset_webhook.go``): the queue label is immutable; with
  LWSImmutableGroupSize (on in v0.19) so is ``spec.leaderWorkerTemplate.size`` while managed.
* Deployment, StatefulSet (``deployment_webhook.go``, ``statefulset_webhook.go``): immutable
  while a pod is ready (the old object's ``status.readyReplicas``), and never removed.

The controller (``controller_users``) is never judged here: it writes these keys.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from admission.mutation import DEFAULT_LOCAL_QUEUE
from admission.suspension import queue_name, requesting_user
from admission.view import ClusterView
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.identifiers import ANN_POD_GROUP_NAME, ANN_PREBUILT_WORKLOAD, identifiers
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.manifest.annotations import NO_OVERRIDES
from scheduler.adapter.manifest.fielderrors import FieldError, forbidden, invalid
from scheduler.core.config import FeatureGates
from scheduler.core.kueue_names import (
    ANN_POD_GROUP_TOTAL_COUNT,
    GATE_ADMISSION,
    GATE_TOPOLOGY,
    LABEL_MANAGED,
    LABEL_POD_GROUP_POD_INDEX,
    LABEL_PREBUILT_WORKLOAD,
    MANAGED_VALUE,
)
from scheduler.core.workload import ANN_ROLE_HASH, LABEL_QUEUE_NAME

IMMUTABLE = "field is immutable"  # apimachinery's FieldImmutableErrorMsg, Kueue's word
LWS_SIZE_PATH = "spec.leaderWorkerTemplate.size"
QUEUE_LABEL_PATH = f"metadata.labels[{LABEL_QUEUE_NAME}]"
KUEUE_GATES = (GATE_ADMISSION, GATE_TOPOLOGY)
# The keys that tie a pod to its Workload and pod set (the group-name label: validate_pod).
POD_LABELS = (LABEL_MANAGED, LABEL_QUEUE_NAME, LABEL_POD_GROUP_POD_INDEX, LABEL_PREBUILT_WORKLOAD)
POD_ANNOTATIONS = (ANN_POD_GROUP_TOTAL_COUNT, ANN_ROLE_HASH)
POD_ID_ANNOTATIONS = (ANN_POD_GROUP_NAME, ANN_PREBUILT_WORKLOAD)  # WorkloadIdentifierAnnotations' forms
# Kinds whose queue label Kueue judges by the old object's ready replicas, not a suspend flag.
READY_REPLICA_KINDS = frozenset({"Deployment", "StatefulSet"})


def _map(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    value = meta.get(where) if isinstance(meta, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def kueue_gates(pod: Mapping[str, Any]) -> set[str]:
    spec = pod.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    names = {g.get("name") for g in gates or () if isinstance(g, Mapping)} if isinstance(gates, list) else set()
    return {n for n in names if n in KUEUE_GATES}


def held_by_kueue(pod: Mapping[str, Any]) -> bool:
    """Managed, queued, or gated by Kueue: a pod whose run the queue decides."""
    labels = _map(pod, "labels")
    return labels.get(LABEL_MANAGED) == MANAGED_VALUE or bool(labels.get(LABEL_QUEUE_NAME)) or bool(kueue_gates(pod))


def _who(username: str) -> str:
    return f"user \"{username}\"" if username else "a request without a user"


def pod_update_errors(pod: Mapping[str, Any], old: Mapping[str, Any], username: str,
                      controller_users: Collection[str], gates: FeatureGates = NO_OVERRIDES) -> list[FieldError]:
    """The refusals of a pod UPDATE by anyone but the controller. Under Kueue's
    WorkloadIdentifierAnnotations (``gates``) the pod-group and prebuilt-Workload names are
    annotations too (``adapter/kinds/identifiers.py``): held the same, so a tenant cannot unhook a
    pod by rewriting the annotation that now ties it to its Workload."""
    if username in controller_users:
        return []
    errors: list[FieldError] = []
    removed = sorted(kueue_gates(old) - kueue_gates(pod))
    if removed:  # whatever the labels say now: a gate Kueue put there is the controller's to lift
        errors.append(forbidden(
            "spec.schedulingGates", f"only toposched's controller may remove {', '.join(removed)} from a managed pod; "
            "it does so when the pod's Workload is admitted (and names its domain)",
            f"wait for admission, or delete the pod and recreate it without the {LABEL_QUEUE_NAME} label to run it "
            "outside the queue"))
    if not held_by_kueue(old):
        return errors
    fix = (f"only toposched's controller may change it ({_who(username)} is not it); keep the value, or delete the "
           f"pod and recreate it without the {LABEL_QUEUE_NAME} label to run it outside the queue")
    annotation_keys = POD_ANNOTATIONS + (POD_ID_ANNOTATIONS if identifiers(gates).annotations else ())
    for where, keys in (("labels", POD_LABELS), ("annotations", annotation_keys)):
        before, after = _map(old, where), _map(pod, where)
        for key in keys:
            if before.get(key) != after.get(key):
                errors.append(invalid(f"metadata.{where}[{key}]", after.get(key, ""), IMMUTABLE, fix))
    return errors


def _ready_replicas(obj: Mapping[str, Any]) -> int:
    status = obj.get("status")
    value = status.get("readyReplicas") if isinstance(status, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def job_update_errors(kind: JobKind, obj: Mapping[str, Any], old: Mapping[str, Any], username: str,
                      controller_users: Collection[str],
                      default_queue_exists: Callable[[str], bool]) -> list[FieldError]:
    """Kueue's queue-name rules on UPDATE of a governed object that is not a pod."""
    if username in controller_users:
        return []
    new_queue, old_queue = queue_name(obj), queue_name(old)
    if new_queue == old_queue:
        return []
    fix = (f"keep {LABEL_QUEUE_NAME}: \"{old_queue}\" (the queue that admitted it); to move it, suspend it first, "
           "or delete it and create it in the other queue")
    if kind.suspendable:
        running = not kind.is_suspended(obj)
    elif kind.kind in READY_REPLICA_KINDS:
        running = _ready_replicas(old) > 0 or not new_queue
    else:  # the LeaderWorkerSet: always (Kueue)
        running = True
    errors = [invalid(QUEUE_LABEL_PATH, new_queue, IMMUTABLE, fix)] if running else []
    if kind.suspendable and not new_queue and old_queue:
        meta = old.get("metadata")
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
        if isinstance(namespace, str) and default_queue_exists(namespace):
            errors.append(invalid(QUEUE_LABEL_PATH, "", "queue-name must not be empty in namespace with default queue"))
    return errors


def _lws_size(obj: Mapping[str, Any]) -> Any:
    spec = obj.get("spec")
    lwt = spec.get("leaderWorkerTemplate") if isinstance(spec, Mapping) else None
    size = lwt.get("size") if isinstance(lwt, Mapping) else None
    return 1 if size is None else size  # defaultLeaderWorkerSetSize


def lws_size_errors(obj: Mapping[str, Any], old: Mapping[str, Any], gates: FeatureGates) -> list[FieldError]:
    """Kueue v0.19.1+'s LWSImmutableGroupSize (``leaderworkerset_webhook.go ValidateUpdate``): the
    group size of a managed LeaderWorkerSet is immutable, for everyone, since its Workloads'
    pod sets are never recomputed (a bigger group would run pods no quota was reserved for)."""
    if not gates.enabled("LWSImmutableGroupSize") or not queue_name(obj):
        return []
    new_size, old_size = _lws_size(obj), _lws_size(old)
    if new_size == old_size:
        return []
    return [invalid(LWS_SIZE_PATH, new_size, IMMUTABLE,
                    f"keep spec.leaderWorkerTemplate.size: {old_size}; to change the group size, delete the "
                    "LeaderWorkerSet and create it again with the new size")]


def update_errors(kind: JobKind, request: Mapping[str, Any], obj: Mapping[str, Any], old: Any,
                  view: ClusterView | None, controller_users: Collection[str],
                  gates: FeatureGates = NO_OVERRIDES) -> list[FieldError]:
    """The UPDATE guards of one review (none for other operations): the one entry
    ``admission/review.py`` calls for pods and for every other governed kind. ``gates``: the
    Kueue Configuration's (LWSImmutableGroupSize)."""
    if request.get("operation") != "UPDATE" or not isinstance(old, Mapping):
        return []
    user = requesting_user(request)
    if kind is POD:
        return pod_update_errors(obj, old, user, controller_users, gates)

    def default_queue_exists(namespace: str) -> bool:
        return view is not None and view.local_queue(namespace, DEFAULT_LOCAL_QUEUE) is not None

    errors = job_update_errors(kind, obj, old, user, controller_users, default_queue_exists)
    if kind.kind == "LeaderWorkerSet":
        errors += lws_size_errors(obj, old, gates)
    return errors
