"""Plain Pods and pod groups as Kueue v0.17.0's ``pod`` integration reads them
(``pkg/controller/jobs/pod/pod_controller.go``, ``pod_webhook.go``; docs/design/new-kinds.md).

A pod with a queue label is a job of its own: one Workload ``pod-<name>-<hash>`` with the pod set
``main`` (1 pod). Pods labelled ``kueue.x-k8s.io/pod-group-name: <group>`` and annotated
``kueue.x-k8s.io/pod-group-total-count: <n>`` form one Workload named ``<group>``: one pod set
per *role* (pods whose admission-relevant spec fields hash alike, :func:`role_hash`), named by
the hash, sorted. Pod templates keep only the spec; the rank label is
``kueue.x-k8s.io/pod-group-pod-index`` (copied by the webhook from the label the pod's
``kueue.x-k8s.io/pod-group-pod-index-label`` annotation names). Pods are held by Kueue's
``kueue.x-k8s.io/admission`` scheduling gate (the pod webhook, ``admission/pods.py``) until their
Workload is admitted; the controller's pod phases (``scheduler/kube/podintegration.py``) create
the Workloads, release the gate with the pod set's node selector, finish and stop them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds.base import NOT_FINISHED, FinishState, JobKind, Obj, PodSetSource, finished
from scheduler.adapter.kinds.identifiers import LABELS_ONLY, Identifiers
from scheduler.adapter.kinds.shapes import METADATA, POD_TEMPLATE
from scheduler.core.kueue_names import (
    ANN_IS_GROUP_WORKLOAD,
    ANN_POD_GROUP_FAST_ADMISSION,
    ANN_POD_GROUP_SERVING,
    ANN_POD_GROUP_TOTAL_COUNT,
    ANN_RETRIABLE_IN_GROUP,
    GATE_ADMISSION,
    LABEL_POD_GROUP_NAME,
    LABEL_POD_GROUP_POD_INDEX,
)
from scheduler.core.workload import ANN_ROLE_HASH, DEFAULT_POD_SET, kueue_workload_name

FRAMEWORK = "pod"


class PodGroupError(ValueError):
    """A pod group whose metadata Kueue refuses; the message is Kueue's."""


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def group_name(pod: Mapping[str, Any], ids: Identifiers = LABELS_ONLY) -> str:
    """The pod's group (``ids``: the label, or under WorkloadIdentifierAnnotations the
    annotation first: ``identifiers.py``)."""
    return ids.group_name(pod)


def group_total_count(pod: Mapping[str, Any], ids: Identifiers = LABELS_ONLY) -> int:
    """The group's size from ``kueue.x-k8s.io/pod-group-total-count``, with Kueue's errors."""
    if not group_name(pod, ids):
        where = "annotation/label" if ids.annotations else "label"
        raise PodGroupError(f"pod doesn't have a '{LABEL_POD_GROUP_NAME}' {where}")
    annotations = _meta(pod).get("annotations") or {}
    if ANN_POD_GROUP_TOTAL_COUNT not in annotations:
        raise PodGroupError(f"failed to extract '{ANN_POD_GROUP_TOTAL_COUNT}' annotation")
    raw = str(annotations[ANN_POD_GROUP_TOTAL_COUNT])
    try:
        count = int(raw, 10)
    except ValueError as exc:
        raise PodGroupError(f'strconv.Atoi: parsing "{raw}": invalid syntax') from exc
    if count < 1:
        raise PodGroupError(f"incorrect annotation value '{ANN_POD_GROUP_TOTAL_COUNT}={raw}': group total count "
                            "should be greater than zero")
    return count


# --- the role hash (Kueue's utilpod.GenerateRoleHash) ------------------------------------------

