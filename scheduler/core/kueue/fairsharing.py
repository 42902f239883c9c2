"""Fair sharing: dominant resource shares, the admission tournament and fair preemption.

Kueue v0.17's fair sharing (``pkg/cache/scheduler/fair_sharing.go``,
``pkg/scheduler/fair_sharing_iterator.go``, ``pkg/scheduler/preemption/fairsharing/``,
``preemption.go`` ``fairPreemptions``; site ``concepts/fair_sharing.md``), restated:

* **Dominant resource share (DRS)** of a ClusterQueue or Cohort that has a parent: per
  resource, what the node uses above its subtree quota (summed over flavors) divided by what
  the parent could lend it of that resource (the root's flavor-resources, each with the
  parent's potential availability), in per-mille; the largest ratio is the share and its
  resource the dominant one (ties: the alphabetically first). A root, or a node using no more
  than its quota, has share 0. The *weighted* share is that ratio divided by
  ``spec.fairSharing.weight`` (default 1); a zero weight makes a borrowing node's share
  infinite, and two such nodes compare by their unweighted ratios.
* **Admission order** (``fairSharing`` in the Configuration): one head per ClusterQueue as
  usual; the next head to settle is the winner of a tournament over the cohort tree of an
  arbitrary remaining head (toposched: the first in classical order): at each Cohort, every
  child (sub-cohort winner or ClusterQueue head) is compared by the share the child would
  have *after* admitting its head — first heads whose subtree would not borrow on the
  flavor-resources they request (gate ``FairSharingPrioritizeNonBorrowing``), then the lower
  share, then the higher priority (gate ``PrioritySortingWithinCohort``), then the earlier
  queue timestamp. The shares are recomputed before every pick, against what was admitted so
  far in the cycle.
* **Preemption** (``preemption/fair_sharing.py`` ``fair_targets``): the same candidates as classical preemption in
  Kueue's candidate order; the preemptor's usage is added first; target ClusterQueues are
  visited highest share first down the tree (a node not borrowing is pruned, except on the
  preemptor's path); from the preemptor's own ClusterQueue every candidate is taken
  (``InClusterQueue``); while the preemptor stays within its nominal quota on the contested
  resources (gate ``FairSharingPreemptWithinNominal``) other queues' candidates are taken
  unconditionally (``InCohortReclamation``); else a candidate is taken
  (``InCohortFairSharing``) when the first strategy holds for the shares of the two children
  of the least common ancestor: ``LessThanOrEqualToFinalShare`` (preemptor's new share <=
  target's share without the candidate) or ``LessThanInitialShare`` (preemptor's new share <
  target's current share). With two strategies, the rejected candidates get a second pass
  under ``LessThanInitialShare``, one per ClusterQueue. Then the targets are filled back as
  in classical preemption. The fit check is the cycle's: quota and the TAS placement with the
  victims' nodes freed, so victims always free capacity the topology placement can use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.config import FeatureGates
from scheduler.core.kueue.quota import ClusterQueueSpec, CohortSpec, FlavorResource, QuotaState, cohort_node, cq_node

DEFAULT_WEIGHT = 1.0
MAX_INT64 = 2**63 - 1

GATE_PRIORITIZE_NON_BORROWING = "FairSharingPrioritizeNonBorrowing"
GATE_PREEMPT_WITHIN_NOMINAL = "FairSharingPreemptWithinNominal"
GATE_PRIORITY_SORTING_WITHIN_COHORT = "PrioritySortingWithinCohort"


@dataclass(frozen=True)
class DRS:
    """One node's dominant resource share (Kueue ``DRS``)."""

    weight: float = DEFAULT_WEIGHT
    ratio: float = 0.0  # unweighted, per-mille of the lendable resource
    dominant_resource: str = ""
    borrowed: frozenset[FlavorResource] = field(default_factory=frozenset)

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    @property
    def is_zero(self) -> bool:
        return self.ratio == 0

    def borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero

    def weighted_share(self) -> float:
        """Kueue ``PreciseWeightedShare``: 0 when not borrowing, +inf for a zero weight."""
        if self.is_zero:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def status_value(self) -> int:
        """``status.fairSharing.weightedShare``: the share rounded up; MaxInt64 for +inf."""
        share = self.weighted_share()
        return MAX_INT64 if math.isinf(share) else math.ceil(share)


