"""Which leaves of a topology tree can hold a pod: Kueue's node filters, applied when hostname
is the lowest level (one node per leaf) and only then, as Kueue does: an untolerated
NoSchedule/NoExecute taint, a nodeSelector mismatch, a required node affinity mismatch (each
exclusion counted under the first filter that rejects the node), and the preferred node
affinity's score; then pods per leaf by the scarcest requested resource.

Built once per tree and shared by its clones (:class:`LeafFilters` is immutable but for its
caches of label masks and affinity answers, which any clone may fill)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.core.node_affinity import NodeAffinity
from scheduler.core.nodes import Taint, Toleration

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
# Node affinity masks kept per tree (oldest dropped first): pending workloads are retried every
# cycle with the same affinity, but a long-running controller must not keep one per workload ever seen.
_AFFINITY_CACHE_SIZE = 128


class LeafFilters:
    def __init__(self, leaf_taints: Sequence[tuple[Taint, ...]], leaf_labels: Sequence[Mapping[str, str]],
                 leaf_names: Sequence[str]) -> None:
        """Per leaf: its node's blocking taints, labels and name."""
        self.labels = list(leaf_labels)
        self.names = list(leaf_names)
        groups: dict[tuple[Taint, ...], list[int]] = {}
        for i, taints in enumerate(leaf_taints):
            if taints:
                groups.setdefault(taints, []).append(i)
        self.taint_groups = {k: np.array(v, dtype=np.int64) for k, v in groups.items()}
        self._mask_cache: dict[tuple[str, str], BoolArray] = {}
        self._affinity_cache: dict[NodeAffinity, tuple[BoolArray, IntArray]] = {}

    def apply(self, feasible: BoolArray, exclusions: dict[str, int], node_selector: Mapping[str, str] | None,
              tolerations: Sequence[Toleration], affinity: NodeAffinity | None) -> tuple[BoolArray, IntArray | None]:
        """Kueue's node filters (taints, nodeSelector, required affinity; each exclusion counted
        under the first filter that rejects the node) and the preferred affinity scores."""
        n = len(self.names)
        for taints, leaves in self.taint_groups.items():
            blocking = next((t for t in taints if not any(tol.tolerates(t) for tol in tolerations)), None)
            if blocking is not None:
                feasible[leaves] = False
                key = f'taint "{blocking}"'
                exclusions[key] = exclusions.get(key, 0) + len(leaves)
        if node_selector:
            ok = np.ones(n, dtype=np.bool_)
            for key, value in node_selector.items():
                ok &= self._label_mask(key, value)
            bad = feasible & ~ok
            if bad.any():
                exclusions["nodeSelector"] = int(bad.sum())
            feasible &= ok
        if affinity is None:
            return feasible, None
        matches, leaf_scores = self._affinity_masks(affinity)
        bad = feasible & ~matches
        if bad.any():
            exclusions["affinity"] = int(bad.sum())
        feasible &= matches
        scores = np.where(feasible, leaf_scores, 0).astype(np.int64) if affinity.preferred else None
        return feasible, scores

    def _affinity_masks(self, affinity: NodeAffinity) -> tuple[BoolArray, IntArray]:
        """Per leaf: whether the required node affinity matches, and the preferred score."""
        cached = self._affinity_cache.get(affinity)
        if cached is None:
            names = self.names
            matches = np.array([affinity.required_match(lab, name) for lab, name in zip(self.labels, names,
                                                                                         strict=True)], dtype=np.bool_)
            scores = np.array([affinity.preferred_score(lab, name) for lab, name in zip(self.labels, names,
                                                                                         strict=True)], dtype=np.int64)
            cached = (matches.reshape(len(names)), scores.reshape(len(names)))
            if len(self._affinity_cache) >= _AFFINITY_CACHE_SIZE:
                del self._affinity_cache[next(iter(self._affinity_cache))]
            self._affinity_cache[affinity] = cached
        return cached

    def _label_mask(self, key: str, value: str) -> BoolArray:
        cached = self._mask_cache.get((key, value))
        if cached is None:
            cached = np.array([labels.get(key) == value for labels in self.labels], dtype=np.bool_)
            self._mask_cache[(key, value)] = cached
        return cached


def resource_counts(matrix: IntArray, res_index: Mapping[str, int], requested: Sequence[tuple[str, int]],
                    feasible: BoolArray, exclusions: dict[str, int]) -> IntArray:
    """Pods per leaf by the scarcest requested resource (0 where not feasible); leaves that fit
    none are counted under their limiting resource."""
    n = matrix.shape[0]
    per_res = np.empty((n, len(requested)), dtype=np.int64)
    for j, (res, amount) in enumerate(requested):
        col = res_index.get(res)
        if col is None:
            per_res[:, j] = 0
        else:
            per_res[:, j] = np.maximum(matrix[:, col], 0) // amount
    counts = per_res.min(axis=1) if n else np.zeros(0, dtype=np.int64)
    counts = np.where(feasible, counts, 0).astype(np.int64)
    zero = feasible & (counts == 0)
    if zero.any():
        limiting = per_res[zero].argmin(axis=1)  # first minimum = ties broken by name
        for j, k in zip(*np.unique(limiting, return_counts=True), strict=True):
            key = f'resource "{requested[int(j)][0]}"'
            exclusions[key] = exclusions.get(key, 0) + int(k)
    return counts
