"""PodSet groups (``kueue.x-k8s.io/podset-group-name``): a leader and its workers placed in
one descent, as Kueue's ``FindTopologyAssignmentsForFlavor`` does for a group.

Kueue's rules, restated:

* Pod sets are grouped by group name (a pod set without one is its own group); groups are
  placed in the order of their first pod set, each seeing the assumed usage of those before.
* In a group of two, the first pod set is the workers and the second the leader, unless the
  second has more pods (then they swap). The leader is always counted as ONE pod; the
  workers' topology request, node selector and tolerations govern both.
* Phase 1 counts, per domain, the workers that fit (``state``), whether a leader fits
  (``leader``, 0/1) and the workers that fit next to a leader (``with_leader``); a parent's
  ``with_leader`` is its ``state`` minus the smallest loss any child takes by hosting the
  leader. Slices are counted the same way (``slices`` / ``slices_with_leader``).
* Phase 2a sorts by leader fit first, then Kueue's BestFit / LeastFreeCapacity order, and
  needs one domain holding the leader AND every worker at the requested level (climbing for
  ``preferred``); phase 2b hands the leader to the first domain that can take it on the way
  down. The leader's assignment is the leaf holding it; the workers' the rest.

Kueue's quirks are kept on purpose (e.g. "optimize the last domain" looks only at the
workers' count), so the answer is Kueue's to the pod. The plain pod-set path stays in
:mod:`greedy` (vectorised); this module is Python loops over the chosen domains only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.core.placement import greedy, group_balanced
from scheduler.core.placement import spread as spread_mod
from scheduler.core.placement.group_counts import Counts, counts_from_leaves, prioritize_leader_domain
from scheduler.core.placement.types import DEFAULT_GATES, PlacementError, PlacementGates
from scheduler.core.resources import with_pod_slot
from scheduler.core.spreading import SpreadCounts, SpreadingSpec
from scheduler.core.topology import IntArray, TopologyTree
from scheduler.core.workload import PodSetSpec

# One domain: (level index, domain index at that level).
Domain = tuple[int, int]


def group_order(pod_sets: Sequence[PodSetSpec]) -> list[list[int]]:
    """Indices of ``pod_sets`` grouped as Kueue groups them: by group name, in the order of
    each group's first pod set; a pod set without a group name is a group of its own."""
    order: list[str] = []
    members: dict[str, list[int]] = {}
    for index, ps in enumerate(pod_sets):
        name = ps.topology.group_name if ps.topology and ps.topology.group_name else None
        key = f"#{index}" if name is None else f"group:{name}"
        if key not in members:
            order.append(key)
            members[key] = []
        members[key].append(index)
    return [members[key] for key in order]


def leader_and_workers(pod_sets: Sequence[PodSetSpec]) -> tuple[PodSetSpec | None, PodSetSpec]:
    """Kueue's split of a group: (leader or None, workers)."""
    workers = pod_sets[0]
    if len(pod_sets) < 2:
        return None, workers
    leader = pod_sets[1]
    if leader.count > workers.count:
        return workers, leader
    return leader, workers


@dataclass
class GroupResult:
    leader_pods: dict[int, int]  # leaf -> 1 (empty when the group has no leader)
    worker_pods: dict[int, int]  # leaf -> pods
    workers: greedy.Problem  # the workers' resolved request (levels, per-pod requests, counts)
    balanced: bool = False  # Kueue's balanced placement chose the domains (not the joint BestFit)


