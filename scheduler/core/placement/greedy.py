"""Kueue-equivalent greedy placement (TAS ``FindTopologyAssignmentsForFlavor`` semantics).

Phase 1 counts, per domain, how many pods (or slices) fit, bubbling sums up the tree.
Phase 2a chooses the fit level and domains: the requested level for ``required``; for
``preferred`` the lowest level at or above the requested one where a single domain fits
(climbing one level at a time), spreading over top-level domains as a last resort;
unconstrained / implied / slice-only requests take domains of the requested level in
LeastFreeCapacity order. Phase 2b descends level by level: above the slice level the total is
re-packed over ALL children of the selected domains; at and below it each parent's count is
split among its own children. BestFit = domains by count descending, and whenever one
domain covers the remainder, the tightest such domain ("optimize the last domain").
Ties: count, then pod count ascending, then value path ascending (= domain index).

Everything is vectorised with numpy so a decision over 50,000 leaves stays in milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from scheduler.core.placement import spread as spreading
from scheduler.core.placement.quality import level_spans
from scheduler.core.placement.types import (
    DEFAULT_GATES,
    DomainAssignment,
    PlacementError,
    PlacementGates,
    PodSetPlacement,
)
from scheduler.core.resources import with_pod_slot
from scheduler.core.spreading import SpreadCounts, SpreadingSpec
from scheduler.core.topology import IntArray, LeafFit, TopologyTree
from scheduler.core.topology_request import SliceConstraint, TopologyRequest
from scheduler.core.workload import PodSetSpec

_INF = np.iinfo(np.int64).max


@dataclass
class Problem:
    """One pod set against one free-capacity state, after phase 1."""

    tree: TopologyTree
    pod_set: PodSetSpec
    per_pod: dict[str, int]  # with pods: 1
    mode: str  # "required" | "preferred" | "unconstrained"
    level: int  # requested level index
    slice_level: int
    slice_size: int
    units_per_level: list[int]  # pods per counting unit at each level
    best_fit: bool
    fit: LeafFit
    pod_counts: list[IntArray]  # per level, pods that fit (rounded for inner slice layers)
    units: list[IntArray]  # per level, units (slices / inner slices / pods) that fit
    inner: dict[int, int]  # level -> inner slice layer size (multi-layer requests)
    gates: PlacementGates = DEFAULT_GATES
    # Per level, the preferred node affinity score of each domain (TASRespectNodeAffinityPreferred
    # on and the pod set has preferred terms); None otherwise.
    scores: list[IntArray] | None = None
    # Topology spreading (TASTopologySpreading on, a required request with rules): banned
    # domains and sort keys per level; None otherwise.
    spread: spreading.SpreadState | None = None
    # Partial slices (TASPartialSlices on, one slice layer not dividing the count): the tail's
    # pods and, per level down to the slice level, whole slices held next to it (-1: no room).
    tail: int = 0
    with_tail: list[IntArray] = field(default_factory=list)

    @property
    def needed(self) -> int:
        return -(-self.pod_set.count // self.slice_size)

    @property
    def unit_word(self) -> str:
        return "slice(s)" if self.slice_size > 1 else "pod(s)"


def _requested_level(
    tree: TopologyTree, req: TopologyRequest | None, slices: bool, implied_tas: bool
) -> tuple[str, str]:
    """(level label, mode): the required or preferred level; the top level for slices with
    neither; the lowest level for unconstrained and implied TAS. Kueue's message otherwise."""
    key: str | None
    if req is not None and req.required:
        key, mode = req.required, "required"
    elif req is not None and req.preferred:
        key, mode = req.preferred, "preferred"
    elif slices:
        key, mode = tree.levels[0], "unconstrained"
    elif (req is not None and req.unconstrained) or (req is None and implied_tas):
        key, mode = tree.levels[-1], "unconstrained"
    elif req is not None and req.unconstrained is None and req.pod_index_label and implied_tas:
        key, mode = tree.levels[-1], "unconstrained"
    else:
        key, mode = None, ""
    if not key:
        raise PlacementError("topology level not specified")
    if not tree.has_level(key):
        raise PlacementError(f"no requested topology level: {key}")
    return key, mode


