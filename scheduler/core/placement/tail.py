"""Partial slices (``TASPartialSlices``), restated from Kueue main's
``pkg/cache/scheduler/tas_partial_slices.go`` and ``findTopologyAssignment`` (late 2026).

A pod set of ``count`` pods with one slice layer of ``size`` that does not divide it is ``count //
size`` whole slices plus one partial slice (the *tail*) of ``count % size`` pods, which one domain
at the slice level must hold. Each domain at or above the slice level also knows how many whole
slices it holds while it holds the tail (``with_tail``; -1: it cannot hold it): at the slice
level ``(pods - tail) // size``; above, its slices minus the cheapest child's loss for holding the
tail, bounded by its own pods.

- Phase 2a: BestFit picks, among the top tier, the domain with the fewest whole slices next to the
  tail that still hold every whole slice (ties: fewer whole slices). A required level that no
  domain can hold fails with the usual message, counting the tail as a slice. Preferred requests
  climb; at the top the whole slices are spread and, if none of the chosen domains holds the tail
  next to its slices, the first domain that can hold it is added.
- Phase 2b: at and above the slice level, before each domain, the rest may be closed in one
  domain with the tail (not a larger one than the plain BestFit choice); otherwise whole slices
  are taken as usual and the tail goes to the first used domain with room for it next to its
  slices, else to the first unused domain that can hold it. Below the slice level pods go one by one.

Only for single pod sets with one slice layer (Kueue excludes multi-layer requests); balanced
placement and CP-SAT skip such requests (Kueue's balanced placement does too).
"""

from __future__ import annotations

import numpy as np

from scheduler.core.placement import greedy
from scheduler.core.placement import spread as spreading
from scheduler.core.placement.types import PlacementError
from scheduler.core.topology import IntArray


def _best_with_tail(prob: greedy.Problem, level: int, order: IntArray, whole: int) -> int:
    """Kueue ``findBestFitDomainForSlicesWithTail``: in the top affinity tier, the domain with the
    fewest whole slices next to the tail that still covers ``whole`` (then fewest whole slices,
    then the first); the first candidate when none does."""
    scores = prob.scores[level] if prob.scores is not None else None
    cands = greedy.top_affinity_tier(order, scores)
    wt, units = prob.with_tail[level][cands], prob.units[level][cands]
    ok = wt >= whole
    if not ok.any():
        return int(cands[0])
    idx = np.nonzero(ok)[0]
    pick = idx[np.lexsort((idx, units[idx], wt[idx]))[0]]
    return int(cands[int(pick)])


def _closing(prob: greedy.Problem, level: int, cands: IntArray, remaining: int) -> int | None:
    """Kueue ``closingDomainWithTail``: one domain of ``cands`` takes the rest and the tail."""
    units, wt = prob.units[level], prob.with_tail[level]
    first = int(cands[0])
    if units[first] < remaining:
        return None
    tail_dom = whole_fit = first
    if prob.best_fit:
        scores = prob.scores[level] if prob.scores is not None else None
        tail_dom = _best_with_tail(prob, level, cands, remaining)
        whole_fit = greedy.tight_fit(units, cands, remaining, scores)
    if wt[tail_dom] < remaining or units[tail_dom] > units[whole_fit]:
        return None
    return tail_dom


def _hosts(prob: greedy.Problem, level: int, dom: int, slices: int) -> bool:
    wt = int(prob.with_tail[level][dom])
    return wt >= 0 and slices <= wt


def _finish(prob: greedy.Problem, level: int, used: list[tuple[int, int]], cands: IntArray) -> int:
    """Kueue ``placeTail``: the first used domain with room for the tail next to its slices, else
    the first unused candidate that can hold it."""
    for dom, slices in used:
        if _hosts(prob, level, dom, slices):
            return dom
    taken = {d for d, _ in used}
    for dom in cands.tolist():
        if dom not in taken and prob.with_tail[level][dom] >= 0:
            used.append((dom, 0))
            return int(dom)
    raise PlacementError(f"cannot place the partial slice of PodSet {prob.pod_set.name} in a single topology domain")