NEGATIVE_DRS = DRS(DEFAULT_WEIGHT, -1.0)


def compare_drs(a: DRS, b: DRS) -> int:
    """-1, 0, 1: lower is preferred for admission, higher for preemption (Kueue ``CompareDRS``)."""
    if a.zero_weight_borrows and b.zero_weight_borrows:
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if a.zero_weight_borrows:
        return 1
    if b.zero_weight_borrows:
        return -1
    x, y = a.weighted_share(), b.weighted_share()
    return (x > y) - (x < y)


def node_weights(
    cluster_queues: Mapping[str, ClusterQueueSpec], cohorts: Mapping[str, CohortSpec]
) -> dict[str, float]:
    """Quota-tree node -> ``fairSharing.weight`` (implicit cohorts weigh the default 1)."""
    out = {cq_node(name): cq.fair_weight for name, cq in cluster_queues.items()}
    out.update({cohort_node(name): co.fair_weight for name, co in cohorts.items()})
    return out


class Shares:
    """DRS of the nodes of a :class:`QuotaState` (read live: usage changes are seen)."""

    def __init__(self, quota: QuotaState, weights: Mapping[str, float]) -> None:
        self.quota = quota
        self.weights = weights

    def weight(self, node: str) -> float:
        return self.weights.get(node, DEFAULT_WEIGHT)

    def _lendable(self, parent: str) -> dict[str, int]:
        root = parent
        while (up := self.quota.parent[root]) is not None:
            root = up
        out: dict[str, int] = {}
        for fr in self.quota.subtree[root]:
            out[fr[1]] = out.get(fr[1], 0) + self.quota.potential_of(parent, fr)
        return out

    def drs(self, node: str, extra: Mapping[FlavorResource, int] | None = None) -> DRS:
        parent = self.quota.parent[node]
        weight = self.weight(node)
        if parent is None:
            return DRS(weight)
        usage = self.quota.usage[node]
        borrowed_by_res: dict[str, int] = {}
        borrowed: set[FlavorResource] = set()
        for fr, quota in self.quota.subtree[node].items():
            amount = (extra or {}).get(fr, 0) + usage.get(fr, 0) - quota
            if amount > 0:
                borrowed_by_res[fr[1]] = borrowed_by_res.get(fr[1], 0) + amount
                borrowed.add(fr)
        if not borrowed:
            return DRS(weight)
        lendable = self._lendable(parent)
        ratio, dominant = 0.0, ""
        for res, amount in borrowed_by_res.items():
            lr = lendable.get(res, 0)
            if lr <= 0:
                continue
            r = amount * 1000.0 / lr
            if r > ratio or (r == ratio and res < dominant):
                ratio, dominant = r, res
        return DRS(weight, ratio, dominant, frozenset(borrowed))

    def cluster_queue(self, name: str) -> DRS:
        return self.drs(cq_node(name))

    def cohort(self, name: str) -> DRS:
        return self.drs(cohort_node(name))


