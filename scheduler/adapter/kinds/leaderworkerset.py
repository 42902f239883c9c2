"""leaderworkerset.x-k8s.io/v1 LeaderWorkerSet, as Kueue v0.17's ``leaderworkerset`` integration.

Not suspended: held per group. Kueue keeps one prebuilt Workload per group (replica) and
manages the group's pods through its pod-group integration; toposched's controller does the
same (``scheduler/kube/podgroups.py``). One group's pod sets: with a leader template, ``leader``
(1 pod, no rank label) and ``worker`` (size - 1 pods); without, ``main`` (size pods); workers
ranked by ``leaderworkerset.sigs.k8s.io/worker-index``; the Workload's templates keep only
their spec. The webhook puts Kueue's pod-group annotations on the templates
(:func:`template_defaults`); the controller labels each pod with its group's Workload and role
(:func:`pod_role`).
"""

from __future__ import annotations

from typing import Any

from scheduler.adapter.kinds.base import (
    JobKind,
    Obj,
    PodGroups,
    PodSetSource,
    json_pointer,
    never_finishes,
    never_ready,
    no_active_pods,
)
from scheduler.adapter.kinds.shapes import POD_TEMPLATE, TOP
from scheduler.core.kueue_names import ANN_POD_GROUP_SERVING, ANN_POD_INDEX_OFFSET, ANN_POD_SUSPENDING_PARENT
from scheduler.core.topology_request import ANN_GROUP_NAME
from scheduler.core.workload import DEFAULT_POD_SET, LABEL_PRIORITY_CLASS

FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"  # leader 0, workers 1..size-1
LEADER_POD_SET, WORKER_POD_SET = "leader", "worker"
# LWS's pod labels / annotations (sigs.k8s.io/lws api/leaderworkerset/v1).
LABEL_SET_NAME = "leaderworkerset.sigs.k8s.io/name"
LABEL_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
ANN_LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"
_BASE = ("spec", "leaderWorkerTemplate")


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def pod_sets(lws: Obj) -> list[PodSetSource]:
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    count = _int(lwt.get("size"), 1)
    out = []
    worker_name = DEFAULT_POD_SET
    leader = lwt.get("leaderTemplate")
    if leader is not None:
        worker_name, count = WORKER_POD_SET, count - 1
        out.append(PodSetSource(LEADER_POD_SET, 1, leader, (*_BASE, "leaderTemplate"), None, spec_only=True))
    out.append(PodSetSource(worker_name, count, lwt.get("workerTemplate") or {}, (*_BASE, "workerTemplate"),
                            WORKER_INDEX, spec_only=True))
    return out


def group_count(lws: Obj) -> int:
    """Kueue's ``filterWorkloads``: ``spec.replicas`` (default 1), or ``status.replicas`` when
    it is larger during a rolling update with maxSurge (the surge groups need Workloads too)."""
    spec, status = lws.get("spec") or {}, lws.get("status") or {}
    replicas = _int(spec.get("replicas"), 1)
    rolling = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")) or {}
    surge = rolling.get("maxSurge")
    surging = isinstance(surge, int) and surge > 0 and _int(status.get("updatedReplicas"), 0) < replicas
    status_replicas = _int(status.get("replicas"), 0)
    return status_replicas if surging and status_replicas > replicas else replicas


def owner_name(pod: Obj) -> str | None:
    """The LeaderWorkerSet a pod belongs to (LWS labels every pod of a set with its name)."""
    return ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_SET_NAME)


def pod_role(pod: Obj, lws: Obj) -> tuple[int, str, int] | None:
    """Kueue's LWS pod reconciler ``setDefault``: (group index, role, group size) of a pod of
    the set; None while the LWS controller has not given it a group index."""
    meta = pod.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if LABEL_GROUP_INDEX not in labels:
        return None
    try:
        index = int(labels[LABEL_GROUP_INDEX])
    except ValueError:
        return None
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    role = DEFAULT_POD_SET
    if lwt.get("leaderTemplate") is not None:
        role = WORKER_POD_SET if ANN_LEADER_NAME in annotations else LEADER_POD_SET
    return index, role, _int(lwt.get("size"), 1)


def template_defaults(lws: Obj, ops: list[dict[str, Any]], priority: str | None) -> None:
    """Kueue's LWS webhook ``podTemplateSpecDefault`` on the leader and worker templates:
    ``pod-suspending-parent``, ``pod-group-serving``, ``pod-index-offset: "1"`` on the workers
    when there is a leader and no PodSet group, the WorkloadPriorityClass label."""
    has_leader = ((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("leaderTemplate") is not None
    for ps in pod_sets(lws):
        pointer, template = json_pointer(ps.path), ps.template
        if not template:
            continue  # no such template: nothing to default (the CRD requires the worker's)
        meta = template.get("metadata") or {}
        annotations = dict(meta.get("annotations") or {})
        wanted = {ANN_POD_SUSPENDING_PARENT: FRAMEWORK, ANN_POD_GROUP_SERVING: "true"}
        if ps.path[-1] == "workerTemplate" and has_leader and ANN_GROUP_NAME not in annotations:
            wanted[ANN_POD_INDEX_OFFSET] = "1"
        new_labels = dict(meta.get("labels") or {})
        if priority:
            new_labels[LABEL_PRIORITY_CLASS] = priority
        if "metadata" not in template:
            ops.append({"op": "add", "path": f"{pointer}/metadata", "value": {}})
        if new_labels != (meta.get("labels") or {}):
            ops.append({"op": "add", "path": f"{pointer}/metadata/labels", "value": new_labels})
        if {**annotations, **wanted} != annotations:
            ops.append({"op": "add", "path": f"{pointer}/metadata/annotations", "value": {**annotations, **wanted}})


LEADERWORKERSET = JobKind(
    group="leaderworkerset.x-k8s.io", version="v1", kind="LeaderWorkerSet", plural="leaderworkersets",
    framework=FRAMEWORK, pod_sets=pod_sets, finish_state=never_finishes, active_pods=no_active_pods,
    pods_ready=never_ready,
    shape={**TOP, "spec": {"replicas": "count", "leaderWorkerTemplate": {
        "size": "count", "leaderTemplate": POD_TEMPLATE, "workerTemplate": POD_TEMPLATE}}},
    suspend_path=None, rank_label=WORKER_INDEX,
    pod_groups=PodGroups(owner_name=owner_name, group_count=group_count, pod_role=pod_role,
                         template_defaults=template_defaults),
)
