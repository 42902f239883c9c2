"""Kueue's balanced placement (``TASBalancedPlacement``) for a PodSet group (leader + workers),
restated from ``pkg/cache/scheduler/tas_balanced_placement.go`` (v0.19), whose every step takes
the leader count; :mod:`balanced` is the same algorithm for a single pod set.

For a preferred request, over the group's phase-1 counts (:mod:`group_counts`):

1. Candidate groups of sibling domains at the requested level (all of the top level, else the
   children of each domain one level up, path order). In each, Kueue's greedy count
   (``evaluateGreedyAssignment``): leader-capable domains first (leader, slices next to a
   leader desc, workers next to a leader asc, path) until the leader is placed, then the rest
   by slices desc, workers asc, path. Threshold = min(slices // domains used, the last leader
   domain's slices next to a leader, the last domain's slices).
2. Pruning: a domain below the threshold loses its capacity (subtree); a leader-capable one
   whose slices next to a leader are below it loses only its leader capacity; then the group
   is re-counted and pruned the same way. When the pruned group no longer fits and reserving
   the leader's room lowers the threshold (the last domain's slices next to a leader), that
   lower threshold is tried. Best: highest threshold, then fewest requested-level domains.
3. A dynamic programme over (domains used, leaders left, pods left) picks the set with the
   greedy's number of domains that holds the leader and the workers with the least overshoot
   (requested level ordered by leader, slices next to a leader, children's entropy, path).
4. Each chosen domain gets ``threshold`` slices, the leader goes to the first in leader order,
   and the remaining slices are handed out in that order.

None (fall back to the joint BestFit) when no group has a threshold above zero or a step fails.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scheduler.core.placement import greedy
from scheduler.core.placement.group_counts import Counts, counts_from_leaves
from scheduler.core.topology import BoolArray


@dataclass(frozen=True)
class _Greedy:
    """``evaluateGreedyAssignment``'s answer."""

    fits: bool
    used: int = 0
    last_with_leader: int = -1
    last: int = -1


def _with_leader_order(c: Counts, lvl: int, doms: list[int]) -> list[int]:
    return sorted(doms, key=lambda d: (-int(c.leader[lvl][d]), -int(c.slices_with_leader[lvl][d]),
                                       int(c.with_leader[lvl][d]), d))


def _plain_order(c: Counts, lvl: int, doms: list[int]) -> list[int]:
    return sorted(doms, key=lambda d: (-int(c.slices[lvl][d]), int(c.state[lvl][d]), d))


def _evaluate(c: Counts, lvl: int, doms: list[int], slice_count: int, leaders: int) -> _Greedy:
    used, last_with_leader, last = 0, -1, -1
    remaining = slice_count
    rest = doms
    if leaders > 0:
        ordered = _with_leader_order(c, lvl, doms)
        idx = 0
        while leaders > 0 and idx < len(ordered) and c.leader[lvl][ordered[idx]] > 0:
            d = ordered[idx]
            used, last_with_leader = used + 1, d
            leaders -= int(c.leader[lvl][d])
            remaining -= int(c.slices_with_leader[lvl][d])
            idx += 1
        rest = ordered[idx:]
    if leaders > 0:
        return _Greedy(False)
    for d in _plain_order(c, lvl, rest):
        if remaining <= 0 or c.slices[lvl][d] <= 0:
            break
        used, last = used + 1, d
        remaining -= int(c.slices[lvl][d])
    if remaining > 0:
        return _Greedy(False)
    return _Greedy(True, used, last_with_leader, last)


def _children(prob: greedy.Problem, lvl: int, parents: list[int]) -> list[int]:
    return [int(k) for k in greedy.children(prob.tree, lvl, parents)]


