"""A worker's own backlog, as its gRPC ``Place`` reports it to the MultiKueue dispatcher
(issue 43; docs/multicluster.md): what the worker's queued Workloads ask for.

Queued: no quota reservation, active (``spec.active`` not false), not finished. A MultiKueue
manager's copy (label ``kueue.x-k8s.io/multikueue-origin``) is left out: the manager's
dispatcher counts its own nominations as in flight, and counting its copies here too would
count them twice. With a flavor, only Workloads whose LocalQueue's ClusterQueue lists that
flavor count (the demand that competes for that flavor's tree). A Workload that cannot be
decoded (Kueue's schema, ``adapter/workload_checks.py``) asks for nothing here (the controller
tells its owner; docs/security.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.objects import FINISHED, condition_true, has_reservation
from scheduler.adapter.workload_checks import UNREADABLE, schema_problems
from scheduler.core.resources import GPU
from scheduler.core.workload import WorkloadSpec, workload_from_kueue

Obj = Mapping[str, Any]
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"


@dataclass(frozen=True)
class Backlog:
    gpus: int = 0
    pods: int = 0


def spec_demand(spec: WorkloadSpec) -> Backlog:
    """What one Workload asks for: GPUs and pods."""
    return Backlog(sum(ps.count * int(ps.requests.get(GPU, 0)) for ps in spec.pod_sets),
                   sum(ps.count for ps in spec.pod_sets))


def _queue_flavors(local_queues: Sequence[Obj], cluster_queues: Sequence[Obj]) -> dict[tuple[str, str], set[str]]:
    """(namespace, LocalQueue name) -> the flavors its ClusterQueue lists."""
    flavors: dict[str, set[str]] = {}
    for cq in cluster_queues:
        names: set[str] = set()
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            for fl in (group.get("flavors") or []) if isinstance(group, Mapping) else []:
                if isinstance(fl, Mapping) and isinstance(fl.get("name"), str):
                    names.add(fl["name"])
        flavors[str((cq.get("metadata") or {}).get("name", ""))] = names
    out: dict[tuple[str, str], set[str]] = {}
    for lq in local_queues:
        meta = lq.get("metadata") or {}
        out[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = flavors.get(
            str((lq.get("spec") or {}).get("clusterQueue", "")), set())
    return out


def queued(wl: Obj) -> bool:
    """A Workload of the worker's own that waits in its queue."""
    labels = (wl.get("metadata") or {}).get("labels") or {}
    return (ORIGIN_LABEL not in labels and (wl.get("spec") or {}).get("active") is not False
            and not has_reservation(wl) and not condition_true(wl, FINISHED))


def backlog(workloads: Sequence[Obj], local_queues: Sequence[Obj], cluster_queues: Sequence[Obj],
            flavor: str = "") -> Backlog:
    """The demand of the queued Workloads (of ``flavor``'s ClusterQueues when given)."""
    queues = _queue_flavors(local_queues, cluster_queues) if flavor else {}
    gpus = pods = 0
    for wl in workloads:
        if not queued(wl) or schema_problems(wl):
            continue
        try:
            spec = workload_from_kueue(dict(wl))
        except UNREADABLE:
            continue
        if flavor and flavor not in queues.get((spec.namespace, spec.queue_name), set()):
            continue
        asks = spec_demand(spec)
        gpus, pods = gpus + asks.gpus, pods + asks.pods
    return Backlog(gpus, pods)
