"""Who may be preempted, and in which attempts (Kueue ``pkg/scheduler/preemption``, doc
``concepts/preemption.md``).

* candidates (:func:`find_candidates`): admitted workloads of the preemptor's ClusterQueue
  allowed by ``withinClusterQueue`` (``LowerPriority``: strictly lower;
  ``LowerOrNewerEqualPriority``: also equal priority admitted/queued later than the preemptor),
  plus workloads of other ClusterQueues in the same cohort tree that are *borrowing* in a
  flavor-resource the preemptor needs, allowed by ``reclaimWithinCohort`` (``LowerPriority`` or
  ``Any``); only workloads that use one of the flavor-resources needing preemption;
* ordered by ``preemption.cost.candidate_order_key``;
* the attempts (:func:`plan_attempts`), in order: own-CQ-only candidates with borrowing;
  ``borrowWithinCohort`` (``maxPriorityThreshold``) with borrowing; without borrowing while the
  CQ is under nominal; finally own-CQ candidates with borrowing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.quota import (
    ANY,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    NEVER,
    ClusterQueueSpec,
    FlavorResource,
    QuotaState,
)
from scheduler.core.preemption.cost import LqUsage, Priority, candidates_ordering


def _uses(w: AdmittedWorkload, needs: frozenset[FlavorResource]) -> bool:
    return any(fr in needs and v > 0 for fr, v in w.usage.items())


def find_candidates(
    preemptor_priority: int,
    preemptor_timestamp: float,
    cq: ClusterQueueSpec,
    quota: QuotaState,
    admitted: Sequence[AdmittedWorkload],
    needs: frozenset[FlavorResource],
    priority: Priority,
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


class Attempt(NamedTuple):
    """One try of Kueue's preemption plan."""

    candidates: list[AdmittedWorkload]  # in Kueue's order
    allow_borrowing: bool  # the preemptor may borrow once the targets are gone
    borrow_below_priority: int | None  # borrowWithinCohort: other-CQ victims below this priority


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
    priority: Priority,
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
    priority: Priority,
    lq_usage: LqUsage | None = None,
) -> list[Attempt]:
    """The candidates of a preemptor, in Kueue's order, split into its attempts (empty when
    nothing may be preempted). The classical, CP-SAT and domain-clearing strategies walk it."""
    candidates = find_candidates(preemptor_priority, preemptor_timestamp, cq, quota, admitted, needs, priority)
    if not candidates:
        return []
    ordered = candidates_ordering(candidates, cq.name, priority, lq_usage)
    return plan_attempts(ordered, cq, quota, needs, preemptor_priority, priority)