@dataclass(frozen=True)
class _Recount:
    """What re-counting a pruned copy needs: the problem and the group's slice layers."""

    prob: greedy.Problem
    sizes_below: Mapping[int, int]

    def leaves_under(self, lvl: int, doms: list[int]) -> BoolArray:
        mask: BoolArray = np.isin(self.prob.tree.ancestors_array(lvl), np.array(doms, dtype=np.int64))
        return mask

    def prune(self, c: Counts, lvl: int, doms: list[int], threshold: int, leader_required: bool) -> Counts:
        """Kueue's ``pruneDomainNodeBelowThreshold`` on ``doms`` (at ``lvl``), then the re-count."""
        last = len(self.prob.tree.levels) - 1
        state, with_leader, leader = c.state[last].copy(), c.with_leader[last].copy(), c.leader[last].copy()
        below = [d for d in doms if c.slices[lvl][d] < threshold]
        no_leader = [d for d in doms if c.slices[lvl][d] >= threshold and leader_required
                     and c.leader[lvl][d] > 0 and c.slices_with_leader[lvl][d] < threshold]
        if below:
            cleared = self.leaves_under(lvl, below)
            state[cleared], with_leader[cleared], leader[cleared] = 0, 0, 0
        if no_leader:
            cleared = self.leaves_under(lvl, no_leader)
            with_leader[cleared], leader[cleared] = 0, 0
        prob = self.prob
        return counts_from_leaves(prob.tree, state, with_leader, leader, prob.slice_level, prob.slice_size,
                                  self.sizes_below)

    def pruned_group(self, c: Counts, group: list[int], threshold: int, leaders: int) -> Counts:
        """Kueue's ``pruneDomainsBelowThreshold``: the group's children, then the group."""
        lvl = self.prob.level
        if lvl < len(self.prob.tree.levels) - 1:
            c = self.prune(c, lvl + 1, _children(self.prob, lvl, group), threshold, leaders > 0)
        return self.prune(c, lvl, group, threshold, leaders > 0)


def _best_group(rc: _Recount, c: Counts, slice_count: int, leaders: int) -> tuple[int, list[int], Counts] | None:
    """Kueue's ``findBestDomainsForBalancedPlacement`` for a group: (threshold, domains, counts)."""
    prob = rc.prob
    tree, lvl = prob.tree, prob.level
    if lvl == prob.slice_level and lvl < len(tree.levels) - 1:
        return None  # as for a single pod set: nothing survives pruning here
    if lvl == 0:
        groups = [list(range(tree.domain_count(0)))]
    else:
        groups = [_children(prob, lvl - 1, [p]) for p in range(tree.domain_count(lvl - 1))]
    lower_level = lvl + 1 if lvl < prob.slice_level else lvl
    best: tuple[int, list[int], Counts] | None = None
    best_threshold, best_count = 0, 0
    for group in groups:
        lower = _children(prob, lvl, group) if lower_level != lvl else group
        found = _evaluate(c, lower_level, lower, slice_count, leaders)
        if not found.fits:
            continue
        threshold = slice_count // found.used
        if found.last_with_leader >= 0:
            threshold = min(threshold, int(c.slices_with_leader[lower_level][found.last_with_leader]))
        reserved = threshold
        if found.last >= 0:
            threshold = min(threshold, int(c.slices[lower_level][found.last]))
            if leaders > 0:
                reserved = min(threshold, int(c.slices_with_leader[lower_level][found.last]))
        if threshold < best_threshold:
            continue
        pruned = rc.pruned_group(c, group, threshold, leaders)
        after = _evaluate(pruned, lvl, group, slice_count, leaders)
        if not after.fits and reserved < threshold:  # retry leaving room for the leader
            if reserved <= 0 or reserved < best_threshold:
                continue
            threshold = reserved
            pruned = rc.pruned_group(c, group, threshold, leaders)
            after = _evaluate(pruned, lvl, group, slice_count, leaders)
        if not after.fits:
            continue
        if threshold > best_threshold or (threshold == best_threshold and after.used < best_count):
            best_threshold, best_count, best = threshold, after.used, (threshold, group, pruned)
    return best if best_threshold > 0 else None


def _entropy(c: Counts, prob: greedy.Problem, lvl: int, d: int) -> float:
    """Shannon entropy (bits) of the workers that fit in ``d``'s children."""
    pods = [int(c.state[lvl + 1][k]) for k in _children(prob, lvl, [d])] if lvl + 1 < len(c.state) else []
    total = sum(pods)
    if total == 0:
        return 0.0
    return float(-sum((p / total) * math.log2(p / total) for p in pods if p > 0))


