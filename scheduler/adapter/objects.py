"""The raw objects of one moment, and the few dict questions every converter asks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Obj = Mapping[str, Any]
T = TypeVar("T")

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
FINISHED = "Finished"
EVICTED = "Evicted"
REQUEUED = "Requeued"


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
    # Kueue's alpha preemption objects (kueue.x-k8s.io/v1alpha1; empty where the CRDs are absent)
    preemption_configs: Sequence[Obj] = ()
    preemption_limits: Sequence[Obj] = ()
    # Objects that may stand between a pod and the job owning its Workload (the queued jobs of
    # every kind, a JobSet's Jobs, a LeaderWorkerSet's StatefulSets): adapter.pod_ownership
    # follows a pod's owner references through them, by uid.
    owner_links: Sequence[Obj] = ()


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


def has_reservation(workload: Obj) -> bool:
    """The one reader of a Workload's quota reservation: QuotaReserved with an admission (a
    Finished workload may still carry it: Kueue keeps the record)."""
    return condition_true(workload, QUOTA_RESERVED) and bool((workload.get("status") or {}).get("admission"))


def holds_reservation(workload: Obj) -> bool:
    """A reservation that counts: not finished, so its quota and topology usage are charged."""
    return has_reservation(workload) and not condition_true(workload, FINISHED)


class VersionMemo(Generic[T]):
    """Conversions of API objects reused while the object is unchanged: an object with a
    ``resourceVersion`` never changes, so its conversion, keyed by namespace/name and stamped
    with (resourceVersion, uid, ``extra``), is reused; the uid keeps two objects of one name
    apart (a deleted and re-created one, or two clusters in one process). Objects without a
    resourceVersion (files, tests) are converted each time. Entries of objects no longer seen
    are dropped now and then. The values are frozen and shared: nobody may mutate them."""

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[tuple[Any, ...], T]] = {}

    def convert(self, objs: Iterable[Obj], convert: Callable[[Obj], T],
                extra: Callable[[Obj], Any] = lambda _obj: None) -> list[T]:
        out: list[T] = []
        seen: set[str] = set()
        for obj in objs:
            meta = obj.get("metadata") or {}
            version = meta.get("resourceVersion")
            if not version:
                out.append(convert(obj))
                continue
            key = f"{meta.get('namespace') or ''}/{meta.get('name')}"
            stamp = (str(version), meta.get("uid"), extra(obj))
            hit = self._by_key.get(key)
            if hit is None or hit[0] != stamp:
                hit = (stamp, convert(obj))
                self._by_key[key] = hit
            seen.add(key)
            out.append(hit[1])
        if len(self._by_key) > 2 * len(out) + 1024:  # gone, or no longer in this set
            self._by_key = {k: v for k, v in self._by_key.items() if k in seen}
        return out