def status_shares(
    quota: QuotaState, weights: Mapping[str, float], cluster_queues: Sequence[str], cohorts: Sequence[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """``status.fairSharing.weightedShare`` of every named ClusterQueue and Cohort."""
    shares = Shares(quota, weights)
    return ({n: shares.cluster_queue(n).status_value() for n in cluster_queues},
            {n: shares.cohort(n).status_value() for n in cohorts if cohort_node(n) in quota.parent})


# ---------------------------------------------------------------------- admission tournament


@dataclass(frozen=True)
class Contender:
    """One ClusterQueue's head in the tournament."""

    key: str
    cluster_queue: str
    usage: Mapping[FlavorResource, int]
    priority: int
    timestamp: float


class _Tournament:
    def __init__(self, shares: Shares, contenders: Mapping[str, Contender], gates: FeatureGates) -> None:
        self.shares = shares
        self.by_cq = {cq_node(c.cluster_queue): c for c in contenders.values()}
        self.values: dict[tuple[str, str], DRS] = {}
        self.non_borrowing_first = gates.enabled(GATE_PRIORITIZE_NON_BORROWING)
        self.priority_first = gates.enabled(GATE_PRIORITY_SORTING_WITHIN_COHORT)

    def compute(self, root: str) -> None:
        """The share of every node on each head's path, with that head admitted (Kueue
        ``computeDRS``): keyed by (parent cohort, head)."""
        quota = self.shares.quota
        for node in _subtree_cluster_queues(quota, root):
            c = self.by_cq.get(node)
            if c is None:
                continue
            quota.add_usage(c.cluster_queue, c.usage)
            value = self.shares.drs(node)
            ancestor = quota.parent[node]
            while ancestor is not None:
                self.values[(ancestor, c.key)] = value
                value = self.shares.drs(ancestor)
                ancestor = quota.parent[ancestor]
            quota.remove_usage(c.cluster_queue, c.usage)

    def less(self, a: Contender, b: Contender, parent: str) -> bool:
        da, db = self.values[(parent, a.key)], self.values[(parent, b.key)]
        if self.non_borrowing_first:
            ba, bb = da.borrowing_on(a.usage), db.borrowing_on(b.usage)
            if ba != bb:
                return not ba
        order = compare_drs(da, db)
        if order:
            return order < 0
        if self.priority_first and a.priority != b.priority:
            return a.priority > b.priority
        return a.timestamp < b.timestamp

    def run(self, cohort: str) -> Contender | None:
        candidates: list[Contender] = []
        kids = self.shares.quota.children.get(cohort, ())
        for child in kids:  # child cohorts first, then ClusterQueues (Kueue's order)
            if not is_cq(child) and (won := self.run(child)) is not None:
                candidates.append(won)
        candidates.extend(self.by_cq[child] for child in kids if child in self.by_cq)
        if not candidates:
            return None
        best = candidates[0]
        for current in candidates[1:]:
            if self.less(current, best, cohort):
                best = current
        return best


def is_cq(node: str) -> bool:
    return node.startswith(cq_node(""))


def _subtree_cluster_queues(quota: QuotaState, root: str) -> list[str]:
    out: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if is_cq(node):
            out.append(node)
        else:
            stack.extend(reversed(quota.children.get(node, ())))
    return out


def next_contender(
    quota: QuotaState, weights: Mapping[str, float], contenders: Sequence[Contender], gates: FeatureGates
) -> Contender:
    """The head to settle next (Kueue's ``fairSharingIterator.pop``). ``contenders``: the
    remaining heads, one per ClusterQueue; the first one picks the cohort tree (Kueue picks an
    arbitrary one). ``quota`` is used for what-ifs and left as it was."""
    first = contenders[0]
    node = cq_node(first.cluster_queue)
    if quota.parent.get(node) is None:
        return first
    root = quota.root_of(first.cluster_queue)
    tournament = _Tournament(Shares(quota, weights), {c.cluster_queue: c for c in contenders}, gates)
    tournament.compute(root)
    won = tournament.run(root)
    return won if won is not None else first


# ---------------------------------------------------------------------- explaining


@dataclass(frozen=True)
class ShareRow:
    """One ClusterQueue of a cohort tree, for ``toposched explain``: its weighted share now and
    with its head admitted (``inf`` for a zero weight that borrows)."""

    cluster_queue: str
    weight: float
    share: float
    dominant_resource: str
    head: str = ""
    share_with_head: float | None = None


def share_rows(
    quota: QuotaState, weights: Mapping[str, float], cluster_queues: Sequence[str], heads: Mapping[str, Contender]
) -> list[ShareRow]:
    """The share of each named ClusterQueue, and with its head (``heads``: by ClusterQueue)."""
    shares = Shares(quota, weights)
    rows = []
    for name in cluster_queues:
        node = cq_node(name)
        now = shares.drs(node)
        head = heads.get(name)
        with_head = shares.drs(node, head.usage).weighted_share() if head is not None else None
        rows.append(ShareRow(name, shares.weight(node), now.weighted_share(), now.dominant_resource,
                             head.key if head is not None else "", with_head))
    return rows


def fair_order(
    quota: QuotaState, weights: Mapping[str, float], heads: Sequence[Contender], gates: FeatureGates
) -> list[Contender]:
    """The order in which the tournament would pick ``heads`` at the current usage (no
    admissions in between): what ``explain`` reports as "ahead by fair share"."""
    remaining = list(heads)
    out: list[Contender] = []
    while remaining:
        won = next_contender(quota, weights, remaining, gates)
        out.append(won)
        remaining = [c for c in remaining if c.key != won.key]
    return out
