"""The controller's phases for kinds held per pod group (the LeaderWorkerSet), as Kueue's
pod-group integrations manage them (``scheduler/adapter/kinds/podgroups.py`` builds the
Workloads and the pod labels; the kind's module declares its groups and roles).

Kueue (pkg/controller/jobs/leaderworkerset) does not suspend an LWS: it keeps one prebuilt
Workload per group (replica) and manages the group's pods through its pod-group integration.
toposched does the same with the machinery it has:

- Workloads (:meth:`PodGroupPhases.ensure`): for groups 0..count-1 one Workload each (for an
  LWS ``leaderworkerset-<lws>-<i>-<hash>``); the Workloads of groups beyond the count are
  deleted.
- Pods (:meth:`PodGroupPhases.label_pods`, Kueue's pod reconciler ``setDefault``): a pod of a
  queued object, once it has its group, gets its group's Workload and role.
- Gating: a StatefulSet's pods carry Kueue's ``kueue.x-k8s.io/admission`` scheduling gate (the
  pod webhook, ``admission/pods.py``) until the pod integration releases them
  (``scheduler/kube/podintegration.py``). A LeaderWorkerSet's pods (``schedulerName:
  toposched``, set by the webhook) are held by the extender instead, which refuses them until
  their Workload is admitted and then places them on its assignment
  (``scheduler/extender/gate.py``, ``workload_view.pod_ref``).
- Eviction (:meth:`PodGroupPhases.stop_group`): the group's bound pods are deleted (the
  owner's controller recreates them, held again), then the reservation is released.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.identifiers import identifiers
from scheduler.adapter.kinds.ownership import controller_ref
from scheduler.adapter.kinds.podgroups import group_workload, group_workload_name, is_group_workload, pod_group_patch
from scheduler.adapter.kinds.registry import BY_GROUP_KIND
from scheduler.adapter.manifest.annotations import NO_OVERRIDES
from scheduler.adapter.manifest.gated_by import GATE as ADMISSION_GATED_BY
from scheduler.adapter.priority_policy import ClassRefused
from scheduler.core.config import FeatureGates
from scheduler.core.kueue_names import ANN_POD_SUSPENDING_PARENT
from scheduler.core.topology_request import TopologyRequestError
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import PODS, WORKLOADS
from scheduler.kube.cache import ClusterCache
from scheduler.kube.isolation import Isolation
from scheduler.kube.workload_index import OWNER
from scheduler.kube.writer import Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]

Priority = Callable[[Mapping[str, Any]], "tuple[int, dict[str, str] | None] | ClassRefused"]
__all__ = ["PodGroupPhases", "is_group_workload"]


def _governed_child(obj: Obj) -> bool:
    ref = controller_ref(obj)
    return ref is not None and (ref.group, ref.kind) in BY_GROUP_KIND


class PodGroupPhases:
    """The controller's pod-group phases (Workloads per group, pod labels, stopping a group)
    for every enabled kind held per pod group, on the informer caches and through the writer."""

    def __init__(self, cache: ClusterCache, writer: Writer, isolation: Isolation, priority: Priority,
                 kinds: Sequence[JobKind], gates: FeatureGates = NO_OVERRIDES) -> None:
        self.cache = cache
        # Kueue's WorkloadIdentifierAnnotations (where a pod's group is named) and AdmissionGatedBy.
        self.ids = identifiers(gates)
        self.admission_gated_by = gates.enabled(ADMISSION_GATED_BY)
        self.release = gates.release  # what a group's Workload is charged for (kinds/charging.py)
        self.writer = writer
        self.isolation = isolation
        self.priority = priority
        self.kinds = tuple(k for k in kinds if k.pod_groups is not None)

    def _objects(self, kind: JobKind) -> list[Obj]:
        """The queued objects of the kind that are not some governed object's children (a
        LeaderWorkerSet's StatefulSets are its, not groups of their own)."""
        informer = self.cache.jobs.get(kind.framework)
        return [] if informer is None else [o for o in informer.items()
                                            if (o["metadata"].get("labels") or {}).get(LABEL_QUEUE_NAME)
                                            and not _governed_child(o)]

    def _groups_of(self, obj: Obj) -> dict[str, Obj]:
        """The group Workloads of an object by name (the Workload informer's owner index)."""
        return {wl["metadata"]["name"]: wl for wl in self.cache.workloads.indexed(OWNER, str(obj["metadata"]["uid"]))
                if is_group_workload(wl)}

    def ensure(self) -> None:
        """Create the missing groups' Workloads, delete those of groups that are gone."""
        for kind in self.kinds:
            self.isolation.for_each("ensure_workloads", self._objects(kind), self._ensurer(kind))

    def _ensurer(self, kind: JobKind) -> Callable[[Obj], None]:
        return lambda obj: self._ensure(kind, obj, self._groups_of(obj))

    def _ensure(self, kind: JobKind, obj: Obj, existing: Mapping[str, Obj]) -> None:
        assert kind.pod_groups is not None
        if obj["metadata"].get("deletionTimestamp"):
            return
        wanted = {group_workload_name(kind, obj, i): i for i in range(kind.pod_groups.group_count(obj))}
        for name, wl in existing.items():
            if name not in wanted and self.writer.delete(WORKLOADS, name, wl["metadata"].get("namespace")):
                log.info("%s group Workload %s deleted (group gone)", kind.kind, name)
        missing = [i for name, i in wanted.items() if name not in existing]
        if not missing:
            return
        priority = self.priority(obj)
        if isinstance(priority, ClassRefused):
            self.writer.event(obj, "Warning", priority.reason, priority.event)
            return
        for index in missing:
            try:
                body = group_workload(kind, obj, index, priority[0], priority[1], self.admission_gated_by,
                                      self.release)
            except TopologyRequestError as exc:
                self.writer.event(obj, "Warning", "CreatedWorkloadFailed", str(exc)[:500])
                return
            created = self.writer.create(WORKLOADS, body, obj["metadata"]["namespace"], self.cache.workloads)
            if created is not None:
                self.writer.event(obj, "Normal", "CreatedWorkload",
                                  f"Created Workload: {created['metadata']['namespace']}/{created['metadata']['name']}")

    def label_pods(self) -> None:
        for kind in self.kinds:
            owners = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in self._objects(kind)}
            if not owners:
                continue
            pods = [p for p in self.cache.pods.items()
                    if ((p["metadata"].get("annotations") or {}).get(ANN_POD_SUSPENDING_PARENT) == kind.framework
                        and not p["metadata"].get("deletionTimestamp"))]
            self.isolation.for_each("label_pods", pods, self._labeller(kind, owners))

    def _labeller(self, kind: JobKind, owners: Mapping[tuple[Any, Any], Obj]) -> Callable[[Obj], None]:
        return lambda pod: self._label(kind, pod, owners)

    def _label(self, kind: JobKind, pod: Obj, owners: Mapping[tuple[Any, Any], Obj]) -> None:
        assert kind.pod_groups is not None
        meta = pod["metadata"]
        owner = owners.get((meta.get("namespace"), kind.pod_groups.owner_name(pod)))
        patch = pod_group_patch(kind, pod, owner, self.ids) if owner is not None else None
        if patch is not None:
            self.writer.patch(PODS, pod, patch, self.cache.pods)

    def group_pods(self, wl: Mapping[str, Any]) -> list[Obj]:
        name, ns = wl["metadata"]["name"], wl["metadata"].get("namespace")
        return [p for p in self.cache.pods.items() if p["metadata"].get("namespace") == ns
                and self.ids.group_name(p) == name]

    def owned_groups(self) -> list[tuple[Obj, Obj]]:
        """(owner, group Workload) of every queued object held per pod group."""
        return [(obj, wl) for kind in self.kinds for obj in self._objects(kind) for wl in self._groups_of(obj).values()]

    def stop_group(self, wl: Mapping[str, Any]) -> bool:
        """Delete the group's pods that hold a node; True once none holds one (then the
        reservation may go; pods the owner's controller recreates meanwhile are held again)."""
        holding = [p for p in self.group_pods(wl) if (p.get("spec") or {}).get("nodeName")]
        for pod in holding:
            if not pod["metadata"].get("deletionTimestamp"):
                self.writer.delete_pod(pod["metadata"]["name"], pod["metadata"]["namespace"])
        return not holding