def distribute(prob: greedy.Problem, level: int, order: IntArray, whole: int) -> tuple[list[tuple[int, int]], int]:
    """Kueue ``updateCountsToMinimumGeneric`` with a tail: (domain, whole slices) and the domain
    holding the tail."""
    units = prob.units[level]
    scores = prob.scores[level] if prob.scores is not None else None
    remaining, used, hosted = whole, [], False
    for i in range(len(order)):
        if not hosted:
            closed = _closing(prob, level, order[i:], remaining)
            if closed is not None:
                used.append((closed, remaining))
                return used, closed
        dom = int(order[i])
        if prob.best_fit and units[dom] >= remaining:
            dom = greedy.tight_fit(units, order[i:], remaining, scores)
        if units[dom] >= remaining:
            used.append((dom, remaining))
            return used, _finish(prob, level, used, order)
        used.append((dom, int(units[dom])))
        remaining -= int(units[dom])
        hosted = hosted or _hosts(prob, level, dom, int(units[dom]))
    raise greedy.no_fit_error(prob, whole - remaining)


def _spread_top(prob: greedy.Problem, level: int, order: IntArray, whole: int) -> list[tuple[int, int]]:
    """The top-level spread of Kueue's ``findLevelWithFitDomains``, with a domain added for the
    tail when none of the chosen ones holds it."""
    units = prob.units[level]
    scores = prob.scores[level] if prob.scores is not None else None
    results: list[tuple[int, int]] = []
    remaining = whole
    for i in range(len(order)):
        if remaining <= 0:
            break
        dom = int(order[i])
        if prob.best_fit and units[dom] >= remaining:
            dom = greedy.tight_fit(units, spreading.top_tier(prob.spread, level, order[i:]), remaining, scores)
        results.append((dom, min(int(units[dom]), remaining)))
        remaining -= int(units[dom])
    if remaining > 0:
        raise greedy.no_fit_error(prob, whole - remaining)
    if not any(_hosts(prob, level, d, n) for d, n in results):
        chosen = {d for d, _ in results}
        extra = next((int(d) for d in order.tolist() if d not in chosen and prob.with_tail[level][d] >= 0), None)
        if extra is None:
            raise greedy.no_fit_error(prob, whole)
        results.append((extra, 0))
    return results


def _choose(prob: greedy.Problem, whole: int) -> tuple[int, list[tuple[int, int]]]:
    """Phase 2a with a tail: the level and the domains chosen there (before phase 2b)."""
    level = prob.level
    while True:
        units = prob.units[level]
        if len(units) == 0:
            raise PlacementError(f"no topology domains at level: {prob.tree.levels[level]}")
        order = greedy.sort_domains(prob, level, greedy.allowed(prob, level, np.arange(len(units), dtype=np.int64)))
        wt = prob.with_tail[level]
        top = int(order[0])
        if prob.best_fit:
            top = _best_with_tail(prob, level, spreading.top_tier(prob.spread, level, order), whole)
        else:
            top = next((int(d) for d in order.tolist() if wt[d] >= whole), top)
        if wt[top] >= whole:
            return level, [(top, whole)]
        if prob.mode == "required":
            fits = np.nonzero(wt[order] >= whole)[0]
            if len(fits):  # affinity / spreading moved a fitting domain back
                rest = spreading.top_tier(prob.spread, level, order[int(fits[0]):])
                return level, [(_best_with_tail(prob, level, rest, whole), whole)]
            raise greedy.no_fit_error(prob, int(units[top]), level=level)
        if prob.mode == "preferred" and level > 0:
            level -= 1
            continue
        return level, _spread_top(prob, level, order, whole)


def place(prob: greedy.Problem) -> dict[int, int]:
    """Leaf -> pods for a request with a partial slice."""
    whole = prob.pod_set.count // prob.slice_size
    level, chosen = _choose(prob, whole)
    order = np.array([d for d, _ in chosen], dtype=np.int64)
    current, tail_dom = distribute(prob, level, order, whole)
    tree = prob.tree
    while level < prob.slice_level:
        kids = greedy.allowed(prob, level + 1, greedy.children(tree, level, sorted(d for d, _ in current)))
        level += 1
        current, tail_dom = distribute(prob, level, greedy.sort_domains(prob, level, kids), whole)
    pods = {d: n * prob.slice_size for d, n in current}
    pods[tail_dom] = pods.get(tail_dom, 0) + prob.pod_set.count % prob.slice_size
    if level == len(tree.levels) - 1:
        return {d: n for d, n in pods.items() if n > 0}
    return greedy.descend(prob, level, [(d, n) for d, n in sorted(pods.items()) if n > 0], pods_at_level=True)
