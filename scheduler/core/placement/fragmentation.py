"""Fragmentation-aware placement and degraded-domain ranking (issue 17 items 3 and 5).

Both are opt-in policies (:mod:`scheduler.core.placement.options`); with them off the planner
never calls this module and placement is Kueue's.

**Hierarchical LeastFreeCapacity** (:func:`place`, for unconstrained / implied-TAS pod sets of
plain pods). Kueue orders the leaves by the pods of this shape each can still take, ascending
(LeastFreeCapacity), ties by value path, without looking at the domains above them: when the
partly used nodes are full, the next pod opens whichever empty node comes first by name, and
may break the last whole layer-3 domain while another has free nodes next to busy ones. Here
the leaves are ordered by

1. how many whole-free units the pod would break (the node itself and its ancestors at every
   level, with no usage at all): fewest first, so a small pod goes to a partly used node and
   whole nodes and whole domains stay free for multi-node jobs;
2. then from the narrowest level up, the free capacity (in pods of this shape) of the leaf's
   domain at that level, ascending (best fit): the fullest layer-3 domain, among equals the
   one in the fullest layer-2, ...; the large free holes stay large;
3. then Kueue's key (the leaf's capacity ascending, then its value path).

A pod set that fits on one leaf takes the first such leaf in that order; otherwise it takes
leaves in that order until it is placed (Kueue's LeastFreeCapacity cover).

**Degraded domains last** (:func:`healthy_only`): a multi-pod pod set with a required or
preferred level first sees a tree where the domains of that level that hold an unhealthy or
drained node (:attr:`TopologyTree.impaired`) have no capacity; the planner keeps that answer
when it fits and falls back to the whole tree otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.core.placement import greedy
from scheduler.core.topology import IntArray, TopologyTree
from scheduler.core.workload import PodSetSpec


def applies(prob: greedy.Problem) -> bool:
    """Unconstrained plain pods at the leaf level (slices keep Kueue's placement)."""
    constraints = prob.pod_set.topology.slice_constraints if prob.pod_set.topology else ()
    return prob.mode == "unconstrained" and not constraints and prob.level == len(prob.tree.levels) - 1


def whole_free_leaves(tree: TopologyTree, free: IntArray) -> IntArray:
    """1 for each leaf with nothing in use (free equals allocatable), else 0."""
    whole: IntArray = np.all(free == tree.allocatable, axis=1).astype(np.int64)
    return whole


def leaf_order(prob: greedy.Problem, free: IntArray) -> IntArray:
    """The leaves that can take a pod, in the order described in the module docstring."""
    tree = prob.tree
    n_levels = len(tree.levels)
    leaf_units = prob.units[-1]
    leaves = np.nonzero(leaf_units > 0)[0].astype(np.int64)
    if len(leaves) == 0:
        return leaves
    whole = whole_free_leaves(tree, free)
    sizes = tree.subtree_sums(np.ones(tree.n_leaves, dtype=np.int64))
    whole_sums = tree.subtree_sums(whole)
    broken = whole[leaves].copy()  # the node itself: a whole node is what a multi-node pod needs
    by_level: list[IntArray] = []
    for level in range(n_levels - 1):
        ancestors = tree.ancestors_array(level)[leaves]
        broken += (whole_sums[level] == sizes[level])[ancestors].astype(np.int64)
        by_level.append(prob.units[level][ancestors])
    # np.lexsort: the LAST key is the primary one; by_level runs from the top level down, so the
    # narrowest domain (layer-3) comes right after ``broken``.
    keys = [leaves, prob.pod_counts[-1][leaves], leaf_units[leaves], *by_level, broken]
    ordered: IntArray = leaves[np.lexsort(keys)]
    return ordered


def place(prob: greedy.Problem, free: IntArray | None = None) -> dict[int, int]:
    """Leaf -> pods for an unconstrained pod set (raises Kueue's no-fit PlacementError)."""
    tree = prob.tree
    state = tree.free if free is None else free
    needed = prob.needed
    units = prob.units[-1]
    order = leaf_order(prob, state)
    fits = np.nonzero(units[order] >= needed)[0] if len(order) else np.zeros(0, dtype=np.int64)
    if len(fits):
        chosen = [(int(order[int(fits[0])]), needed)]
    else:
        taken = greedy.take_in_order(units, order, needed, False)
        if taken is None:
            raise greedy.no_fit_error(prob, int(units.sum()))
        chosen = taken
    return greedy.descend(prob, len(tree.levels) - 1, chosen)


def _impaired_mask(tree: TopologyTree, level: int) -> np.ndarray:
    """Leaves whose domain at ``level`` holds an unhealthy or drained node."""
    prefixes = {path[: level + 1] for path in tree.impaired}
    if not prefixes:
        return np.zeros(tree.n_leaves, dtype=np.bool_)
    bad_domains = np.array([p in prefixes for p in tree.paths[level]], dtype=np.bool_)
    return bad_domains[tree.ancestors_array(level)]


def healthy_only(tree: TopologyTree, pod_sets: Sequence[PodSetSpec]) -> TopologyTree | None:
    """A copy of ``tree`` without the capacity of degraded domains at the levels the
    multi-pod pod sets ask for, or None when there is nothing to narrow."""
    if not tree.impaired or len(tree.levels) <= 1:
        return None
    mask = np.zeros(tree.n_leaves, dtype=np.bool_)
    for ps in pod_sets:
        req = ps.topology
        key = (req.required or req.preferred) if req is not None else None
        if ps.count <= 1 or not key or not tree.has_level(key):
            continue
        level = tree.level_index(key)
        if level == len(tree.levels) - 1:
            continue
        mask |= _impaired_mask(tree, level)
    if not mask.any() or mask.all():
        return None
    narrowed = tree.clone()
    narrowed.free[mask] = 0
    return narrowed


__all__ = ["applies", "healthy_only", "leaf_order", "place", "whole_free_leaves"]
