"""Preemption: candidates, Kueue's ordering and target selection, and CP-SAT victims for TAS.

Classic Kueue preemption (``pkg/scheduler/preemption``, doc ``concepts/preemption.md``):

* candidates: admitted workloads of the preemptor's ClusterQueue allowed by
  ``withinClusterQueue`` (``LowerPriority``: strictly lower; ``LowerOrNewerEqualPriority``:
  also equal priority admitted/queued later than the preemptor), plus workloads of other
  ClusterQueues in the same cohort tree that are *borrowing* in a flavor-resource the
  preemptor needs, allowed by ``reclaimWithinCohort`` (``LowerPriority`` or ``Any``); only
  workloads that use one of the flavor-resources needing preemption;
* :func:`candidates_ordering` — evicted first, other ClusterQueues before the own one, lower
  priority, most recently quota-reserved, UID;
* :func:`preemption_plan` (:func:`plan_attempts`) — the attempts, in order: own-CQ-only
  candidates with borrowing; ``borrowWithinCohort`` (``maxPriorityThreshold``) with
  borrowing; without borrowing while the CQ is under nominal; finally own-CQ candidates with
  borrowing.
* :func:`classical_targets` — the heuristic over that plan. Each attempt removes
  candidates in order until the preemptor fits and then puts back (in reverse) every target
  it can do without.

For a preemptor that needs a topology domain (one TAS pod set with a required or preferred
level) :func:`tas_targets` asks CP-SAT for the cheapest victim set — fewest workloads, then
lowest priority, then most recently admitted — whose removal frees one domain at that level
large enough (per-leaf pod capacity modelled exactly), then verifies it by re-running the
placement on a clone of the tree with the victims' usage removed and the quota check, and
minimises the set again so nothing is evicted that is not needed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.core.nodes import Toleration
from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.quota import (
    ANY,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    NEVER,
    ClusterQueueSpec,
    FlavorResource,
    QuotaState,
)
from scheduler.core.resources import with_pod_slot
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import WorkloadSpec

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

HUMAN_READABLE_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    "ConfigurablePreemption": "the configured preemption rules",  # Kueue v0.20's PreemptionConfig
}


@dataclass(frozen=True)
class TASUsage:
    """One admitted pod set's topology assignment on a TAS flavor."""

    flavor: str
    placement: PodSetPlacement
    per_pod: Mapping[str, int]  # per-pod requests WITHOUT pods: 1


@dataclass(frozen=True)
class AdmittedWorkload:
    """A workload holding a quota reservation (admitted, or being evicted)."""

    spec: WorkloadSpec
    cluster_queue: str
    usage: Mapping[FlavorResource, int]
    reserved_at: float = 0.0  # QuotaReserved lastTransitionTime
    priority: int | None = None  # resolved priority; None = resolve from classes
    evicted: bool = False  # Evicted=True already (its preemption is in progress)
    queued_at: float | None = None  # queue-order timestamp (for LowerOrNewerEqualPriority)
    tas: tuple[TASUsage, ...] = ()
    pods_ready: bool = True  # PodsReady=True (waitForPodsReady's blockAdmission looks at it)

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def uid(self) -> str:
        return self.spec.uid

    @property
    def timestamp(self) -> float:
        return self.spec.created_at if self.queued_at is None else self.queued_at


@dataclass(frozen=True)
class Target:
    workload: AdmittedWorkload
    reason: str


def preemption_message(preemptor: WorkloadSpec, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """Kueue's Preempted condition / Evicted message."""
    uid = preemptor.uid or "UNKNOWN"
    job_uid = preemptor.labels.get(LABEL_JOB_UID) or "UNKNOWN"
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
        f"{HUMAN_READABLE_REASONS.get(reason, 'UNKNOWN')}; preemptor path: {preemptor_path or 'UNKNOWN'}; "
        f"preemptee path: {preemptee_path or 'UNKNOWN'}"
    )