def place_group(tree: TopologyTree, leader: PodSetSpec | None, workers: PodSetSpec, free: IntArray,
                gates: PlacementGates = DEFAULT_GATES,
                spread: tuple[SpreadingSpec, SpreadCounts] | None = None) -> GroupResult:
    """Kueue's joint placement of ``leader`` (one pod) and ``workers`` on ``free``; raises
    :class:`PlacementError` with Kueue's message when the group does not fit. The workers'
    preferred node affinity orders domains (after leader capacity) when
    ``gates.affinity_preferred`` is on; ``spread`` (the group's spreading spec and counts) bans
    and orders domains as for a single pod set when ``gates.spreading`` is on."""
    prob = greedy.prepare(tree, workers, free=free, gates=gates, spread=spread)  # Kueue's messages on errors
    leader_count = 1 if leader is not None else 0
    sizes_below = _slice_sizes_below(prob)
    v019 = gates.leader_keeps_worker_capacity
    counts = _phase_one(prob, leader, free, sizes_below, leader_required=v019 and leader is not None)
    balanced = group_balanced.place(prob, counts, leader_count, sizes_below) if gates.balanced else None
    if balanced is not None:  # Kueue's balanced placement chose the domains and their shares
        counts, fit_level, chosen = balanced
        leaves = _Search(prob, counts, leader_count, v019).descend(fit_level, chosen, sizes_below, per_parent=True)
    else:
        search = _Search(prob, counts, leader_count, v019)
        fit_level, chosen = search.find_level(prob.level)
        leaves = search.descend(fit_level, chosen, sizes_below)
    last = len(tree.levels) - 1  # phase 2 wrote each chosen leaf's share into the counts
    leader_pods = {d: int(counts.leader[last][d]) for d in leaves if counts.leader[last][d] > 0} if leader else {}
    worker_pods = {d: int(counts.state[last][d]) for d in leaves if counts.state[last][d] > 0}
    return GroupResult(leader_pods, worker_pods, prob, balanced is not None)


def _slice_sizes_below(prob: greedy.Problem) -> dict[int, int]:
    """Kueue's ``sliceSizeAtLevel``: below the outer slice level, the size of the next inner
    slice layer at each level (only when inner layers exist)."""
    constraints = prob.pod_set.topology.slice_constraints if prob.pod_set.topology else ()
    if len(constraints) < 2:
        return {}
    last_layer = max(prob.tree.level_index(c.level) for c in constraints)
    return {lvl: prob.units_per_level[lvl] for lvl in range(prob.slice_level + 1, last_layer + 1)}


def _phase_one(prob: greedy.Problem, leader: PodSetSpec | None, free: IntArray,
               sizes_below: Mapping[int, int], leader_required: bool = False) -> Counts:
    tree = prob.tree
    state = prob.fit.counts.astype(np.int64)
    if leader is None:
        leader_fits = np.zeros_like(state)
        with_leader = state.copy()
    else:
        ws = prob.pod_set
        leader_per_pod = with_pod_slot(leader.requests)
        fit = tree.leaf_fit(leader_per_pod, ws.node_selector, ws.tolerations, free=free)
        leader_fits = (fit.counts > 0).astype(np.int64)
        after = free - leader_fits[:, None] * tree.request_vector(leader_per_pod)[None, :]
        beside = tree.leaf_fit(prob.per_pod, ws.node_selector, ws.tolerations, free=after).counts
        with_leader = np.where(leader_fits > 0, beside, state).astype(np.int64)
    return counts_from_leaves(tree, state, with_leader, leader_fits, prob.slice_level, prob.slice_size, sizes_below,
                              leader_required)


