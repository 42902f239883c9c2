"""Raw objects -> one immutable core ``Snapshot`` for an admission cycle.

The immutable-snapshot / pure-cycle / writer split of Kueue: :func:`build_snapshot` turns
:class:`~scheduler.adapter.objects.ClusterObjects` into plain core data (one TopologyTree per
TAS flavor with the admitted workloads' usage already subtracted), ``core.cycle.run_cycle``
decides, and the shell writes the decisions. Every object is converted once here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.adapter.afs import lq_usages
from scheduler.adapter.cluster import core_nodes, core_pods, empty_flavor_trees, subtract_admitted
from scheduler.adapter.objects import (
    FINISHED,
    QUOTA_RESERVED,
    ClusterObjects,
    Obj,
    VersionMemo,
    by_name,
    condition_true,
    name_of,
)
from scheduler.adapter.pending_queues import QueueMemo
from scheduler.adapter.preemption_rules import configured_preemption
from scheduler.adapter.queues import (
    cluster_queue_specs,
    cohort_specs,
    compact_defaults,
    flavor_spec,
    local_queue_key,
    local_queue_spec,
    namespace_labels,
    priority_values,
)
from scheduler.adapter.workloads import admitted_workloads, pending_workload
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.cycle import Snapshot
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy
from scheduler.core.healthy_capacity import (
    ANN_FOLLOW_HEALTHY,
    EffectiveQuota,
    flavor_capacities,
    follow_healthy_capacity,
)
from scheduler.core.nodes import NodeInfo
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.preemption_rules import ConfiguredPreemption
from scheduler.core.queueing import PendingWorkload
from scheduler.core.quota import ClusterQueueSpec, FlavorSpec


@dataclass(frozen=True)
class WorkloadsByState:
    holding: tuple[Obj, ...]  # QuotaReserved with an admission: their usage counts
    pending: tuple[Obj, ...]  # waiting for quota (active, not finished, not being deleted)


def split_workloads(workloads: tuple[Obj, ...] | list[Obj]) -> WorkloadsByState:
    """Finished and deleting Workloads count nowhere; inactive ones (``spec.active: false``) only
    when they still hold a reservation."""
    holding, pending = [], []
    for wl in workloads:
        if condition_true(wl, FINISHED) or (wl.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if condition_true(wl, QUOTA_RESERVED) and (wl.get("status") or {}).get("admission"):
            holding.append(wl)
        elif (wl.get("spec") or {}).get("active") is not False:
            pending.append(wl)
    return WorkloadsByState(tuple(holding), tuple(pending))


# The controller rebuilds its snapshot every pass; with tens of thousands of pending Workloads
# their conversion was most of it (issue 18, scripts/bench/scale_series.py), yet a pending
# Workload rarely changes between passes. Its namespace's labels are part of the stamp.
_PENDING_MEMO: VersionMemo[PendingWorkload] = VersionMemo()
# ... and so do their queues: ordering them sorted every pending Workload each pass.
_QUEUE_MEMO = QueueMemo()


def _namespace(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def build_snapshot(objects: ClusterObjects, now: dt.datetime, *, solver: str = "auto", time_budget_s: float = 0.1,
                   inadmissible: frozenset[str] = frozenset(), health_policy: HealthPolicy | None = None,
                   config: KueueConfig = KUEUE_DEFAULTS,
                   placement_options: PlacementOptions | None = None, domain_preemption: bool = True,
                   preemption_rules: ConfiguredPreemption | None = None) -> Snapshot:
    """The objects as one immutable core ``Snapshot`` taken at ``now``, under the admin's Kueue
    Configuration (``config``). ``placement_options``: toposched's placement policies beyond
    Kueue (default: none, Kueue's placement). ``preemption_rules``: the PreemptionConfigs and
    PreemptionLimits with the evictions they count (the controller's; default: read from
    ``objects``, no evictions counted)."""
    by_eviction = config.wait_for_pods_ready.requeuing_strategy.timestamp != "Creation"
    workloads = split_workloads(list(objects.workloads))
    topologies = by_name(objects.topologies)
    nodes = core_nodes(objects.nodes)
    trees = empty_flavor_trees(objects.flavors, topologies, nodes, core_pods(objects.pods), health_policy)
    # The TAS flavors are known before any workload is read, so each reservation is decoded once.
    admitted = tuple(admitted_workloads(workloads.holding, frozenset(trees)))
    subtract_admitted(trees, admitted)
    ns_labels = namespace_labels(objects.namespaces)
    # A pending Workload's conversion depends on its namespace's labels: one stamp per namespace.
    ns_stamps = {ns: tuple(sorted(labels.items())) for ns, labels in ns_labels.items()}
    pending = tuple(_PENDING_MEMO.convert(
        workloads.pending, lambda wl: pending_workload(wl, ns_labels.get(_namespace(wl), {}), by_eviction),
        lambda wl: ns_stamps.get(_namespace(wl), ())))
    wpc, pc = priority_values(objects.workload_priority_classes), priority_values(objects.priority_classes)
    flavors = {spec.name: spec for spec in map(flavor_spec, objects.flavors)}
    cluster_queues, effective = quotas_following_health(objects.cluster_queues, flavors, nodes, health_policy)
    return Snapshot(
        now=now.timestamp(),
        cluster_queues=cluster_queues,
        effective_quotas=effective,
        cohorts=cohort_specs(objects.cohorts),
        local_queues={local_queue_key(o): local_queue_spec(o) for o in objects.local_queues},
        flavors=flavors,
        trees=trees,
        pending=pending,
        queues=_QUEUE_MEMO.queues(pending, wpc, pc),
        admitted=admitted,
        workload_priority_classes=wpc,
        priority_classes=pc,
        inadmissible=inadmissible,
        namespace_labels=ns_labels,
        solver=solver,
        time_budget_s=time_budget_s,
        config=config,
        placement_options=placement_options or PlacementOptions(),
        domain_preemption=domain_preemption,
        compact_defaults=compact_defaults(objects.cluster_queues),
        lq_usage=lq_usages(objects.local_queues, admitted, config),
        preemption_rules=preemption_rules if preemption_rules is not None else configured_preemption(objects).rules,
    )


def quotas_following_health(cluster_queues: Sequence[Obj], flavors: Mapping[str, FlavorSpec],
                            nodes: Sequence[NodeInfo], health_policy: HealthPolicy | None
                            ) -> tuple[dict[str, ClusterQueueSpec], dict[str, tuple[EffectiveQuota, ...]]]:
    """The ClusterQueues as core values, those annotated ``toposched.io/quota-follows-healthy-capacity:
    "true"`` with their nominal quotas scaled to healthy capacity (core/healthy_capacity.py)."""
    specs = cluster_queue_specs(cluster_queues)
    opted = [name_of(o) for o in cluster_queues
             if ((o.get("metadata") or {}).get("annotations") or {}).get(ANN_FOLLOW_HEALTHY) == "true"]
    if not opted:
        return specs, {}
    capacities = flavor_capacities(flavors, nodes, health_policy or DEFAULT_POLICY)
    effective: dict[str, tuple[EffectiveQuota, ...]] = {}
    for name in opted:
        specs[name], effective[name] = follow_healthy_capacity(specs[name], capacities)
    return specs, effective
