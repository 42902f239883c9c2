"""Kinds held per pod group (:class:`~scheduler.adapter.kinds.base.PodGroups`: the
LeaderWorkerSet), as Kueue's pod-group integrations: one prebuilt Workload per group, named
``GetWorkloadNameForOwnerWithGVK("<name>-<i>", uid)``, with label ``kueue.x-k8s.io/job-uid``,
annotations ``is-group-workload``, ``job-owner-gvk``, ``job-owner-name``,
``component-workload-index`` and a (non-controller) owner reference; each pod labelled with
``kueue.x-k8s.io/managed``, ``queue-name``, ``pod-group-name`` and ``prebuilt-workload-name``
(its group's Workload) and annotated with ``pod-group-total-count`` and ``role-hash`` (its pod
set). Pure functions; the controller's phase is ``scheduler/kube/podgroups.py``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import JobKind, Obj
from scheduler.adapter.kinds.identifiers import LABELS_ONLY, Identifiers
from scheduler.adapter.kinds.registry import with_pod_groups
from scheduler.adapter.kinds.workloads import workload_pod_sets
from scheduler.core.config import DEFAULT_KUEUE_RELEASE
from scheduler.core.kueue_names import (
    ANN_ADMISSION_GATED_BY,
    ANN_COMPONENT_INDEX,
    ANN_IS_GROUP_WORKLOAD,
    ANN_JOB_OWNER_GVK,
    ANN_JOB_OWNER_NAME,
    ANN_POD_GROUP_TOTAL_COUNT,
    LABEL_JOB_UID,
    LABEL_MANAGED,
)
from scheduler.core.workload import ANN_ROLE_HASH, LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME, kueue_workload_name

_GROUP_GVKS = {k.gvk for k in with_pod_groups()}


def group_workload_name(kind: JobKind, obj: Obj, index: int) -> str:
    """``<kind>-<name>-<i>-<hash>`` (an LWS group), or ``<kind>-<name>-<hash>`` for a kind with
    one group per object (a StatefulSet)."""
    meta = obj["metadata"]
    single = kind.pod_groups is not None and kind.pod_groups.single_group
    return kueue_workload_name(kind.kind, kind.group, meta["name"] if single else f"{meta['name']}-{index}",
                               str(meta["uid"]))


def is_group_workload(wl: Mapping[str, Any]) -> bool:
    return ((wl.get("metadata") or {}).get("annotations") or {}).get(ANN_JOB_OWNER_GVK) in _GROUP_GVKS


def group_workload(kind: JobKind, obj: Obj, index: int, priority: int,
                   priority_class_ref: Mapping[str, str] | None, admission_gated_by: bool = False,
                   release: str = DEFAULT_KUEUE_RELEASE) -> dict[str, Any]:
    """The Workload of group ``index`` (Kueue's ``constructWorkload``, v1beta2). With
    ``admission_gated_by`` (the gate is on) the owner's ``kueue.x-k8s.io/admission-gated-by``
    goes onto it (Kueue's LeaderWorkerSet and StatefulSet reconcilers). ``release``: the
    charges of that Kueue release (kinds/charging.py)."""
    meta = obj["metadata"]
    single = kind.pod_groups is not None and kind.pod_groups.single_group
    spec: dict[str, Any] = {"queueName": (meta.get("labels") or {}).get(LABEL_QUEUE_NAME, ""),
                            "podSets": workload_pod_sets(kind, obj, release=release), "priority": priority,
                            "active": True}
    if priority_class_ref:
        spec["priorityClassRef"] = dict(priority_class_ref)
    labels = {LABEL_JOB_UID: str(meta["uid"])}
    gated = (meta.get("annotations") or {}).get(ANN_ADMISSION_GATED_BY)
    gate = {ANN_ADMISSION_GATED_BY: gated} if admission_gated_by and isinstance(gated, str) and gated else {}
    if (meta.get("labels") or {}).get(LABEL_PRIORITY_CLASS):
        labels[LABEL_PRIORITY_CLASS] = meta["labels"][LABEL_PRIORITY_CLASS]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {
            "name": group_workload_name(kind, obj, index), "namespace": meta.get("namespace", "default"),
            "labels": labels,
            "annotations": {ANN_IS_GROUP_WORKLOAD: "true", ANN_JOB_OWNER_GVK: kind.gvk,
                            ANN_JOB_OWNER_NAME: meta["name"],
                            **({} if single else {ANN_COMPONENT_INDEX: str(index)}), **gate},
            # controllerutil.SetOwnerReference: an owner, not the controller
            "ownerReferences": [{"apiVersion": kind.api_version, "kind": kind.kind, "name": meta["name"],
                                 "uid": meta["uid"]}],
        },
        "spec": spec,
    }


def pod_group_patch(kind: JobKind, pod: Obj, owner: Obj, ids: Identifiers = LABELS_ONLY) -> dict[str, Any] | None:
    """Kueue's pod-group ``setDefault``: the merge patch naming the pod's group Workload and
    role, or None (already labelled, no group yet, or the owner is not queued). ``ids``: where
    the group and prebuilt-Workload names go (labels, or annotations under
    WorkloadIdentifierAnnotations: ``identifiers.py``)."""
    assert kind.pod_groups is not None
    labels = (pod.get("metadata") or {}).get("labels") or {}
    queue = ((owner.get("metadata") or {}).get("labels") or {}).get(LABEL_QUEUE_NAME)
    if LABEL_QUEUE_NAME in labels or not queue:
        return None
    role = kind.pod_groups.pod_role(pod, owner)
    if role is None:
        return None
    index, pod_set, size = role
    name = group_workload_name(kind, owner, index)
    id_labels, id_annotations = ids.stamp(name)
    out = {LABEL_MANAGED: "true", LABEL_QUEUE_NAME: queue, **id_labels}
    priority = ((owner.get("metadata") or {}).get("labels") or {}).get(LABEL_PRIORITY_CLASS)
    if priority and LABEL_PRIORITY_CLASS not in labels:  # Kueue copies it onto the group's pods
        out[LABEL_PRIORITY_CLASS] = priority
    return {"metadata": {
        "labels": out,
        "annotations": {**kind.pod_groups.pod_annotations, ANN_POD_GROUP_TOTAL_COUNT: str(size),
                        ANN_ROLE_HASH: pod_set, **id_annotations}}}