def _units_per_level(
    n_levels: int, slice_level: int, slice_size: int, constraints: Sequence[SliceConstraint], layer_levels: list[int]
) -> list[int]:
    """Pods per counting unit at each level: the slice size down to the slice level, below it
    the size of the innermost slice layer at or under that level (1 for plain pods)."""
    units_per_level = []
    for lvl in range(n_levels):
        if lvl <= slice_level:
            units_per_level.append(slice_size)
            continue
        unit = 1
        for c_lvl, c in zip(layer_levels, constraints, strict=True):
            if c_lvl >= lvl:
                unit = c.size
                break
        units_per_level.append(unit)
    return units_per_level


def _pod_counts(tree: TopologyTree, leaf_counts: IntArray, inner: Mapping[int, int]) -> list[IntArray]:
    """Phase 1: pods that fit per domain, summed up the tree, rounded down to whole inner
    slices on the levels that carry an inner slice layer."""
    n_levels = len(tree.levels)
    pod_counts: list[IntArray] = [np.zeros(0, dtype=np.int64)] * n_levels
    cur = leaf_counts
    for lvl in range(n_levels - 1, -1, -1):
        if lvl != n_levels - 1:
            cur = np.bincount(
                tree.parent[lvl + 1], weights=pod_counts[lvl + 1], minlength=tree.domain_count(lvl)
            ).astype(np.int64)
        if lvl in inner:
            cur = (cur // inner[lvl]) * inner[lvl]
        pod_counts[lvl] = cur
    return pod_counts


def _unit_counts(
    tree: TopologyTree, pod_counts: list[IntArray], slice_level: int, slice_size: int, units_per_level: list[int]
) -> list[IntArray]:
    """Units (slices / inner slices / pods) that fit per domain; above the slice level the
    whole slices of the children add up."""
    n_levels = len(tree.levels)
    units: list[IntArray] = [np.zeros(0, dtype=np.int64)] * n_levels
    for lvl in range(n_levels - 1, -1, -1):
        if lvl > slice_level:
            units[lvl] = pod_counts[lvl] // units_per_level[lvl]
        elif lvl == slice_level:
            units[lvl] = pod_counts[lvl] // slice_size
        else:
            units[lvl] = np.bincount(
                tree.parent[lvl + 1], weights=units[lvl + 1], minlength=tree.domain_count(lvl)
            ).astype(np.int64)
    return units


def prepare(
    tree: TopologyTree, pod_set: PodSetSpec, *, implied_tas: bool = False, free: IntArray | None = None,
    gates: PlacementGates = DEFAULT_GATES, spread: tuple[SpreadingSpec, SpreadCounts] | None = None,
) -> Problem:
    """Resolve the request (Kueue's messages on errors) and run phase 1. ``spread``: the pod
    set's spreading spec and its group's counts (used under ``gates.spreading``)."""
    req = pod_set.topology
    constraints = req.slice_constraints if req else ()
    if constraints and any(c.size <= 0 for c in constraints):
        raise PlacementError("slice topology requested, but slice size not provided")
    slice_size = constraints[0].size if constraints else 1
    key, mode = _requested_level(tree, req, bool(constraints), implied_tas)
    for c in constraints:
        if not tree.has_level(c.level):
            raise PlacementError(f"no requested topology level for slices: {c.level}")
    level = tree.level_index(key)
    n_levels = len(tree.levels)
    slice_level = tree.level_index(constraints[0].level) if constraints else n_levels - 1
    if slice_level < level:
        raise PlacementError(
            f"podset slice topology {tree.levels[slice_level]} is above the podset topology {key}"
        )
    layer_levels = [tree.level_index(c.level) for c in constraints]
    units_per_level = _units_per_level(n_levels, slice_level, slice_size, constraints, layer_levels)
    per_pod = with_pod_slot(pod_set.requests)
    fit = tree.leaf_fit(per_pod, pod_set.node_selector, pod_set.tolerations, free=free, affinity=pod_set.affinity)
    inner = {c_lvl: c.size for c_lvl, c in zip(layer_levels[1:], constraints[1:], strict=True)}
    pod_counts = _pod_counts(tree, fit.counts, inner)
    units = _unit_counts(tree, pod_counts, slice_level, slice_size, units_per_level)
    scores = None
    if gates.affinity_preferred and fit.affinity_scores is not None:
        scores = tree.subtree_sums(fit.affinity_scores)
    spread_state = None
    if gates.spreading and mode == "required" and spread is not None:
        spread_state = spreading.spread_state(tree, level, *spread)
    tail = pod_set.count % slice_size if gates.partial_slices and len(constraints) == 1 else 0
    with_tail = _with_tail_units(tree, units, pod_counts, slice_level, slice_size, tail) if tail else []
    return Problem(
        tree=tree,
        pod_set=pod_set,
        per_pod=per_pod,
        mode=mode,
        level=level,
        slice_level=slice_level,
        slice_size=slice_size,
        units_per_level=units_per_level,
        # LeastFreeCapacity only for unconstrained requests, and only under TASProfileMixed
        best_fit=mode != "unconstrained" or not gates.profile_mixed,
        fit=fit,
        pod_counts=pod_counts,
        units=units,
        inner=inner,
        gates=gates,
        scores=scores,
        spread=spread_state,
        tail=tail,
        with_tail=with_tail,
    )


def _with_tail_units(tree: TopologyTree, units: list[IntArray], pod_counts: list[IntArray], slice_level: int,
                     size: int, tail: int) -> list[IntArray]:
    """Per level down to the slice level, the whole slices a domain holds next to a partial
    slice of ``tail`` pods (-1: no room): at the slice level ``(pods - tail) // size``; above,
    its slices minus its cheapest child's loss, bounded by its own pods (Kueue ``fillTailCounts``)."""
    out: list[IntArray] = [np.zeros(0, dtype=np.int64)] * len(tree.levels)

    def hosting(pods: IntArray) -> IntArray:
        res: IntArray = np.where(pods >= tail, (pods - tail) // size, -1).astype(np.int64)
        return res

    out[slice_level] = hosting(pod_counts[slice_level])
    for lvl in range(slice_level - 1, -1, -1):
        child = out[lvl + 1]
        penalty = np.where(child >= 0, units[lvl + 1] - child, _INF)
        cheapest = np.minimum.reduceat(penalty, tree.child_start[lvl]) if len(penalty) else penalty
        rolled = np.where(cheapest < _INF, units[lvl] - np.minimum(cheapest, units[lvl]), -1)
        out[lvl] = np.where(rolled < 0, -1, np.minimum(rolled, hosting(pod_counts[lvl]))).astype(np.int64)
    return out


def with_leaf_counts(prob: Problem, leaf_counts: IntArray) -> Problem:
    """The same request with phase 1 re-run on other per-leaf pod counts (e.g. pruned ones)."""
    pod_counts = _pod_counts(prob.tree, leaf_counts, prob.inner)
    units = _unit_counts(prob.tree, pod_counts, prob.slice_level, prob.slice_size, prob.units_per_level)
    return replace(prob, fit=replace(prob.fit, counts=leaf_counts), pod_counts=pod_counts, units=units)


def sort_domains(prob: Problem, level: int, candidates: IntArray, *, stale_slices: bool = False,
                 best_fit: bool | None = None, pods: IntArray | None = None) -> IntArray:
    """Kueue's order: preferred affinity score desc (when scored), units desc (BestFit) / asc
    (LeastFreeCapacity), pods asc, path asc. ``stale_slices``: children below the outermost
    slice level, whose slice count Kueue leaves at zero (also under an inner slice layer: Kueue
    sorts before it recomputes the inner count), so only pods ascending and path order them.
    ``pods``: the level's pod counts to sort by (default ``prob.pod_counts[level]``)."""
    units = prob.units[level][candidates]
    pods = (prob.pod_counts[level] if pods is None else pods)[candidates]
    best = prob.best_fit if best_fit is None else best_fit
    primary = np.zeros_like(units) if stale_slices else (-units if best else units)
    keys: tuple[IntArray, ...] = (candidates, pods, primary)
    if prob.scores is not None:
        keys = (*keys, -prob.scores[level][candidates])
    if prob.spread is not None:  # most significant (Kueue sorts by spreading last, stably)
        keys = (*keys, *(k[candidates] for k in reversed(prob.spread.keys[level])))
    perm = np.lexsort(keys)
    ordered: IntArray = candidates[perm]
    return ordered


def own_pod_counts(prob: Problem, level: int) -> IntArray:
    """Pods a domain of ``level`` holds as Kueue counts them for sorting: the sum of its
    children's (rounded) counts, not rounded down to its own inner slice layer (Kueue rounds a
    child's contribution to its parent, never the child's own count)."""
    if level not in prob.inner:
        return prob.pod_counts[level]
    if level == len(prob.tree.levels) - 1:
        return prob.fit.counts
    own: IntArray = np.bincount(prob.tree.parent[level + 1], weights=prob.pod_counts[level + 1],
                                minlength=prob.tree.domain_count(level)).astype(np.int64)
    return own


def _top_tier(order: IntArray, scores: IntArray | None) -> IntArray:
    """The leading domains of ``order`` sharing its first domain's affinity score (Kueue's
    ``topAffinityTierDomains``: BestFit never trades affinity for tightness)."""
    if scores is None or len(order) == 0:
        return order
    vals = scores[order]
    differs = np.nonzero(vals != vals[0])[0]
    return order[: int(differs[0])] if len(differs) else order


def _tight_fit(units: IntArray, order: IntArray, remaining: int, scores: IntArray | None = None) -> int:
    order = _top_tier(order, scores)
    vals = units[order]
    masked = np.where(vals >= remaining, vals, _INF)
    return int(order[int(np.argmin(masked))])


def take_in_order(
    units: IntArray, order: IntArray, needed: int, best_fit: bool, scores: IntArray | None = None
) -> list[tuple[int, int]] | None:
    """Greedy cover of ``needed`` units by domains in ``order`` (None if they cannot)."""
    if needed <= 0:
        return []
    vals = units[order]
    nonzero = vals > 0
    order, vals = order[nonzero], vals[nonzero]
    if len(order) == 0:
        return None
    cum = np.cumsum(vals)
    i = int(np.searchsorted(cum, needed))  # first position whose prefix covers everything
    if i >= len(order):
        return None
    taken = [(int(d), int(u)) for d, u in zip(order[:i].tolist(), vals[:i].tolist(), strict=True)]
    remaining = needed - (int(cum[i - 1]) if i else 0)
    last = _tight_fit(units, order[i:], remaining, scores) if best_fit else int(order[i])
    taken.append((last, remaining))
    return taken


def no_fit_error(prob: Problem, fitting: int, needed: int | None = None, level: int | None = None) -> PlacementError:
    """Kueue's no-fit message: ``fitting`` of ``needed`` units (the request's by default); for a
    multi-layer slice request the per-level form, measured in the best domain at ``level``."""
    constraints = prob.pod_set.topology.slice_constraints if prob.pod_set.topology else ()
    if len(constraints) > 1:
        return PlacementError(multi_layer_no_fit_message(prob, prob.level if level is None else level))
    name, word = prob.tree.name, prob.unit_word
    needed = prob.needed if needed is None else needed
    if fitting <= 0:
        msg = f'topology "{name}" doesn\'t allow to fit any of {needed} {word}'
    else:
        msg = f'topology "{name}" allows to fit only {fitting} out of {needed} {word}'
    return PlacementError(msg + prob.fit.stats_suffix())


def multi_layer_no_fit_message(prob: Problem, level: int) -> str:
    """``topology "t" doesn't allow to fit; a/b slice(s) fit on level L; ...`` (Kueue's
    ``multiLayerNotFitMessage``): per slice layer, the slices of that layer that fit inside the
    domain of ``level`` with the most outer slices (ties: the first by path), against the
    slices the pod set needs (count // layer size)."""
    tree = prob.tree
    message = f'topology "{tree.name}" doesn\'t allow to fit'
    units = prob.units[level]
    if len(units) == 0:
        return message
    best = int(np.argmax(units))  # first maximum = smallest path
    constraints = prob.pod_set.topology.slice_constraints if prob.pod_set.topology else ()
    for c in constraints:
        target = tree.level_index(c.level)
        start, end = best, best + 1
        for lvl in range(level, target):
            start, end = int(tree.child_start[lvl][start]), int(tree.child_end[lvl][end - 1])
        fit = int((prob.pod_counts[target][start:end] // c.size).sum())
        message += f"; {fit}/{prob.pod_set.count // c.size} slice(s) fit on level {c.level}"
    return message + prob.fit.stats_suffix()


def choose_fit_level(prob: Problem) -> tuple[int, list[tuple[int, int]]]:
    """Phase 2a: the level and the (domain, units) chosen there."""
    needed = prob.needed
    level = prob.level
    while True:
        units = prob.units[level]
        if len(units) == 0:
            raise PlacementError(f"no topology domains at level: {prob.tree.levels[level]}")
        order = sort_domains(prob, level, _allowed(prob, level, np.arange(len(units), dtype=np.int64)))
        scores = prob.scores[level] if prob.scores is not None else None
        fits = np.nonzero(units[order] >= needed)[0]
        if prob.best_fit:
            if units[order[0]] >= needed:
                return level, [(_tight_fit(units, spreading.top_tier(prob.spread, level, order), needed, scores),
                                needed)]
            if prob.mode == "required" and len(fits):  # affinity / spreading moved a fitting domain back
                rest = spreading.top_tier(prob.spread, level, order[int(fits[0]):])
                return level, [(_tight_fit(units, rest, needed, scores), needed)]
        elif len(fits):
            return level, [(int(order[int(fits[0])]), needed)]
        if prob.mode == "required":
            raise no_fit_error(prob, int(units[order[0]]) if prob.best_fit else int(units.max()), level=level)
        if prob.mode == "preferred" and level > 0:
            level -= 1
            continue
        taken = take_in_order(units, order, needed, prob.best_fit, scores)
        if taken is None:
            raise no_fit_error(prob, int(units.sum()), level=level)
        return level, taken


def _allowed(prob: Problem, level: int, candidates: IntArray) -> IntArray:
    """``candidates`` without the domains a Required spreading rule bans (Kueue
    ``filterOutBannedDomains``); at the searched level, Kueue's message when none is left."""
    if prob.spread is None:
        return candidates
    kept: IntArray = candidates[~prob.spread.banned[level][candidates]]
    if len(kept) == 0 and level == prob.level:
        raise PlacementError(f"topology spreading excludes all topology domains at level: {prob.tree.levels[level]}")
    return kept


def _children(tree: TopologyTree, level: int, parents: Sequence[int]) -> IntArray:
    start, end = tree.child_start[level], tree.child_end[level]
    ranges = [np.arange(int(start[p]), int(end[p]), dtype=np.int64) for p in parents]
    return np.concatenate(ranges) if ranges else np.zeros(0, dtype=np.int64)


def descend(prob: Problem, level: int, chosen: list[tuple[int, int]], *, per_parent: bool = False,
            pods_at_level: bool = False) -> dict[int, int]:
    """Phase 2b: from ``chosen`` at ``level`` down to the leaves; returns leaf -> pods.
    ``per_parent`` (balanced placement): every parent splits its own count, above the slice
    level too. ``pods_at_level``: ``chosen`` counts pods, not units (a partial slice's domain)."""
    tree = prob.tree
    current = dict(chosen)
    for child_level in range(level + 1, len(tree.levels)):
        parent_level = child_level - 1
        child_units = prob.units[child_level]
        scores = prob.scores[child_level] if prob.scores is not None else None
        if parent_level < prob.slice_level and not per_parent:
            kids = _allowed(prob, child_level, _children(tree, parent_level, sorted(current)))
            order = sort_domains(prob, child_level, kids)
            taken = take_in_order(child_units, order, sum(current.values()), prob.best_fit, scores)
            if taken is None:  # cannot happen: parents' units are sums of children's
                raise no_fit_error(prob, 0)
            current = dict(taken)
            continue
        ratio_num = 1 if pods_at_level and parent_level == level else prob.units_per_level[parent_level]
        ratio_den = prob.units_per_level[child_level]
        # Below the outermost slice level Kueue orders children by free pods ascending, inner
        # slice layers included (the largest-first order was a known gap, issue 36).
        stale = child_level > prob.slice_level
        own = own_pod_counts(prob, child_level) if stale else None
        nxt: dict[int, int] = {}
        for parent in sorted(current):
            need = -(-(current[parent] * ratio_num) // ratio_den)
            kids = _allowed(prob, child_level, _children(tree, parent_level, [parent]))
            order = sort_domains(prob, child_level, kids, stale_slices=stale, pods=own)
            taken = take_in_order(child_units, order, need, prob.best_fit, scores)
            if taken is None:
                raise no_fit_error(prob, 0)
            for dom, amount in taken:
                nxt[dom] = nxt.get(dom, 0) + amount
        current = nxt
    unit = prob.units_per_level[-1]
    leaf_pods = {leaf: u * unit for leaf, u in current.items()}
    excess = sum(leaf_pods.values()) - prob.pod_set.count
    for leaf in sorted(leaf_pods, reverse=True):  # non-dividing slice size: trim the last slice
        if excess <= 0:
            break
        cut = min(excess, leaf_pods[leaf])
        leaf_pods[leaf] -= cut
        excess -= cut
    return {leaf: n for leaf, n in leaf_pods.items() if n > 0}


def to_pod_set_placement(
    tree: TopologyTree, pod_set: PodSetSpec, leaf_pods: Mapping[int, int]
) -> PodSetPlacement:
    domains = tuple(
        DomainAssignment(tree.leaf_values(leaf), count)
        for leaf, count in sorted(leaf_pods.items())
        if count > 0
    )
    return PodSetPlacement(pod_set.name, pod_set.count, tree.assignment_levels(), domains)


def measured_placement(prob: Problem, leaf_pods: Mapping[int, int], improved_by_cpsat: bool = False) -> PodSetPlacement:
    """:func:`to_pod_set_placement` plus what the metrics report about it (spans per level)."""
    placement = to_pod_set_placement(prob.tree, prob.pod_set, leaf_pods)
    return replace(placement, spans=level_spans(prob.tree, prob.level, prob.pod_counts, leaf_pods),
                   improved_by_cpsat=improved_by_cpsat)


def place_pod_set(prob: Problem) -> dict[int, int]:
    """Greedy answer for a prepared problem: leaf -> pods (raises PlacementError)."""
    level, chosen = choose_fit_level(prob)
    return descend(prob, level, chosen)


def consume(
    tree: TopologyTree, free: IntArray, per_pod: Mapping[str, int], leaf_pods: Mapping[int, int]
) -> None:
    """Assumed usage: subtract ``leaf_pods`` pods of ``per_pod`` (incl. pods: 1) from ``free``."""
    if not leaf_pods:
        return
    vec = tree.request_vector(per_pod)
    leaves = np.fromiter(leaf_pods.keys(), dtype=np.int64, count=len(leaf_pods))
    counts = np.fromiter(leaf_pods.values(), dtype=np.int64, count=len(leaf_pods))
    free[leaves] -= counts[:, None] * vec[None, :]


# Shared with the partial-slice, balanced and group placements.
top_affinity_tier = _top_tier
tight_fit = _tight_fit
allowed = _allowed
children = _children