def _go_json(value: Any) -> str:
    """What Go's ``json.Marshal`` writes for a value decoded from JSON: no spaces, non-ASCII kept,
    ``<``, ``>``, ``&``, U+2028 and U+2029 escaped. Key order is the caller's: Go sorts map keys
    and keeps struct field order, which an object read from the API server already has."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def _sorted_map(value: Any) -> Any:
    if not isinstance(value, Mapping):  # None, or a hand-made review's garbage: hashed as it is
        return value
    return {str(k): (str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
            for k, v in sorted(dict(value).items())}


def _go_maps_sorted(value: Any) -> Any:
    """``value`` with the keys of the Go *maps* nested in pod-spec structs sorted (label
    selectors' ``matchLabels``, the only map inside affinity and spread constraints); struct
    fields keep their order."""
    if isinstance(value, list):
        return [_go_maps_sorted(v) for v in value]
    if isinstance(value, Mapping):
        return {k: (_sorted_map(v) if k == "matchLabels" and isinstance(v, Mapping) else _go_maps_sorted(v))
                for k, v in value.items()}
    return value


def _containers_shape(containers: Any) -> list[dict[str, Any]] | None:
    if not containers:
        return None
    out = []
    for c in containers:
        resources = c.get("resources") or {}
        requests = resources.get("requests")
        out.append({"ports": c.get("ports"),
                    "resources": {"requests": _sorted_map(requests) if requests is not None else None}})
    return out


def role_hash(spec: Mapping[str, Any]) -> str:
    """The first 8 hex digits of the SHA-256 of the JSON of the pod-spec fields that matter to
    admission: containers' and init containers' requests and ports, node selector, affinity,
    tolerations, runtime class, priority, topology spread constraints, overhead, resource claims
    (Kueue v0.17.0 ``pkg/util/pod/pod.go``). Exact for pods as the API server serves them: struct
    fields in Go's order, quantities canonical; the keys of Go maps (requests, node selector,
    overhead, label selectors' matchLabels) are sorted here whatever their order."""
    shape = {  # Go sorts the keys of this map[string]any
        "affinity": _go_maps_sorted(spec.get("affinity")),
        "containers": _containers_shape(spec.get("containers")),
        "initContainers": _containers_shape(spec.get("initContainers")),
        "nodeSelector": _sorted_map(spec.get("nodeSelector")),
        "overhead": _sorted_map(spec.get("overhead")),
        "priority": spec.get("priority"),
        "resourceClaims": spec.get("resourceClaims"),
        "runtimeClassName": spec.get("runtimeClassName"),
        "tolerations": spec.get("tolerations"),
        "topologySpreadConstraints": _go_maps_sorted(spec.get("topologySpreadConstraints")),
    }
    return hashlib.sha256(_go_json({"spec": shape}).encode()).hexdigest()[:8]


def pod_role(pod: Mapping[str, Any]) -> str:
    """The role hash annotation when present (the webhook writes it), else computed."""
    given = (_meta(pod).get("annotations") or {}).get(ANN_ROLE_HASH)
    return str(given) if given else role_hash(pod.get("spec") or {})


# --- pod sets ----------------------------------------------------------------------------------

def runnable_or_succeeded(pod: Mapping[str, Any]) -> bool:
    """Can still run, runs or succeeded: not Failed, and not being deleted before it got a node."""
    if _meta(pod).get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
        return False
    return (pod.get("status") or {}).get("phase") != "Failed"


def pod_pod_set(pod: Mapping[str, Any], name: str, count: int) -> PodSetSource:
    """Kueue's ``constructPodSet``: the spec only as template, the topology request from the
    pod's annotations with ``kueue.x-k8s.io/pod-group-pod-index`` as rank label."""
    template = {"metadata": {"annotations": dict(_meta(pod).get("annotations") or {})},
                "spec": dict(pod.get("spec") or {})}
    return PodSetSource(name, count, template, (), LABEL_POD_GROUP_POD_INDEX, spec_only=True)


def single_pod_sets(pod: Obj) -> list[PodSetSource]:
    return [pod_pod_set(pod, DEFAULT_POD_SET, 1)]


def group_pod_sets(pods: Sequence[Mapping[str, Any]], ids: Identifiers = LABELS_ONLY) -> list[PodSetSource]:
    """The pod sets of a group from its members: one per role among the runnable or succeeded
    pods, count = members of that role, sorted by name; with fast admission
    (``kueue.x-k8s.io/pod-group-fast-admission``) one pod set from the first runnable pod with
    count = the total count. Raises :class:`PodGroupError`."""
    runnable = [p for p in pods if runnable_or_succeeded(p)]
    if pods and ANN_POD_GROUP_FAST_ADMISSION in (_meta(pods[0]).get("annotations") or {}):
        total = group_total_count(pods[0], ids)
        if not runnable:
            raise PodGroupError("failed to find a runnable pod in the group")
        return [pod_pod_set(runnable[0], pod_role(runnable[0]), total)]
    counts: dict[str, int] = {}
    first: dict[str, Mapping[str, Any]] = {}
    for pod in runnable:
        role = pod_role(pod)
        counts[role] = counts.get(role, 0) + 1
        first.setdefault(role, pod)
    return [pod_pod_set(first[role], role, counts[role]) for role in sorted(counts)]


def workload_name(pod: Mapping[str, Any], ids: Identifiers = LABELS_ONLY) -> str:
    """The group's name for a group member, else Kueue's ``pod-<name>-<hash>``."""
    group = group_name(pod, ids)
    if group:
        return group
    meta = _meta(pod)
    return kueue_workload_name("Pod", "", str(meta.get("name", "")), str(meta.get("uid", "")))


def pod_set_of(pod: Mapping[str, Any], ids: Identifiers = LABELS_ONLY) -> str:
    """The pod set a member of a Workload of the pod integration belongs to."""
    return pod_role(pod) if group_name(pod, ids) else DEFAULT_POD_SET


# --- state -------------------------------------------------------------------------------------

def owned_by_single_pod(workload: Mapping[str, Any]) -> bool:
    """Kueue's ``workload.OwnedBySinglePod`` (v0.19): one owner reference, a ``v1`` ``Pod``, and
    not a pod group's Workload (``kueue.x-k8s.io/is-group-workload: "true"``)."""
    meta = workload.get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list) or len(refs) != 1 or not isinstance(refs[0], Mapping):
        return False
    if (meta.get("annotations") or {}).get(ANN_IS_GROUP_WORKLOAD) == "true":
        return False
    return bool(refs[0].get("kind") == "Pod" and refs[0].get("apiVersion") == "v1")


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def terminated(pod: Mapping[str, Any]) -> bool:
    return _phase(pod) in ("Succeeded", "Failed")


def gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE_ADMISSION for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def is_suspended(pods: Sequence[Mapping[str, Any]]) -> bool:
    """A pod is suspended while terminated or gated by ``kueue.x-k8s.io/admission``; a group
    while any member is."""
    return any(terminated(p) or gated(p) for p in pods)


def is_serving(pods: Sequence[Mapping[str, Any]], ids: Identifiers = LABELS_ONLY) -> bool:
    return bool(pods) and bool(group_name(pods[0], ids)) and \
        (_meta(pods[0]).get("annotations") or {}).get(ANN_POD_GROUP_SERVING) == "true"


def group_finish_state(pods: Sequence[Mapping[str, Any]], ids: Identifiers = LABELS_ONLY) -> FinishState:
    """A single pod: when Succeeded / Failed, with its status message. A group: when its
    succeeded members reach the total count, or all are terminated and one is unretriable
    (``kueue.x-k8s.io/retriable-in-group: "false"``); message "Pods succeeded: <s>/<n>.". A
    serving group never finishes."""
    if not pods or is_serving(pods, ids):
        return NOT_FINISHED
    if not group_name(pods[0], ids):
        pod = pods[0]
        if not terminated(pod):
            return NOT_FINISHED
        return finished(_phase(pod) == "Succeeded", str((pod.get("status") or {}).get("message") or ""))
    try:
        total = group_total_count(pods[0], ids)
    except PodGroupError:
        return NOT_FINISHED
    succeeded = sum(1 for p in pods if _phase(p) == "Succeeded")
    active = any(not terminated(p) for p in pods)
    unretriable = any((_meta(p).get("annotations") or {}).get(ANN_RETRIABLE_IN_GROUP) == "false" for p in pods)
    if succeeded == total or (not active and unretriable):
        return FinishState(True, "Succeeded", f"Pods succeeded: {succeeded}/{total}.")
    return NOT_FINISHED


def any_running(pods: Sequence[Mapping[str, Any]], now: float, deletion_time: Mapping[str, float]) -> bool:
    """Some member Running and not stuck terminating past its grace period. ``deletion_time``:
    pod name -> its deletionTimestamp in seconds (the caller parses timestamps)."""
    for pod in pods:
        if _phase(pod) != "Running":
            continue
        meta = _meta(pod)
        name = str(meta.get("name", ""))
        grace = meta.get("deletionGracePeriodSeconds")
        if name in deletion_time and grace is not None and now > deletion_time[name] + float(grace):
            continue
        return True
    return False


def all_ready(pods: Sequence[Mapping[str, Any]]) -> bool:
    return bool(pods) and all(
        any(c.get("type") == "Ready" and c.get("status") == "True" for c in (p.get("status") or {}).get("conditions")
            or ()) for p in pods)


def finish_state(pod: Obj) -> FinishState:
    return group_finish_state([pod])


def active_pods(pod: Obj) -> int:
    return int(_phase(pod) == "Running")


def pods_ready(pod: Obj) -> bool:
    return all_ready([pod])


POD = JobKind(
    group="", version="v1", kind="Pod", plural="pods", framework=FRAMEWORK, pod_sets=single_pod_sets,
    finish_state=finish_state, active_pods=active_pods, pods_ready=pods_ready,
    shape={"metadata": METADATA, "spec": POD_TEMPLATE["spec"]}, suspend_path=None,
    rank_label=LABEL_POD_GROUP_POD_INDEX, single_pod_set=True,
)
