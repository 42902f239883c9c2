"""LocalQueue objects + reservations -> Admission Fair Sharing state (``core.afs``) as plain data.

Reads each LocalQueue's ``spec.fairSharing.weight`` and ``status.fairSharing
.admissionFairSharingStatus`` (``consumedResources``, ``lastUpdate``); the entry penalty of
workloads whose quota was reserved after ``lastUpdate`` (not yet folded in by the controller)
is added as ``penalty``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from scheduler.core.config import KueueConfig
from scheduler.core.kueue import afs
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.afs import LocalQueueUsage
from scheduler.core.resources import quantity_float

Obj = Mapping[str, Any]


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def afs_status(obj: Obj) -> Mapping[str, Any] | None:
    """``status.fairSharing.admissionFairSharingStatus`` of a LocalQueue (None when absent)."""
    found = ((obj.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")
    return found if isinstance(found, Mapping) else None


def _weight(obj: Obj) -> float:
    weight = ((obj.get("spec") or {}).get("fairSharing") or {}).get("weight")
    return 1.0 if weight is None else quantity_float(weight)


def _epoch(text: object) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


def state_of(obj: Obj) -> LocalQueueUsage | None:
    """The LocalQueue's status as core data (no penalty), None without a status."""
    status = afs_status(obj)
    if status is None:
        return None
    consumed = {str(k): quantity_float(v) for k, v in (status.get("consumedResources") or {}).items()}
    return LocalQueueUsage(consumed=consumed, weight=_weight(obj), last_update=_epoch(status.get("lastUpdate")))


def by_local_queue(admitted: Iterable[AdmittedWorkload]) -> dict[str, list[AdmittedWorkload]]:
    out: dict[str, list[AdmittedWorkload]] = {}
    for w in admitted:
        out.setdefault(f"{w.spec.namespace}/{w.spec.queue_name}", []).append(w)
    return out


def admitted_usage(workloads: Sequence[AdmittedWorkload]) -> dict[str, float]:
    total: dict[str, float] = {}
    for w in workloads:
        total = afs.add_resources(total, afs.total_requests(w.usage))
    return total


def newly_admitted(workloads: Sequence[AdmittedWorkload], since: float | None) -> dict[str, float]:
    """The summed requests of the reservations made after ``since`` (none when unknown)."""
    if since is None:
        return {}
    return admitted_usage([w for w in workloads if w.reserved_at > since])


def lq_usages(local_queues: Iterable[Obj], admitted: Sequence[AdmittedWorkload],
              config: KueueConfig) -> dict[str, LocalQueueUsage]:
    """``Snapshot.lq_usage``: empty when Admission Fair Sharing is off."""
    if not afs.enabled(config):
        return {}
    per_lq = by_local_queue(admitted)
    out: dict[str, LocalQueueUsage] = {}
    for obj in local_queues:
        key = _key(obj)
        state = state_of(obj)
        mine = per_lq.get(key, [])
        if state is None:  # not sampled yet: Kueue starts from the current admitted usage
            out[key] = LocalQueueUsage(consumed=admitted_usage(mine), weight=_weight(obj))
            continue
        penalty = afs.entry_penalty(newly_admitted(mine, state.last_update), config)
        out[key] = LocalQueueUsage(state.consumed, penalty, state.weight, state.last_update)
    return out
