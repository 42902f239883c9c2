"""Phase 1 of a PodSet group's placement as Kueue counts it (``fillInCounts`` /
``fillInCountsHelper``): per level, the workers that fit in each domain (``state``), whether a
leader fits (``leader``, 0/1), the workers that fit next to a leader (``with_leader``), and the
same in slices. Shared by the group placement (:mod:`groups`) and its balanced variant
(:mod:`group_balanced`), which re-counts after pruning."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scheduler.core.topology import IntArray, TopologyTree


@dataclass
class Counts:
    """Phase-1 counts per level (mutable: phase 2 overwrites the chosen domains' entries, as
    Kueue overwrites its domain objects)."""

    state: list[IntArray]
    with_leader: list[IntArray]
    leader: list[IntArray]
    slices: list[IntArray]
    slices_with_leader: list[IntArray]


def counts_from_leaves(tree: TopologyTree, state: IntArray, with_leader: IntArray, leader: IntArray,
                       slice_level: int, slice_size: int, sizes_below: Mapping[int, int],
                       leader_required: bool = False) -> Counts:
    """Every level's counts from the leaves' (the leaf arrays are kept, not copied).
    ``leader_required`` (Kueue v0.18+, #10783, with a leader to place): a parent's
    ``with_leader`` is taken from the children that can host the leader only (none: 0)."""
    n_levels = len(tree.levels)
    empty = np.zeros(0, dtype=np.int64)
    out = Counts([empty] * n_levels, [empty] * n_levels, [empty] * n_levels, [empty] * n_levels,
                 [empty] * n_levels)
    last = n_levels - 1
    out.state[last], out.with_leader[last], out.leader[last] = state, with_leader, leader
    at_slice = last == slice_level
    out.slices[last] = state // slice_size if at_slice else np.zeros_like(state)
    out.slices_with_leader[last] = with_leader // slice_size if at_slice else np.zeros_like(state)
    for lvl in range(last - 1, -1, -1):
        bubble_up(tree, out, lvl, sizes_below.get(lvl + 1), slice_level, slice_size, leader_required)
    return out


def bubble_up(tree: TopologyTree, out: Counts, lvl: int, inner: int | None, slice_level: int,
              slice_size: int, leader_required: bool = False) -> None:
    """One parent level from its children (Kueue's ``fillInCountsHelper``)."""
    starts = tree.child_start[lvl]
    child_state, child_with = out.state[lvl + 1], out.with_leader[lvl + 1]
    if inner:
        child_state = (child_state // inner) * inner
        child_with = (child_with // inner) * inner
    state = np.add.reduceat(child_state, starts) if len(starts) else np.zeros(0, dtype=np.int64)
    loss = np.minimum.reduceat(child_state - child_with, starts) if len(starts) else state
    slices = np.add.reduceat(out.slices[lvl + 1], starts) if len(starts) else state
    slice_loss = (np.minimum.reduceat(out.slices[lvl + 1] - out.slices_with_leader[lvl + 1], starts)
                  if len(starts) else state)
    if leader_required and len(starts):
        # Kueue v0.18+: only a child that can host the leader says what hosting it costs; a
        # parent with no such child has no capacity beside a leader.
        hosts = out.leader[lvl + 1] > 0
        big = np.iinfo(np.int64).max
        loss = np.minimum.reduceat(np.where(hosts, child_state - child_with, big), starts)
        slice_loss = np.minimum.reduceat(
            np.where(hosts, out.slices[lvl + 1] - out.slices_with_leader[lvl + 1], big), starts)
        any_host = np.maximum.reduceat(hosts.astype(np.int64), starts) > 0
        loss = np.where(any_host, loss, state)
        slice_loss = np.where(any_host, slice_loss, slices)
    out.state[lvl] = state.astype(np.int64)
    out.with_leader[lvl] = (state - loss).astype(np.int64)
    out.leader[lvl] = (np.maximum.reduceat(out.leader[lvl + 1], starts) if len(starts) else state).astype(np.int64)
    if lvl == slice_level:
        out.slices[lvl] = out.state[lvl] // slice_size
        out.slices_with_leader[lvl] = out.with_leader[lvl] // slice_size
    else:
        out.slices[lvl] = slices.astype(np.int64)
        out.slices_with_leader[lvl] = (slices - slice_loss).astype(np.int64)


def prioritize_leader_domain(c: Counts, lvl: int, doms: list[int], count: int, leaders: int, size: int,
                             slices: bool) -> list[int]:
    """Kueue v0.19.1's ``prioritizeLeaderDomain`` (#13766): the first domain that can host the
    leaders and whose cost of hosting them still leaves the others room for every worker is
    moved to the front (the rest keep their order); ``doms`` unchanged when there is none."""
    if leaders == 0 or len(doms) < 2:
        return doms
    primary = c.slices[lvl] if slices else c.state[lvl]
    beside = c.slices_with_leader[lvl] if slices else c.with_leader[lvl]
    required = count // size if slices else count
    available = sum(int(primary[d]) for d in doms)
    for i, d in enumerate(doms):
        if c.leader[lvl][d] < leaders or available - (int(primary[d]) - int(beside[d])) < required:
            continue
        return doms if i == 0 else [d, *doms[:i], *doms[i + 1:]]
    return doms