# Admission Fair Sharing: the LocalQueue usage of a candidate (core/afs.py), None when its
# ClusterQueue is not ordered by usage (Kueue's ``Info.LocalQueueFSUsage`` nil).
LqUsage = Callable[[AdmittedWorkload], float | None]


def _afs_compare(a: AdmittedWorkload, b: AdmittedWorkload, lq_usage: LqUsage) -> int:
    """Kueue ``CandidatesOrdering`` step 3 (AFS on): two candidates of the same ClusterQueue
    from different LocalQueues, both with a usage: the higher usage first."""
    if a.cluster_queue != b.cluster_queue or a.spec.queue_name == b.spec.queue_name:
        return 0
    ua, ub = lq_usage(a), lq_usage(b)
    if ua is None or ub is None or ua == ub:
        return 0
    return -1 if ua > ub else 1


def candidate_order_key(
    w: AdmittedWorkload, own_cq: str, priority: Callable[[AdmittedWorkload], int], lq_usage: LqUsage | None = None
) -> Any:
    """Kueue ``CandidatesOrdering``: evicted first; other ClusterQueues before the preemptor's;
    (Admission Fair Sharing on) higher LocalQueue usage first within a ClusterQueue; lower
    priority first; most recently quota-reserved first; UID (then key) ascending. A tuple
    without AFS; a comparison key with it (the AFS step compares only some pairs)."""
    def base(x: AdmittedWorkload) -> tuple[bool, bool, int, float, str, str]:
        return (not x.evicted, x.cluster_queue == own_cq, priority(x), -x.reserved_at, x.uid, x.key)

    if lq_usage is None:
        return base(w)

    def compare(a: AdmittedWorkload, b: AdmittedWorkload) -> int:
        ka, kb = base(a), base(b)
        if ka[:2] != kb[:2]:
            return -1 if ka[:2] < kb[:2] else 1
        return _afs_compare(a, b, lq_usage) or (-1 if ka[2:] < kb[2:] else (1 if ka[2:] > kb[2:] else 0))

    return functools.cmp_to_key(compare)(w)


def candidates_ordering(
    candidates: Sequence[AdmittedWorkload], own_cq: str, priority: Callable[[AdmittedWorkload], int],
    lq_usage: LqUsage | None = None,
) -> list[AdmittedWorkload]:
    """The candidates in Kueue's order (:func:`candidate_order_key`)."""
    return sorted(candidates, key=lambda w: candidate_order_key(w, own_cq, priority, lq_usage))


def _uses(w: AdmittedWorkload, needs: frozenset[FlavorResource]) -> bool:
    return any(fr in needs and v > 0 for fr, v in w.usage.items())


def find_candidates(
    preemptor_priority: int,
    preemptor_timestamp: float,
    cq: ClusterQueueSpec,
    quota: QuotaState,
    admitted: Sequence[AdmittedWorkload],
    needs: frozenset[FlavorResource],
    priority: Callable[[AdmittedWorkload], int],
) -> list[AdmittedWorkload]:
    policy = cq.preemption
    out: list[AdmittedWorkload] = []
    if policy.within_cluster_queue != NEVER:
        same_prio_ok = policy.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY
        for w in admitted:
            if w.cluster_queue != cq.name:
                continue
            p = priority(w)
            if p > preemptor_priority:
                continue
            if p == preemptor_priority and not (same_prio_ok and preemptor_timestamp < w.timestamp):
                continue
            if _uses(w, needs):
                out.append(w)
    if quota.has_cohort(cq.name) and policy.reclaim_within_cohort != NEVER:
        only_lower = policy.reclaim_within_cohort != ANY
        borrowing = {
            other
            for other in quota.cluster_queues_in_tree(cq.name)
            if other != cq.name and any(quota.borrowing(other, fr) for fr in needs)
        }
        for w in admitted:
            if w.cluster_queue not in borrowing:
                continue
            if only_lower and priority(w) >= preemptor_priority:
                continue
            if _uses(w, needs):
                out.append(w)
    return out


