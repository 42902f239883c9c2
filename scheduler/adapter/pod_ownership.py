"""Which running pods are an admitted workload's, and so accounted by its topology assignment
rather than counted as usage of their nodes (issue 39 item 10).

A pod is a workload's only when ownership says so: the pod is itself an owner of a Workload
holding a topology reservation (Kueue's pod groups list their pods as owners), or its chain of
controller owner references, followed by uid through objects the caller holds (pods, the queued
jobs, the jobs and StatefulSets between them and their pods), reaches an owner of such a
Workload in the same namespace. Annotations and labels (Kueue's
``kueue.x-k8s.io/podset-*-topology``, ``kueue.x-k8s.io/workload``, the prebuilt-workload label)
are never evidence: a tenant writes them on any pod. Every other bound, unfinished pod's
requests are usage of its node, whatever it carries, so no pod run outside the queue can hide
the capacity it takes from another team's placement.

Pure functions on plain dicts; the snapshot (``adapter/snapshot.py``), the engine's views
(``adapter/views.py``) and the node-failure phase build their trees from :func:`usage_pods`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.adapter.cluster import core_pods
from scheduler.adapter.objects import Obj, VersionMemo
from scheduler.core.nodes import PodInfo

MAX_HOPS = 8  # a LeaderWorkerSet worker: pod -> StatefulSet -> leader pod -> StatefulSet -> LWS


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _uid(obj: Obj) -> str:
    return str(_meta(obj).get("uid") or "")


def _namespace(obj: Obj) -> str:
    return str(_meta(obj).get("namespace") or "default")


def _owner_uids(obj: Obj, controller_only: bool) -> list[str]:
    refs = _meta(obj).get("ownerReferences")
    out = []
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("uid") and (not controller_only or ref.get("controller") is True):
            out.append(str(ref["uid"]))
    return out


def _topology_reserved(workload: Obj) -> bool:
    """The Workload's reservation carries a topology assignment, so its usage is subtracted from
    the trees (a reservation without one is not: its pods must count as they run)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    return any(isinstance(ps, Mapping) and ps.get("topologyAssignment")
               for ps in admission.get("podSetAssignments") or ())


def workload_owners(holding: Iterable[Obj]) -> set[tuple[str, str]]:
    """(namespace, uid) of every owner of a Workload holding a topology reservation."""
    return {(_namespace(wl), uid) for wl in holding if _topology_reserved(wl) for uid in _owner_uids(wl, False)}


def workload_pod_uids(pods: Iterable[Obj], holding: Iterable[Obj], links: Iterable[Obj] = ()) -> frozenset[str]:
    """The uids of the pods that are a holding Workload's by ownership (module docstring).
    ``links``: the objects that may stand between a pod and the job owning its Workload; a
    chain through an object the caller does not hold stops there (the pod counts as usage)."""
    owners = workload_owners(holding)
    if not owners:
        return frozenset()
    pods = list(pods)
    known: dict[str, Obj] = {_uid(o): o for o in links if _uid(o)}
    known.update((_uid(p), p) for p in pods if _uid(p))
    out = set()
    for pod in pods:
        uid, namespace = _uid(pod), _namespace(pod)
        if uid and _owned_by_workload(uid, namespace, known, owners):
            out.add(uid)
    return frozenset(out)


def _owned_by_workload(uid: str, namespace: str, known: Mapping[str, Obj], owners: set[tuple[str, str]]) -> bool:
    current = uid
    for _ in range(MAX_HOPS):
        if (namespace, current) in owners:
            return True
        obj = known.get(current)
        if obj is None or _namespace(obj) != namespace:
            return False  # an owner we do not hold, or one of another namespace: no evidence
        parents = _owner_uids(obj, True)
        if not parents:
            return False
        current = parents[0]
    return False


def usage_pods(pods: Iterable[Obj], holding: Iterable[Obj], links: Iterable[Obj] = (),
               memo: VersionMemo[PodInfo] | None = None) -> list[PodInfo]:
    """The pods whose requests are usage of their nodes: bound, not finished, and not a holding
    Workload's by ownership (those are counted from the Workload's assignment)."""
    pods = list(pods)
    theirs = workload_pod_uids(pods, holding, links)
    return [pod for pod in core_pods(pods, memo) if pod.uid not in theirs]
