"""The controller's phases for Kueue's pod integration (``pod``, ``deployment``, ``statefulset``;
Kueue v0.17.0 ``pkg/controller/jobs/pod/pod_controller.go``): plain pods, pod groups and the pods
a Deployment or StatefulSet holds, gated at creation by the pod webhook (``admission/pods.py``:
``kueue.x-k8s.io/admission`` and ``kueue.x-k8s.io/topology``). The pure parts are the ``Pod``
kind module's (``scheduler/adapter/kinds/pod.py``).

- :meth:`PodIntegration.ensure`: one Workload per queued pod (``pod-<name>-<hash>``, owned by
  the pod) or per complete pod group (named by the group, owned by its pods); the groups of a
  StatefulSet or LeaderWorkerSet are prebuilt by ``scheduler/kube/podgroups.py``.
- :meth:`PodIntegration.run`: the pods of an admitted Workload get the pod set's node selector,
  tolerations, pod-set label and workload annotation, and lose the admission gate (the topology
  gate too when the pod set has no topology assignment); the topology ungater then names each
  pod's domain.
- :meth:`PodIntegration.sync_finished`: a pod's (a group's) Workload finishes with its pods.
- :meth:`PodIntegration.release_finalizers`: Kueue's ``kueue.x-k8s.io/managed`` finalizer leaves a
  pod once it is being deleted, or finished and its Workload has recorded it.
- :meth:`PodIntegration.stop`: an evicted Workload's pods are deleted (a pod cannot be
  suspended; a Deployment's or StatefulSet's controller creates them again, gated).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds import pod as pods
from scheduler.adapter.kinds.base import PodSetStart, template_start_patch
from scheduler.adapter.kinds.identifiers import ANN_PREBUILT_WORKLOAD, LABELS_ONLY, Identifiers
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.registry import with_pod_groups
from scheduler.adapter.kinds.workloads import workload_for_job, workload_pod_set
from scheduler.adapter.priority_policy import ClassRefused
from scheduler.adapter.workload_checks import MAX_POD_SETS
from scheduler.core.kueue_names import (
    ANN_IS_GROUP_WORKLOAD,
    ANN_JOB_OWNER_GVK,
    ANN_POD_SUSPENDING_PARENT,
    FINALIZER_MANAGED,
    GATE_ADMISSION,
    GATE_TOPOLOGY,
    LABEL_PREBUILT_WORKLOAD,
)
from scheduler.core.topology_request import TopologyRequestError
from scheduler.core.workload import LABEL_QUEUE_NAME, WorkloadFormatError
from scheduler.k8s.informer import PODS, WORKLOADS, object_key
from scheduler.kube import status as st
from scheduler.kube.cache import POD_GROUP, ClusterCache
from scheduler.kube.isolation import Isolation
from scheduler.kube.writer import Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Priority = Callable[[Mapping[str, Any]], "tuple[int, dict[str, str] | None] | ClassRefused"]
Starts = Callable[[Mapping[str, Any]], list[PodSetStart]]

# Parents whose groups are prebuilt (StatefulSet, LeaderWorkerSet): their pods get no Workload here.
_PREBUILT_PARENTS = frozenset(k.framework for k in with_pod_groups())


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def _gates(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("schedulingGates") or ())


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def admitted_counts(wl: Mapping[str, Any]) -> dict[str, int]:
    """Pod set -> the pods it was admitted for (the admission's count, which partial admission
    may have lowered; else the spec's)."""
    counts = {str(ps.get("name")): int(ps.get("count") or 0) for ps in (wl.get("spec") or {}).get("podSets") or ()}
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
        if psa.get("count") is not None:
            counts[str(psa.get("name"))] = int(psa["count"])
    return counts


def admission_gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE_ADMISSION for g in _gates(pod))