def _cq_is_borrowing(quota: QuotaState, cq: str, needs: frozenset[FlavorResource]) -> bool:
    return quota.has_cohort(cq) and any(quota.borrowing(cq, fr) for fr in needs)


FitCheck = Callable[[QuotaState, Sequence[AdmittedWorkload], bool], bool]


class Attempt(NamedTuple):
    """One try of Kueue's preemption plan."""

    candidates: list[AdmittedWorkload]  # in Kueue's order
    allow_borrowing: bool  # the preemptor may borrow once the targets are gone
    borrow_below_priority: int | None  # borrowWithinCohort: other-CQ victims below this priority


def _minimal(
    candidates: Sequence[AdmittedWorkload],
    cq: str,
    quota: QuotaState,
    needs: frozenset[FlavorResource],
    fits: FitCheck,
    allow_borrowing: bool,
    below_priority: int | None,
    priority: Callable[[AdmittedWorkload], int],
) -> list[Target]:
    """Kueue ``minimalPreemptions``: remove in order until it fits, then fill back."""
    work = quota.clone()
    targets: list[Target] = []
    fit = False
    for cand in candidates:
        if cand.cluster_queue != cq and not _cq_is_borrowing(work, cand.cluster_queue, needs):
            continue
        reason, forbids_borrowing = _target_reason(cand, cq, below_priority, priority)
        allow_borrowing = allow_borrowing and not forbids_borrowing
        work.remove_usage(cand.cluster_queue, cand.usage)
        targets.append(Target(cand, reason))
        if fits(work, [t.workload for t in targets], allow_borrowing):
            fit = True
            break
    if not fit:
        return []
    return fill_back(targets, work, fits, allow_borrowing)


def _target_reason(
    cand: AdmittedWorkload, cq: str, below_priority: int | None, priority: Callable[[AdmittedWorkload], int]
) -> tuple[str, bool]:
    """Why ``cand`` would be preempted, and whether taking it forbids the preemptor to borrow
    (borrowWithinCohort: an other-CQ victim at or above the threshold)."""
    if cand.cluster_queue == cq:
        return IN_CLUSTER_QUEUE, False
    if below_priority is None:
        return IN_COHORT_RECLAMATION, False
    if priority(cand) >= below_priority:
        return IN_COHORT_RECLAMATION, True
    return IN_COHORT_RECLAIM_WHILE_BORROWING, False


def fill_back(
    targets: list[Target], work: QuotaState, fits: FitCheck, allow_borrowing: bool
) -> list[Target]:
    """Walk the targets in reverse (all but the last) and keep out every one the preemptor
    can do without."""
    for i in range(len(targets) - 2, -1, -1):
        t = targets[i]
        work.add_usage(t.workload.cluster_queue, t.workload.usage)
        rest = [x.workload for j, x in enumerate(targets) if j != i]
        if fits(work, rest, allow_borrowing):
            targets.pop(i)
        else:
            work.remove_usage(t.workload.cluster_queue, t.workload.usage)
    return targets


def _under_nominal(quota: QuotaState, cq: str, needs: frozenset[FlavorResource]) -> bool:
    return all(quota.used(cq, fr) < quota.nominal(cq, fr) for fr in needs)


def borrow_within_cohort_threshold(cq: ClusterQueueSpec, preemptor_priority: int) -> int | None:
    """None when borrowWithinCohort is off; else the priority below which other-CQ candidates
    may be preempted while the preemptor borrows."""
    policy = cq.preemption
    if policy.borrow_within_cohort == NEVER:
        return None
    threshold = preemptor_priority
    if policy.max_priority_threshold is not None and policy.max_priority_threshold < threshold:
        threshold = policy.max_priority_threshold + 1
    return threshold


