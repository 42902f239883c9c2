"""Nominate a ClusterQueue's head (Kueue's ``nominate`` / ``getInitialAssignments``): the flavor
assigner, TAS placement on the cycle's trees (a TAS failure becomes preemption when an empty
topology would fit), then the refinements toposched hangs on a nomination that fits, then, for
one that needs preemption, the preemption strategies (``preemption/strategies.py``). With the
PartialAdmission gate, a head that neither fits nor can preempt is nominated again with fewer
pods (Kueue's ``PodSetReducer``).

A refinement's contract (:data:`Refinement`): it gets an entry that fits, quota and topology,
with TAS placements, and returns the entry it becomes (``compact_wait.refine``). A step before
preemption has the same contract for an entry that needs preemption; an entry it turns into
no fit does not preempt (``compact_wait.patient``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from scheduler.core.beyond.domain_target import DomainTarget, target_of_placement
from scheduler.core.beyond.held_domains import Reservation
from scheduler.core.beyond.preferred_domains import preferred_domains
from scheduler.core.config import KUEUE_V019
from scheduler.core.kueue import slices
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.cycle_state import CycleState
from scheduler.core.kueue.entries import Entry, Head, Outcome, Preemption
from scheduler.core.kueue.flavorassigner import (
    FlavorAssignment,
    Mode,
    PreemptionMode,
    PreemptionOracle,
    assign_flavors,
    is_tas_only,
)
from scheduler.core.kueue.queueing import PendingWorkload, resolve_priority
from scheduler.core.kueue.quota import ClusterQueueSpec, FlavorResource, QuotaState
from scheduler.core.kueue.topologies import Placed
from scheduler.core.placement.planner import Placement
from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.preemption.classical import classical_targets
from scheduler.core.preemption.domains import DomainRequest
from scheduler.core.preemption.plan import preemption_plan
from scheduler.core.preemption.strategies import Ask, Preemptor, choose_targets
from scheduler.core.preemption.targets import FitCheck, Target
from scheduler.core.reasons import PendingReason, flavors_message
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import PodSetSpec, WorkloadSpec

ByFlavor = Mapping[str, list[PodSetSpec]]  # TAS flavor -> the pod sets assigned it
Refinement = Callable[[Entry, "Nominator"], Entry]
T = TypeVar("T")


def partial_search(pod_sets: Sequence[PodSetSpec], fits: Callable[[Sequence[int]], T | None]) -> T | None:
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


def domain_request(spec: WorkloadSpec, by_flavor: ByFlavor) -> DomainRequest | None:
    """A single TAS pod set with a required/preferred level (the CP-SAT victim search)."""
    if len(by_flavor) != 1:
        return None
    flavor, pod_sets = next(iter(by_flavor.items()))
    if len(pod_sets) != 1 or len(spec.pod_sets) != 1:
        return None
    ps = pod_sets[0]
    req = ps.topology
    if req is None or req.slice_constraints or req.group_name:
        return None
    level = req.required or req.preferred
    if not level:
        return None
    return DomainRequest(flavor, level, ps.count, ps.requests, ps.node_selector, ps.tolerations, ps.name)


class Nominator:
    def __init__(self, state: CycleState, refinements: Sequence[Refinement] = (),
                 before_preemption: Sequence[Refinement] = ()) -> None:
        self.state = state
        self.snap = state.snap
        self.topologies = state.topologies
        self.refinements = tuple(refinements)
        self.before_preemption = tuple(before_preemption)

    # ------------------------------------------------------------------ placing an entry
    def layout(self, entry: Entry) -> tuple[dict[str, list[PodSetSpec]], bool]:
        """The entry's TAS pod sets by flavor, and whether its ClusterQueue implies TAS."""
        head = entry.head
        return (self.topologies.tas_pod_sets(entry.assignment, head.spec.pod_sets),
                is_tas_only(head.cq, self.snap.flavors))

    def place_for(self, entry: Entry, tree: TopologyTree, pod_sets: Sequence[PodSetSpec], flavor: str,
                  implied: bool, *, target: DomainTarget | None = None, held: Sequence[Reservation] = ()) -> Placement:
        """Place the entry's pod sets on ``tree`` as the entry: its preferred domains first
        (preferred_domains.py), its spreading counts, the reservations ``held`` that bind it."""
        spec = entry.head.spec
        preferred = preferred_domains(spec, target, self.state.holds.held_by(spec.key), self.snap.domain_preemption)
        return self.topologies.place(tree, pod_sets, implied, spec=spec, flavor=flavor, preferred=preferred, held=held)

    def replaced(self, entry: Entry, victims: Sequence[AdmittedWorkload]) -> Placed | None:
        """The entry's TAS pod sets placed again on the working trees (after ``victims`` are
        removed), or None when they no longer fit."""
        by_flavor, implied = self.layout(entry)
        target = entry.preemption.domain.target if entry.preemption and entry.preemption.domain else None
        placed = Placed(tightened=entry.placed.tightened)
        for flavor, pod_sets in sorted(by_flavor.items()):
            tree = self.topologies.without(flavor, victims) if victims else self.topologies.trees[flavor]
            placement = self.place_for(entry, tree, entry.placed.tightened.get(flavor, pod_sets), flavor, implied,
                                       target=target, held=self.state.holds.binding(entry.head, flavor))
            if not placement.fits:
                return None
            placed = placed.adding(placement, flavor)
        return placed

    def freeing_before(self, entry: Entry) -> list[AdmittedWorkload]:
        """The admitted workloads whose capacity frees before the entry's: lower priority, or
        already being evicted."""
        return [w for w in self.state.admitted if w.evicted or self.state.priority_of(w) < entry.head.priority]

    # ------------------------------------------------------------------ nomination
    def nominate(self, pw: PendingWorkload, cq: ClusterQueueSpec) -> Entry:
        """The whole workload; when it neither fits nor can preempt, and the PartialAdmission
        gate is on, the most pods its ``minCount`` allow. An elastic job's new slice is
        nominated with the quota of the slice it replaces counted as its own (slices.py)."""
        old = slices.replaced_slice(self.state, pw.key, pw.spec.namespace, cq.name)
        if old is not None:  # never partial: Kueue refuses partial admission on an elastic job
            with slices.as_own(self.state, old):
                return replace(self._nominate(pw, slices.same_flavors(cq, old), pw.spec), replaces=old)
        entry = self._nominate(pw, cq, pw.spec)
        if entry.admissible or not self.snap.config.feature_gates.enabled("PartialAdmission"):
            return entry
        partial = partial_search(pw.spec.pod_sets, lambda counts: self._nominate_reduced(pw, cq, counts))
        return partial if partial is not None else entry

    def _nominate_reduced(self, pw: PendingWorkload, cq: ClusterQueueSpec, counts: Sequence[int]) -> Entry | None:
        pod_sets = tuple(replace(ps, count=n) for ps, n in zip(pw.spec.pod_sets, counts, strict=True))
        entry = self._nominate(pw, cq, replace(pw.spec, pod_sets=pod_sets))
        return entry if entry.admissible else None

    def _nominate(self, pw: PendingWorkload, cq: ClusterQueueSpec, spec: WorkloadSpec) -> Entry:
        snap = self.snap
        head = Head(pw, cq, resolve_priority(spec, snap.workload_priority_classes, snap.priority_classes,
                                             pw.priority), spec)
        assignment = assign_flavors(spec, cq, self.state.quota, snap.flavors, self.topologies.levels,
                                    self._oracle(head), fair_sharing=self.state.fair,
                                    ignore_undeclared=snap.config.ignore_undeclared_resources,
                                    group_tas_flavors=snap.config.release == KUEUE_V019)
        entry = Entry(head, assignment, Outcome(assignment.mode, assignment.reason, assignment.message))
        if assignment.mode == Mode.NO_FIT:
            return entry
        by_flavor, implied = self.layout(entry)
        needs = set(assignment.needs_preemption)
        if assignment.mode == Mode.FIT:
            entry, settled = self._place_topology(entry, by_flavor, implied, needs)
            if settled:
                return entry
            if entry.mode == Mode.FIT and entry.placed.placements:
                for refine in self.refinements:
                    entry = refine(entry, self)
        elif not self._tas_preempt_needs(assignment, by_flavor, implied, needs):
            return entry.becoming(Mode.NO_FIT)  # Kueue: no topology fits even on an empty cluster
        for step in self.before_preemption if entry.mode == Mode.PREEMPT else ():
            entry = step(entry, self)
        if entry.mode == Mode.PREEMPT:
            entry = self._preempt(entry, frozenset(needs), by_flavor, implied)
        return entry

    def _place_topology(self, entry: Entry, by_flavor: ByFlavor, implied: bool,
                        needs: set[FlavorResource]) -> tuple[Entry, bool]:
        """Kueue's TAS step for a quota fit: each flavor's pod sets placed on its working tree.
        A failure needs preemption when the pod sets fit an empty topology (their resources
        join ``needs``), else the entry does not fit; reserve-compact holds back an entry that
        fits only in held room. Returns the entry and whether it is settled."""
        trees, holds = self.topologies.trees, self.state.holds
        overlapping = self.snap.config.feature_gates.enabled("TASHandleOverlappingFlavors")
        assumed: list[tuple[PodSetPlacement, Mapping[str, int]]] = []
        for flavor, pod_sets in sorted(by_flavor.items()):
            held = holds.binding(entry.head, flavor)
            tree = _with_assumed(trees[flavor], assumed) if overlapping else trees[flavor]
            placement = self.place_for(entry, tree, pod_sets, flavor, implied, held=held)
            if placement.fits:
                entry = replace(entry, placed=entry.placed.adding(placement, flavor))
                if overlapping and tree.hostname_lowest:
                    # Kueue's WithAggregatedDomainUsages: the workload's next hostname-level
                    # flavor sees what this one just placed on the hosts they share
                    requests = {ps.name: ps.requests for ps in pod_sets}
                    assumed += [(p, requests.get(p.name, {})) for p in placement.pod_sets]
                continue
            if held and self.place_for(entry, tree, pod_sets, flavor, implied).fits:
                return holds.hold_back(entry, pod_sets[0].name, held), True
            message = flavors_message(placement.failed_pod_set or pod_sets[0].name, placement.reason)
            failed = PendingReason.TOPOLOGY_FAILED.value
            if not self.topologies.place(self.topologies.empty(flavor), pod_sets, implied).fits:
                return entry.becoming(Mode.NO_FIT, failed, message), True
            entry = entry.becoming(Mode.PREEMPT, failed, message)
            needs.update(_resources_on(entry.assignment, pod_sets, flavor))
        return entry, False

    def _tas_preempt_needs(self, assignment: FlavorAssignment, by_flavor: ByFlavor, implied: bool,
                           needs: set[FlavorResource]) -> bool:
        """Quota needs preemption and the workload has TAS pod sets: as Kueue v0.17's flavor
        assigner, False when they fit nowhere even with every workload gone (NoFit), else every
        resource of those pod sets needs preemption (the quota may suffice while the topology is
        fragmented), added to ``needs``."""
        for flavor, pod_sets in sorted(by_flavor.items()):
            if not self.topologies.place(self.topologies.empty(flavor), pod_sets, implied).fits:
                return False
            needs.update(_resources_on(assignment, pod_sets, flavor))
        return True

    def _oracle(self, head: Head) -> PreemptionOracle:
        """Kueue's ``SimulatePreemption`` for the flavor assigner: would preempting free
        ``quantity`` of one flavor-resource, and whose workloads would go."""
        state, cq = self.state, head.cq

        def simulate(fr: FlavorResource, quantity: int) -> PreemptionMode:
            needs = frozenset({fr})
            plan = preemption_plan(head.priority, head.timestamp, cq, state.quota, state.admitted, needs,
                                   state.priority_of, state.lq_usage())

            def fits(quota: QuotaState, _victims: Sequence[AdmittedWorkload], allow_borrowing: bool) -> bool:
                return quota.fits(cq.name, {fr: quantity}, allow_borrowing)

            targets = classical_targets(plan, cq.name, state.quota, needs, fits, state.priority_of) if plan else []
            if not targets:
                return PreemptionMode.NO_CANDIDATES
            in_queue = any(t.workload.cluster_queue == cq.name for t in targets)
            return PreemptionMode.PREEMPT_IN_QUEUE if in_queue else PreemptionMode.RECLAIM

        return simulate

    # ------------------------------------------------------------------ preemption
    def _fits(self, entry: Entry, by_flavor: ByFlavor, implied: bool) -> FitCheck:
        """The preemptor fits: quota, and each TAS flavor's pod sets placed without the victims."""
        usage, cq = entry.assignment.usage, entry.head.cq.name

        def check(state: QuotaState, victims: Sequence[AdmittedWorkload], allow_borrowing: bool) -> bool:
            if not state.fits(cq, usage, allow_borrowing):
                return False
            for flavor, pod_sets in sorted(by_flavor.items()):
                held = self.state.holds.binding(entry.head, flavor)
                if not self.topologies.place(self.topologies.without(flavor, victims), pod_sets, implied,
                                             held=held).fits:
                    return False
            return True

        return check

    def _scattered(self, request: DomainRequest | None, required: bool, by_flavor: ByFlavor,
                   implied: bool) -> Callable[[Sequence[Target]], bool]:
        """A preferred-level preemptor that, once ``targets`` are gone, would span more than one
        domain of its preferred level."""
        def scattered(targets: Sequence[Target]) -> bool:
            if request is None or required or not self.snap.domain_preemption:
                return False
            tree = self.topologies.without(request.flavor, [t.workload for t in targets])
            placement = self.topologies.place(tree, by_flavor[request.flavor], implied)
            ps = next((p for p in placement.pod_sets if p.name == request.pod_set), None)
            if not placement.fits or ps is None:
                return False
            return target_of_placement(tree, request.flavor, ps, request.level, True) is None
        return scattered

    def _preempt(self, entry: Entry, needs: frozenset[FlavorResource], by_flavor: ByFlavor, implied: bool) -> Entry:
        """Whom the entry would preempt (preemption/strategies.py); none found: it does not fit."""
        state, head = self.state, entry.head
        # Fair sharing preempts by shares, never for a domain: no domain request then.
        request = None if state.fair else domain_request(head.spec, by_flavor)
        top = head.pw.spec.pod_sets[0].topology
        required = bool(request is not None and top is not None and top.required)
        preemptor = Preemptor(head.priority, head.timestamp, head.cq, entry.assignment, needs, head.pw.spec,
                              request, required)
        snap = self.snap
        ask = Ask(preemptor, state.quota, state.admitted, state.priority_of, state.lq_usage(),
                  self._fits(entry, by_flavor, implied), self._scattered(request, required, by_flavor, implied),
                  self.topologies.trees, snap.config, state.weights, snap.domain_preemption,
                  snap.preemption_budget_s, snap.preemption_rules, snap.now, snap.cluster_queues, snap.cohorts)
        found = choose_targets(ask)
        entry = replace(entry, preemption=Preemption(found.targets, request, required, found.domain,
                                                     found.blocked_by_limit))
        return entry if found.targets else entry.becoming(Mode.NO_FIT)


def _resources_on(assignment: FlavorAssignment, pod_sets: Sequence[PodSetSpec], flavor: str) -> set[FlavorResource]:
    """The flavor-resources the pod sets use on ``flavor``."""
    out: set[FlavorResource] = set()
    for ps in pod_sets:
        psf = next(p for p in assignment.pod_sets if p.name == ps.name)
        out.update(fr for fr in psf.usage if fr[0] == flavor)
    return out


def _with_assumed(tree: TopologyTree, assumed: Sequence[tuple[PodSetPlacement, Mapping[str, int]]]) -> TopologyTree:
    """``tree`` with the workload's placements on other overlapping hostname-level flavors
    (TASHandleOverlappingFlavors): a copy, only when there is something to add."""
    if not assumed or not tree.hostname_lowest:
        return tree
    out = tree.clone()
    for placement, per_pod in assumed:
        out.add_usage(placement, per_pod)
    return out
