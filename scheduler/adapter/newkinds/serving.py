"""Deployment and StatefulSet (apps/v1) as Kueue v0.17.0's ``deployment`` and ``statefulset``
integrations handle them (``pkg/controller/jobs/deployment/``, ``statefulset/``;
docs/design/new-kinds.md). Neither is suspended: their pods are held by the pod integration.

- Deployment: the webhook stamps the pod template (``pod-suspending-parent: deployment``, the
  managed label, the queue and priority-class labels); each pod is then a single-pod Workload.
- StatefulSet: one prebuilt Workload ``statefulset-<name>-<hash>`` with the pod set ``main`` of
  ``replicas`` pods ranked by ``apps.kubernetes.io/pod-index``; the webhook stamps the template
  with ``pod-suspending-parent: statefulset``; each pod is labelled and annotated into the
  Workload's serving pod group (:func:`statefulset_pod_patch`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.newkinds.common import (
    ANN_IS_GROUP_WORKLOAD,
    ANN_JOB_OWNER_GVK,
    ANN_JOB_OWNER_NAME,
    ANN_POD_GROUP_FAST_ADMISSION,
    ANN_POD_GROUP_POD_INDEX_LABEL,
    ANN_POD_GROUP_SERVING,
    ANN_POD_GROUP_TOTAL_COUNT,
    LABEL_MANAGED,
    LABEL_POD_GROUP_NAME,
    MANAGED_VALUE,
    as_int,
    pod_set,
)
from scheduler.core.kueue_names import ANN_POD_SUSPENDING_PARENT, LABEL_JOB_UID, LABEL_PREBUILT_WORKLOAD
from scheduler.core.workload import (
    ANN_ROLE_HASH,
    DEFAULT_POD_SET,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    kueue_workload_name,
)

DEPLOYMENT_FRAMEWORK = "deployment"
STATEFULSET_FRAMEWORK = "statefulset"
STATEFULSET_POD_INDEX = "apps.kubernetes.io/pod-index"
STATEFULSET_GVK = "apps/v1, Kind=StatefulSet"


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def deployment_template_patch(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """Merge patch of a queued Deployment at admission: its pod template marked so every pod is
    held and admitted alone (Kueue's deployment webhook ``Default``)."""
    labels = {LABEL_MANAGED: MANAGED_VALUE}
    queue = _labels(deployment).get(LABEL_QUEUE_NAME)
    if queue:
        labels[LABEL_QUEUE_NAME] = queue
    priority = _labels(deployment).get(LABEL_PRIORITY_CLASS)
    if priority:
        labels[LABEL_PRIORITY_CLASS] = priority
    return {"spec": {"template": {"metadata": {
        "annotations": {ANN_POD_SUSPENDING_PARENT: DEPLOYMENT_FRAMEWORK}, "labels": labels}}}}


def statefulset_template_patch(statefulset: Mapping[str, Any]) -> dict[str, Any]:
    """Merge patch of a queued StatefulSet at admission (Kueue's statefulset webhook)."""
    return {"spec": {"template": {"metadata": {"annotations": {ANN_POD_SUSPENDING_PARENT: STATEFULSET_FRAMEWORK}}}}}


def statefulset_replicas(statefulset: Mapping[str, Any]) -> int:
    return as_int((statefulset.get("spec") or {}).get("replicas"), 1)


def statefulset_workload_name(statefulset: Mapping[str, Any]) -> str:
    meta = statefulset.get("metadata") or {}
    return kueue_workload_name("StatefulSet", "apps", str(meta.get("name", "")), str(meta.get("uid", "")))


def statefulset_pod_sets(statefulset: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``main``: replicas pods, the template's spec, ranked by the pod ordinal."""
    template = (statefulset.get("spec") or {}).get("template") or {}
    ps = pod_set(DEFAULT_POD_SET, statefulset_replicas(statefulset), template, STATEFULSET_POD_INDEX)
    ps["template"] = {"spec": ps["template"].get("spec") or {}}
    return [ps]


def statefulset_workload(statefulset: Mapping[str, Any]) -> dict[str, Any]:
    """The prebuilt Workload Kueue creates for a queued StatefulSet with replicas > 0."""
    meta = statefulset.get("metadata") or {}
    labels = {LABEL_JOB_UID: str(meta.get("uid", ""))}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {
            "name": statefulset_workload_name(statefulset), "namespace": meta.get("namespace", ""),
            "labels": labels,
            "annotations": {ANN_IS_GROUP_WORKLOAD: "true", ANN_JOB_OWNER_GVK: STATEFULSET_GVK,
                            ANN_JOB_OWNER_NAME: meta.get("name", "")},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta.get("name", ""),
                                 "uid": meta.get("uid", ""), "blockOwnerDeletion": True}],
        },
        "spec": {"podSets": statefulset_pod_sets(statefulset),
                 "queueName": _labels(statefulset).get(LABEL_QUEUE_NAME, "")},
    }


def statefulset_pod_patch(statefulset: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge patch joining a StatefulSet pod to its Workload's serving pod group (Kueue's
    statefulset pod reconciler), or None when it already belongs (queue label in sync) or the
    StatefulSet is not queued."""
    name = statefulset_workload_name(statefulset)
    queue = _labels(statefulset).get(LABEL_QUEUE_NAME, "")
    pod_labels = (pod.get("metadata") or {}).get("labels") or {}
    if pod_labels.get(LABEL_POD_GROUP_NAME) == name:
        if queue and pod_labels.get(LABEL_QUEUE_NAME) != queue:
            return {"metadata": {"labels": {LABEL_QUEUE_NAME: queue}}}
        return None
    if not queue:
        return None
    labels = {LABEL_MANAGED: MANAGED_VALUE, LABEL_POD_GROUP_NAME: name, LABEL_PREBUILT_WORKLOAD: name,
              LABEL_QUEUE_NAME: queue}
    priority = _labels(statefulset).get(LABEL_PRIORITY_CLASS)
    if priority:
        labels[LABEL_PRIORITY_CLASS] = priority
    return {"metadata": {"labels": labels, "annotations": {
        ANN_POD_GROUP_TOTAL_COUNT: str(statefulset_replicas(statefulset)),
        ANN_POD_GROUP_FAST_ADMISSION: "true", ANN_POD_GROUP_SERVING: "true",
        ANN_POD_GROUP_POD_INDEX_LABEL: STATEFULSET_POD_INDEX, ANN_ROLE_HASH: DEFAULT_POD_SET}}}