def _optimal_set(c: Counts, prob: greedy.Problem, lvl: int, doms: list[int], slice_count: int, leaders: int,
                 by_entropy: bool) -> list[int] | None:
    """Kueue's ``selectOptimalDomainSetToFit`` with the leader: among sets of the greedy's size
    that hold the leader and every worker, the one whose capacity overshoots least."""
    found = _evaluate(c, lvl, doms, slice_count, leaders)
    if not found.fits:
        return None
    if by_entropy:
        ordered = sorted(doms, key=lambda d: (-int(c.leader[lvl][d]), -int(c.slices_with_leader[lvl][d]),
                                              -_entropy(c, prob, lvl, d), d))
    else:
        ordered = sorted(doms)
    used = found.used
    # placements[i][leaders left][pods left]: the first set of i domains reaching that state
    placements: list[dict[int, dict[int, list[int]]]] = [{} for _ in range(used + 1)]
    placements[0][leaders] = {slice_count * prob.slice_size: []}
    for d in ordered:
        for i in range(used, 0, -1):
            for before_leader in sorted(placements[i - 1]):
                for before_pods in sorted(placements[i - 1][before_leader]):
                    if before_leader <= 0 and before_pods <= 0:
                        continue
                    chosen = placements[i - 1][before_leader][before_pods] + [d]
                    if before_leader > 0 and c.leader[lvl][d] > 0:
                        after = placements[i].setdefault(before_leader - int(c.leader[lvl][d]), {})
                        after.setdefault(before_pods - int(c.with_leader[lvl][d]), chosen)
                    if c.slices[lvl][d] > 0:
                        after = placements[i].setdefault(before_leader, {})
                        after.setdefault(before_pods - int(c.state[lvl][d]), chosen)
    done = [left for left in placements[used].get(0, {}) if left <= 0]
    return placements[used][0][max(done)] if done else None


def _share(c: Counts, prob: greedy.Problem, lvl: int, doms: list[int], slice_count: int, leaders: int,
           threshold: int) -> list[int] | None:
    """Kueue's ``placeSlicesOnDomainsBalanced``: ``threshold`` slices on every chosen domain,
    the leader on the first in leader order, the rest in that order; the chosen domains'
    counts are overwritten with their shares (as Kueue overwrites its domain objects)."""
    chosen = _optimal_set(c, prob, lvl, doms, slice_count, leaders, by_entropy=False)
    if chosen is None or slice_count < len(chosen) * threshold:
        return None
    order = _with_leader_order(c, lvl, chosen)
    extra, leaders_left, size = slice_count - len(chosen) * threshold, leaders, prob.slice_size
    for d in order:
        if leaders_left > 0:
            take = min(int(c.slices_with_leader[lvl][d]) - threshold, extra)
            c.leader[lvl][d] = 1
            leaders_left -= 1
        elif extra > 0:
            take = min(int(c.slices[lvl][d]) - threshold, extra)
            c.leader[lvl][d] = 0
        else:
            c.leader[lvl][d], take = 0, 0
        c.state[lvl][d] = (threshold + take) * size
        c.slices[lvl][d] = c.slices_with_leader[lvl][d] = threshold + take
        c.with_leader[lvl][d] = c.state[lvl][d] - c.leader[lvl][d]
        extra -= take
    return order if extra <= 0 and leaders_left <= 0 else None


def place(prob: greedy.Problem, counts: Counts, leaders: int,
          sizes_below: Mapping[int, int]) -> tuple[Counts, int, list[int]] | None:
    """(the pruned counts with the chosen domains' shares, the level they are at, the chosen
    domains in Kueue's order) for the group's descent, or None: the joint BestFit applies."""
    if prob.mode != "preferred":
        return None
    slice_count = prob.pod_set.count // prob.slice_size
    rc = _Recount(prob, sizes_below)
    found = _best_group(rc, counts, slice_count, leaders)
    if found is None:
        return None
    threshold, group, pruned = found
    lvl, candidates = prob.level, group
    if lvl < prob.slice_level:
        top = _optimal_set(pruned, prob, lvl, group, slice_count, leaders, by_entropy=True)
        if top is None:
            return None
        candidates = _children(prob, lvl, top)
        lvl += 1
    shares = _share(pruned, prob, lvl, candidates, slice_count, leaders, threshold)
    if shares is None:
        return None
    return pruned, lvl, shares
