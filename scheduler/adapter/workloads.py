"""Kueue Workloads (plain dicts, v1beta1 or v1beta2) -> the core's pending and admitted workloads.

Read straight from the dicts (no pydantic round trip on this hot path: every cycle converts
every Workload). A reserved pod set's ``topologyAssignment`` is decoded here once, into
``AdmittedWorkload.tas``; the topology trees subtract that same decoded usage
(:func:`scheduler.adapter.cluster.subtract_admitted`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.adapter.objects import (
    EVICTED,
    QUOTA_RESERVED,
    REQUEUED,
    Obj,
    VersionMemo,
    condition_true,
    find_condition,
)
from scheduler.core.assignment import AssignmentFormatError, decode_topology_assignment
from scheduler.core.kueue.admitted import AdmittedWorkload, TASUsage
from scheduler.core.kueue.podsready import PODS_READY
from scheduler.core.kueue.queueing import PendingWorkload
from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.resources import parse_quantity
from scheduler.core.workload import DEFAULT_POD_SET, WorkloadSpec, workload_from_kueue

# Evictions after which the workload queues again by its eviction time (Kueue
# ``requeuingStrategy.timestamp: Eviction``); Preempted / NodeFailures keep their creation time.
REQUEUE_BY_EVICTION_TIME = ("PodsReadyTimeout", "AdmissionCheck")


@dataclass(frozen=True)
class ReservedPodSet:
    """One pod set of ``status.admission.podSetAssignments`` with its topology assignment decoded."""

    placement: PodSetPlacement
    per_pod: Mapping[str, int]
    flavors: tuple[str, ...]  # distinct flavor names of the assignment, sorted


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _condition_time(workload: Obj, type_: str) -> float | None:
    cond = find_condition(workload, type_)
    return _timestamp(cond.get("lastTransitionTime")) if cond else None


def _priority(workload: Obj) -> int | None:
    value = (workload.get("spec") or {}).get("priority")
    return None if value is None else int(value)


def _admission(workload: Obj) -> Mapping[str, Any]:
    return (workload.get("status") or {}).get("admission") or {}


def pending_workload(workload: Obj, namespace_labels: Mapping[str, str] | None = None,
                     by_eviction_time: bool = True) -> PendingWorkload:
    """A Workload waiting for quota. Queue-order timestamp: the eviction time after a
    PodsReadyTimeout or AdmissionCheck eviction, else creation (reference 2.1, 3.3; with
    ``waitForPodsReady.requeuingStrategy.timestamp: Creation`` (``by_eviction_time`` False)
    always creation); ``status.requeueState.requeueAt`` is the backoff end; ``Requeued=False``
    holds it out of the queue (Kueue's ``backoffWaitingTimeExpired``)."""
    evicted = find_condition(workload, EVICTED)
    evicted_at = (_condition_time(workload, EVICTED)
                  if by_eviction_time and evicted is not None and evicted.get("reason") in REQUEUE_BY_EVICTION_TIME
                  else None)
    requeue_state = (workload.get("status") or {}).get("requeueState") or {}
    requeued = find_condition(workload, REQUEUED)
    return PendingWorkload(
        workload_from_kueue(workload),
        queued_at=evicted_at,
        priority=_priority(workload),
        requeue_at=_timestamp(requeue_state.get("requeueAt")),
        namespace_labels=dict(namespace_labels or {}),
        held=requeued is not None and requeued.get("status") == "False",
    )


@dataclass(frozen=True)
class AssignedPodSet:
    """One pod set of ``status.admission.podSetAssignments`` with a ``topologyAssignment``,
    decoded, or the error that made it unreadable."""

    name: str
    flavors: tuple[str, ...]  # distinct flavor names of the assignment, sorted
    placement: PodSetPlacement | None
    error: AssignmentFormatError | None = None


def topology_assignments(workload: Obj) -> list[AssignedPodSet]:
    """The one reader of a Workload's topology assignments (v1beta2 ``slices`` or v1beta1
    ``domains``): the controller's snapshot and the extender both read them here."""
    out = []
    for psa in _admission(workload).get("podSetAssignments") or ():
        assignment = psa.get("topologyAssignment")
        if not assignment:
            continue
        name = str(psa.get("name") or DEFAULT_POD_SET)
        flavors = tuple(sorted({str(f) for f in (psa.get("flavors") or {}).values()}))
        try:
            levels, domains = decode_topology_assignment(assignment)
        except AssignmentFormatError as exc:
            out.append(AssignedPodSet(name, flavors, None, exc))
            continue
        placement = PodSetPlacement(name, sum(d.count for d in domains), tuple(levels), tuple(domains))
        out.append(AssignedPodSet(name, flavors, placement))
    return out


def reserved_pod_sets(workload: Obj, spec: WorkloadSpec | None = None) -> list[ReservedPodSet]:
    """Every pod set of the admission that carries a topology assignment, decoded (an
    unreadable one raises its ``AssignmentFormatError``)."""
    if spec is None:
        spec = workload_from_kueue(workload)
    requests = {ps.name: ps.requests for ps in spec.pod_sets}
    out = []
    for ps in topology_assignments(workload):
        if ps.placement is None:
            assert ps.error is not None
            raise ps.error
        out.append(ReservedPodSet(ps.placement, requests.get(ps.name, {}), ps.flavors))
    return out


def _quota_usage(admission: Mapping[str, Any], counts: Mapping[str, int]) -> dict[tuple[str, str], int]:
    """``status.admission``'s usage; a pod set whose ``spec`` count (``counts``) fell below its
    admitted count (an elastic job scaled down in place) charges the pods it still has, as
    Kueue's ``totalRequestsFromAdmission`` (divided by the admitted count, then multiplied)."""
    usage: dict[tuple[str, str], int] = {}
    for psa in admission.get("podSetAssignments") or ():
        flavors = psa.get("flavors") or {}
        name = str(psa.get("name") or DEFAULT_POD_SET)
        admitted = psa.get("count") if isinstance(psa.get("count"), int) else counts.get(name)
        now = counts.get(name)
        for resource, quantity in (psa.get("resourceUsage") or {}).items():
            flavor = flavors.get(resource)
            if flavor:
                value = parse_quantity(quantity, resource)
                if isinstance(admitted, int) and now is not None and 0 <= now < admitted:
                    value = value // admitted * now
                usage[(flavor, resource)] = usage.get((flavor, resource), 0) + value
    return usage


def _tas_usage(reserved: Iterable[ReservedPodSet], tas_flavors: frozenset[str] | set[str]) -> tuple[TASUsage, ...]:
    """The flavor a pod set's topology usage counts in: its first TAS flavor, else its first."""
    out = []
    for ps in reserved:
        candidates = [f for f in ps.flavors if f in tas_flavors] or list(ps.flavors)
        if candidates:
            out.append(TASUsage(candidates[0], ps.placement, ps.per_pod))
    return tuple(out)


def admitted_workloads(holding: Iterable[Obj], tas_flavors: frozenset[str],
                       memo: VersionMemo[AdmittedWorkload] | None = None) -> list[AdmittedWorkload]:
    """:func:`admitted_workload` of each; with ``memo`` (a snapshot builder's), reused while the
    Workload and the TAS flavors are unchanged."""
    return (memo if memo is not None else VersionMemo()).convert(
        holding, lambda wl: admitted_workload(wl, tas_flavors), lambda _wl: tas_flavors)


def admitted_workload(workload: Obj, tas_flavors: frozenset[str] | set[str] = frozenset()) -> AdmittedWorkload:
    """A Workload holding a reservation: quota usage per (flavor, resource) from
    ``status.admission`` and, for pod sets with a topology assignment, the decoded usage."""
    admission = _admission(workload)
    if not admission:
        meta = workload.get("metadata") or {}
        raise ValueError(f"workload {meta.get('namespace')}/{meta.get('name')}: status.admission is missing")
    spec = workload_from_kueue(workload)
    return AdmittedWorkload(
        spec,
        str(admission.get("clusterQueue") or ""),
        _quota_usage(admission, {ps.name: ps.count for ps in spec.pod_sets}),
        reserved_at=_condition_time(workload, QUOTA_RESERVED) or 0.0,
        priority=_priority(workload),
        evicted=condition_true(workload, EVICTED),
        tas=_tas_usage(reserved_pod_sets(workload, spec), tas_flavors),
        pods_ready=condition_true(workload, PODS_READY),
    )