class _Search:
    """Phase 2 over :class:`Counts`, Kueue's steps one for one. ``v019``: Kueue v0.19.1's
    leader placement (#13766): best fit and LeastFreeCapacity skip domains that cannot host the
    leader, the leader goes to a domain that leaves room for every worker
    (``prioritize_leader_domain``), and a partly used domain keeps exactly what it gave."""

    def __init__(self, prob: greedy.Problem, counts: Counts, leader_count: int, v019: bool = False) -> None:
        self.prob, self.c, self.leader_count, self.v019 = prob, counts, leader_count, v019
        self.best_fit = prob.best_fit
        self.slice_count = prob.pod_set.count // prob.slice_size
        self.scores = prob.scores  # preferred node affinity per level (None: not scored)
        self.spreading = prob.spread  # topology spreading (None: not spread)

    def spread_key(self, lvl: int, d: int) -> tuple[int, ...]:
        """Kueue sorts by spreading last and stably: its keys come first."""
        return tuple(int(k[d]) for k in self.spreading.keys[lvl]) if self.spreading is not None else ()

    def allowed(self, lvl: int, doms: Sequence[int]) -> list[int]:
        """``doms`` without the domains a Required spreading rule bans."""
        kept = greedy.allowed(self.prob, lvl, np.array(list(doms), dtype=np.int64))
        return [int(d) for d in kept.tolist()]

    def spread_tier(self, lvl: int, doms: Sequence[int]) -> list[int]:
        return [int(d) for d in spread_mod.top_tier(self.spreading, lvl, np.array(list(doms), dtype=np.int64)).tolist()]

    def score(self, lvl: int, d: int) -> int:
        return int(self.scores[lvl][d]) if self.scores is not None else 0

    def top_tier(self, lvl: int, doms: Sequence[int]) -> Sequence[int]:
        """Kueue's ``topAffinityTierDomains``: the leading domains sharing the first one's score."""
        if self.scores is None or not doms:
            return doms
        first = self.score(lvl, doms[0])
        for i, d in enumerate(doms):
            if self.score(lvl, d) != first:
                return doms[:i]
        return doms

    # --------------------------------------------------------------- ordering
    def sorted_with_leader(self, lvl: int, doms: Sequence[int]) -> list[int]:
        c = self.c
        sign = -1 if self.best_fit else 1
        return sorted(doms, key=lambda d: (*self.spread_key(lvl, d), -int(c.leader[lvl][d]), -self.score(lvl, d),
                                           sign * int(c.slices_with_leader[lvl][d]), int(c.with_leader[lvl][d]), d))

    def sorted_plain(self, lvl: int, doms: Sequence[int]) -> list[int]:
        c = self.c
        sign = -1 if self.best_fit else 1
        return sorted(doms, key=lambda d: (*self.spread_key(lvl, d), -self.score(lvl, d), sign * int(c.slices[lvl][d]),
                                           int(c.state[lvl][d]), d))

    @staticmethod
    def best_fit_by(doms: Sequence[int], needed: int, value: Callable[[int], int],
                    hosts: Callable[[int], bool] | None = None) -> int:
        """Kueue's ``findBestFitDomainBy``: the first domain with the smallest value that still
        covers ``needed``; the first domain when none does. ``hosts`` (v0.19.1): only domains
        that can host the leaders are candidates (v0.17.0 compares against the first domain's
        value, which the callers' first domain always covers)."""
        if hosts is not None:
            fitting = [d for d in doms if hosts(d) and value(d) >= needed]
            return min(fitting, key=value) if fitting else doms[0]  # min keeps the first of equals
        best = doms[0]
        best_value = value(best)
        for d in doms:
            v = value(d)
            if needed <= v < best_value:
                best, best_value = d, v
        return best

    def _hosts(self, lvl: int, leaders: int) -> Callable[[int], bool] | None:
        return (lambda d: int(self.c.leader[lvl][d]) >= leaders) if self.v019 else None

    def best_fit_slices(self, lvl: int, doms: Sequence[int], needed: int, leaders: int) -> int:
        arr = self.c.slices_with_leader[lvl] if leaders > 0 else self.c.slices[lvl]
        return self.best_fit_by(self.top_tier(lvl, doms), needed, lambda d: int(arr[d]), self._hosts(lvl, leaders))

    def best_fit_pods(self, lvl: int, doms: Sequence[int], needed: int, leaders: int) -> int:
        arr = self.c.with_leader[lvl] if leaders > 0 else self.c.state[lvl]
        return self.best_fit_by(self.top_tier(lvl, doms), needed, lambda d: int(arr[d]), self._hosts(lvl, leaders))

    # --------------------------------------------------------------- phase 2a
    def no_fit(self, fitting: int) -> PlacementError:
        return greedy.no_fit_error(self.prob, fitting, self.slice_count)

    def find_level(self, lvl: int) -> tuple[int, list[int]]:
        c, prob = self.c, self.prob
        n = len(c.state[lvl])
        if n == 0:
            raise PlacementError(f"no topology domains at level: {prob.tree.levels[lvl]}")
        ordered = self.sorted_with_leader(lvl, self.allowed(lvl, range(n)))
        top = ordered[0]
        needed, leaders = self.slice_count, self.leader_count
        if self.best_fit and c.slices_with_leader[lvl][top] >= needed and c.leader[lvl][top] >= leaders:
            top = self.best_fit_slices(lvl, self.spread_tier(lvl, ordered), needed, leaders)
        if not self.best_fit:
            for d in ordered:
                if self.v019 and leaders > 0:  # v0.19.1: a domain that cannot host the leader is skipped
                    if c.leader[lvl][d] >= leaders and c.slices_with_leader[lvl][d] >= needed:
                        return lvl, [d]
                elif c.slices[lvl][d] >= needed:
                    return lvl, [d]
            if prob.mode == "required":
                raise self.no_fit(int(c.state[lvl][ordered[-1]]))
        if c.slices_with_leader[lvl][top] >= needed and c.leader[lvl][top] >= leaders:
            return lvl, [top]
        if prob.mode == "required":
            for i in range(1, len(ordered)):  # a lower affinity tier may still hold it (scored only)
                d = ordered[i]
                scanned = self.scores is not None or self.spreading is not None
                if scanned and c.slices_with_leader[lvl][d] >= needed and c.leader[lvl][d] >= leaders:
                    return lvl, [self.best_fit_slices(lvl, self.spread_tier(lvl, ordered[i:]), needed, leaders)]
            raise self.no_fit(int(c.slices[lvl][top]))
        if lvl > 0 and prob.mode != "unconstrained":
            return self.find_level(lvl - 1)
        return lvl, self.spread(lvl, ordered)

    def spread(self, lvl: int, ordered: list[int]) -> list[int]:
        """No single domain holds the group: leaders first (domains that can host one), then
        the workers over the rest in worker-capacity order."""
        c = self.c
        results: list[int] = []
        remaining, leaders = self.slice_count, self.leader_count
        if self.v019:
            ordered = prioritize_leader_domain(c, lvl, ordered, self.prob.pod_set.count, leaders,
                                               self.prob.slice_size, True)
        idx = 0
        while leaders > 0 and idx < len(ordered) and c.leader[lvl][ordered[idx]] > 0:
            d = ordered[idx]
            if self.best_fit and c.slices_with_leader[lvl][d] >= remaining:
                d = self.best_fit_slices(lvl, ordered[idx:], remaining, leaders)
            results.append(d)
            leaders -= int(c.leader[lvl][d])
            remaining -= int(c.slices_with_leader[lvl][d])
            idx += 1
        if leaders > 0:
            raise self.no_fit(self.leader_count - leaders)
        rest = self.sorted_plain(lvl, ordered[idx:])
        for i in range(len(rest)):
            if remaining <= 0:
                break
            d = rest[i]
            if self.best_fit and c.slices[lvl][d] >= remaining:
                d = self.best_fit_slices(lvl, rest[i:], remaining, 0)
            results.append(d)
            remaining -= int(c.slices[lvl][d])
        if remaining > 0:
            raise self.no_fit(self.slice_count - remaining)
        return results

    # --------------------------------------------------------------- phase 2b
    def descend(self, fit_level: int, chosen: list[int], sizes_below: Mapping[int, int],
                per_parent: bool = False) -> list[int]:
        """Kueue's level-by-level descent; returns the chosen leaves (their counts are in
        ``state`` / ``leader`` of the last level). ``per_parent`` (balanced placement): every
        parent splits its own share from the fit level down, never re-packed across parents."""
        prob, tree = self.prob, self.prob.tree
        count, size, last = prob.pod_set.count, prob.slice_size, len(tree.levels) - 1
        current = self.minimum(fit_level, chosen, count, self.leader_count, size, True)
        lvl = fit_level
        while lvl < min(last, prob.slice_level) and not per_parent:
            kids = self.sorted_plain(lvl + 1, self.allowed(lvl + 1, self.children(lvl, current)))
            current = self.minimum(lvl + 1, kids, count, self.leader_count, size, True)
            lvl += 1
        while lvl < last:
            # Kueue's sliceSizeOnLevel: the slice size above the slice level, then inner layers or 1
            unit = size if lvl < prob.slice_level else sizes_below.get(lvl + 1, 1)
            nxt: list[int] = []
            for parent in current:
                kids = self.sorted_plain(lvl + 1, self.allowed(lvl + 1, self.children(lvl, [parent])))
                if unit > 1:  # inner slice layer: re-count the children in its slices
                    for d in kids:
                        self.c.slices[lvl + 1][d] = self.c.state[lvl + 1][d] // unit
                        self.c.slices_with_leader[lvl + 1][d] = self.c.with_leader[lvl + 1][d] // unit
                nxt += self.minimum(lvl + 1, kids, int(self.c.state[lvl][parent]),
                                    int(self.c.leader[lvl][parent]), unit, unit > 1)
            current = nxt
            lvl += 1
        return current

    def children(self, lvl: int, parents: Sequence[int]) -> list[int]:
        tree = self.prob.tree
        return [k for p in parents for k in range(int(tree.child_start[lvl][p]), int(tree.child_end[lvl][p]))]

    def minimum(self, lvl: int, doms: list[int], count: int, leaders: int, size: int, slices: bool) -> list[int]:
        """Kueue's ``updateCountsToMinimumGeneric``: take domains in order until ``count`` pods
        (and the leader) are covered, writing each taken domain's share into the counts."""
        c = self.c
        if self.v019:
            doms = prioritize_leader_domain(c, lvl, doms, count, leaders, size, slices)
        result: list[int] = []
        remaining = count // size if slices else count
        for i, d in enumerate(doms):
            if leaders > 0:
                d, remaining, leaders, done = self.consume_with_leader(
                    lvl, doms[i:], d, remaining, leaders, size, slices)
                result.append(d)
                if done:
                    return result
                continue
            primary = c.slices[lvl] if slices else c.state[lvl]
            if self.best_fit and primary[d] >= remaining:
                d = (self.best_fit_slices if slices else self.best_fit_pods)(lvl, doms[i:], remaining, 0)
            c.leader[lvl][d] = 0
            if primary[d] >= remaining:
                c.state[lvl][d] = remaining * size if slices else remaining
                primary[d] = remaining
                result.append(d)
                return result
            if slices:
                c.state[lvl][d] = primary[d] * size
            remaining -= int(primary[d])
            result.append(d)
        raise self.no_fit(0)  # Kueue logs "unexpected remainingCount" here; cannot happen on sane counts

    def consume_with_leader(self, lvl: int, rest: list[int], d: int, remaining: int, leaders: int, size: int,
                            slices: bool) -> tuple[int, int, int, bool]:
        """Kueue's ``consumeWithLeadersGeneric`` for one domain while the leader is unplaced."""
        c = self.c
        with_leader = c.slices_with_leader[lvl] if slices else c.with_leader[lvl]
        primary = c.slices[lvl] if slices else c.state[lvl]
        if self.best_fit and with_leader[d] >= remaining and c.leader[lvl][d] >= leaders:
            d = (self.best_fit_slices if slices else self.best_fit_pods)(lvl, rest, remaining, leaders)
        if with_leader[d] >= remaining and c.leader[lvl][d] >= leaders:
            primary[d] = remaining
            c.leader[lvl][d] = leaders
            c.state[lvl][d] = remaining * (size if slices else 1)
            return d, remaining, leaders, True
        if self.v019 or slices:  # v0.19.1: the pods path clamps before it subtracts, as slices do
            with_leader[d] = min(int(with_leader[d]), remaining)
            if self.v019:  # and the domain keeps exactly the share it gave
                primary[d] = with_leader[d]
            c.leader[lvl][d] = min(int(c.leader[lvl][d]), leaders)
            c.state[lvl][d] = with_leader[d] * (size if slices else 1)
            return d, remaining - int(with_leader[d]), leaders - int(c.leader[lvl][d]), False
        remaining -= int(with_leader[d])
        leaders -= int(c.leader[lvl][d])
        with_leader[d] = min(int(with_leader[d]), remaining)
        c.leader[lvl][d] = min(int(c.leader[lvl][d]), leaders)
        return d, remaining, leaders, False
