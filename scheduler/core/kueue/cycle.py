"""One admission cycle: ``run_cycle(snapshot) -> list[Decision]``. Pure and deterministic.

Kueue's scheduling cycle (``pkg/scheduler/scheduler.go``), restated; each step is one function
here, and what toposched adds hangs on a step as a named module with one contract:

1. Route every pending workload LocalQueue -> ClusterQueue (a missing LocalQueue or
   ClusterQueue, a stopped or inactive queue gives a pending decision with Kueue's message).
2. Take ONE head per ClusterQueue (``queueing.heads``).
3. Nominate each head (``nominate.Nominator``): namespace selector, flavor assignment
   (``flavorassigner``), TAS placement on the working trees (``topologies``: topology spreading
   counts; ``preferred_domains``: sticky target, held domain, previous domains;
   ``reserve_compact``: room held for compact waiters), the refinements of a nomination that
   fits (:data:`REFINEMENTS`: ``compact_wait``), and for a head that needs preemption the
   steps before it (:data:`BEFORE_PREEMPTION`: ``compact_wait.patient``), then the preemption
   strategies in order (``preemption/strategies.py``: fair sharing -> sticky -> CP-SAT ->
   classical -> clear-domain).
4. Order the entries: not borrowing first, then priority desc, then queue timestamp (fair
   sharing: the cohort tournament, ``fairsharing.next_contender``).
5. Settle the entries against the *updated* usage (quota and topology): admit what still
   fits, issue preemptions (the freed capacity is reserved for the preemptor for the rest of
   the cycle), skip overlapping preemption targets, and report everything else as pending.

The snapshot is never modified: quota state and trees are cloned at the start
(``cycle_state.CycleState``). :func:`run_cycles` runs such cycles back to back on one snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from scheduler.core.beyond import domain_holds
from scheduler.core.beyond.compact_wait import patient
from scheduler.core.beyond.compact_wait import refine as wait_for_compact
from scheduler.core.beyond.domain_target import DomainTarget
from scheduler.core.beyond.preferred_domains import landing_target
from scheduler.core.kueue import afs, slices
from scheduler.core.kueue.cycle_state import CycleState
from scheduler.core.kueue.decisions import Admit, Decision, Evict, Pending, PodSetAdmission, Preempt
from scheduler.core.kueue.entries import Entry
from scheduler.core.kueue.fairsharing import Contender, next_contender
from scheduler.core.kueue.flavorassigner import Mode
from scheduler.core.kueue.nominate import Nominator, Refinement
from scheduler.core.kueue.podsready import WAITING, WAITING_MESSAGE, blocks_admission
from scheduler.core.kueue.queueing import (
    REQUEUE_IMMEDIATE,
    REQUEUE_INADMISSIBLE,
    PendingQueues,
    PendingWorkload,
    Queued,
    heads,
)
from scheduler.core.kueue.quota import STOP_HOLD_AND_DRAIN, STOP_NONE, STRICT_FIFO, ClusterQueueSpec, QuotaState, Usage
from scheduler.core.kueue.snapshot import Snapshot, after_decisions, snapshot_queues
from scheduler.core.preemption.targets import preemption_message
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

# toposched's refinements of a nomination that fits, in order (nominate.Refinement), and its
# steps before a nomination that needs preemption preempts.
REFINEMENTS: tuple[Refinement, ...] = (wait_for_compact,)
BEFORE_PREEMPTION: tuple[Refinement, ...] = (patient,)

# ---------------------------------------------------------------------- step 1: routing


def _drain_stopped_queues(cyc: CycleState) -> list[Decision]:
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
    """LocalQueue -> an active ClusterQueue, or why not."""
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


def _route_pending(cyc: CycleState, queues: PendingQueues, decisions: list[Decision]) -> Queues:
    """Every pending workload queued on its ClusterQueue in Kueue's order, or why it cannot be
    queued (in key order). Routing depends only on the LocalQueue, so each LocalQueue is routed
    once, its workloads staying in their order."""
    snapshot = cyc.snap
    queued: Queues = {}
    refused: list[Pending] = []
    validate = snapshot.config.feature_gates.enabled("TASValidateWorkloadSliceSize")
    for lq_key, all_items in sorted(queues.by_local_queue.items()):
        # Kueue v0.19 refuses such a Workload at creation: held pending with its field errors.
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


# ---------------------------------------------------------------------- steps 2-4: heads, nomination, order


def _nominate_heads(cyc: CycleState, nominator: Nominator, queued: Queues, decisions: list[Decision]) -> list[Entry]:
    """One head per ClusterQueue, filtered by the namespace selector, nominated."""
    snapshot = cyc.snap
    strategies = {name: cq.queueing_strategy for name, cq in snapshot.cluster_queues.items()}
    entries: list[Entry] = []
    for cq_name, pw in sorted(heads(queued, snapshot.inadmissible, strategies, snapshot.now).items()):
        cq = snapshot.cluster_queues[cq_name]
        labels = pw.namespace_labels or snapshot.namespace_labels.get(pw.spec.namespace, {})
        if not cq.namespace_selector.matches(labels):
            decisions.append(_not_admitted(pw, cq_name, NotAdmitted.NAMESPACE_MISMATCH))
            continue
        entries.append(nominator.nominate(pw, cq))
    return entries


def _admission_order(e: Entry) -> tuple[bool, int, float, str, str]:
    """Not borrowing first, then priority desc, then queue timestamp. Kueue leaves ties in the
    order its heads came (map order: arbitrary); UID, then key, is a fixed order that favours no
    name (as the queue order's own tie-break, ``queueing.local_order``)."""
    return (e.assignment.borrows, -e.head.priority, e.head.timestamp, e.head.pw.spec.uid, e.head.key)


def _fair_next(cyc: CycleState, remaining: Sequence[Entry]) -> Entry:
    """Fair sharing: the winner of the cohort tournament among the remaining heads, against
    the usage the entries settled so far left (core/kueue/fairsharing.py ``next_contender``)."""
    contenders = [Contender(e.head.key, e.head.cq.name, e.assignment.usage, e.head.priority, e.head.timestamp)
                  for e in remaining]
    won = next_contender(cyc.quota, cyc.weights, contenders, cyc.snap.config.feature_gates)
    return next(e for e in remaining if e.head.key == won.key)


# ---------------------------------------------------------------------- step 5: settle


def _pending(entry: Entry, reason: str, message: str, immediate: bool) -> Pending:
    strict = entry.head.cq.queueing_strategy == STRICT_FIFO
    return Pending(
        entry.head.key,
        entry.head.pw.spec.uid,
        entry.head.cq.name,
        reason or PendingReason.PENDING.value,
        message,
        # held back by a PreemptionLimit: asked again each pass, as its window slides
        REQUEUE_IMMEDIATE if (immediate or strict or entry.blocked_by_limit) else REQUEUE_INADMISSIBLE,
        retry_at=entry.waiting.retry_at,
        reserved_domain=domain_holds.reserved_domain(entry.waiting),
        blocked_by_limit=entry.blocked_by_limit,
    )


def _retry_later(entry: Entry, reason: str, code: NotAdmitted) -> Pending:
    """The entry lost to one processed before it in this cycle: requeue it immediately."""
    return _pending(entry, reason, not_admitted_message(code), True)


def _admit(entry: Entry) -> Admit:
    pod_sets = []
    for psf in entry.assignment.pod_sets:
        usage: dict[str, int] = {}
        for (_, res), v in psf.usage.items():
            usage[res] = usage.get(res, 0) + v
        pod_sets.append(
            PodSetAdmission(psf.name, psf.count, dict(psf.flavors), usage, entry.placed.placements.get(psf.name))
        )
    head = entry.head
    return Admit(head.key, head.pw.spec.uid, head.cq.name, tuple(pod_sets), entry.assignment.borrows,
                 message=quota_reserved_message(head.cq.name), relaxed=entry.waiting.relaxed,
                 replaces=entry.replaces.key if entry.replaces is not None else "")


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


def _settle_no_fit(cyc: CycleState, e: Entry) -> list[Decision]:
    if e.preemption is not None:
        # needed preemption, found no targets: hold the capacity back (Kueue)
        cyc.quota.add_usage(e.head.cq.name, _reserve(cyc.quota, e.head.cq.name, e.assignment.usage))
    return [_pending(e, e.outcome.reason, e.outcome.message, False)]


def _preemptions(cyc: CycleState, e: Entry) -> list[Decision]:
    """One Preempt per target not already being evicted, in key order."""
    out: list[Decision] = []
    head = e.head
    # Domain clearing's victims count against PreemptionLimits (preemption/rules.py).
    counted = e.preemption is not None and e.preemption.domain is not None
    config = cyc.snap.preemption_rules.cluster_queue_config.get(head.cq.name, "")
    for t in sorted(e.targets, key=lambda t: t.workload.key):
        if t.workload.evicted:
            continue
        message = preemption_message(
            head.pw.spec, t.reason, cyc.quota.path(head.cq.name), cyc.quota.path(t.workload.cluster_queue)
        )
        out.append(Preempt(t.workload.key, t.workload.uid, t.workload.cluster_queue, head.key, head.cq.name,
                           t.reason, message, counted=counted, config=config))
    return out


def _settle_preempt(cyc: CycleState, nominator: Nominator, e: Entry, preempted: set[str]) -> list[Decision]:
    """A preemptor: issue its preemptions and reserve what they free for it, unless another
    entry already claimed one of its targets or it no longer fits even without them."""
    keys = {t.workload.key for t in e.targets}
    if keys & preempted:
        return [_retry_later(e, e.outcome.reason, NotAdmitted.OVERLAPPING_TARGETS)]
    usage = e.assignment.usage
    work = cyc.quota.clone() if e.replaces is None else slices.without_slice(cyc.quota, e.replaces)
    for t in e.targets:
        work.remove_usage(t.workload.cluster_queue, t.workload.usage)
    victims = [t.workload for t in e.targets]
    placed = nominator.replaced(e, victims) if work.fits(e.head.cq.name, usage) else None
    if placed is None:
        return [_retry_later(e, e.outcome.reason, NotAdmitted.NO_LONGER_FITS)]
    e = replace(e, placed=placed)
    # The victims' capacity is now the preemptor's for the rest of the cycle (and an elastic
    # job's old slice's, which its new slice counts as its own: slices.py).
    cyc.quota = work
    cyc.quota.add_usage(e.head.cq.name, usage)
    cyc.topologies.release(victims + ([e.replaces] if e.replaces is not None else []))
    cyc.topologies.take(e.head.key, e.head.pw.spec, e.head.spec, e.placed)
    preempted |= keys
    decisions = _preemptions(cyc, e)
    # Kueue counts every target, also the ones already being evicted.
    base = e.outcome.message or flavors_message(e.head.pw.spec.pod_sets[0].name, None)
    message = preemption_pending_message(base, len(e.targets))
    waiting = _pending(e, PendingReason.WAITING_FOR_PREEMPTION.value, message, True)
    target = _landing_target(cyc, e)
    if target is not None:
        waiting = replace(waiting, preemption_target=target.encode())
    decisions.append(waiting)
    return decisions


def _landing_target(cyc: CycleState, e: Entry) -> DomainTarget | None:
    """The domain a domain-wanting preemptor lands in once its victims are gone (recorded as
    its sticky target). None when off, not such a preemptor, or the placement spans more."""
    preemption = e.preemption
    if preemption is None or preemption.request is None or not cyc.snap.domain_preemption:
        return None
    request = preemption.request
    return landing_target(cyc.topologies.trees[request.flavor], request, preemption.required,
                          e.placed.placements.get(request.pod_set))


def _settle_fit(cyc: CycleState, nominator: Nominator, e: Entry) -> list[Decision]:
    """Admit if it still fits (quota, then topology) after the entries before it, and (with
    waitForPodsReady's ``blockAdmission``) only while every admitted workload is ready."""
    pending = PendingReason.PENDING.value
    # An elastic job's new slice: fitted with the slice it replaces released (slices.py).
    old = [e.replaces] if e.replaces is not None else []
    quota = cyc.quota if e.replaces is None else slices.without_slice(cyc.quota, e.replaces)
    if not quota.fits(e.head.cq.name, e.assignment.usage):
        return [_retry_later(e, pending, NotAdmitted.NO_LONGER_FITS)]
    if e.placed.placements:
        placed = nominator.replaced(e, ())
        if placed is None:
            return [_retry_later(e, pending, NotAdmitted.NO_LONGER_FITS)]
        e = replace(e, placed=placed)
    if blocks_admission(cyc.snap.config.wait_for_pods_ready, cyc.all_ready):
        return [_pending(e, WAITING, WAITING_MESSAGE, True)]
    cyc.quota = quota
    cyc.quota.add_usage(e.head.cq.name, e.assignment.usage)
    cyc.topologies.release(old)  # finished with the admission: its nodes are free for the rest
    cyc.topologies.take(e.head.key, e.head.pw.spec, e.head.spec, e.placed)
    cyc.all_ready = False  # the new admission has no ready pods yet
    return [_admit(e)]


def _settle(cyc: CycleState, nominator: Nominator, e: Entry, preempted: set[str]) -> list[Decision]:
    """One entry, against the usage left by the entries before it."""
    if e.mode == Mode.NO_FIT:
        decisions = _settle_no_fit(cyc, e)
    elif e.mode == Mode.PREEMPT:
        decisions = _settle_preempt(cyc, nominator, e, preempted)
    else:
        decisions = _settle_fit(cyc, nominator, e)
    cyc.holds.keep(e)  # reserve-compact
    return decisions


# ---------------------------------------------------------------------- cycles


def run_cycle(snapshot: Snapshot) -> list[Decision]:
    """One Kueue-style admission cycle. Same snapshot -> same decisions."""
    return _one_cycle(snapshot)[0]


def _one_cycle(snapshot: Snapshot, own_trees: bool = False) -> tuple[list[Decision], CycleState, PendingQueues]:
    """One cycle; also returns the queues it ordered ``snapshot.pending`` in, for the next
    cycle of run_cycles. ``own_trees``: as for ``CycleState``."""
    cyc = CycleState(snapshot, own_trees=own_trees)
    nominator = Nominator(cyc, REFINEMENTS, BEFORE_PREEMPTION)
    decisions = _drain_stopped_queues(cyc)
    queues = snapshot_queues(snapshot)
    queued = _route_pending(cyc, queues, decisions)
    entries = _nominate_heads(cyc, nominator, queued, decisions)
    entries.sort(key=_admission_order)
    preempted: set[str] = set()
    while entries:
        e = _fair_next(cyc, entries) if cyc.fair else entries[0]
        entries.remove(e)
        decisions.extend(_settle(cyc, nominator, e, preempted))
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
        # The next cycle's cache: this cycle's admissions hold quota and topology (cyc.topologies.trees
        # carry them), its BestEffortFIFO misses are parked. Its queues are this cycle's less
        # the admitted workloads (after_decisions), so it does not order them again.
        snap = replace(after_decisions(replace(snap, queues=queues), decisions), trees=cyc.topologies.trees,
                       inadmissible=snap.inadmissible | frozenset(parked),
                       reserved_domains=domain_holds.reserved_after(snap, decisions))
        taken = {d.workload for d in decisions if isinstance(d, Admit)}
        if afs.enabled(snap.config) and taken:  # Kueue pushes the entry penalty on assume: re-order
            snap = replace(snap, lq_usage=afs.with_entry_penalties(
                snap.lq_usage, [w for w in snap.admitted if w.key in taken], snap.config))
    admitted_keys = {d.workload for d in actions}
    return [*actions, *(d for key, d in kept.items() if key not in admitted_keys)]
