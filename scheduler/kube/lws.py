"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) as Kueue v0.17's LWS integration manages it.

Kueue (pkg/controller/jobs/leaderworkerset) does not suspend an LWS: it keeps one prebuilt
Workload per group (replica) and manages the group's pods through its pod-group integration.
toposched does the same with the machinery it has:

- Workloads (:meth:`LwsGroups.ensure`): for groups 0..replicas-1 (``status.replicas`` while a
  rolling update surges) one Workload named ``GetWorkloadNameForOwnerWithGVK("<lws>-<i>", uid)``
  (``leaderworkerset-<lws>-<i>-<hash>``) with pod sets ``leader`` + ``worker`` (or ``main``),
  label ``kueue.x-k8s.io/job-uid``, annotations ``kueue.x-k8s.io/is-group-workload``,
  ``job-owner-gvk``, ``job-owner-name``, ``component-workload-index``, and a (non-controller)
  owner reference to the LWS; the Workloads of groups beyond the count are deleted.
- Pods (:meth:`LwsGroups.label_pods`, Kueue's LWS pod reconciler ``setDefault``): a pod of a
  queued LWS with its group index gets ``kueue.x-k8s.io/managed``, ``queue-name``,
  ``pod-group-name`` and ``prebuilt-workload-name`` (the group's Workload) and the annotations
  ``pod-group-total-count`` (the size) and ``role-hash`` (its pod set: ``leader``/``worker``,
  or ``main``).
- Gating: Kueue's pod webhook puts the ``kueue.x-k8s.io/admission`` scheduling gate on such
  pods and ungates them when the Workload is admitted. toposched has no pod webhook: the pods
  (``schedulerName: toposched``, set by its LWS webhook) are held by the extender instead, which
  refuses them until their Workload is admitted and then places them on its assignment
  (``scheduler/extender/gate.py``, ``workload_view.pod_ref``).
- Eviction (:meth:`LwsGroups.stop_group`): the group's bound pods are deleted (the LWS
  controller recreates them, held again), then the reservation is released.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.adapter.jobkinds import LWS_LEADER_POD_SET, LWS_WORKER_POD_SET, lws_pod_sets
from scheduler.core.kueue_names import ANN_POD_SUSPENDING_PARENT, LABEL_JOB_UID, LABEL_PREBUILT_WORKLOAD
from scheduler.core.topology_request import TopologyRequestError
from scheduler.core.workload import (
    ANN_ROLE_HASH,
    DEFAULT_POD_SET,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    kueue_workload_name,
)
from scheduler.k8s.informer import LEADERWORKERSETS, PODS, WORKLOADS
from scheduler.kube.cache import ClusterCache
from scheduler.kube.isolation import Isolation
from scheduler.kube.workload_index import OWNER
from scheduler.kube.writer import Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]

KIND = "LeaderWorkerSet"
GROUP = LEADERWORKERSETS.group
GVK = f"{GROUP}/{LEADERWORKERSETS.version}, Kind={KIND}"  # Go's schema.GroupVersionKind.String()
FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
# LWS's pod labels / annotations (sigs.k8s.io/lws api/leaderworkerset/v1).
LABEL_SET_NAME = "leaderworkerset.sigs.k8s.io/name"
LABEL_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
ANN_LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"
# Kueue's (pkg/controller/constants, jobs/pod/constants).
LABEL_MANAGED = "kueue.x-k8s.io/managed"
LABEL_POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
ANN_POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
ANN_IS_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"
ANN_JOB_OWNER_GVK = "kueue.x-k8s.io/job-owner-gvk"
ANN_JOB_OWNER_NAME = "kueue.x-k8s.io/job-owner-name"
ANN_COMPONENT_INDEX = "kueue.x-k8s.io/component-workload-index"

Priority = Callable[[Mapping[str, Any]], "tuple[int, dict[str, str] | None] | None"]


