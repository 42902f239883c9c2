"""Kueue's balanced placement (``TASBalancedPlacement``, alpha since v0.15), restated from
``pkg/cache/scheduler/tas_balanced_placement.go`` (v0.19).

Only for preferred requests (not required, not unconstrained / implied / slice-only). Kueue:

1. Candidate groups: all domains of the requested level when it is the top level, else the
   children of each domain one level up (path order). In each group the BestFit greedy count of
   domains one level below the requested one (the requested level itself when it is the slice
   level) gives the threshold = min(slices // domains used, slices of the last domain used).
2. Children of the group's domains with fewer slices than the threshold are dropped (their whole
   subtree), then group domains left below the threshold. The group must still fit; the best
   group has the highest threshold, then the fewest requested-level domains.
3. A dynamic programme picks, among sets with the greedy's number of domains, the one whose
   free pods overshoot the request least (requested level ordered by slices desc, then the
   entropy of their children's free pods desc, then path; the level below by path). Every chosen
   domain gets ``threshold`` slices, and the rest is handed out in BestFit order.
4. Below, every parent splits its own count (no re-packing across parents).

When no group has a threshold above zero, or a step fails, the caller falls back to BestFit.
PodSet groups (leader + workers): the same steps with the leader, in :mod:`group_balanced`.
"""

from __future__ import annotations

import math

import numpy as np

from scheduler.core.placement import greedy
from scheduler.core.topology import IntArray


def _greedy_count(prob: greedy.Problem, level: int, domains: IntArray, slice_count: int) -> tuple[int, int]:
    """Kueue ``evaluateGreedyAssignment`` without a leader: (domains used, last domain) taking
    whole domains in BestFit order until the slices are covered; (0, -1) if they cannot be."""
    order = greedy.sort_domains(prob, level, domains, best_fit=True)
    vals = prob.units[level][order]
    positive = vals > 0
    order, vals = order[positive], vals[positive]
    if len(order) == 0:
        return 0, -1
    i = int(np.searchsorted(np.cumsum(vals), slice_count))
    if i >= len(order):
        return 0, -1
    return i + 1, int(order[i])


def _pruned(prob: greedy.Problem, group: IntArray, threshold: int) -> greedy.Problem:
    """Kueue ``pruneDomainsBelowThreshold``: the group's children under the threshold, then the
    group's domains under it, lose all their capacity."""
    tree, level = prob.tree, prob.level
    counts = prob.fit.counts.copy()
    if level < len(tree.levels) - 1:
        kids = greedy.children(prob.tree, level, group.tolist())
        low = kids[prob.units[level + 1][kids] < threshold]
        if len(low):
            counts[np.isin(tree.ancestors_array(level + 1), low)] = 0
    step = greedy.with_leaf_counts(prob, counts)
    low_group = group[step.units[level][group] < threshold]
    if len(low_group):
        counts[np.isin(tree.ancestors_array(level), low_group)] = 0
        step = greedy.with_leaf_counts(prob, counts)
    return step


