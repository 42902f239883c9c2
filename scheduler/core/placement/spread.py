"""Topology spreading on the tree's arrays (Kueue ``tas_spreading.go``; see
:mod:`scheduler.core.spreading` for the annotation and the counting).

For a required request with spreading rules, per level of the tree:

- ``banned``: the domain, or its ancestor at a Required rule's level, is over that rule's share
  (Kueue ``bannedBySpreading``), so it is never a candidate;
- ``keys``: sort keys, most significant first: per rule level, coarsest first, the tier of the
  domain's ancestor there (0 used by the group and under the share, 1 unused, 2 over) and, in
  the over tier, its count (Kueue ``compareSpreadPriority``; levels above a rule are not ordered
  by it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.core.placement.types import PlacementError
from scheduler.core.spreading import REQUIRED, SpreadCounts, SpreadingRule, SpreadingSpec
from scheduler.core.topology import BoolArray, IntArray, TopologyTree


@dataclass(frozen=True)
class SpreadState:
    keys: list[list[IntArray]]  # per level: sort keys, most significant first
    banned: list[BoolArray]  # per level


def _ancestors(tree: TopologyTree, level: int, target: int) -> IntArray:
    """For every domain at ``level``, its ancestor's index at ``target`` (<= level)."""
    idx = np.arange(tree.domain_count(level), dtype=np.int64)
    for lvl in range(level, target, -1):
        idx = tree.parent[lvl][idx]
    return idx


def _rule_arrays(tree: TopologyTree, lvl: int, rule: SpreadingRule, counts: SpreadCounts
                 ) -> tuple[BoolArray, IntArray, IntArray]:
    """At a rule's level: over the share, tier, and count-if-over per domain."""
    paths = tree.paths[lvl]
    count = np.array([counts.by_domain.get(p, 0) for p in paths], dtype=np.int64).reshape(len(paths))
    parent = np.array([counts.by_domain.get(p[:-1], 0) if lvl > 0 else counts.total for p in paths],
                      dtype=np.int64).reshape(len(paths))
    over = count * 1000 > rule.max_share_milli * parent
    tier = np.where(over, 2, np.where(count == 0, 1, 0)).astype(np.int64)
    return over, tier, np.where(over, count, 0).astype(np.int64)


def spread_state(tree: TopologyTree, requested_level: int, spec: SpreadingSpec, counts: SpreadCounts
                 ) -> SpreadState | None:
    """The spreading arrays for a required request at ``requested_level``; None when no rule
    names a level of this topology. Kueue's message when a rule is below the requested level."""
    rules: dict[int, SpreadingRule] = {}
    for rule in spec.rules:
        if not tree.has_level(rule.topology_key):
            continue  # a level this flavor's topology lacks is skipped
        lvl = tree.level_index(rule.topology_key)
        if lvl > requested_level:
            raise PlacementError(f"topology spreading level {rule.topology_key} is below the podset topology "
                                 f"{tree.levels[requested_level]}")
        rules[lvl] = rule
    if not rules:
        return None
    arrays = {lvl: _rule_arrays(tree, lvl, rule, counts) for lvl, rule in rules.items()}
    keys: list[list[IntArray]] = []
    banned: list[BoolArray] = []
    for level in range(len(tree.levels)):
        level_keys: list[IntArray] = []
        ban = np.zeros(tree.domain_count(level), dtype=np.bool_)
        for lvl in sorted(rules):
            if lvl > level:
                continue
            over, tier, over_count = arrays[lvl]
            anc = _ancestors(tree, level, lvl)
            level_keys += [tier[anc], over_count[anc]]
            if rules[lvl].mode == REQUIRED:
                ban |= over[anc]
        keys.append(level_keys)
        banned.append(ban)
    return SpreadState(keys, banned)


def top_tier(state: SpreadState | None, level: int, order: IntArray) -> IntArray:
    """Kueue ``topSpreadTierDomains``: the leading domains the rules rank equally best."""
    if state is None or len(order) == 0 or not state.keys[level]:
        return order
    same = np.ones(len(order), dtype=np.bool_)
    for key in state.keys[level]:
        vals = key[order]
        same &= vals == vals[0]
    differs = np.nonzero(~same)[0]
    return order[: int(differs[0])] if len(differs) else order