def group_workload_name(lws: Mapping[str, Any], index: int) -> str:
    meta = lws["metadata"]
    return kueue_workload_name(KIND, GROUP, f"{meta['name']}-{index}", str(meta["uid"]))


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def group_count(lws: Mapping[str, Any]) -> int:
    """Kueue's ``filterWorkloads``: ``spec.replicas`` (default 1), or ``status.replicas`` when
    it is larger during a rolling update with maxSurge (the surge groups need Workloads too)."""
    spec, status = lws.get("spec") or {}, lws.get("status") or {}
    replicas = _int(spec.get("replicas"), 1)
    rolling = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")) or {}
    surge = rolling.get("maxSurge")
    surging = isinstance(surge, int) and surge > 0 and _int(status.get("updatedReplicas"), 0) < replicas
    status_replicas = _int(status.get("replicas"), 0)
    return status_replicas if surging and status_replicas > replicas else replicas


def is_group_workload(wl: Mapping[str, Any]) -> bool:
    return ((wl.get("metadata") or {}).get("annotations") or {}).get(ANN_JOB_OWNER_GVK) == GVK


def group_workload(lws: Mapping[str, Any], index: int, priority: int,
                   priority_class_ref: Mapping[str, str] | None) -> Obj:
    """The Workload of group ``index`` (Kueue's ``constructWorkload``, v1beta2)."""
    meta = lws["metadata"]
    spec: Obj = {"queueName": (meta.get("labels") or {}).get(LABEL_QUEUE_NAME, ""), "podSets": lws_pod_sets(lws),
                 "priority": priority, "active": True}
    if priority_class_ref:
        spec["priorityClassRef"] = dict(priority_class_ref)
    labels = {LABEL_JOB_UID: str(meta["uid"])}
    if (meta.get("labels") or {}).get(LABEL_PRIORITY_CLASS):
        labels[LABEL_PRIORITY_CLASS] = meta["labels"][LABEL_PRIORITY_CLASS]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {
            "name": group_workload_name(lws, index), "namespace": meta.get("namespace", "default"),
            "labels": labels,
            "annotations": {ANN_IS_GROUP_WORKLOAD: "true", ANN_JOB_OWNER_GVK: GVK, ANN_JOB_OWNER_NAME: meta["name"],
                            ANN_COMPONENT_INDEX: str(index)},
            # controllerutil.SetOwnerReference: an owner, not the controller
            "ownerReferences": [{"apiVersion": f"{GROUP}/{LEADERWORKERSETS.version}", "kind": KIND,
                                 "name": meta["name"], "uid": meta["uid"]}],
        },
        "spec": spec,
    }


def pod_group_patch(pod: Mapping[str, Any], lws: Mapping[str, Any]) -> Obj | None:
    """Kueue's LWS pod reconciler ``setDefault``: the merge patch naming the pod's group Workload
    and role, or None (already labelled, no group index yet, or the LWS is not queued)."""
    meta = pod.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if LABEL_QUEUE_NAME in labels or LABEL_GROUP_INDEX not in labels:
        return None
    queue = ((lws.get("metadata") or {}).get("labels") or {}).get(LABEL_QUEUE_NAME)
    if not queue:
        return None
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    role = DEFAULT_POD_SET
    if lwt.get("leaderTemplate") is not None:
        role = LWS_WORKER_POD_SET if ANN_LEADER_NAME in annotations else LWS_LEADER_POD_SET
    try:
        index = int(labels[LABEL_GROUP_INDEX])
    except ValueError:
        return None
    name = group_workload_name(lws, index)
    return {"metadata": {
        "labels": {LABEL_MANAGED: "true", LABEL_QUEUE_NAME: queue, LABEL_POD_GROUP_NAME: name,
                   LABEL_PREBUILT_WORKLOAD: name},
        "annotations": {ANN_POD_GROUP_TOTAL_COUNT: str(_int(lwt.get("size"), 1)), ANN_ROLE_HASH: role}}}


