"""What ``toposched explain NAMESPACE/NAME`` is about: the object and its Workloads, for every
kind of the registry, found as the controller names and owns them.

Most kinds have one Workload owned by the object (its uid in the Workload's owner references).
Kueue's pod-level and pod-group integrations do not:

- a Deployment has no Workload: each of its pods gets a single-pod Workload owned by the pod
  (``pod-<name>-<hash>``; the pods are the ReplicaSet's, named ``<deployment>-<pod-template-hash>``);
- a StatefulSet (one group) and a LeaderWorkerSet (one group per replica) get prebuilt group
  Workloads owned by the object, named by ``group_workload_name``; the group's pods carry its
  name in ``kueue.x-k8s.io/pod-group-name``;
- a plain pod group (pods labelled ``kueue.x-k8s.io/pod-group-name``) gets one Workload named
  by the group, created only once all ``kueue.x-k8s.io/pod-group-total-count`` pods exist.

Pure: reads an ``EngineSnapshot``'s raw objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.kinds import pod as pods
from scheduler.adapter.kinds.podgroups import group_workload_name
from scheduler.adapter.kinds.registry import by_owner_reference, kind_of
from scheduler.adapter.objects import Obj, holds_reservation
from scheduler.adapter.views import EngineSnapshot
from scheduler.core.kueue_names import LABEL_POD_GROUP_NAME

POD_TEMPLATE_HASH = "pod-template-hash"  # the Deployment controller's label, in its ReplicaSet's name


@dataclass(frozen=True)
class Member:
    """One Workload of a target (or the one it would have), with its pods."""

    name: str  # the Workload's name, or the one the controller gives it
    workload: Obj | None  # None: not created yet
    pods: tuple[Obj, ...]
    size: int  # pods the Workload (or group) takes

    @property
    def admitted(self) -> bool:
        return self.workload is not None and holds_reservation(self.workload)

    @property
    def running(self) -> int:
        return sum(1 for p in self.pods if (p.get("status") or {}).get("phase") == "Running"
                   and not (p.get("metadata") or {}).get("deletionTimestamp"))


@dataclass(frozen=True)
class Target:
    """``kind``: the object's kind ("pod group" for a plain group); ``members``: None for a kind
    with one Workload of its own (``workload``), else one per pod or per group."""

    kind: str
    job: Obj | None
    workload: Obj | None
    members: tuple[Member, ...] | None = None
    unit: str = ""  # what a member is: "replica", "group"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def _in(objs: Sequence[Obj], namespace: str) -> list[Obj]:
    return [o for o in objs if _meta(o).get("namespace") == namespace]


def _owned_by(workloads: Sequence[Obj], uid: str) -> list[Obj]:
    return sorted((w for w in workloads if any(r.get("uid") == uid for r in _meta(w).get("ownerReferences") or ())),
                  key=lambda w: str(_meta(w).get("name")))


def _size(workload: Obj | None, default: int) -> int:
    if workload is None:
        return default
    return sum(int(ps.get("count") or 0) for ps in (workload.get("spec") or {}).get("podSets") or ()) or default


def _live(objs: Sequence[Obj]) -> tuple[Obj, ...]:
    return tuple(p for p in objs if pods.runnable_or_succeeded(p) and not pods.terminated(p))


def _replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 1


def _deployment(snap: EngineSnapshot, obj: Obj, namespace: str) -> Target:
    name = str(_meta(obj).get("name"))
    workloads = _in(snap.objects.workloads, namespace)
    members = []
    for p in _live(_in(snap.objects.pods, namespace)):
        owner = f"{name}-{_labels(p).get(POD_TEMPLATE_HASH, '')}"
        if not any(r.get("kind") == "ReplicaSet" and r.get("controller") and r.get("name") == owner
                   for r in _meta(p).get("ownerReferences") or ()):
            continue
        mine = _owned_by(workloads, str(_meta(p).get("uid")))
        members.append(Member(mine[0]["metadata"]["name"] if mine else pods.workload_name(p),
                              mine[0] if mine else None, (p,), 1))
    return Target("Deployment", obj, None, tuple(sorted(members, key=lambda m: m.name)), "replica")


def _groups(snap: EngineSnapshot, obj: Obj, namespace: str) -> Target:
    kind = kind_of(obj)
    assert kind is not None and kind.pod_groups is not None
    owned = {str(_meta(w).get("name")): w for w in _owned_by(_in(snap.objects.workloads, namespace),
                                                              str(_meta(obj).get("uid")))}
    names = [group_workload_name(kind, obj, i) for i in range(kind.pod_groups.group_count(obj))]
    names += sorted(set(owned) - set(names))  # groups being removed still count until they are gone
    members_pods = _live(_in(snap.objects.pods, namespace))
    members = tuple(Member(n, owned.get(n), tuple(p for p in members_pods if _labels(p).get(LABEL_POD_GROUP_NAME) == n),
                           _size(owned.get(n), 0)) for n in names)
    return Target(kind.kind, obj, None, members, "group")


def _pod_group(snap: EngineSnapshot, namespace: str, group: str) -> Target | None:
    members = tuple(p for p in _in(snap.objects.pods, namespace) if pods.group_name(p) == group)
    if not members:
        return None
    workload = next((w for w in _in(snap.objects.workloads, namespace) if _meta(w).get("name") == group), None)
    try:
        total = max(pods.group_total_count(p) for p in members)
    except pods.PodGroupError:
        total = len(members)
    return Target("pod group", None, None, (Member(group, workload, members, _size(workload, total)),), "group")


def resolve(snap: EngineSnapshot, namespace: str, name: str) -> Target | None:
    """The target named ``name``: a governed object (a non-pod kind first: a pod shares no name
    with its owner, but a Deployment and a bare pod may), a Workload, or a plain pod group."""
    named = [j for j in _in(snap.jobs_raw, namespace) if _meta(j).get("name") == name]
    # a governed parent before its governed child of the same name (a TrainJob's JobSet, a
    # LeaderWorkerSet's leader StatefulSet), and a pod last
    named.sort(key=lambda j: (j.get("kind") == "Pod", any(by_owner_reference(r) is not None
                                                          for r in _meta(j).get("ownerReferences") or ())))
    obj = named[0] if named else None
    kind = kind_of(obj) if obj is not None else None
    if obj is not None and kind is not None:
        if kind.kind == "Deployment":
            return _deployment(snap, obj, namespace)
        if kind.pod_groups is not None:
            return _groups(snap, obj, namespace)
        if kind.kind == "Pod" and pods.group_name(obj):
            return _pod_group(snap, namespace, pods.group_name(obj))
    if obj is not None:
        uid = _meta(obj).get("uid")
        owned = _owned_by(_in(snap.objects.workloads, namespace), str(uid)) if uid else []
        return Target(kind.kind if kind is not None else "", obj, owned[0] if owned else None)
    _, workload = snap.find_job(namespace, name)  # a Workload by its own name
    if workload is not None:
        return Target("", None, workload)
    return _pod_group(snap, namespace, name)


@dataclass(frozen=True)
class Summary:
    """The state of a target with members: the reasons that say it (first the counts), whether
    all of it is admitted, the member whose Workload to explain (the first one not admitted)."""

    reasons: tuple[dict[str, str], ...]
    admitted: bool
    pending: Member | None
    rows: tuple[dict[str, Any], ...]


def _row(m: Member) -> dict[str, Any]:
    return {"workload": m.name, "exists": m.workload is not None, "admitted": m.admitted,
            "pods": len(m.pods), "size": m.size, "running": m.running,
            "podNames": sorted(str(_meta(p).get("name")) for p in m.pods)}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def summarize(target: Target) -> Summary:
    members = target.members or ()
    rows = tuple(_row(m) for m in members)
    admitted = sum(1 for m in members if m.admitted)
    running = sum(m.running for m in members)
    reasons: list[dict[str, str]] = []
    if target.kind == "Deployment":
        assert target.job is not None
        want = _replicas(target.job)
        counts = f"{admitted} of {_plural(want, 'replica')} admitted, {running} running"
        if len(members) != want:
            counts += f" ({_plural(len(members), 'pod')} exist)"
        reasons.append({"reason": "Replicas", "message": counts + "; each replica's pod is a Workload of its own"})
        done = admitted >= want and admitted == len(members)
        if not members and want:
            reasons.append({"reason": "NoPods", "message": "no pods yet: the Deployment's ReplicaSet creates them "
                                                           "(kubectl describe deployment shows why not)"})
    elif target.kind == "pod group":
        (m,) = members
        reasons.append({"reason": "PodGroup", "message": f"pod group {m.name}: {len(m.pods)} of "
                        f"{_plural(m.size, 'pod')} exist, {running} running"})
        if m.workload is None:
            reasons.append({"reason": "PodGroupIncomplete", "message": (
                f"the group's Workload is created once all {m.size} pods exist (annotation "
                f"kueue.x-k8s.io/pod-group-total-count); create the {_plural(m.size - len(m.pods), 'missing pod')}")})
        done = m.admitted
    else:
        size = sum(m.size for m in members)
        reasons.append({"reason": "Groups", "message": f"{admitted} of {_plural(len(members), 'group')} admitted, "
                        f"{running} of {_plural(size, 'pod')} running; each group is a Workload"})
        done = bool(members) and admitted == len(members)
    pending = next((m for m in members if not m.admitted), None)
    if pending is not None and pending.workload is None and target.kind != "pod group":
        pods_named = ", ".join(_row(pending)["podNames"]) or "-"
        reasons.append({"reason": "NoWorkload", "message": (
            f"no Workload {pending.name} yet (pods: {pods_named}): the controller creates it "
            "(is the controller running? kubectl get events shows CreatedWorkload or why not)")})
    return Summary(tuple(reasons), done, pending, rows)
