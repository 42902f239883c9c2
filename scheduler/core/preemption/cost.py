"""Who is preempted first: the cost of a preemption victim, defined once.

A victim is cheaper the lower its priority and, at equal priority, the more recently its quota
was reserved (Kueue's candidate ordering); :func:`cost_of` is that cost. Every way of choosing
victims reads it:

* :func:`candidate_order_key`: Kueue's ``CandidatesOrdering``, the order classical, fair sharing
  and domain-clearing preemption take candidates in and CP-SAT's pool is cut in: workloads
  already being evicted first, other ClusterQueues before the preemptor's, (Admission Fair
  Sharing) higher LocalQueue usage first, then the cheaper cost, then UID;
* :func:`victim_cost`: a whole victim set, which domain clearing compares across domains: the
  victims' costs from the most expensive down (a prefix is cheaper: fewer victims), then the GPUs
  they hold; victims already being evicted cost nothing;
* :func:`solver_weights`: the same order as one weighted sum for CP-SAT: the number of victims
  first, then the ranks of their priorities, then of their recency. The solver counts a victim
  already being evicted like any other (its pool is Kueue's candidates, whose order puts them
  first anyway).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from scheduler.core.kueue.admitted import AdmittedWorkload

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")

Priority = Callable[[AdmittedWorkload], int]
# Admission Fair Sharing: the LocalQueue usage of a candidate (core/kueue/afs.py), None when its
# ClusterQueue is not ordered by usage (Kueue's ``Info.LocalQueueFSUsage`` nil).
LqUsage = Callable[[AdmittedWorkload], float | None]


class VictimCost(NamedTuple):
    """One victim's cost, compared as a tuple: lower priority is cheaper, then more recent."""

    priority: int
    recency: float  # -reservation time: the more recently admitted, the smaller


def cost_of(w: AdmittedWorkload, priority: Priority) -> VictimCost:
    return VictimCost(priority(w), -w.reserved_at)


def gpus_held(w: AdmittedWorkload) -> int:
    return sum(v for (_, res), v in w.usage.items() if res in GPU_RESOURCES)


class SetCost(NamedTuple):
    """A victim set's cost, compared as a tuple (see :func:`victim_cost`)."""

    victims: list[VictimCost]  # most expensive first
    gpus_lost: int


def victim_cost(victims: Sequence[AdmittedWorkload], priority: Priority) -> SetCost:
    """The cost of preempting ``victims``; those already being evicted are free."""
    live = [w for w in victims if not w.evicted]
    return SetCost(sorted((cost_of(w, priority) for w in live), reverse=True), sum(gpus_held(w) for w in live))


def _afs_compare(a: AdmittedWorkload, b: AdmittedWorkload, lq_usage: LqUsage) -> int:
    """Kueue ``CandidatesOrdering`` step 3 (AFS on): two candidates of the same ClusterQueue
    from different LocalQueues, both with a usage: the higher usage first."""
    if a.cluster_queue != b.cluster_queue or a.spec.queue_name == b.spec.queue_name:
        return 0
    ua, ub = lq_usage(a), lq_usage(b)
    if ua is None or ub is None or ua == ub:
        return 0
    return -1 if ua > ub else 1


def candidate_order_key(w: AdmittedWorkload, own_cq: str, priority: Priority, lq_usage: LqUsage | None = None) -> Any:
    """Kueue ``CandidatesOrdering``: evicted first; other ClusterQueues before the preemptor's;
    (Admission Fair Sharing on) higher LocalQueue usage first within a ClusterQueue; the cheaper
    :func:`cost_of` first; UID (then key) ascending. A tuple without AFS; a comparison key with
    it (the AFS step compares only some pairs)."""
    def base(x: AdmittedWorkload) -> tuple[bool, bool, int, float, str, str]:
        return (not x.evicted, x.cluster_queue == own_cq, *cost_of(x, priority), x.uid, x.key)

    if lq_usage is None:
        return base(w)

    def compare(a: AdmittedWorkload, b: AdmittedWorkload) -> int:
        ka, kb = base(a), base(b)
        if ka[:2] != kb[:2]:
            return -1 if ka[:2] < kb[:2] else 1
        return _afs_compare(a, b, lq_usage) or (-1 if ka[2:] < kb[2:] else (1 if ka[2:] > kb[2:] else 0))

    return functools.cmp_to_key(compare)(w)


def candidates_ordering(
    candidates: Sequence[AdmittedWorkload], own_cq: str, priority: Priority, lq_usage: LqUsage | None = None,
) -> list[AdmittedWorkload]:
    """The candidates in Kueue's order (:func:`candidate_order_key`)."""
    return sorted(candidates, key=lambda w: candidate_order_key(w, own_cq, priority, lq_usage))


def solver_weights(candidates: Sequence[AdmittedWorkload], priority: Priority) -> list[int]:
    """Per candidate, its weight in a minimised sum that orders victim sets lexicographically:
    the number of victims, then the sum of their priority ranks, then of their recency ranks
    (each rank over the distinct values of that part of :func:`cost_of`; 0 is the cheapest)."""
    costs = [cost_of(c, priority) for c in candidates]
    prio_rank = {p: i for i, p in enumerate(sorted({c.priority for c in costs}))}
    rec_rank = {r: i for i, r in enumerate(sorted({c.recency for c in costs}))}
    n = len(costs)
    w_rec = 1
    w_prio = n * max(len(rec_rank), 1) + 1
    w_count = n * (w_prio * max(len(prio_rank), 1) + max(len(rec_rank), 1)) + 1
    return [w_count + w_prio * prio_rank[c.priority] + w_rec * rec_rank[c.recency] for c in costs]