class LwsGroups:
    """The controller's LeaderWorkerSet phases (Workloads per group, pod labels, stopping a
    group), on the informer caches and through the writer."""

    def __init__(self, cache: ClusterCache, writer: Writer, isolation: Isolation, priority: Priority) -> None:
        self.cache = cache
        self.writer = writer
        self.isolation = isolation
        self.priority = priority

    def _sets(self) -> list[Obj]:
        informer = self.cache.leaderworkersets
        return [] if informer is None else [o for o in informer.items()
                                            if (o["metadata"].get("labels") or {}).get(LABEL_QUEUE_NAME)]

    def _groups_of(self, lws: Obj) -> dict[str, Obj]:
        """The group Workloads of a set by name (the Workload informer's owner index)."""
        return {wl["metadata"]["name"]: wl for wl in self.cache.workloads.indexed(OWNER, str(lws["metadata"]["uid"]))
                if is_group_workload(wl)}

    def ensure(self) -> None:
        """Create the missing groups' Workloads, delete those of groups that are gone."""
        self.isolation.for_each("ensure_workloads", self._sets(), lambda lws: self._ensure(lws, self._groups_of(lws)))

    def _ensure(self, lws: Obj, existing: Mapping[str, Obj]) -> None:
        if lws["metadata"].get("deletionTimestamp"):
            return
        wanted = {group_workload_name(lws, i): i for i in range(group_count(lws))}
        for name, wl in existing.items():
            if name not in wanted and self.writer.delete(WORKLOADS, name, wl["metadata"].get("namespace")):
                log.info("LeaderWorkerSet group Workload %s deleted (group gone)", name)
        missing = [i for name, i in wanted.items() if name not in existing]
        if not missing:
            return
        priority = self.priority(lws)
        if priority is None:
            self.writer.event(lws, "Warning", "WorkloadPriorityClassNotFound",
                              f"workloadPriorityClass \"{lws['metadata']['labels'][LABEL_PRIORITY_CLASS]}\" "
                              f"not found; create it or fix label {LABEL_PRIORITY_CLASS}")
            return
        for index in missing:
            try:
                body = group_workload(lws, index, priority[0], priority[1])
            except TopologyRequestError as exc:
                self.writer.event(lws, "Warning", "CreatedWorkloadFailed", str(exc)[:500])
                return
            created = self.writer.create(WORKLOADS, body, lws["metadata"]["namespace"], self.cache.workloads)
            if created is not None:
                self.writer.event(lws, "Normal", "CreatedWorkload",
                                  f"Created Workload: {created['metadata']['namespace']}/{created['metadata']['name']}")

    def label_pods(self) -> None:
        sets = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in self._sets()}
        if not sets:
            return
        pods = [p for p in self.cache.pods.items()
                if ((p["metadata"].get("annotations") or {}).get(ANN_POD_SUSPENDING_PARENT) == FRAMEWORK
                    and not p["metadata"].get("deletionTimestamp"))]
        self.isolation.for_each("label_pods", pods, lambda pod: self._label(pod, sets))

    def _label(self, pod: Obj, sets: Mapping[tuple[Any, Any], Obj]) -> None:
        meta = pod["metadata"]
        lws = sets.get((meta.get("namespace"), (meta.get("labels") or {}).get(LABEL_SET_NAME)))
        patch = pod_group_patch(pod, lws) if lws is not None else None
        if patch is not None:
            self.writer.patch(PODS, pod, patch, self.cache.pods)

    def group_pods(self, wl: Mapping[str, Any]) -> list[Obj]:
        name, ns = wl["metadata"]["name"], wl["metadata"].get("namespace")
        return [p for p in self.cache.pods.items() if p["metadata"].get("namespace") == ns
                and (p["metadata"].get("labels") or {}).get(LABEL_POD_GROUP_NAME) == name]

    def stop_group(self, wl: Mapping[str, Any]) -> bool:
        """Delete the group's pods that hold a node; True once none holds one (then the
        reservation may go; pods the LWS controller recreates meanwhile are held again)."""
        holding = [p for p in self.group_pods(wl) if (p.get("spec") or {}).get("nodeName")]
        for pod in holding:
            if not pod["metadata"].get("deletionTimestamp"):
                self.writer.delete_pod(pod["metadata"]["name"], pod["metadata"]["namespace"])
        return not holding
