"""How compact placements are: domains spanned per level versus the fewest possible, and the
whole domains still free.

Pure observations for the ``toposched_*`` metrics (docs/metrics.md); no placement decision
reads them. The fewest possible at a level is the smallest number of that
level's domains whose free pod slots (``pod_counts``, as the placement saw them) add up to the
pod count: a lower bound, since it ignores the constraints of the other levels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from scheduler.core.placement.types import LevelSpan, PodSetPlacement
from scheduler.core.topology import IntArray, TopologyTree


def fewest_domains(pods_per_domain: IntArray, count: int) -> int:
    """Fewest domains whose capacities sum to ``count`` (all of them when even that is short)."""
    if count <= 0:
        return 0
    if len(pods_per_domain) and int(pods_per_domain.max()) >= count:
        return 1  # the common case, without sorting (this runs for every placement tried)
    largest_first = np.sort(pods_per_domain[pods_per_domain > 0])[::-1]
    covered = np.cumsum(largest_first)
    return int(np.searchsorted(covered, count) + 1) if len(covered) and covered[-1] >= count else len(covered)


def level_spans(tree: TopologyTree, from_level: int, pod_counts: Sequence[IntArray],
                leaf_pods: Mapping[int, int]) -> tuple[LevelSpan, ...]:
    """One :class:`LevelSpan` per level from ``from_level`` (the requested one) down to the leaves."""
    leaves = np.array(sorted(leaf for leaf, pods in leaf_pods.items() if pods > 0), dtype=np.int64)
    count = int(sum(pods for pods in leaf_pods.values() if pods > 0))
    if not len(leaves):
        return ()
    leaf_level = len(tree.levels) - 1
    spans: list[LevelSpan] = []
    domains = leaves
    for level in range(leaf_level, from_level - 1, -1):
        if level < leaf_level:
            domains = np.unique(tree.parent[level + 1][domains])
        spans.append(LevelSpan(tree.levels[level], len(domains), fewest_domains(pod_counts[level], count)))
    spans.reverse()
    return tuple(spans)


def free_whole_domains(tree: TopologyTree, used_leaves: Iterable[int]) -> dict[str, int]:
    """Per level (by node label), how many domains have no leaf in ``used_leaves``: the whole
    domains a large job could still take without sharing them."""
    in_use = np.zeros(tree.n_leaves, dtype=np.int64)
    for leaf in used_leaves:
        in_use[leaf] = 1
    per_level = tree.subtree_sums(in_use)
    return {level: int(np.count_nonzero(per_level[index] == 0)) for index, level in enumerate(tree.levels)}


def leaves_of(tree: TopologyTree, placements: Iterable[PodSetPlacement]) -> set[int]:
    """The leaves the placements' domains name (domains no longer in the tree are skipped)."""
    leaves: set[int] = set()
    for placement in placements:
        for domain in placement.domains:
            leaf = tree.leaf_for_values(placement.levels, domain.values)
            if leaf is not None and domain.count > 0:
                leaves.add(leaf)
    return leaves
