"""Kueue queue models -> the core's plain dataclasses (the core never imports pydantic models).

Workloads are converted straight from dicts by ``scheduler.adapter.workloads``; these are
the queue objects, which ``scheduler.adapter.queues`` validates through the models first.
Quantities are parsed into canonical integers (``scheduler.core.resources``); v1beta1 and
v1beta2 spellings give the same core object.
"""

from __future__ import annotations

from scheduler.core.kueue.queueing import LocalQueueSpec as CoreLocalQueue
from scheduler.core.kueue.quota import ClusterQueueSpec as CoreClusterQueue
from scheduler.core.kueue.quota import CohortSpec as CoreCohort
from scheduler.core.kueue.quota import FlavorFungibility as CoreFungibility
from scheduler.core.kueue.quota import FlavorQuotas as CoreFlavorQuotas
from scheduler.core.kueue.quota import FlavorSpec, PreemptionPolicy
from scheduler.core.kueue.quota import ResourceGroup as CoreResourceGroup
from scheduler.core.kueue.quota import ResourceQuota as CoreResourceQuota
from scheduler.core.nodes import Taint as CoreTaint
from scheduler.core.nodes import Toleration as CoreToleration
from scheduler.core.resources import parse_quantity, quantity_float
from scheduler.core.selectors import selector_from_k8s
from scheduler.models.kueue import (
    ClusterQueue,
    Cohort,
    FairSharing,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
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
        CoreFungibility(ff.effective_when_can_borrow(), ff.effective_when_can_preempt(), ff.preference)
        if ff else CoreFungibility()
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
        fair_weight=fair_weight(spec.fair_sharing),
        admission_mode=spec.admission_scope.admission_mode if spec.admission_scope else "",
    )


def fair_weight(fs: FairSharing | None) -> float:
    """``fairSharing.weight`` (Kueue ``parseFairWeight``): 1 when absent."""
    if fs is None or fs.weight is None:
        return 1.0
    return quantity_float(fs.weight)


def cohort_to_core(cohort: Cohort) -> CoreCohort:
    spec = cohort.spec
    return CoreCohort(cohort.metadata.name, spec.parent_name or None, _groups(spec.resource_groups),
                      fair_weight(spec.fair_sharing))


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