def plan_attempts(
    candidates: Sequence[AdmittedWorkload],
    cq: ClusterQueueSpec,
    quota: QuotaState,
    needs: frozenset[FlavorResource],
    preemptor_priority: int,
    priority: Callable[[AdmittedWorkload], int],
) -> list[Attempt]:
    """Kueue's attempt plan: (candidates in order, allow borrowing, borrow-below-priority)."""
    same = [c for c in candidates if c.cluster_queue == cq.name]
    if len(same) == len(candidates):
        return [Attempt(list(candidates), True, None)]
    threshold = borrow_within_cohort_threshold(cq, preemptor_priority)
    if threshold is not None:
        cands = list(candidates)
        if not _under_nominal(quota, cq.name, needs):
            # Only workloads strictly below the threshold may be taken from other queues.
            cands = [c for c in cands if c.cluster_queue == cq.name or priority(c) < threshold]
        return [Attempt(cands, True, threshold)]
    plan: list[Attempt] = []
    if _under_nominal(quota, cq.name, needs):
        plan.append(Attempt(list(candidates), False, None))
    plan.append(Attempt(same, True, None))
    return plan


def preemption_plan(
    preemptor_priority: int,
    preemptor_timestamp: float,
    cq: ClusterQueueSpec,
    quota: QuotaState,
    admitted: Sequence[AdmittedWorkload],
    needs: frozenset[FlavorResource],
    priority: Callable[[AdmittedWorkload], int],
    lq_usage: LqUsage | None = None,
) -> list[Attempt]:
    """The candidates of a preemptor, in Kueue's order, split into its attempts (empty when
    nothing may be preempted). Both :func:`tas_targets` and :func:`classical_targets` walk it."""
    candidates = find_candidates(
        preemptor_priority, preemptor_timestamp, cq, quota, admitted, needs, priority
    )
    if not candidates:
        return []
    ordered = candidates_ordering(candidates, cq.name, priority, lq_usage)
    return plan_attempts(ordered, cq, quota, needs, preemptor_priority, priority)


def classical_targets(
    plan: Sequence[Attempt],
    cq: str,
    quota: QuotaState,
    needs: frozenset[FlavorResource],
    fits: FitCheck,
    priority: Callable[[AdmittedWorkload], int],
) -> list[Target]:
    """Kueue's classical target selection (no fair sharing): the first attempt of ``plan``
    whose minimal preemption set lets the preemptor fit."""
    for cands, allow_borrowing, threshold in plan:
        targets = _minimal(cands, cq, quota, needs, fits, allow_borrowing, threshold, priority)
        if targets:
            return targets
    return []


# ---------------------------------------------------------------------- TAS victims (CP-SAT)


@dataclass(frozen=True)
class DomainRequest:
    """What the preemptor needs from one TAS flavor: ``count`` pods of ``per_pod`` (WITHOUT
    ``pods: 1``) inside one domain at ``level``."""

    flavor: str
    level: str
    count: int
    per_pod: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    pod_set: str = ""  # the pod set's name (the sticky target records it)


def _victim_leaf_usage(
    tree: TopologyTree, flavor: str, cand: AdmittedWorkload
) -> dict[int, npt.NDArray[np.int64]]:
    out: dict[int, npt.NDArray[np.int64]] = {}
    for usage in cand.tas:
        if usage.flavor != flavor:
            continue
        vec = tree.request_vector(with_pod_slot(usage.per_pod))
        for dom in usage.placement.domains:
            leaf = tree.leaf_for_values(usage.placement.levels, dom.values)
            if leaf is None:
                continue
            out[leaf] = out.get(leaf, np.zeros_like(vec)) + dom.count * vec
    return out


