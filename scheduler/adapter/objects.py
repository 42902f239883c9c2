"""The raw objects of one moment, and the few dict questions every converter asks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]

QUOTA_RESERVED = "QuotaReserved"
FINISHED = "Finished"
EVICTED = "Evicted"


@dataclass(frozen=True)
class ClusterObjects:
    """Kubernetes and Kueue objects as the API returns them (plain dicts). Whoever holds objects
    fills it: the controller from its informer cache, explain and the CLI from list calls or
    files, the gRPC engine from its snapshot."""

    nodes: Sequence[Obj] = ()
    pods: Sequence[Obj] = ()
    workloads: Sequence[Obj] = ()
    cluster_queues: Sequence[Obj] = ()
    cohorts: Sequence[Obj] = ()
    local_queues: Sequence[Obj] = ()
    flavors: Sequence[Obj] = ()
    topologies: Sequence[Obj] = ()
    namespaces: Sequence[Obj] = ()
    workload_priority_classes: Sequence[Obj] = ()
    priority_classes: Sequence[Obj] = ()


def name_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def by_name(objs: Sequence[Obj]) -> dict[str, Obj]:
    return {name_of(o): o for o in objs}


def find_condition(obj: Obj, type_: str) -> Mapping[str, Any] | None:
    """The first status condition of that type (Kubernetes keeps one per type)."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return cond  # type: ignore[no-any-return]
    return None


def condition_true(obj: Obj, type_: str) -> bool:
    cond = find_condition(obj, type_)
    return cond is not None and cond.get("status") == "True"


def holds_reservation(workload: Obj) -> bool:
    """QuotaReserved with an admission, not finished: the workload's quota and topology usage count."""
    return (condition_true(workload, QUOTA_RESERVED) and bool((workload.get("status") or {}).get("admission"))
            and not condition_true(workload, FINISHED))
