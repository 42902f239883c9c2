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
from scheduler.adapter.caches import PendingOrProblems, SnapshotCaches
from scheduler.adapter.cluster import core_nodes, empty_flavor_trees, subtract_admitted
from scheduler.adapter.kinds.workload_slicing import replacements
from scheduler.adapter.manifest.gated_by import GATE as ADMISSION_GATED_BY
from scheduler.adapter.manifest.gated_by import gated_by
from scheduler.adapter.objects import (
    FINISHED,
    QUOTA_RESERVED,
    ClusterObjects,
    Obj,
    by_name,
    condition_true,
)
from scheduler.adapter.owned import QueueFacts, Signer, trusted_pending, without_annotations
from scheduler.adapter.pod_ownership import usage_pods
from scheduler.adapter.preemption_rules import configured_preemption
from scheduler.adapter.queues import (
    cluster_queue_specs,
    cohort_specs,
    compact_defaults,
    flavor_spec,
    following_health,
    local_queue_key,
    local_queue_spec,
    namespace_labels,
    priority_values,
)
from scheduler.adapter.workload_checks import UNREADABLE, FieldProblem, schema_problems, unreadable_problem
from scheduler.adapter.workloads import admitted_workloads, pending_workload
from scheduler.core.beyond.healthy_capacity import quotas_following_health
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy
from scheduler.core.kueue.queueing import ANN_PRIORITY_BOOST, PendingWorkload
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.preemption.rules import ConfiguredPreemption


@dataclass(frozen=True)
class WorkloadsByState:
    holding: tuple[Obj, ...]  # QuotaReserved with an admission: their usage counts
    pending: tuple[Obj, ...]  # waiting for quota (active, not finished, not being deleted)


def split_workloads(workloads: Sequence[Obj]) -> WorkloadsByState:
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


PRIORITY_BOOST_GATE = "PriorityBoost"  # Kueue's alpha gate (off by default): the boost annotation counts only then

Invalid = tuple[Obj, tuple[FieldProblem, ...]]


def _pending_or_problems(wl: Obj, labels: Mapping[str, str], by_eviction: bool,
                         release: str) -> PendingOrProblems:
    """The pending Workload, or what is wrong with it (Kueue's rules, or unreadable): checked and
    converted in one memoized step, so an unchanged Workload costs one lookup a pass."""
    problems = schema_problems(wl, release)  # the release's rules (its cap on pod sets)
    if problems:
        return tuple(problems)
    try:
        return pending_workload(wl, labels, by_eviction)
    except UNREADABLE as exc:
        return (unreadable_problem(exc),)


def _namespace(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def build_snapshot(objects: ClusterObjects, now: dt.datetime, *, solver: str = "auto", time_budget_s: float = 0.1,
                   inadmissible: frozenset[str] = frozenset(), health_policy: HealthPolicy | None = None,
                   config: KueueConfig = KUEUE_DEFAULTS,
                   placement_options: PlacementOptions | None = None, domain_preemption: bool = True,
                   signer: Signer | None = None, invalid: list[Invalid] | None = None,
                   caches: SnapshotCaches | None = None,
                   preemption_rules: ConfiguredPreemption | None = None) -> Snapshot:
    """The objects as one immutable core ``Snapshot`` taken at ``now``, under the admin's Kueue
    Configuration (``config``). ``placement_options``: toposched's placement policies beyond
    Kueue (default: none, Kueue's placement). Invalid pending Workloads (Kueue's schema and
    webhook rules, :mod:`scheduler.adapter.workload_checks`) are left out; the controller's own
    annotations are kept only where it may honour them (:func:`scheduler.adapter.owned.trusted_pending`;
    ``signer``: the controller's key, None to skip the signature check). ``invalid``: filled with
    the Workloads left out and what is wrong with each (the controller tells their owners).
    ``caches``: the conversions a builder of one snapshot after another reuses (caches.py); none:
    everything is converted afresh. ``preemption_rules``: the PreemptionConfigs and
    PreemptionLimits with the evictions they count (the controller's; default: read from
    ``objects``, no evictions counted). ClusterQueues that opt in get their nominal quota scaled
    to the healthy capacity of their flavors (``core.healthy_capacity.quotas_following_health``)."""
    caches = caches if caches is not None else SnapshotCaches()
    by_eviction = config.wait_for_pods_ready.requeuing_strategy.timestamp != "Creation"
    workloads = split_workloads(list(objects.workloads))
    if config.feature_gates.enabled(ADMISSION_GATED_BY):  # Kueue's workload.IsAdmissible: not queued
        workloads = WorkloadsByState(workloads.holding,
                                     tuple(wl for wl in workloads.pending if not gated_by(wl)))
    topologies = by_name(objects.topologies)
    nodes = core_nodes(objects.nodes, caches.nodes)
    # Only pods an admitted Workload owns are left to its assignment; every other pod is usage.
    pods = usage_pods(objects.pods, workloads.holding, objects.owner_links, caches.pods)
    trees = empty_flavor_trees(objects.flavors, topologies, nodes, pods, health_policy, caches.trees)
    # The TAS flavors are known before any workload is read, so each reservation is decoded once.
    admitted = tuple(admitted_workloads(workloads.holding, frozenset(trees), caches.admitted))
    subtract_admitted(trees, admitted, config.feature_gates.enabled("TASHandleOverlappingFlavors"))
    ns_labels = namespace_labels(objects.namespaces)
    # A pending Workload's conversion depends on its namespace's labels: one stamp per namespace.
    # The release is in the stamp too: its rules decide what is a problem.
    ns_stamps = {ns: (config.release, *sorted(labels.items())) for ns, labels in ns_labels.items()}
    converted: list[PendingWorkload] = []
    for wl, outcome in zip(workloads.pending, caches.pending.convert(
            workloads.pending, lambda wl: _pending_or_problems(wl, ns_labels.get(_namespace(wl), {}), by_eviction,
                                                         config.release),
            lambda wl: ns_stamps.get(_namespace(wl), (config.release,))), strict=True):
        if isinstance(outcome, PendingWorkload):
            converted.append(outcome)
        elif invalid is not None:
            invalid.append((wl, outcome))
    flavors = {spec.name: spec for spec in map(flavor_spec, objects.flavors)}
    cluster_queues, effective = quotas_following_health(cluster_queue_specs(objects.cluster_queues),
                                                        following_health(objects.cluster_queues), flavors, nodes,
                                                        health_policy or DEFAULT_POLICY)
    local_queues = {local_queue_key(o): local_queue_spec(o) for o in objects.local_queues}
    pending = trusted_pending(converted, signer, QueueFacts(local_queues, cluster_queues, ns_labels, now.timestamp()))
    ungated = () if config.feature_gates.enabled(PRIORITY_BOOST_GATE) else (ANN_PRIORITY_BOOST,)
    pending, admitted = without_annotations(pending, ungated), without_annotations(admitted, ungated)
    wpc, pc = priority_values(objects.workload_priority_classes), priority_values(objects.priority_classes)
    return Snapshot(
        now=now.timestamp(),
        cluster_queues=cluster_queues,
        cohorts=cohort_specs(objects.cohorts),
        local_queues=local_queues,
        flavors=flavors,
        trees=trees,
        pending=pending,
        queues=caches.queues.queues(pending, wpc, pc),
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
        preemption_rules=(preemption_rules if preemption_rules is not None
                          else configured_preemption(objects, caches=caches).rules),
        effective_quotas=effective,
        slice_replacements=replacements(workloads.pending, workloads.holding, config.feature_gates),
    )