def _best_group(prob: greedy.Problem, slice_count: int) -> tuple[int, IntArray, greedy.Problem] | None:
    """Kueue ``findBestDomainsForBalancedPlacement``: (threshold, group, pruned problem)."""
    tree, level = prob.tree, prob.level
    if level == prob.slice_level and level < len(tree.levels) - 1:
        return None  # Kueue reads the children's (zero) slice counts here: nothing survives pruning
    if level == 0:
        groups = [np.arange(tree.domain_count(0), dtype=np.int64)]
    else:
        groups = [greedy.children(prob.tree, level - 1, [p])
                  for p in range(tree.domain_count(level - 1))]
    lower_level = level + 1 if level < prob.slice_level else level
    best: tuple[int, IntArray, greedy.Problem] | None = None
    best_threshold, best_count = 0, 0
    for group in groups:
        lower = greedy.children(prob.tree, level, group.tolist()) if lower_level != level else group
        used, last = _greedy_count(prob, lower_level, lower, slice_count)
        if used == 0:
            continue
        threshold = min(slice_count // used, int(prob.units[lower_level][last]))
        if threshold < best_threshold:
            continue
        pruned = _pruned(prob, group, threshold)
        count, _ = _greedy_count(pruned, level, group, slice_count)
        if count == 0:
            continue
        if threshold > best_threshold or count < best_count:
            best_threshold, best_count, best = threshold, count, (threshold, group, pruned)
    return best if best_threshold > 0 else None


def _entropy(prob: greedy.Problem, level: int, domain: int) -> float:
    """Shannon entropy (bits) of the free pods of ``domain``'s children."""
    kids = greedy.children(prob.tree, level, [domain])
    pods = prob.pod_counts[level + 1][kids] if len(kids) else np.zeros(0, dtype=np.int64)
    total = int(pods.sum())
    if total == 0:
        return 0.0
    return float(-sum((p / total) * math.log2(p / total) for p in pods.tolist() if p > 0))


def _optimal_set(prob: greedy.Problem, level: int, domains: IntArray, slice_count: int,
                 by_entropy: bool) -> list[int] | None:
    """Kueue ``selectOptimalDomainSetToFit``: of the sets with the greedy's number of domains that
    hold the request, the one whose free pods exceed it least (the first found on ties)."""
    used, _ = _greedy_count(prob, level, domains, slice_count)
    if used == 0:
        return None
    units, pods = prob.units[level], prob.pod_counts[level]
    ids = domains.tolist()
    if by_entropy:
        ids.sort(key=lambda d: (-int(units[d]), -_entropy(prob, level, d), d))
    else:
        ids.sort()
    # placements[i]: pods still to place -> the first set of i domains leaving that many
    placements: list[dict[int, list[int]]] = [{} for _ in range(used + 1)]
    placements[0][slice_count * prob.slice_size] = []
    for d in ids:
        if units[d] <= 0:
            continue
        for i in range(used, 0, -1):
            for before in sorted(placements[i - 1]):
                if before <= 0:
                    continue
                placements[i].setdefault(before - int(pods[d]), placements[i - 1][before] + [d])
    done = [left for left in placements[used] if left <= 0]
    return placements[used][max(done)] if done else None


def _share(prob: greedy.Problem, level: int, domains: IntArray, slice_count: int,
           threshold: int) -> list[tuple[int, int]] | None:
    """Kueue ``placeSlicesOnDomainsBalanced``: ``threshold`` slices on every chosen domain and
    the remainder in BestFit order."""
    chosen = _optimal_set(prob, level, domains, slice_count, by_entropy=False)
    if chosen is None or slice_count < len(chosen) * threshold:
        return None
    order = greedy.sort_domains(prob, level, np.array(chosen, dtype=np.int64), best_fit=True)
    extra = slice_count - len(chosen) * threshold
    out = []
    for d in order.tolist():
        take = min(int(prob.units[level][d]) - threshold, extra) if extra > 0 else 0
        out.append((d, threshold + take))
        extra -= take
    return out if extra <= 0 else None


def place(prob: greedy.Problem) -> dict[int, int] | None:
    """Balanced leaf -> pods, or None when Kueue falls back to BestFit."""
    if prob.mode != "preferred":
        return None
    slice_count = prob.pod_set.count // prob.slice_size
    found = _best_group(prob, slice_count)
    if found is None:
        return None
    threshold, group, pruned = found
    level = prob.level
    candidates = group
    if level < prob.slice_level:
        top = _optimal_set(pruned, level, group, slice_count, by_entropy=True)
        if top is None:
            return None
        candidates = greedy.children(pruned.tree, level, top)
        level += 1
    shares = _share(pruned, level, candidates, slice_count, threshold)
    if shares is None:
        return None
    return greedy.descend(pruned, level, shares, per_parent=True)
