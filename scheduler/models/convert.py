"""Kueue models -> the core's plain dataclasses (the core never imports pydantic models).

Quantities are parsed into canonical integers (``scheduler.core.resources``); v1beta1 and
v1beta2 spellings give the same core object.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from scheduler.core.nodes import Taint as CoreTaint
from scheduler.core.nodes import Toleration as CoreToleration
from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.preemption import AdmittedWorkload, TASUsage
from scheduler.core.queueing import LocalQueueSpec as CoreLocalQueue
from scheduler.core.queueing import PendingWorkload
from scheduler.core.quota import ClusterQueueSpec as CoreClusterQueue
from scheduler.core.quota import CohortSpec as CoreCohort
from scheduler.core.quota import FlavorFungibility as CoreFungibility
from scheduler.core.quota import FlavorQuotas as CoreFlavorQuotas
from scheduler.core.quota import FlavorSpec, PreemptionPolicy
from scheduler.core.quota import ResourceGroup as CoreResourceGroup
from scheduler.core.quota import ResourceQuota as CoreResourceQuota
from scheduler.core.resources import parse_quantity
from scheduler.core.selectors import selector_from_k8s
from scheduler.core.workload import workload_from_kueue
from scheduler.models.kueue import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    Topology,
    Workload,
    WorkloadPriorityClass,
    dump,
)


def _groups(groups: list[ResourceGroup]) -> tuple[CoreResourceGroup, ...]:
    out = []
    for g in groups:
        flavors = []
        for f in g.flavors:
            res = {}
            for r in f.resources:
                res[r.name] = CoreResourceQuota(
                    parse_quantity(r.nominal_quota, r.name),
                    None if r.borrowing_limit is None else parse_quantity(r.borrowing_limit, r.name),
                    None if r.lending_limit is None else parse_quantity(r.lending_limit, r.name),
                )
            flavors.append(CoreFlavorQuotas(f.name, res))
        out.append(CoreResourceGroup(tuple(g.covered_resources), tuple(flavors)))
    return tuple(out)


def cluster_queue_to_core(cq: ClusterQueue) -> CoreClusterQueue:
    spec = cq.spec
    pre = spec.preemption
    bwc = pre.borrow_within_cohort if pre else None
    policy = PreemptionPolicy(
        pre.within_cluster_queue if pre else "Never",
        pre.reclaim_within_cohort if pre else "Never",
        bwc.policy if bwc else "Never",
        bwc.max_priority_threshold if bwc else None,
    )
    ff = spec.flavor_fungibility
    fungibility = (
        CoreFungibility(ff.effective_when_can_borrow(), ff.effective_when_can_preempt()) if ff else CoreFungibility()
    )
    selector = selector_from_k8s(None if spec.namespace_selector is None else dump(spec.namespace_selector))
    return CoreClusterQueue(
        cq.metadata.name,
        _groups(spec.resource_groups),
        spec.effective_cohort(),
        spec.queueing_strategy,
        selector,
        policy,
        fungibility,
        spec.stop_policy,
        terminating=cq.metadata.deletion_timestamp is not None,
    )


def cohort_to_core(cohort: Cohort) -> CoreCohort:
    return CoreCohort(cohort.metadata.name, cohort.spec.parent_name or None, _groups(cohort.spec.resource_groups))


def local_queue_to_core(lq: LocalQueue) -> CoreLocalQueue:
    return CoreLocalQueue(
        lq.metadata.namespace or "default", lq.metadata.name, lq.spec.cluster_queue, lq.spec.stop_policy
    )


def flavor_to_core(rf: ResourceFlavor) -> FlavorSpec:
    spec = rf.spec
    return FlavorSpec(
        rf.metadata.name,
        dict(spec.node_labels),
        tuple(CoreTaint(t.key, t.value, t.effect) for t in spec.node_taints),
        tuple(CoreToleration(t.key, t.operator or "Equal", t.value, t.effect) for t in spec.tolerations),
        spec.topology_name or None,
    )


def topology_levels(topology: Topology) -> tuple[str, ...]:
    return topology.level_labels()


def priority_class_values(classes: list[WorkloadPriorityClass]) -> dict[str, int]:
    return {c.metadata.name: c.value for c in classes}


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _cond_time(wl: Workload, type_: str) -> float | None:
    cond = wl.status.condition(type_) if wl.status else None
    return _ts(cond.last_transition_time) if cond else None


def workload_to_pending(wl: Workload, namespace_labels: dict[str, str] | None = None) -> PendingWorkload:
    """Queue-order timestamp (Kueue ``requeuingStrategy.timestamp: Eviction``): the eviction time
    after a PodsReadyTimeout or AdmissionCheck eviction, else creation — Preempted and
    NodeFailures evictions keep their place by creation time (reference 2.1, 3.3);
    ``requeueState.requeueAt`` is the backoff end."""
    spec = workload_from_kueue(dump(wl))
    evicted = wl.status.condition("Evicted") if wl.status else None
    evicted_at = (_cond_time(wl, "Evicted")
                  if evicted is not None and evicted.reason in ("PodsReadyTimeout", "AdmissionCheck") else None)
    requeue_at = _ts(wl.status.requeue_state.requeue_at) if wl.status and wl.status.requeue_state else None
    return PendingWorkload(
        spec,
        queued_at=evicted_at,
        priority=wl.spec.priority,
        requeue_at=requeue_at,
        namespace_labels=dict(namespace_labels or {}),
    )


def workload_to_admitted(wl: Workload, tas_flavors: set[str] | frozenset[str] = frozenset()) -> AdmittedWorkload:
    """A Workload holding a reservation: quota usage per (flavor, resource) from
    ``status.admission`` and, for assignments on TAS flavors, the decoded topology usage."""
    if wl.status is None or wl.status.admission is None:
        raise ValueError(f"workload {wl.metadata.namespace}/{wl.metadata.name}: status.admission is missing")
    spec = workload_from_kueue(dump(wl))
    requests = {ps.name: ps.requests for ps in spec.pod_sets}
    usage: dict[tuple[str, str], int] = {}
    tas: list[TASUsage] = []
    for psa in wl.status.admission.pod_set_assignments:
        for res, q in psa.resource_usage.items():
            flavor = psa.flavors.get(res)
            if flavor:
                usage[(flavor, res)] = usage.get((flavor, res), 0) + parse_quantity(q, res)
        if psa.topology_assignment is not None:
            flavor_names = sorted(f for f in set(psa.flavors.values()) if f in tas_flavors) or sorted(
                set(psa.flavors.values())
            )
            levels, domains = psa.topology_assignment.decoded()
            placement = PodSetPlacement(psa.name, sum(d.count for d in domains), tuple(levels), tuple(domains))
            if flavor_names:
                tas.append(TASUsage(flavor_names[0], placement, requests.get(psa.name, {})))
    status = wl.status
    admission = wl.status.admission  # checked above; re-read so the type checker sees it is set
    return AdmittedWorkload(
        spec,
        admission.cluster_queue,
        usage,
        reserved_at=_cond_time(wl, "QuotaReserved") or 0.0,
        priority=wl.spec.priority,
        evicted=status.is_true("Evicted"),
        tas=tuple(tas),
    )


def any_to_dict(model: Any) -> dict[str, Any]:
    return dump(model)
