"""What one cycle looks at: :class:`Snapshot`, plain frozen data the cycle never modifies, built
by the adapter (``adapter/snapshot.py``) from the cluster's objects, and the snapshot as a
cycle's admissions leave it (:func:`after_decisions`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduler.core.beyond.healthy_capacity import EffectiveQuota
from scheduler.core.config import KueueConfig
from scheduler.core.kueue.admitted import AdmittedWorkload, TASUsage
from scheduler.core.kueue.afs import LocalQueueUsage
from scheduler.core.kueue.decisions import Admit, Decision
from scheduler.core.kueue.queueing import LocalQueueSpec, PendingQueues, PendingWorkload, pending_queues
from scheduler.core.kueue.quota import (
    STOP_HOLD_AND_DRAIN,
    ClusterQueueSpec,
    CohortSpec,
    FlavorResource,
    FlavorSpec,
    QuotaState,
)
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.preemption.rules import NO_CONFIGURED_PREEMPTION, ConfiguredPreemption
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import CompactWait


@dataclass(frozen=True)
class Snapshot:
    """Everything one cycle looks at. Plain data; the cycle never mutates it.

    ``trees``: one TopologyTree per TAS flavor (key = ResourceFlavor name) with the usage of
    every workload in ``admitted`` already subtracted (``kube.snapshot.flavor_trees``).
    ``admitted``: workloads holding a quota reservation (including ones being evicted).
    ``pending``: workloads without a reservation, not finished, active.
    ``inadmissible``: keys parked by BestEffortFIFO (``queueing.QueueState``).
    ``namespace_labels``: namespace -> labels (for ``namespaceSelector``).
    """

    now: float
    cluster_queues: Mapping[str, ClusterQueueSpec]
    cohorts: Mapping[str, CohortSpec] = field(default_factory=dict)
    local_queues: Mapping[str, LocalQueueSpec] = field(default_factory=dict)  # "ns/name"
    flavors: Mapping[str, FlavorSpec] = field(default_factory=dict)
    trees: Mapping[str, TopologyTree] = field(default_factory=dict)
    pending: Sequence[PendingWorkload] = ()
    admitted: Sequence[AdmittedWorkload] = ()
    workload_priority_classes: Mapping[str, int] = field(default_factory=dict)
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    inadmissible: frozenset[str] = frozenset()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    solver: str = "auto"  # place_workload solver
    time_budget_s: float = 0.1  # per placement
    preemption_budget_s: float = 0.5  # per CP-SAT victim search
    config: KueueConfig = KueueConfig()  # the admin's Kueue Configuration (core/config.py)
    # toposched's domain-clearing preemption and sticky preemption targets (domain_preemption.py)
    domain_preemption: bool = True
    # toposched beyond Kueue (docs/beyond-kueue.md): placement policies (off = Kueue's) and
    # the ClusterQueues' default bounded wait for a compact placement (core/beyond/compactness.py).
    placement_options: PlacementOptions = PlacementOptions()
    compact_defaults: Mapping[str, CompactWait] = field(default_factory=dict)
    # reserve-compact: workload key -> its held domain as decided by an earlier cycle of the
    # same pass (Reservation.encode(); "" = none), over its ANN_RESERVED_DOMAIN annotation,
    # which the writer updates only after the pass (run_cycles).
    reserved_domains: Mapping[str, str] = field(default_factory=dict)
    # Admission Fair Sharing state per LocalQueue "ns/name" (core/kueue/afs.py), from LocalQueue status.
    lq_usage: Mapping[str, LocalQueueUsage] = field(default_factory=dict)
    # ``pending`` already grouped and ordered per LocalQueue (the adapter keeps them between
    # passes); used only when it describes this ``pending`` (see ``snapshot_queues``).
    queues: PendingQueues | None = field(default=None, compare=False, repr=False)
    # Kueue's PreemptionConfig (alpha, KEP-13396) / toposched's PreemptionLimit for toposched's domain
    # clearing (core/preemption/rules.py); empty = toposched's defaults.
    preemption_rules: ConfiguredPreemption = NO_CONFIGURED_PREEMPTION
    # ClusterQueues whose quota follows healthy capacity (core/beyond/healthy_capacity.py): the
    # effective quotas ``cluster_queues`` already carry, for their status condition.
    effective_quotas: Mapping[str, tuple[EffectiveQuota, ...]] = field(default_factory=dict)


def quota_in_use(snap: Snapshot) -> QuotaState:
    """The quota tree of the snapshot's ClusterQueues and Cohorts charged with every admitted
    workload. A workload whose ClusterQueue was deleted under it keeps its nodes (its topology
    usage is in the trees) but has no quota left to charge."""
    quota = QuotaState(snap.cluster_queues.values(), snap.cohorts.values())
    for cq, usage in usage_by_cluster_queue(snap).items():
        quota.add_usage(cq, usage)
    return quota


def usage_by_cluster_queue(snap: Snapshot) -> dict[str, dict[FlavorResource, int]]:
    """Every admitted workload's usage summed per ClusterQueue (of the snapshot's queues).
    Charging a ClusterQueue its sum is charging it each workload in turn (what a node keeps and
    what it passes to its cohort add up for non-negative amounts), at one walk of the cohort
    tree per ClusterQueue instead of per workload: every cycle charges every admitted workload,
    which was most of a cycle's time with thousands admitted (issue 34's burst)."""
    totals: dict[str, dict[FlavorResource, int]] = {}
    for w in snap.admitted:
        if w.cluster_queue not in snap.cluster_queues:
            continue
        into = totals.setdefault(w.cluster_queue, {})
        for fr, value in w.usage.items():
            into[fr] = into.get(fr, 0) + value
    return totals


def snapshot_queues(snapshot: Snapshot) -> PendingQueues:
    """``snapshot.pending`` by LocalQueue in Kueue's order: the snapshot's own ``queues`` when
    they were built for this very ``pending`` and these priority classes, else built now."""
    queues = snapshot.queues
    if queues is not None and queues.describes(snapshot.pending, snapshot.workload_priority_classes,
                                               snapshot.priority_classes):
        return queues
    return pending_queues(snapshot.pending, snapshot.workload_priority_classes, snapshot.priority_classes)


def draining(snapshot: Snapshot) -> bool:
    """Some workload still holds quota in a ``HoldAndDrain``-stopped ClusterQueue or LocalQueue:
    the cycle has evictions to issue even with nothing pending."""
    for w in snapshot.admitted:
        cq = snapshot.cluster_queues.get(w.cluster_queue)
        lq = snapshot.local_queues.get(f"{w.spec.namespace}/{w.spec.queue_name}")
        if not w.evicted and ((cq is not None and cq.stop_policy == STOP_HOLD_AND_DRAIN)
                              or (lq is not None and lq.stop_policy == STOP_HOLD_AND_DRAIN)):
            return True
    return False


def admitted_from_decision(decision: Admit, pending: PendingWorkload, now: float) -> AdmittedWorkload:
    """The :class:`AdmittedWorkload` an Admit decision produces (for simulators and tests)."""
    spec = pending.spec
    requests = {ps.name: ps.requests for ps in spec.pod_sets}
    usage: dict[FlavorResource, int] = {}
    tas: list[TASUsage] = []
    for ps in decision.pod_sets:
        for res, v in ps.resource_usage.items():
            flavor = ps.flavors.get(res)
            if flavor is not None:
                usage[(flavor, res)] = usage.get((flavor, res), 0) + v
        if ps.topology is not None:
            flavor = sorted(set(ps.flavors.values()))[0]
            tas.append(TASUsage(flavor, ps.topology, requests[ps.name]))
    return AdmittedWorkload(
        spec,
        decision.cluster_queue,
        usage,
        reserved_at=now,
        priority=pending.priority,
        queued_at=pending.queued_at,
        tas=tuple(tas),
    )


def after_decisions(snapshot: Snapshot, decisions: Sequence[Decision]) -> Snapshot:
    """The snapshot as the cycle's admissions leave it: admitted workloads moved from pending
    to admitted. Queue status (pending counts, usage) is written from it, so a ClusterQueue
    shows an admission in the same pass that made it, as Kueue's cache does, rather than one
    pass later (issue 18: Kueue's perf recorder integrates ClusterQueue usage from status
    events and ends when no ClusterQueue reports pending work)."""
    admits = {d.workload: d for d in decisions if isinstance(d, Admit)}
    if not admits:
        return snapshot
    pending = tuple(p for p in snapshot.pending if p.key not in admits)
    taken = [p for p in snapshot.pending if p.key in admits]
    admitted = tuple(admitted_from_decision(admits[p.key], p, snapshot.now) for p in taken)
    queues = snapshot.queues
    if queues is not None:  # kept up to date when they describe the pending workloads, else dropped
        queues = (queues.without(taken, pending) if queues.describes(
            snapshot.pending, snapshot.workload_priority_classes, snapshot.priority_classes) else None)
    return replace(snapshot, pending=pending, admitted=(*snapshot.admitted, *admitted), queues=queues)