def _pods_fit(free: npt.NDArray[np.int64], req: npt.NDArray[np.int64]) -> int:
    mask = req > 0
    if not mask.any():
        return 0
    return int(max(0, int(np.min(np.maximum(free[mask], 0) // req[mask]))))


def _feasible_domains(
    tree: TopologyTree,
    request: DomainRequest,
    usage: Mapping[str, Mapping[int, npt.NDArray[np.int64]]],
    req: npt.NDArray[np.int64],
) -> dict[int, list[int]]:
    """Domains at ``request.level`` worth modelling, with their eligible leaves: they hold
    some candidate usage and could hold the pods if every candidate inside were removed."""
    per_pod = with_pod_slot(request.per_pod)
    anc = tree.ancestors_array(tree.level_index(request.level))
    eligible = (
        tree.leaf_fit(per_pod, request.node_selector, request.tolerations, free=tree.allocatable).counts > 0
    )
    leaves_by_domain: dict[int, set[int]] = {}
    for per_leaf in usage.values():
        for leaf in per_leaf:
            leaves_by_domain.setdefault(int(anc[leaf]), set())
    domain_leaves = {d: [int(x) for x in np.nonzero((anc == d) & eligible)[0]] for d in leaves_by_domain}
    feasible: dict[int, list[int]] = {}
    for d, leaves in sorted(domain_leaves.items()):
        best = 0
        for leaf in leaves:
            free = tree.free[leaf].copy()
            for per_leaf in usage.values():
                if leaf in per_leaf:
                    free = free + per_leaf[leaf]
            best += _pods_fit(free, req)
        if best >= request.count:
            feasible[d] = leaves
    return feasible


def _require_one_domain(
    model: cp_model.CpModel,
    tree: TopologyTree,
    request: DomainRequest,
    cands: Sequence[AdmittedWorkload],
    x: Sequence[cp_model.IntVar],
    usage: Mapping[str, Mapping[int, npt.NDArray[np.int64]]],
    req: npt.NDArray[np.int64],
    feasible: Mapping[int, list[int]],
) -> None:
    """Exactly one domain is chosen and, with the chosen victims gone, holds the pods (per
    leaf: pods x request <= free + the victims' usage there, for every requested resource)."""
    y = {d: model.new_bool_var(f"y{d}") for d in feasible}
    model.add_exactly_one(y.values())
    for d, leaves in feasible.items():
        terms: list[cp_model.LinearExprT] = []
        const = 0
        for leaf in leaves:
            holders = [(i, usage[c.key][leaf]) for i, c in enumerate(cands) if leaf in usage[c.key]]
            base = tree.free[leaf]
            if not holders:
                const += _pods_fit(base, req)
                continue
            total = base.copy()
            for _, u in holders:
                total = total + u
            ub = _pods_fit(total, req)
            p = model.new_int_var(0, ub, f"p{leaf}")
            for r in np.nonzero(req > 0)[0]:
                model.add(int(req[r]) * p <= int(base[r]) + sum(int(u[r]) * x[i] for i, u in holders))
            terms.append(p)
        model.add(sum(terms) + const >= request.count).only_enforce_if(y[d])


def _minimize_victim_cost(
    model: cp_model.CpModel,
    cands: Sequence[AdmittedWorkload],
    x: Sequence[cp_model.IntVar],
    priority: Callable[[AdmittedWorkload], int],
) -> None:
    """Lexicographic cost as one weighted sum: number of victims, then their priority ranks,
    then admission recency ranks (most recent cheapest)."""
    prios = sorted({priority(c) for c in cands})
    prio_rank = {p: i for i, p in enumerate(prios)}
    recency = sorted({c.reserved_at for c in cands}, reverse=True)
    rec_rank = {t: i for i, t in enumerate(recency)}
    n = len(cands)
    w_rec = 1
    w_prio = n * max(len(recency), 1) + 1
    w_count = n * (w_prio * max(len(prios), 1) + max(len(recency), 1)) + 1
    model.minimize(
        sum(
            x[i] * (w_count + w_prio * prio_rank[priority(c)] + w_rec * rec_rank[c.reserved_at])
            for i, c in enumerate(cands)
        )
    )


def cheapest_domain_victims(
    tree: TopologyTree,
    request: DomainRequest,
    candidates: Sequence[AdmittedWorkload],
    priority: Callable[[AdmittedWorkload], int],
    quota_shortfall: Mapping[FlavorResource, int] | None = None,
    excluded_sets: Sequence[frozenset[str]] = (),
    time_budget_s: float = 0.5,
) -> list[AdmittedWorkload] | None:
    """CP-SAT: the cheapest subset of ``candidates`` whose removal lets ``request.count`` pods
    fit inside ONE domain at ``request.level`` (per-leaf capacity, every requested resource
    and the pod slot), and covers ``quota_shortfall``. Cost, lexicographic: number of victims,
    then their priorities (lower is cheaper), then admission age (most recent is cheaper).
    ``excluded_sets`` are victim sets (keys) already rejected by verification.
    None when no subset works (or the solver finds none in time)."""
    if not tree.has_level(request.level) or request.count <= 0:
        return None
    req = tree.request_vector(with_pod_slot(request.per_pod))
    usage = {c.key: _victim_leaf_usage(tree, request.flavor, c) for c in candidates}
    feasible = _feasible_domains(tree, request, usage, req)
    if not feasible:
        return None
    model = cp_model.CpModel()
    cands = list(candidates)
    x = [model.new_bool_var(f"x{i}") for i in range(len(cands))]
    _require_one_domain(model, tree, request, cands, x, usage, req, feasible)
    for fr, need in (quota_shortfall or {}).items():
        if need > 0:
            model.add(sum(int(c.usage.get(fr, 0)) * x[i] for i, c in enumerate(cands)) >= need)
    for rejected in excluded_sets:
        idx = [i for i, c in enumerate(cands) if c.key in rejected]
        if len(idx) == len(rejected):
            model.add(sum(x[i] for i in idx) <= len(idx) - 1)
    _minimize_victim_cost(model, cands, x, priority)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 1
    solver.parameters.max_deterministic_time = max(time_budget_s, 0.01) * 10
    solver.parameters.max_time_in_seconds = max(time_budget_s, 0.01) * 4
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return [c for i, c in enumerate(cands) if solver.value(x[i])]


def tas_targets(
    request: DomainRequest,
    tree: TopologyTree,
    cq: ClusterQueueSpec,
    quota: QuotaState,
    plan: Sequence[Attempt],
    needs: frozenset[FlavorResource],
    request_usage: Mapping[FlavorResource, int],
    fits: FitCheck,
    priority: Callable[[AdmittedWorkload], int],
    max_candidates: int = 400,
    max_rounds: int = 4,
    time_budget_s: float = 0.5,
) -> list[Target] | None:
    """Verified cheapest victims for a domain-needing preemptor, or None (use the classical
    heuristic instead)."""
    for cands, allow_borrowing, threshold in plan:
        pool = [
            c for c in cands if c.cluster_queue == cq.name or _cq_is_borrowing(quota, c.cluster_queue, needs)
        ]
        pool = pool[:max_candidates]
        if not pool:
            continue
        shortfall = {
            fr: v - quota.available(cq.name, fr)
            for fr, v in request_usage.items()
            if fr in needs and v > quota.available(cq.name, fr)
        }
        rejected: list[frozenset[str]] = []
        for _ in range(max_rounds):
            chosen = cheapest_domain_victims(
                tree, request, pool, priority, shortfall, rejected, time_budget_s
            )
            if chosen is None:
                break
            order = {c.key: i for i, c in enumerate(pool)}
            chosen.sort(key=lambda c: order[c.key])
            targets: list[Target] = []
            allow = allow_borrowing
            work = quota.clone()
            valid = True
            for c in chosen:
                # Kueue re-checks after every removal: an other-queue victim only while its queue borrows.
                valid = valid and (c.cluster_queue == cq.name or _cq_is_borrowing(work, c.cluster_queue, needs))
                reason, forbids_borrowing = _target_reason(c, cq.name, threshold, priority)
                allow = allow and not forbids_borrowing
                work.remove_usage(c.cluster_queue, c.usage)
                targets.append(Target(c, reason))
            if valid and fits(work, chosen, allow):
                return fill_back(targets, work, fits, allow) if len(targets) > 1 else targets
            rejected.append(frozenset(c.key for c in chosen))
    return None