def _as_job(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod shaped as the priority resolver reads a job (its priority class in a template)."""
    return {"metadata": _meta(pod), "spec": {"template": {"spec": pod.get("spec") or {}}}}


def run_patch(pod: Mapping[str, Any], start: PodSetStart, workload_name: str) -> dict[str, Any]:
    """Kueue's pod ``RunWithPodSetsInfo``: the pod set's node selector and tolerations (a gated
    pod may gain both), its label and the workload annotation; the admission gate removed, the
    topology gate too when the pod set was admitted without a topology assignment (the list is
    sent whole: a merge patch replaces it)."""
    patch = template_start_patch(pod, start, workload_name)
    gates = [dict(g) for g in _gates(pod) if g.get("name") != GATE_ADMISSION
             and (g.get("name") != GATE_TOPOLOGY or start.topology_assigned)]
    patch["spec"]["schedulingGates"] = gates or None
    return patch


class PodIntegration:
    def __init__(self, cache: ClusterCache, writer: Writer, isolation: Isolation, priority: Priority,
                 starts: Starts, clock: Callable[[], dt.datetime], ids: Identifiers = LABELS_ONLY,
                 max_pod_sets: int = MAX_POD_SETS) -> None:
        self.clock = clock
        # Where a pod names its group and prebuilt Workload (WorkloadIdentifierAnnotations).
        self.ids = ids
        self.max_pod_sets = max_pod_sets  # the release's cap on a Workload's pod sets (a group's roles)
        self.cache = cache
        self.writer = writer
        self.isolation = isolation
        self.priority = priority
        self.starts = starts

    # ------------------------------------------------------------------ reading
    def _managed(self) -> list[Obj]:
        return self.cache.managed_pods.items()

    def _groups(self) -> dict[tuple[str, str], list[Obj]]:
        out: dict[tuple[str, str], list[Obj]] = {}
        for pod in self._managed():
            group = self.ids.group_name(pod)
            if group:
                out.setdefault((str(_meta(pod).get("namespace")), str(group)), []).append(pod)
        return out

    def _wants_workload(self, pod: Mapping[str, Any]) -> bool:
        meta = _meta(pod)
        annotations = meta.get("annotations") or {}
        parent = annotations.get(ANN_POD_SUSPENDING_PARENT)
        prebuilt = LABEL_PREBUILT_WORKLOAD in _labels(pod) or (self.ids.annotations
                                                              and ANN_PREBUILT_WORKLOAD in annotations)
        return bool(_labels(pod).get(LABEL_QUEUE_NAME)) and not meta.get("deletionTimestamp") \
            and not prebuilt and parent not in _PREBUILT_PARENTS

    def owns(self, wl: Mapping[str, Any]) -> bool:
        """A Workload of this integration: a pod's, or a plain pod group's (not prebuilt)."""
        meta = _meta(wl)
        if any(r.get("kind") == "Pod" and r.get("controller") for r in meta.get("ownerReferences") or ()):
            return True
        annotations = meta.get("annotations") or {}
        return annotations.get(ANN_IS_GROUP_WORKLOAD) == "true" and ANN_JOB_OWNER_GVK not in annotations

    def members(self, wl: Mapping[str, Any]) -> list[Obj]:
        """The pods of a Workload, by the Workload's own record: the pods its owner references
        name (Kueue makes a pod, or every member of a group, an owner of its Workload), checked
        by uid, and a group's pods by their (immutable) group label; looked up among all pods,
        not only those still labelled ``kueue.x-k8s.io/managed`` (a tenant may remove that
        label from its running pods, which then still hold their nodes)."""
        meta = _meta(wl)
        ns, name = meta.get("namespace"), meta.get("name")
        owners = [(str(r.get("name")), r.get("uid")) for r in meta.get("ownerReferences") or ()
                  if isinstance(r, Mapping) and r.get("kind") == "Pod" and r.get("apiVersion") == "v1"]
        found: dict[str, Obj] = {}
        for informer in (self.cache.managed_pods, self.cache.pods):  # the live view last: it wins
            for pod in informer.indexed(POD_GROUP, f"{ns}/{name}"):
                if self.ids.group_name(pod) == name:  # the index holds both forms (kube/cache.py)
                    found[str(_meta(pod).get("uid"))] = pod
            for pod_name, uid in owners:
                owner = informer.get(f"{ns}/{pod_name}")
                if owner is not None and uid and _meta(owner).get("uid") == uid:
                    found[str(uid)] = owner
        return list(found.values())

    # ------------------------------------------------------------------ ensure
    def ensure(self) -> None:
        wanted: dict[str, list[Obj]] = {}
        groups = self._groups()
        for pod in self._managed():
            if not self._wants_workload(pod) or self.cache.workloads.get(
                    f"{_meta(pod).get('namespace')}/{pods.workload_name(pod, self.ids)}") is not None:
                continue
            group = pods.group_name(pod, self.ids)
            if not group:
                if not pods.terminated(pod):
                    wanted[object_key(pod)] = [pod]
                continue
            members = groups.get((str(_meta(pod).get("namespace")), group), [])
            try:
                complete = len(members) >= pods.group_total_count(pod, self.ids)
            except pods.PodGroupError:
                complete = False  # refused by the webhook; nothing to admit
            if complete:
                wanted[f"{_meta(pod).get('namespace')}/{group}"] = members
        self.isolation.for_each("ensure_workloads", list(wanted.values()), self._create,
                                subject=lambda members: members[0])

    def _create(self, members: list[Obj]) -> None:
        first = members[0]
        priority = self.priority(_as_job(first))
        if isinstance(priority, ClassRefused):
            self.writer.event(first, "Warning", priority.reason, priority.event)
            return
        try:
            body = self._body(members, priority[0], priority[1])
        except (TopologyRequestError, WorkloadFormatError, pods.PodGroupError) as exc:
            self.writer.event(first, "Warning", "CreatedWorkloadFailed", str(exc)[:500])
            return
        if len(body["spec"]["podSets"]) > self.max_pod_sets:
            # Kueue's pod controller (errMsgIncorrectGroupRoleCount) only logs this; the pods would
            # stay gated with nothing said, so toposched says it once on the group's first pod.
            self.writer.event(first, "Warning", "ErrWorkloadCompose",
                              f"pod group can't include more than {self.max_pod_sets} roles")
            return
        created = self.writer.create(WORKLOADS, body, _meta(first).get("namespace"), self.cache.workloads)
        if created is not None:
            self.writer.event(first, "Normal", "CreatedWorkload",
                              f"Created Workload: {created['metadata']['namespace']}/{created['metadata']['name']}")

    def _body(self, members: Sequence[Obj], priority: int, ref: Mapping[str, str] | None) -> dict[str, Any]:
        first = members[0]
        group = pods.group_name(first, self.ids)
        if not group:
            return workload_for_job(POD, first, priority, ref)
        meta = _meta(first)
        body: dict[str, Any] = {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": group, "namespace": meta.get("namespace"),
                         "annotations": {ANN_IS_GROUP_WORKLOAD: "true"},
                         # Kueue: every member is an owner (none the controller)
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": _meta(p)["name"],
                                              "uid": _meta(p)["uid"]} for p in members]},
            "spec": {"queueName": _labels(first).get(LABEL_QUEUE_NAME, ""), "priority": priority, "active": True,
                     "podSets": [workload_pod_set(ps) for ps in pods.group_pod_sets(members, self.ids)]}}
        if ref:
            body["spec"]["priorityClassRef"] = dict(ref)
        return body

    # ------------------------------------------------------------------ run
    def run(self) -> None:
        """Release the admission gate of the pods of every admitted, not evicted Workload."""
        gated: dict[tuple[str, str], list[Obj]] = {}
        for pod in self.cache.pods.items():
            if admission_gated(pod) and not _meta(pod).get("deletionTimestamp"):
                name = pods.workload_name(pod, self.ids)
                gated.setdefault((str(_meta(pod).get("namespace")), str(name)), []).append(pod)
        if not gated:
            return
        ready = [(wl, gated[(str(wl["metadata"].get("namespace")), str(wl["metadata"]["name"]))])
                 for wl in self.cache.workloads.items()
                 if (str(wl["metadata"].get("namespace")), str(wl["metadata"]["name"])) in gated
                 and st.condition_true(wl, st.ADMITTED) and not st.condition_true(wl, st.EVICTED)
                 and not st.is_finished(wl)]
        self.isolation.for_each("start_admitted", ready, lambda item: self._run(*item),
                                workload_of=lambda item: item[0])

    def _run(self, wl: Mapping[str, Any], members: Sequence[Obj]) -> None:
        """Release the gated members of an admitted Workload, never more of a role than the
        Workload was admitted for: the pods already released of that role (running, pending on a
        node, or succeeded) count against it, so a fifth pod of a group of four, or a late pod
        claiming another's role, stays held. (A role is the hash the webhook recomputed at the
        pod's creation, which only the controller may change afterwards: admission/pods.py,
        admission/update_guards.py.)"""
        starts = {s.name: s for s in self.starts(wl)}
        room = admitted_counts(wl)
        for pod in self.members(wl):
            if not admission_gated(pod) and _phase(pod) != "Failed":
                role = pods.pod_set_of(pod, self.ids)
                room[role] = room.get(role, 0) - 1
        for pod in members:
            role = pods.pod_set_of(pod, self.ids)
            start = starts.get(role)
            if start is None:
                continue  # a role the admission does not name: stays held (Kueue: likewise)
            if room.get(role, 0) <= 0:
                log.info("pod %s held: Workload %s was admitted for no more pods of its role", object_key(pod),
                         wl["metadata"]["name"])
                continue
            if self.writer.patch(PODS, pod, run_patch(pod, start, wl["metadata"]["name"]), self.cache.pods):
                room[role] -= 1
                self.writer.notify("gate_removed", dict(wl), {"gate": GATE_ADMISSION, "at": self.clock().isoformat(),
                                                        "isGroup": bool(pods.group_name(pod))})
                log.info("pod %s released: Workload %s admitted", object_key(pod), wl["metadata"]["name"])

    # ------------------------------------------------------------------ finish
    def sync_finished(self) -> None:
        candidates = [wl for wl in self.cache.workloads.items() if self.owns(wl) and not st.is_finished(wl)
                      and st.condition_true(wl, st.ADMITTED)]
        self.isolation.for_each("sync_finished", candidates, self._sync_finished, workload_of=lambda wl: wl,
                                wanted=lambda wl: pods.group_finish_state(self.members(wl), self.ids).finished)

    def _sync_finished(self, wl: Obj) -> None:
        state = pods.group_finish_state(self.members(wl), self.ids)
        if self.writer.patch_workload_status(wl, st.finish_status(wl, state.reason, state.message,
                                                                  self.clock())):
            self.writer.notify("finished", wl, {"reason": state.reason})

    def release_finalizers(self) -> None:
        done = {str(_meta(p).get("uid")): p for p in self._managed()
                if FINALIZER_MANAGED in (_meta(p).get("finalizers") or ())
                and (_meta(p).get("deletionTimestamp") or self._recorded(p))}
        # A pod being deleted whose managed label its tenant removed keeps Kueue's finalizer too.
        done.update({str(_meta(p).get("uid")): p for p in self.cache.pods.items()
                     if _meta(p).get("deletionTimestamp") and FINALIZER_MANAGED in (_meta(p).get("finalizers") or ())})
        self.isolation.for_each("release_finalizers", list(done.values()), self._release_finalizer)

    def _recorded(self, pod: Mapping[str, Any]) -> bool:
        """Finished, and its Workload finished or gone (nothing left to account for)."""
        if not pods.terminated(pod):
            return False
        wl = self.cache.workloads.get(f"{_meta(pod).get('namespace')}/{pods.workload_name(pod, self.ids)}")
        return wl is None or st.is_finished(wl)

    def _release_finalizer(self, pod: Obj) -> None:
        rest = [f for f in _meta(pod).get("finalizers") or () if f != FINALIZER_MANAGED]
        labelled = self.cache.managed_pods.get(object_key(pod)) is not None
        self.writer.patch(PODS, pod, {"metadata": {"finalizers": rest or None}},
                          self.cache.managed_pods if labelled else self.cache.pods)

    # ------------------------------------------------------------------ stop
    def stop(self, wl: Mapping[str, Any]) -> bool:
        """Delete the evicted Workload's pods that are not finished; True once none is left
        holding a node (then the reservation may go)."""
        live = [p for p in self.members(wl) if not pods.terminated(p)]
        for pod in live:
            if not _meta(pod).get("deletionTimestamp"):
                self.writer.delete_pod(_meta(pod)["name"], _meta(pod)["namespace"])
        return not any((p.get("spec") or {}).get("nodeName") for p in live)
