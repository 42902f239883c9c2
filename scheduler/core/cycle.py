"""One admission cycle: ``run_cycle(snapshot) -> list[Decision]``. Pure and deterministic.

Kueue's scheduling cycle (``pkg/scheduler/scheduler.go``), restated:

1. Route every pending workload LocalQueue -> ClusterQueue (a missing LocalQueue or
   ClusterQueue, a stopped or inactive queue gives a pending decision with Kueue's message).
2. Take ONE head per ClusterQueue (``queueing.heads``).
3. Nominate each head against the snapshot: namespace selector, flavor assignment by quota
   (``quota.assign_flavors``), then TAS placement for pod sets on TAS flavors
   (``place_workload`` on that flavor's tree; implied TAS for TAS-only ClusterQueues). A TAS
   failure becomes preemption when an empty topology would fit, else
   ``TopologyPlacementFailed``. A head that needs preemption gets its targets
   (``preemption``; CP-SAT for a domain-needing TAS pod set).
4. Order the entries: not borrowing first, then priority desc, then queue timestamp.
5. Walk the entries against the *updated* usage (quota and topology): admit what still
   fits, issue preemptions (the freed capacity is reserved for the preemptor for the rest of
   the cycle), skip overlapping preemption targets, and report everything else as pending.

The snapshot is never modified: quota state and trees are cloned at the start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduler.core import afs, compact, reservation
from scheduler.core.afs import LocalQueueUsage
from scheduler.core.config import KueueConfig
from scheduler.core.domain_preemption import (
    ClearContext,
    DomainChoice,
    DomainTarget,
    clear_domain,
    parse_target,
    selector_of,
    target_of_placement,
)
from scheduler.core.fairsharing import Contender, fair_targets, next_contender, node_weights
from scheduler.core.healthy_capacity import EffectiveQuota
from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.placement.planner import Placement, PlacementGates, PodSetPlacement, place_workload
from scheduler.core.podsready import WAITING, WAITING_MESSAGE, blocks_admission
from scheduler.core.preemption import (
    AdmittedWorkload,
    DomainRequest,
    FitCheck,
    LqUsage,
    Target,
    TASUsage,
    classical_targets,
    find_candidates,
    preemption_message,
    preemption_plan,
    tas_targets,
)
from scheduler.core.preemption_rules import (
    NO_CONFIGURED_PREEMPTION,
    ConfiguredPreemption,
    configured_plan,
    limit_blocking,
)
from scheduler.core.queueing import (
    REQUEUE_IMMEDIATE,
    REQUEUE_INADMISSIBLE,
    LocalQueueSpec,
    PendingQueues,
    PendingWorkload,
    Queued,
    cluster_queue_readiness,
    heads,
    pending_queues,
    resolve_priority,
)
from scheduler.core.quota import (
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    PREEMPT,
    PREEMPT_IN_QUEUE,
    RECLAIM,
    STOP_HOLD_AND_DRAIN,
    STOP_NONE,
    STRICT_FIFO,
    ClusterQueueSpec,
    CohortSpec,
    FlavorAssignment,
    FlavorResource,
    FlavorSpec,
    PreemptionOracle,
    QuotaState,
    Usage,
    assign_flavors,
    is_tas_only,
)
from scheduler.core.reasons import (
    BY_WORKLOAD_CONTROLLER,
    EvictReason,
    NotAdmitted,
    PendingReason,
    evict_message,
    flavors_message,
    not_admitted_message,
    not_admitted_reason,
    preemption_pending_message,
    quota_reserved_message,
)
from scheduler.core.reservation import Reservation
from scheduler.core.spreading import GroupOccupancy, SpreadCounts, count_spread, group_key
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import CompactWait
from scheduler.core.workload import PodSetSpec, WorkloadSpec, json_object_annotation

# ---------------------------------------------------------------------- snapshot


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
    # the ClusterQueues' default bounded wait for a compact placement (core/compact.py).
    placement_options: PlacementOptions = PlacementOptions()
    compact_defaults: Mapping[str, CompactWait] = field(default_factory=dict)
    # reserve-compact: workload key -> its held domain as decided by an earlier cycle of the
    # same pass (Reservation.encode(); "" = none), over its ANN_RESERVED_DOMAIN annotation,
    # which the writer updates only after the pass (run_cycles).
    reserved_domains: Mapping[str, str] = field(default_factory=dict)
    # Admission Fair Sharing state per LocalQueue "ns/name" (core/afs.py), from LocalQueue status.
    lq_usage: Mapping[str, LocalQueueUsage] = field(default_factory=dict)
    # ``pending`` already grouped and ordered per LocalQueue (the adapter keeps them between
    # passes); used only when it describes this ``pending`` (see ``snapshot_queues``).
    queues: PendingQueues | None = field(default=None, compare=False, repr=False)
    # Kueue's PreemptionConfig / PreemptionLimit (alpha, KEP-13396/16925) for toposched's domain
    # clearing (core/preemption_rules.py); empty = toposched's defaults.
    preemption_rules: ConfiguredPreemption = NO_CONFIGURED_PREEMPTION
    # ClusterQueues whose quota follows healthy capacity (core/healthy_capacity.py): the
    # effective quotas ``cluster_queues`` already carry, for their status condition.
    effective_quotas: Mapping[str, tuple[EffectiveQuota, ...]] = field(default_factory=dict)


# ---------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class PodSetAdmission:
    """One ``status.admission.podSetAssignments[]`` entry."""

    name: str
    count: int
    flavors: Mapping[str, str]  # resource -> flavor
    resource_usage: Mapping[str, int]  # resource -> total (canonical units)
    topology: PodSetPlacement | None = None  # encode with assignment.encode_v1beta2


@dataclass(frozen=True)
class Admit:
    workload: str  # "ns/name"
    uid: str
    cluster_queue: str
    pod_sets: tuple[PodSetAdmission, ...]
    borrows: bool
    reason: str = "QuotaReserved"
    message: str = ""  # "Quota reserved in ClusterQueue <cq>"
    relaxed: str = ""  # the compact wait ran out: admitted less compact (Event CompactPlacementRelaxed)


@dataclass(frozen=True)
class Preempt:
    workload: str  # the victim
    uid: str
    cluster_queue: str  # the victim's ClusterQueue
    preemptor: str
    preemptor_cluster_queue: str
    reason: str  # InClusterQueue | InCohortReclamation | InCohortReclaimWhileBorrowing | ConfigurablePreemption
    message: str  # Kueue's "Preempted to accommodate a workload ..." text
    # Domain clearing made it: it counts against PreemptionLimits (under ``config``, the
    # preemptor ClusterQueue's PreemptionConfig, "" none); Kueue's classical preemptions do not.
    counted: bool = False
    config: str = ""


@dataclass(frozen=True)
class Evict:
    workload: str
    uid: str
    cluster_queue: str
    reason: str  # ClusterQueueStopped | LocalQueueStopped
    message: str


@dataclass(frozen=True)
class Pending:
    workload: str
    uid: str
    cluster_queue: str  # "" when routing failed
    reason: str  # QuotaReserved=False reason
    message: str
    requeue: str = REQUEUE_INADMISSIBLE  # "immediate" | "inadmissible" (queueing.QueueState)
    # WaitingForPreemptedWorkloads: the domain the preemptions free (DomainTarget.encode()),
    # kept on the Workload as ANN_PREEMPTION_TARGET so later cycles (and a restarted
    # controller) keep preempting for, and land in, the same domain.
    preemption_target: str = ""
    retry_at: float | None = None  # decide again by then even if nothing changes (compact wait's end)
    # reserve-compact: the domain this compact waiter holds (Reservation.encode()), kept on the
    # Workload as ANN_RESERVED_DOMAIN; "" = it holds none (the writer removes the annotation).
    reserved_domain: str = ""
    # Kueue's workload controller, not its scheduler, decides this one (a LocalQueue or
    # ClusterQueue missing, stopped or inactive): reasons.written_reason maps it to Inadmissible.
    by_workload_controller: bool = False
    # The PreemptionLimit that held this preemptor's domain clearing back ("" none): the
    # controller writes Kueue's PreemptionBlockedByLimit condition and PreemptionThrottled Event.
    blocked_by_limit: str = ""


Decision = Admit | Preempt | Evict | Pending


# ---------------------------------------------------------------------- internals


@dataclass
class _Entry:
    pw: PendingWorkload
    cq: ClusterQueueSpec
    priority: int
    assignment: FlavorAssignment
    placements: dict[str, PodSetPlacement]  # pod set -> TAS placement
    tas_flavor: dict[str, str]  # pod set -> TAS flavor
    mode: int
    reason: str
    message: str
    targets: list[Target] = field(default_factory=list)
    wanted_preemption: bool = False
    reduced: WorkloadSpec | None = None  # partial admission: the pod set counts admitted

    @property
    def spec(self) -> WorkloadSpec:
        """The workload as it is nominated (pod set counts reduced by partial admission)."""
        return self.reduced if self.reduced is not None else self.pw.spec

    @property
    def admissible(self) -> bool:
        """Fits, or fits after preempting the targets found (Kueue's reducer ``fits``)."""
        return self.mode == FIT or (self.mode == PREEMPT and bool(self.targets))
    request: DomainRequest | None = None  # a single TAS pod set wanting one domain
    required: bool = False  # request's level is required (else preferred)
    domain_choice: DomainChoice | None = None  # set by domain-clearing preemption
    blocked_by_limit: str = ""  # the PreemptionLimit that held its domain clearing back
    domain_target: DomainTarget | None = None  # where the preemptions land it (sticky)
    tightened: dict[str, list[PodSetSpec]] = field(default_factory=dict)  # flavor -> compact pod sets
    relaxed: str = ""
    retry_at: float | None = None
    reservation: Reservation | None = None  # reserve-compact: the domain its compact wait holds


def quota_in_use(snap: Snapshot) -> QuotaState:
    """The quota tree of the snapshot's ClusterQueues and Cohorts charged with every admitted
    workload. A workload whose ClusterQueue was deleted under it keeps its nodes (its topology
    usage is in the trees) but has no quota left to charge."""
    quota = QuotaState(snap.cluster_queues.values(), snap.cohorts.values())
    for w in snap.admitted:
        if w.cluster_queue in snap.cluster_queues:
            quota.add_usage(w.cluster_queue, w.usage)
    return quota


class _Cycle:
    def __init__(self, snap: Snapshot, *, own_trees: bool = False) -> None:
        """``own_trees``: the snapshot's trees are this cycle's to change (run_cycles hands
        over the trees of the cycle before), so they are not cloned."""
        self.snap = snap
        self.quota = quota_in_use(snap)
        self.prio: dict[str, int] = {}
        for w in snap.admitted:
            self.prio[w.key] = resolve_priority(
                w.spec, snap.workload_priority_classes, snap.priority_classes, w.priority
            )
        self.trees = {name: tree if own_trees else tree.clone() for name, tree in sorted(snap.trees.items())}
        self.levels = {name: tree.levels for name, tree in self.trees.items()}
        self.admitted = sorted(snap.admitted, key=lambda w: w.key)
        self.gates = PlacementGates.from_gates(snap.config.feature_gates.enabled)
        # Admitted in this cycle (key -> spreading occupancy per flavor): topology spreading
        # counts them like Kueue's admittedThisCycle.
        self.admitted_now: dict[str, _Entry] = {}
        self.inactive = self._inactive_cluster_queues()
        # waitForPodsReady: every workload holding quota has PodsReady=True (blockAdmission).
        self.all_ready = all(w.pods_ready for w in snap.admitted)
        self.fair = snap.config.fair_sharing.enabled
        self.weights = node_weights(snap.cluster_queues, snap.cohorts) if self.fair else {}
        # reserve-compact: holder key -> the domain its compact wait holds (updated as entries settle)
        self.reservations = self._standing_reservations() if snap.placement_options.reserve_compact else {}

    def priority_of(self, w: AdmittedWorkload) -> int:
        return self.prio[w.key]

    def _standing_reservations(self) -> dict[str, Reservation]:
        """reserve-compact: the domains pending compact waiters hold (their annotation, or an
        earlier cycle's decision in this pass), while their wait lasts."""
        snap = self.snap
        out: dict[str, Reservation] = {}
        for pw in snap.pending:
            annotations = pw.spec.annotations
            if pw.key in snap.reserved_domains:
                encoded = snap.reserved_domains[pw.key]
                annotations = {reservation.ANN_RESERVED_DOMAIN: encoded} if encoded else {}
            parsed = reservation.parse_reserved(annotations)
            if parsed is None:
                continue
            target, until = parsed
            ps = next((p for p in pw.spec.pod_sets if p.name == target.pod_set and p.count > 0), None)
            if until <= snap.now or target.flavor not in self.trees or ps is None:
                continue
            prio = resolve_priority(pw.spec, snap.workload_priority_classes, snap.priority_classes, pw.priority)
            out[pw.key] = Reservation(pw.key, prio, pw.timestamp, target, until, ps)
        return out

    def _held(self, entry: _Entry, flavor: str) -> list[Reservation]:
        """The reservations on ``flavor`` that hold ``entry`` back (reserve-compact)."""
        return [r for r in self.reservations.values()
                if r.target.flavor == flavor and r.binds(entry.pw.key, entry.priority, entry.pw.timestamp)]

    def _reservation_for(self, entry: _Entry, flavor: str, wish: compact.Wish, until: float) -> Reservation | None:
        """The domain ``entry``'s compact wait holds: the one it held before while that can still
        hold it (sticky), else the best one now (``reservation.choose_domain``) on the capacity
        the reservations that bind it leave, where capacity of lower-priority workloads and of
        workloads being evicted counts as freeing first."""
        ps = next(p for p in entry.spec.pod_sets if p.name == wish.pod_set)
        tree = self.trees[flavor]
        before = self.reservations.get(entry.pw.key)
        if before is not None and (before.target.flavor, before.target.pod_set, before.target.level) == (
                flavor, ps.name, wish.wanted.level) and reservation.can_ever_hold(tree, before.target, ps):
            return replace(before, priority=entry.priority, queued_at=entry.pw.timestamp, until=until, pod_set=ps)
        view = reservation.hold(tree, self._held(entry, flavor), whole=False)
        soon = self._tree_without(flavor, [w for w in self.admitted
                                           if w.evicted or self.priority_of(w) < entry.priority], base=view)
        domain = reservation.choose_domain(view, soon, wish.level, ps)
        if domain is None:
            return None
        target = DomainTarget(ps.name, flavor, wish.wanted.level, selector_of(tree, wish.wanted.level, domain))
        return Reservation(entry.pw.key, entry.priority, entry.pw.timestamp, target, until, ps)

    def keep_reservation(self, entry: _Entry) -> None:
        """After ``entry`` settled: its reservation holds for the rest of the cycle, or it has none."""
        if entry.reservation is not None:
            self.reservations[entry.pw.key] = entry.reservation
        else:
            self.reservations.pop(entry.pw.key, None)

    def lq_usage(self) -> LqUsage | None:
        """Admission Fair Sharing's candidate tie-break (core/afs.py): None when AFS is off."""
        snap = self.snap
        if not afs.enabled(snap.config):
            return None

        def usage(w: AdmittedWorkload) -> float | None:
            cq = snap.cluster_queues.get(w.cluster_queue)
            if cq is None or not afs.orders_by_usage(snap.config, cq.admission_mode):
                return None
            return afs.local_queue_usage(snap.lq_usage, f"{w.spec.namespace}/{w.spec.queue_name}", snap.config)
        return usage

    def _inactive_cluster_queues(self) -> set[str]:
        """Not Active (stopped, terminating, missing flavor or topology: the condition
        ``queue_status`` reports), or in a cohort cycle (Kueue's scheduler skips those too)."""
        return {name for name, cq in self.snap.cluster_queues.items()
                if not cluster_queue_readiness(cq, self.snap.flavors, self.trees).active
                or self.quota.under_cycle(name)}

    # ------------------------------------------------------------------ TAS
    def _tas_pod_sets(
        self, entry_cq: ClusterQueueSpec, assignment: FlavorAssignment, pod_sets: Sequence[PodSetSpec]
    ) -> dict[str, list[PodSetSpec]]:
        by_flavor: dict[str, list[PodSetSpec]] = {}
        for ps, psf in zip(pod_sets, assignment.pod_sets, strict=True):
            names = sorted({f for f in psf.flavors.values() if f in self.trees})
            if names:
                by_flavor.setdefault(names[0], []).append(ps)
        return by_flavor

    def _place(self, tree: TopologyTree, pod_sets: Sequence[PodSetSpec], implied: bool,
               spec: WorkloadSpec | None = None, flavor: str = "", target: DomainTarget | None = None,
               held: Sequence[Reservation] = ()) -> Placement:
        """``spec`` and ``flavor``: the workload being placed, for its previous domains, its
        preemption target and its topology spreading counts (what-if placements pass neither).
        ``held``: reservations that bind it: placed outside their domains first, else beside
        the holders' share (core/reservation.py)."""
        if held:
            steered = self._place(reservation.hold(tree, held, whole=True), pod_sets, implied, spec, flavor, target)
            if steered.fits:
                return steered
            tree = reservation.hold(tree, held, whole=False)
        return place_workload(
            tree,
            pod_sets,
            solver=self.snap.solver,
            time_budget_s=self.snap.time_budget_s,
            implied_tas=implied,
            preferred_domains=self._preferred(spec, target),
            gates=self.gates,
            spread_counts=self._spread_counts(flavor, tree, pod_sets, spec),
            options=self.snap.placement_options,
        )

    def _preferred(self, spec: WorkloadSpec | None, target: DomainTarget | None) -> dict[str, dict[str, str]] | None:
        """The domain to try first: the preemption target (this cycle's, else the sticky one on
        the Workload), else the domains a requeued workload held before."""
        if spec is None:
            return None
        if target is None and self.snap.domain_preemption:
            target = parse_target(spec.annotations)
        if target is not None:
            return {target.pod_set: dict(target.selector)}
        held = self.reservations.get(spec.key)  # reserve-compact: the domain its compact wait holds
        if held is not None:
            return {held.target.pod_set: dict(held.target.selector)}
        return previous_domains(spec)

    def _spread_counts(self, flavor: str, tree: TopologyTree, pod_sets: Sequence[PodSetSpec],
                       spec: WorkloadSpec | None) -> dict[str, SpreadCounts] | None:
        """Per pod set with a topology spreading spec, its group's counts on this flavor
        (Kueue ``topologySpreadCountsForFlavor``); None when spreading is off or unused."""
        wanted = [ps for ps in pod_sets if ps.spreading is not None]
        if not self.gates.spreading or spec is None or not wanted:
            return None
        others = self._occupancy(flavor, tree)
        job_uid = spec.labels.get(LABEL_JOB_UID, "")
        out: dict[str, SpreadCounts] = {}
        for ps in wanted:
            assert ps.spreading is not None
            group = group_key(ps.name, ps.topology.group_name if ps.topology else None)
            out[ps.name] = count_spread(ps.spreading, group, spec.namespace, job_uid, spec.key, tree.levels, others)
        return out

    def _occupancy(self, flavor: str, tree: TopologyTree) -> list[GroupOccupancy]:
        """Every admitted Workload (snapshot and this cycle) with the leaves its PodSet groups
        occupy on ``flavor``."""
        rows: list[tuple[WorkloadSpec, list[tuple[str, PodSetPlacement]]]] = [
            (w.spec, [(u.flavor, u.placement) for u in w.tas]) for w in self.admitted]
        rows += [(e.pw.spec, [(e.tas_flavor[n], p) for n, p in sorted(e.placements.items())])
                 for e in self.admitted_now.values()]
        out = []
        for spec, usages in rows:
            groups = {ps.name: group_key(ps.name, ps.topology.group_name if ps.topology else None)
                      for ps in spec.pod_sets}
            leaves: dict[str, list[tuple[str, ...]]] = {}
            for used_flavor, placement in usages:
                if used_flavor != flavor:
                    continue
                for dom in placement.domains:
                    leaf = tree.leaf_for_values(placement.levels, dom.values)
                    if leaf is not None:
                        leaves.setdefault(groups.get(placement.name, ""), []).append(tree.paths[-1][leaf])
            out.append(GroupOccupancy(spec.key, spec.namespace, spec.labels,
                                      {g: tuple(v) for g, v in leaves.items()}))
        return out

    def _empty_tree(self, flavor: str) -> TopologyTree:
        tree = self.snap.trees[flavor].clone()
        for w in self.snap.admitted:
            for u in w.tas:
                if u.flavor == flavor:
                    tree.remove_usage(u.placement, u.per_pod)
        return tree

    def _tree_without(self, flavor: str, victims: Sequence[AdmittedWorkload],
                      base: TopologyTree | None = None) -> TopologyTree:
        """A copy of ``base`` (default: the flavor's tree) with the victims' usage removed."""
        tree = (base if base is not None else self.trees[flavor]).clone()
        for w in victims:
            for u in w.tas:
                if u.flavor == flavor:
                    tree.remove_usage(u.placement, u.per_pod)
        return tree

    # ------------------------------------------------------------------ nomination
    def nominate(self, pw: PendingWorkload, cq: ClusterQueueSpec) -> _Entry:
        """Kueue's ``getInitialAssignments``: the whole workload; when it neither fits nor can
        preempt, and the PartialAdmission gate is on, the most pods its ``minCount`` allow."""
        entry = self._nominate(pw, cq, pw.spec)
        if entry.admissible or not self.snap.config.feature_gates.enabled("PartialAdmission"):
            return entry
        partial = partial_search(pw.spec.pod_sets, lambda counts: self._nominate_reduced(pw, cq, counts))
        return partial if partial is not None else entry

    def _nominate_reduced(self, pw: PendingWorkload, cq: ClusterQueueSpec, counts: Sequence[int]) -> _Entry | None:
        pod_sets = tuple(replace(ps, count=n) for ps, n in zip(pw.spec.pod_sets, counts, strict=True))
        entry = self._nominate(pw, cq, replace(pw.spec, pod_sets=pod_sets))
        return entry if entry.admissible else None

    def _nominate(self, pw: PendingWorkload, cq: ClusterQueueSpec, spec: WorkloadSpec) -> _Entry:
        prio = resolve_priority(
            spec, self.snap.workload_priority_classes, self.snap.priority_classes, pw.priority
        )
        oracle = self._oracle(prio, pw.timestamp, cq)
        assignment = assign_flavors(spec, cq, self.quota, self.snap.flavors, self.levels, oracle,
                                    fair_sharing=self.fair)
        entry = _Entry(
            pw, cq, prio, assignment, {}, {}, assignment.mode, assignment.reason, assignment.message,
            reduced=spec if spec is not pw.spec else None,
        )
        if assignment.mode == NO_FIT:
            return entry
        implied = is_tas_only(cq, self.snap.flavors)
        needs = set(assignment.needs_preemption)
        by_flavor = self._tas_pod_sets(cq, assignment, spec.pod_sets)
        if assignment.mode == FIT:
            for flavor, pod_sets in sorted(by_flavor.items()):
                held = self._held(entry, flavor)
                placement = self._place(self.trees[flavor], pod_sets, implied, spec, flavor, held=held)
                if placement.fits:
                    for p in placement.pod_sets:
                        entry.placements[p.name] = p
                        entry.tas_flavor[p.name] = flavor
                    continue
                if held and self._place(self.trees[flavor], pod_sets, implied, spec, flavor).fits:
                    self._hold_back(entry, pod_sets[0].name, held)
                    return entry
                message = flavors_message(placement.failed_pod_set or pod_sets[0].name, placement.reason)
                failed = PendingReason.TOPOLOGY_FAILED.value
                if not self._place(self._empty_tree(flavor), pod_sets, implied).fits:
                    entry.mode, entry.reason, entry.message = NO_FIT, failed, message
                    return entry
                entry.mode, entry.reason, entry.message = PREEMPT, failed, message
                for ps in pod_sets:
                    psf = next(p for p in assignment.pod_sets if p.name == ps.name)
                    needs.update(fr for fr in psf.usage if fr[0] == flavor)
            if entry.mode == FIT and entry.placements:
                self._compact(entry, by_flavor, implied)
        elif not self._tas_preempt_needs(assignment, by_flavor, implied, needs):
            entry.mode = NO_FIT  # Kueue: no topology fits even on an empty cluster
            return entry
        if entry.mode == PREEMPT:
            entry.wanted_preemption = True
            entry.targets = self.targets(entry, frozenset(needs), by_flavor, implied)
            if not entry.targets:
                entry.mode = NO_FIT
        return entry

    def _oracle(self, priority: int, timestamp: float, cq: ClusterQueueSpec) -> PreemptionOracle:
        """Kueue's ``SimulatePreemption`` for the flavor assigner: would preempting free
        ``quantity`` of one flavor-resource, and whose workloads would go."""
        def simulate(fr: FlavorResource, quantity: int) -> int:
            needs = frozenset({fr})
            plan = preemption_plan(priority, timestamp, cq, self.quota, self.admitted, needs, self.priority_of,
                                   self.lq_usage())

            def fits(state: QuotaState, _victims: Sequence[AdmittedWorkload], allow_borrowing: bool) -> bool:
                return state.fits(cq.name, {fr: quantity}, allow_borrowing)

            targets = classical_targets(plan, cq.name, self.quota, needs, fits, self.priority_of) if plan else []
            if not targets:
                return NO_CANDIDATES
            return PREEMPT_IN_QUEUE if any(t.workload.cluster_queue == cq.name for t in targets) else RECLAIM

        return simulate

    def _tas_preempt_needs(self, assignment: FlavorAssignment, by_flavor: Mapping[str, list[PodSetSpec]],
                           implied: bool, needs: set[FlavorResource]) -> bool:
        """Quota needs preemption and the workload has TAS pod sets: as Kueue v0.17's flavor
        assigner, False when they fit nowhere even with every workload gone (NoFit), else every
        resource of those pod sets needs preemption (the quota may suffice while the topology is
        fragmented), added to ``needs``."""
        for flavor, pod_sets in sorted(by_flavor.items()):
            if not self._place(self._empty_tree(flavor), pod_sets, implied).fits:
                return False
            for ps in pod_sets:
                psf = next(p for p in assignment.pod_sets if p.name == ps.name)
                needs.update(fr for fr in psf.usage if fr[0] == flavor)
        return True

    def _hold_back(self, entry: _Entry, pod_set: str, held: Sequence[Reservation]) -> None:
        """reserve-compact: ``entry`` fits only in room ``held`` keeps for compact waiters that go
        before it: it stays pending (no preemption: the room exists) and is decided again when
        capacity is released or the first of those waits ends. A waiter held back keeps its own
        reservation."""
        entry.mode, entry.reason = NO_FIT, reservation.HELD_REASON
        entry.message = reservation.held_message(pod_set, held)
        entry.retry_at = min(r.until for r in held)
        entry.reservation = self.reservations.get(entry.pw.key)

    def _compact(self, entry: _Entry, by_flavor: Mapping[str, list[PodSetSpec]], implied: bool) -> None:
        """toposched's bounded wait for a compact placement (core/compact.py): a pod set whose
        placement spans more domains than it asked for is placed again with its level made
        required; if that does not fit either, the entry waits (until the deadline) or is
        admitted as placed, with a note (after it)."""
        default = self.snap.compact_defaults.get(entry.cq.name)
        misses: list[tuple[compact.Wish, int]] = []
        missed_on: list[str] = []  # the flavor of each miss
        for flavor, pod_sets in sorted(by_flavor.items()):
            tree = self.trees[flavor]
            found = compact.wishes(tree, pod_sets, default)
            if not found or not compact.unmet(tree, entry.placements, found):
                continue
            strict = compact.tightened(pod_sets, found)
            better = self._place(tree, strict, implied, entry.spec, flavor, held=self._held(entry, flavor))
            if better.fits:
                entry.placements.update({p.name: p for p in better.pod_sets})
                entry.tightened[flavor] = strict
                continue
            unmet = compact.unmet(tree, entry.placements, found)
            misses += unmet
            missed_on += [flavor] * len(unmet)
        if not misses:
            return
        verdict = compact.verdict(misses, entry.pw.timestamp, self.snap.now)
        if verdict.waiting:
            entry.mode, entry.reason, entry.message = NO_FIT, compact.WAITING_REASON, verdict.message
            entry.retry_at = verdict.deadline
            if self.snap.placement_options.reserve_compact:  # hold one domain for the first unmet wish
                entry.reservation = self._reservation_for(entry, missed_on[0], misses[0][0], verdict.deadline)
        else:
            entry.relaxed = verdict.message

    def _fits(self, entry: _Entry, by_flavor: Mapping[str, list[PodSetSpec]], implied: bool) -> FitCheck:
        usage = entry.assignment.usage
        cq = entry.cq.name

        def check(state: QuotaState, victims: Sequence[AdmittedWorkload], allow_borrowing: bool) -> bool:
            if not state.fits(cq, usage, allow_borrowing):
                return False
            for flavor, pod_sets in sorted(by_flavor.items()):
                held = self._held(entry, flavor)
                if not self._place(self._tree_without(flavor, victims), pod_sets, implied, held=held).fits:
                    return False
            return True

        return check

    def targets(
        self,
        entry: _Entry,
        needs: frozenset[FlavorResource],
        by_flavor: Mapping[str, list[PodSetSpec]],
        implied: bool,
    ) -> list[Target]:
        fits = self._fits(entry, by_flavor, implied)
        if self.fair:
            return self._fair_targets(entry, needs, fits)
        plan = preemption_plan(
            entry.priority, entry.pw.timestamp, entry.cq, self.quota, self.admitted, needs, self.priority_of,
            self.lq_usage(),
        )
        request = self._domain_request(entry, by_flavor)
        if request is not None:
            entry.request = request
            top = entry.pw.spec.pod_sets[0].topology
            entry.required = bool(top is not None and top.required)
        sticky = self._sticky(entry)
        kept = self._clear_domain(entry, fits, by_flavor, sticky) if sticky is not None else []
        if kept:
            return kept
        if not plan:
            return self._clear_domain(entry, fits, by_flavor, None)
        if request is not None:
            found = tas_targets(
                request,
                self.trees[request.flavor],
                entry.cq,
                self.quota,
                plan,
                needs,
                entry.assignment.usage,
                fits,
                self.priority_of,
                time_budget_s=self.snap.preemption_budget_s,
            )
            if found:
                return found
        classic = classical_targets(plan, entry.cq.name, self.quota, needs, fits, self.priority_of)
        if classic and not self._scattered(entry, by_flavor, implied, classic):
            return classic
        # Kueue's heuristic found nothing, or frees capacity the preemptor only uses spread over
        # several domains of its preferred level: clear one domain instead, with no more victims.
        cleared = self._clear_domain(entry, fits, by_flavor, None)
        live = sum(1 for t in cleared if not t.workload.evicted)
        if cleared and (not classic or live <= sum(1 for t in classic if not t.workload.evicted)):
            return cleared
        entry.domain_choice = None
        return classic

    def _scattered(self, entry: _Entry, by_flavor: Mapping[str, list[PodSetSpec]], implied: bool,
                   targets: Sequence[Target]) -> bool:
        """A preferred-level preemptor that, once ``targets`` are gone, would span more than one
        domain of its preferred level."""
        request = entry.request
        if request is None or entry.required or not self.snap.domain_preemption:
            return False
        tree = self._tree_without(request.flavor, [t.workload for t in targets])
        placement = self._place(tree, by_flavor[request.flavor], implied)
        ps = next((p for p in placement.pod_sets if p.name == request.pod_set), None)
        if not placement.fits or ps is None:
            return False
        return target_of_placement(tree, request.flavor, ps, request.level, True) is None

    def _sticky(self, entry: _Entry) -> DomainTarget | None:
        """The domain this preemptor preempted for in an earlier cycle, if it still applies."""
        request = entry.request
        if request is None or not self.snap.domain_preemption:
            return None
        target = parse_target(entry.pw.spec.annotations)
        if target is None or target.flavor != request.flavor or target.pod_set != request.pod_set:
            return None
        return target

    def _clear_domain(self, entry: _Entry, fits: FitCheck, by_flavor: Mapping[str, list[PodSetSpec]],
                      only: DomainTarget | None) -> list[Target]:
        """Domain-clearing preemption (domain_preemption.py): every policy-preemptible blocker on
        the flavor counts, whatever resource it uses. Empty when off or nothing frees a domain."""
        request = entry.request
        if request is None or not self.snap.domain_preemption:
            return []
        ps = entry.pw.spec.pod_sets[0]
        psf = next(p for p in entry.assignment.pod_sets if p.name == ps.name)
        needs = frozenset(fr for fr in psf.usage if fr[0] == request.flavor)
        plan = preemption_plan(
            entry.priority, entry.pw.timestamp, entry.cq, self.quota, self.admitted, needs, self.priority_of,
            self.lq_usage(),
        )
        # The preemptor ClusterQueue's PreemptionConfig adds the candidates its rules select.
        plan, configured = configured_plan(self.snap.preemption_rules, plan, entry.pw.spec, entry.cq.name,
                                           entry.priority, self.admitted, self.priority_of,
                                           self.quota.fits(entry.cq.name, entry.assignment.usage),
                                           self.snap.cluster_queues, self.snap.cohorts)
        if not plan:
            return []
        ctx = ClearContext(entry.cq.name, self.quota, needs, entry.assignment.usage, fits, self.priority_of,
                           configured)
        choice = clear_domain(self.trees[request.flavor], request, entry.required, plan, ctx, only)
        if choice is None:
            return []
        blocked = limit_blocking(self.snap.preemption_rules, self.snap.now, entry.cq.name, choice.targets)
        if blocked is not None:  # PreemptionLimit: no domain clearing for this preemptor now
            entry.blocked_by_limit = blocked.name
            return []
        entry.domain_choice = choice
        return list(choice.targets)

    def _fair_targets(self, entry: _Entry, needs: frozenset[FlavorResource], fits: FitCheck) -> list[Target]:
        """Fair sharing preemption (core/fairsharing.py) instead of the classical plan."""
        candidates = find_candidates(
            entry.priority, entry.pw.timestamp, entry.cq, self.quota, self.admitted, needs, self.priority_of
        )
        config = self.snap.config
        return fair_targets(
            candidates, entry.cq.name, self.quota, self.weights, needs, entry.assignment.usage, fits,
            self.priority_of, config.fair_sharing.preemption_strategies, config.feature_gates, self.lq_usage(),
        )

    @staticmethod
    def _domain_request(entry: _Entry, by_flavor: Mapping[str, list[PodSetSpec]]) -> DomainRequest | None:
        """A single TAS pod set with a required/preferred level (the CP-SAT victim search)."""
        if len(by_flavor) != 1:
            return None
        flavor, pod_sets = next(iter(by_flavor.items()))
        if len(pod_sets) != 1 or len(entry.spec.pod_sets) != 1:
            return None
        ps = pod_sets[0]
        req = ps.topology
        if req is None or req.slice_constraints or req.group_name:
            return None
        level = req.required or req.preferred
        if not level:
            return None
        return DomainRequest(flavor, level, ps.count, ps.requests, ps.node_selector, ps.tolerations, ps.name)

    # ------------------------------------------------------------------ admission
    def commit_tas(self, entry: _Entry, sign: int) -> None:
        requests = {ps.name: ps.requests for ps in entry.spec.pod_sets}
        for name, placement in sorted(entry.placements.items()):
            tree = self.trees[entry.tas_flavor[name]]
            if sign > 0:
                tree.add_usage(placement, requests[name])
            else:
                tree.remove_usage(placement, requests[name])
        if sign > 0:
            self.admitted_now[entry.pw.key] = entry
        else:
            self.admitted_now.pop(entry.pw.key, None)

    def replace(self, entry: _Entry, victims: Sequence[AdmittedWorkload]) -> bool:
        """Re-place the TAS pod sets on the working trees (after ``victims`` are removed)."""
        spec = entry.spec
        implied = is_tas_only(entry.cq, self.snap.flavors)
        by_flavor = self._tas_pod_sets(entry.cq, entry.assignment, spec.pod_sets)
        placements: dict[str, PodSetPlacement] = {}
        flavors: dict[str, str] = {}
        for flavor, pod_sets in sorted(by_flavor.items()):
            tree = self._tree_without(flavor, victims) if victims else self.trees[flavor]
            target = entry.domain_choice.target if entry.domain_choice is not None else None
            placement = self._place(tree, entry.tightened.get(flavor, pod_sets), implied, spec, flavor, target,
                                    held=self._held(entry, flavor))
            if not placement.fits:
                return False
            for p in placement.pod_sets:
                placements[p.name] = p
                flavors[p.name] = flavor
        entry.placements, entry.tas_flavor = placements, flavors
        return True


def partial_search(pod_sets: Sequence[PodSetSpec], fits: Callable[[Sequence[int]], _Entry | None]) -> _Entry | None:
    """Kueue's ``PodSetReducer.Search``: every pod set gives up the same share of what it may
    give up (``count - minCount``), a binary search over that share finds the largest counts
    that ``fits`` (quota, topology, or preemption with targets); None when even the minimum
    does not."""
    deltas = [ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in pod_sets]
    total = sum(deltas)
    if total <= 0:
        return None
    lo, hi, last_good, found = 0, total + 1, 0, None
    while lo < hi:  # Go's sort.Search over [0, total]
        mid = (lo + hi) // 2
        result = fits([ps.count - d * mid // total for ps, d in zip(pod_sets, deltas, strict=True)])
        if result is not None:
            last_good, found, hi = mid, result, mid
        else:
            lo = mid + 1
    return found if lo == last_good else None


def _pending(entry: _Entry, reason: str, message: str, immediate: bool) -> Pending:
    strict = entry.cq.queueing_strategy == STRICT_FIFO
    return Pending(
        entry.pw.key,
        entry.pw.spec.uid,
        entry.cq.name,
        reason or PendingReason.PENDING.value,
        message,
        # held back by a PreemptionLimit: asked again each pass, as its window slides
        REQUEUE_IMMEDIATE if (immediate or strict or entry.blocked_by_limit) else REQUEUE_INADMISSIBLE,
        retry_at=entry.retry_at,
        reserved_domain=entry.reservation.encode() if entry.reservation is not None else "",
        blocked_by_limit=entry.blocked_by_limit,
    )


def _admit(entry: _Entry) -> Admit:
    pod_sets = []
    for psf in entry.assignment.pod_sets:
        usage: dict[str, int] = {}
        for (_, res), v in psf.usage.items():
            usage[res] = usage.get(res, 0) + v
        pod_sets.append(
            PodSetAdmission(psf.name, psf.count, dict(psf.flavors), usage, entry.placements.get(psf.name))
        )
    return Admit(
        entry.pw.key,
        entry.pw.spec.uid,
        entry.cq.name,
        tuple(pod_sets),
        entry.assignment.borrows,
        message=quota_reserved_message(entry.cq.name),
        relaxed=entry.relaxed,
    )


def _reserve(quota: QuotaState, cq: str, usage: Usage) -> Usage:
    """Kueue ``resourcesToReserve``: capacity held back for a preemptor with no targets, so a
    lower-priority workload does not take it (up to nominal, or the borrowing limit)."""
    out: Usage = {}
    for fr, v in usage.items():
        q = quota.quota(cq, fr)
        if q is None:
            continue
        cap = (
            q.nominal
            if not quota.borrowing_with(cq, fr, v) or q.borrowing_limit is None
            else q.nominal + q.borrowing_limit
        )
        out[fr] = max(0, min(v, cap - quota.used(cq, fr)))
    return out


ANN_PREVIOUS_DOMAINS = "toposched.dev/previous-domains"


def previous_domains(spec: WorkloadSpec) -> dict[str, dict[str, str]] | None:
    """The domains a requeued workload held before its eviction (annotation written by the
    controller: JSON ``{"<pod set>": {"<level label>": "<value>"}}``), or None."""
    data = json_object_annotation(spec.annotations, ANN_PREVIOUS_DOMAINS)
    if data is None:
        return None
    return {str(ps): {str(k): str(v) for k, v in sel.items()} for ps, sel in data.items() if isinstance(sel, dict)}


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


def _drain_stopped_queues(cyc: _Cycle) -> list[Decision]:
    """HoldAndDrain: evict what a stopped ClusterQueue (else LocalQueue) still holds."""
    snapshot = cyc.snap
    out: list[Decision] = []
    for w in cyc.admitted:
        if w.evicted:
            continue
        cq = snapshot.cluster_queues.get(w.cluster_queue)
        lq = snapshot.local_queues.get(f"{w.spec.namespace}/{w.spec.queue_name}")
        if cq is not None and cq.stop_policy == STOP_HOLD_AND_DRAIN:
            code = EvictReason.CLUSTER_QUEUE_STOPPED
        elif lq is not None and lq.stop_policy == STOP_HOLD_AND_DRAIN:
            code = EvictReason.LOCAL_QUEUE_STOPPED
        else:
            continue
        out.append(Evict(w.key, w.uid, w.cluster_queue, code.value, evict_message(code)))
    return out


def _not_admitted(pw: PendingWorkload, cq_name: str, code: NotAdmitted, **fields: object) -> Pending:
    """A routing failure: Kueue's reason and message for ``code``, requeued as inadmissible."""
    reason = not_admitted_reason(code)
    assert reason is not None, code  # routing codes all name their own reason
    return Pending(pw.key, pw.spec.uid, cq_name, reason.value, not_admitted_message(code, **fields),
                   by_workload_controller=code in BY_WORKLOAD_CONTROLLER)


def _route(snapshot: Snapshot, inactive: set[str], pw: PendingWorkload) -> ClusterQueueSpec | Pending:
    """Step 1: LocalQueue -> an active ClusterQueue, or why not."""
    spec = pw.spec
    lq = snapshot.local_queues.get(f"{spec.namespace}/{spec.queue_name}")
    if lq is None:
        return _not_admitted(pw, "", NotAdmitted.LOCAL_QUEUE_MISSING, queue=spec.queue_name)
    if lq.stop_policy != STOP_NONE:
        return _not_admitted(pw, lq.cluster_queue, NotAdmitted.LOCAL_QUEUE_STOPPED, queue=spec.queue_name)
    cq = snapshot.cluster_queues.get(lq.cluster_queue)
    if cq is None:
        return _not_admitted(
            pw, lq.cluster_queue, NotAdmitted.CLUSTER_QUEUE_MISSING, cluster_queue=lq.cluster_queue
        )
    if cq.name in inactive:
        return _not_admitted(pw, cq.name, NotAdmitted.CLUSTER_QUEUE_INACTIVE, cluster_queue=cq.name)
    return cq


# ClusterQueue -> its routed LocalQueues: (AFS order usage, the LocalQueue's workloads in order).
Queues = dict[str, list[tuple[float, Sequence[Queued]]]]


def snapshot_queues(snapshot: Snapshot) -> PendingQueues:
    """``snapshot.pending`` by LocalQueue in Kueue's order: the snapshot's own ``queues`` when
    they were built for this very ``pending`` and these priority classes, else built now."""
    queues = snapshot.queues
    if queues is not None and queues.describes(snapshot.pending, snapshot.workload_priority_classes,
                                               snapshot.priority_classes):
        return queues
    return pending_queues(snapshot.pending, snapshot.workload_priority_classes, snapshot.priority_classes)


def _route_pending(cyc: _Cycle, queues: PendingQueues, decisions: list[Decision]) -> Queues:
    """Step 1 for every pending workload: queue it on its ClusterQueue in Kueue's order, or
    report why it cannot be queued (in key order). Routing depends only on the LocalQueue, so
    each LocalQueue is routed once, its workloads staying in their order."""
    snapshot = cyc.snap
    queued: Queues = {}
    refused: list[Pending] = []
    validate = snapshot.config.feature_gates.enabled("TASValidateWorkloadSliceSize")
    for lq_key, all_items in sorted(queues.by_local_queue.items()):
        items = [it for it in all_items if not (validate and it[1].spec.slice_size_errors)]
        refused.extend(_not_admitted(pw, "", NotAdmitted.INVALID_SLICE_SIZE,
                                     errors=", ".join(pw.spec.slice_size_errors))
                       for _, pw in all_items if validate and pw.spec.slice_size_errors)
        if not items:
            continue
        routed = _route(snapshot, cyc.inactive, items[0][1])
        if isinstance(routed, Pending):
            for _, pw in items:
                why = _route(snapshot, cyc.inactive, pw)
                assert isinstance(why, Pending)  # the same LocalQueue, the same answer
                refused.append(why)
            continue
        usage = afs.order_usage(snapshot.config, snapshot.lq_usage, routed.admission_mode, lq_key)
        queued.setdefault(routed.name, []).append((usage, items))
    decisions.extend(sorted(refused, key=lambda d: d.workload))
    return queued


def _nominate_heads(cyc: _Cycle, queued: Queues, decisions: list[Decision]) -> list[_Entry]:
    """Steps 2-3: one head per ClusterQueue, filtered by the namespace selector, nominated."""
    snapshot = cyc.snap
    strategies = {name: cq.queueing_strategy for name, cq in snapshot.cluster_queues.items()}
    entries: list[_Entry] = []
    for cq_name, pw in sorted(heads(queued, snapshot.inadmissible, strategies, snapshot.now).items()):
        cq = snapshot.cluster_queues[cq_name]
        labels = pw.namespace_labels or snapshot.namespace_labels.get(pw.spec.namespace, {})
        if not cq.namespace_selector.matches(labels):
            decisions.append(_not_admitted(pw, cq_name, NotAdmitted.NAMESPACE_MISMATCH))
            continue
        entries.append(cyc.nominate(pw, cq))
    return entries


def _admission_order(e: _Entry) -> tuple[bool, int, float, str, str]:
    """Step 4: not borrowing first, then priority desc, then queue timestamp. Kueue leaves
    ties in the order its heads came (map order: arbitrary); UID, then key, is a fixed order
    that favours no name (as the queue order's own tie-break, ``queueing.local_order``)."""
    return (e.assignment.borrows, -e.priority, e.pw.timestamp, e.pw.spec.uid, e.pw.key)


def _retry_later(entry: _Entry, reason: str, code: NotAdmitted) -> Pending:
    """The entry lost to one processed before it in this cycle: requeue it immediately."""
    return _pending(entry, reason, not_admitted_message(code), True)


def _settle_no_fit(cyc: _Cycle, e: _Entry) -> list[Decision]:
    if e.wanted_preemption:
        # needed preemption, found no targets: hold the capacity back (Kueue)
        cyc.quota.add_usage(e.cq.name, _reserve(cyc.quota, e.cq.name, e.assignment.usage))
    return [_pending(e, e.reason, e.message, False)]


def _preemptions(cyc: _Cycle, e: _Entry) -> list[Decision]:
    """One Preempt per target not already being evicted, in key order."""
    out: list[Decision] = []
    for t in sorted(e.targets, key=lambda t: t.workload.key):
        if t.workload.evicted:
            continue
        message = preemption_message(
            e.pw.spec, t.reason, cyc.quota.path(e.cq.name), cyc.quota.path(t.workload.cluster_queue)
        )
        out.append(
            Preempt(
                t.workload.key, t.workload.uid, t.workload.cluster_queue, e.pw.key, e.cq.name, t.reason, message,
                counted=e.domain_choice is not None,
                config=cyc.snap.preemption_rules.cluster_queue_config.get(e.cq.name, ""),
            )
        )
    return out


def _settle_preempt(cyc: _Cycle, e: _Entry, preempted: set[str]) -> list[Decision]:
    """A preemptor: issue its preemptions and reserve what they free for it, unless another
    entry already claimed one of its targets or it no longer fits even without them."""
    keys = {t.workload.key for t in e.targets}
    if keys & preempted:
        return [_retry_later(e, e.reason, NotAdmitted.OVERLAPPING_TARGETS)]
    usage = e.assignment.usage
    work = cyc.quota.clone()
    for t in e.targets:
        work.remove_usage(t.workload.cluster_queue, t.workload.usage)
    victims = [t.workload for t in e.targets]
    if not work.fits(e.cq.name, usage) or not cyc.replace(e, victims):
        return [_retry_later(e, e.reason, NotAdmitted.NO_LONGER_FITS)]
    # The victims' capacity is now the preemptor's for the rest of the cycle.
    cyc.quota = work
    cyc.quota.add_usage(e.cq.name, usage)
    for t in e.targets:
        for u in t.workload.tas:
            if u.flavor in cyc.trees:
                cyc.trees[u.flavor].remove_usage(u.placement, u.per_pod)
    cyc.commit_tas(e, +1)
    preempted |= keys
    decisions = _preemptions(cyc, e)
    # Kueue counts every target, also the ones already being evicted.
    base = e.message or flavors_message(e.pw.spec.pod_sets[0].name, None)
    message = preemption_pending_message(base, len(e.targets))
    waiting = _pending(e, PendingReason.WAITING_FOR_PREEMPTION.value, message, True)
    e.domain_target = _landing_target(cyc, e)
    if e.domain_target is not None:
        waiting = replace(waiting, preemption_target=e.domain_target.encode())
    decisions.append(waiting)
    return decisions


def _landing_target(cyc: _Cycle, e: _Entry) -> DomainTarget | None:
    """The domain a domain-wanting preemptor lands in once its victims are gone (recorded as
    its sticky target). None when off, not such a preemptor, or the placement spans more."""
    if e.request is None or not cyc.snap.domain_preemption:
        return None
    placement = e.placements.get(e.request.pod_set)
    if placement is None:
        return None
    tree = cyc.trees[e.request.flavor]
    return target_of_placement(tree, e.request.flavor, placement, e.request.level, e.required)


def _settle_fit(cyc: _Cycle, e: _Entry) -> list[Decision]:
    """Admit if it still fits (quota, then topology) after the entries before it, and (with
    waitForPodsReady's ``blockAdmission``) only while every admitted workload is ready."""
    pending = PendingReason.PENDING.value
    if not cyc.quota.fits(e.cq.name, e.assignment.usage):
        return [_retry_later(e, pending, NotAdmitted.NO_LONGER_FITS)]
    if e.placements and not cyc.replace(e, ()):
        return [_retry_later(e, pending, NotAdmitted.NO_LONGER_FITS)]
    if blocks_admission(cyc.snap.config.wait_for_pods_ready, cyc.all_ready):
        return [_pending(e, WAITING, WAITING_MESSAGE, True)]
    cyc.quota.add_usage(e.cq.name, e.assignment.usage)
    cyc.commit_tas(e, +1)
    cyc.all_ready = False  # the new admission has no ready pods yet
    return [_admit(e)]


def _settle(cyc: _Cycle, e: _Entry, preempted: set[str]) -> list[Decision]:
    """Step 5 for one entry, against the usage left by the entries before it."""
    if e.mode == NO_FIT:
        decisions = _settle_no_fit(cyc, e)
    elif e.mode == PREEMPT:
        decisions = _settle_preempt(cyc, e, preempted)
    else:
        decisions = _settle_fit(cyc, e)
    if cyc.snap.placement_options.reserve_compact:
        cyc.keep_reservation(e)
    return decisions


def _fair_next(cyc: _Cycle, remaining: Sequence[_Entry]) -> _Entry:
    """Fair sharing: the winner of the cohort tournament among the remaining heads, against
    the usage the entries settled so far left (core/fairsharing.py ``next_contender``)."""
    contenders = [Contender(e.pw.key, e.cq.name, e.assignment.usage, e.priority, e.pw.timestamp) for e in remaining]
    won = next_contender(cyc.quota, cyc.weights, contenders, cyc.snap.config.feature_gates)
    return next(e for e in remaining if e.pw.key == won.key)


def run_cycle(snapshot: Snapshot) -> list[Decision]:
    """One Kueue-style admission cycle. Same snapshot -> same decisions."""
    return _one_cycle(snapshot)[0]


def _one_cycle(snapshot: Snapshot, own_trees: bool = False) -> tuple[list[Decision], _Cycle, PendingQueues]:
    """One cycle; also returns the queues it ordered ``snapshot.pending`` in, for the next
    cycle of run_cycles. ``own_trees``: as for ``_Cycle``."""
    cyc = _Cycle(snapshot, own_trees=own_trees)
    decisions = _drain_stopped_queues(cyc)
    queues = snapshot_queues(snapshot)
    queued = _route_pending(cyc, queues, decisions)
    entries = _nominate_heads(cyc, queued, decisions)
    entries.sort(key=_admission_order)
    preempted: set[str] = set()
    while entries:
        e = _fair_next(cyc, entries) if cyc.fair else entries[0]
        entries.remove(e)
        decisions.extend(_settle(cyc, e, preempted))
    return decisions, cyc, queues


MAX_IDLE_CYCLES = 2


def run_cycles(snapshot: Snapshot, max_cycles: int = 8) -> list[Decision]:
    """Kueue's scheduler runs cycle after cycle: each takes one head per ClusterQueue and sees
    the previous cycles' admissions assumed in its cache; a BestEffortFIFO head that did not fit
    is parked as inadmissible until capacity is released. This runs such cycles back to back on
    one snapshot, so one pass admits every head that fits one after the other instead of one per
    ClusterQueue (issue 18 item 5: small jobs queued behind each other in one ClusterQueue waited
    a pass each). Stops after a cycle that neither admits nor parks a head (the next would
    decide the same), after :data:`MAX_IDLE_CYCLES` cycles in a row that admit nothing (the next
    pass goes on), after one that preempts
    or evicts (the evictions come first), or after ``max_cycles``. Returns every cycle's admissions, preemptions and
    evictions, and the last pending decision of each workload still pending. Same snapshot ->
    same decisions."""
    kept: dict[str, Decision] = {}
    actions: list[Decision] = []
    snap = snapshot
    idle = 0  # cycles in a row that admitted nothing
    for n in range(max(1, max_cycles)):
        decisions, cyc, queues = _one_cycle(snap, own_trees=n > 0)
        admitted = False
        for d in decisions:
            if isinstance(d, Pending):
                kept[d.workload] = d
            else:
                actions.append(d)
                kept.pop(d.workload, None)
                admitted = admitted or isinstance(d, Admit)
        parked = {d.workload for d in decisions if isinstance(d, Pending) and d.requeue == REQUEUE_INADMISSIBLE
                  and d.cluster_queue in snap.cluster_queues
                  and snap.cluster_queues[d.cluster_queue].queueing_strategy != STRICT_FIFO} - snap.inadmissible
        idle = 0 if admitted else idle + 1
        if not (admitted or parked) or idle >= MAX_IDLE_CYCLES or any(isinstance(d, Preempt | Evict)
                                                                      for d in decisions):
            break  # nothing changed for the next cycle, nothing fits lately, or evictions come first
        # The next cycle's cache: this cycle's admissions hold quota and topology (cyc.trees
        # carry them), its BestEffortFIFO misses are parked. Its queues are this cycle's less
        # the admitted workloads (after_decisions), so it does not order them again.
        snap = replace(after_decisions(replace(snap, queues=queues), decisions), trees=cyc.trees,
                       inadmissible=snap.inadmissible | frozenset(parked),
                       reserved_domains=_reserved_after(snap, decisions))
        taken = {d.workload for d in decisions if isinstance(d, Admit)}
        if afs.enabled(snap.config) and taken:  # Kueue pushes the entry penalty on assume: re-order
            snap = replace(snap, lq_usage=afs.with_entry_penalties(
                snap.lq_usage, [w for w in snap.admitted if w.key in taken], snap.config))
    admitted_keys = {d.workload for d in actions}
    return [*actions, *(d for key, d in kept.items() if key not in admitted_keys)]


def _reserved_after(snapshot: Snapshot, decisions: Sequence[Decision]) -> Mapping[str, str]:
    """reserve-compact: the held domains as the pending decisions of a cycle leave them, for the
    next cycle of the same pass (the annotations are written after the pass)."""
    if not snapshot.placement_options.reserve_compact:
        return snapshot.reserved_domains
    return {**snapshot.reserved_domains,
            **{d.workload: d.reserved_domain for d in decisions if isinstance(d, Pending)}}


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

