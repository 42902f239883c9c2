"""Fair sharing preemption: Kueue v0.17's ``fairPreemptions`` (``pkg/scheduler/preemption/
fairsharing/``), the first strategy of ``preemption.strategies`` and, with fair sharing on, the
only one. The shares it compares are ``core/kueue/fairsharing.py``'s; its candidates and their order
are classical preemption's (``plan.find_candidates``, ``cost.candidate_order_key``); the module
docstring of ``core/kueue/fairsharing.py`` states the rules."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.config import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, FeatureGates
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.fairsharing import DRS, GATE_PREEMPT_WITHIN_NOMINAL, NEGATIVE_DRS, Shares, compare_drs, is_cq
from scheduler.core.kueue.quota import FlavorResource, QuotaState, cq_node
from scheduler.core.preemption.cost import LqUsage, candidate_order_key
from scheduler.core.preemption.targets import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    FitCheck,
    Target,
    fill_back,
)


class _TargetOrdering:
    """Kueue's ``TargetClusterQueueOrdering``: target ClusterQueues, highest share first."""

    def __init__(self, shares: Shares, preemptor_cq: str, candidates: Sequence[AdmittedWorkload],
                 order: Callable[[AdmittedWorkload], Any]) -> None:
        self.shares = shares
        self.quota = shares.quota
        self.preemptor = cq_node(preemptor_cq)
        self.order = order
        self.ancestors: list[str] = []
        up = self.quota.parent[self.preemptor]
        while up is not None:
            self.ancestors.append(up)
            up = self.quota.parent[up]
        self.targets: dict[str, list[AdmittedWorkload]] = {}
        for c in candidates:
            self.targets.setdefault(cq_node(c.cluster_queue), []).append(c)
        self.pruned: set[str] = set()

    def has_workload(self, node: str) -> bool:
        return bool(self.targets.get(node))

    def pop(self, node: str) -> AdmittedWorkload:
        return self.targets[node].pop(0)

    def drop(self, node: str) -> None:
        self.pruned.add(node)

    def __iter__(self) -> Iterator[str]:
        if not self.ancestors:
            while self.has_workload(self.preemptor):
                yield self.preemptor
            return
        root = self.ancestors[-1]
        while root not in self.pruned:
            node = self._next(root)
            if node is not None:
                yield node

    def _next(self, cohort: str) -> str | None:
        best_cq: str | None = None
        best_cq_drs = NEGATIVE_DRS
        best_co: str | None = None
        best_co_drs = NEGATIVE_DRS
        for child in self.quota.children.get(cohort, ()):
            if child in self.pruned:
                continue
            drs = self.shares.drs(child)
            if is_cq(child):
                if (not drs.borrowing and child != self.preemptor) or not self.has_workload(child):
                    self.pruned.add(child)
                    continue
                order = compare_drs(drs, best_cq_drs)
                if order > 0 or (order == 0 and best_cq is not None and self._head_first(child, best_cq)):
                    best_cq, best_cq_drs = child, drs
            elif not drs.borrowing and child not in self.ancestors:
                self.pruned.add(child)
            elif compare_drs(drs, best_co_drs) >= 0:
                best_co, best_co_drs = child, drs
        if best_co is None and best_cq is None:
            self.pruned.add(cohort)
            return None
        if best_co is not None and compare_drs(best_co_drs, best_cq_drs) >= 0:
            return self._next(best_co)
        return best_cq

    def _head_first(self, a: str, b: str) -> bool:
        return bool(self.order(self.targets[a][0]) < self.order(self.targets[b][0]))

    def _almost_lca(self, node: str, lca: str) -> str:
        while (up := self.quota.parent[node]) != lca:
            assert up is not None
            node = up
        return node

    def shares_of(self, target: str) -> tuple[DRS, DRS]:
        """(preemptor's share, target's share), each at the child of their least common
        ancestor on its side (Kueue ``ComputeShares``)."""
        lca = self.quota.parent[target]
        while lca not in self.ancestors:
            assert lca is not None
            lca = self.quota.parent[lca]
        return (self.shares.drs(self._almost_lca(self.preemptor, lca)),
                self.shares.drs(self._almost_lca(target, lca)))

    def share_without(self, target: str, w: AdmittedWorkload) -> DRS:
        self.quota.remove_usage(w.cluster_queue, w.usage)
        lca = self.quota.parent[target]
        while lca not in self.ancestors:
            assert lca is not None
            lca = self.quota.parent[lca]
        drs = self.shares.drs(self._almost_lca(target, lca))
        self.quota.add_usage(w.cluster_queue, w.usage)
        return drs


def strategy_holds(strategy: str, preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    if strategy == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return compare_drs(preemptor_new, target_new) <= 0
    return compare_drs(preemptor_new, target_old) < 0


@dataclass
class _FairSearch:
    """One preemptor's fair preemption: the working quota carries the preemptor's usage."""

    work: QuotaState
    shares: Shares
    cq: str
    usage: Mapping[FlavorResource, int]
    fits: FitCheck
    order: Callable[[AdmittedWorkload], Any]
    targets: list[Target] = field(default_factory=list)

    def take(self, w: AdmittedWorkload, reason: str) -> bool:
        """Preempt ``w``; whether the preemptor fits now (its own usage set aside)."""
        self.work.remove_usage(w.cluster_queue, w.usage)
        self.targets.append(Target(w, reason))
        self.work.remove_usage(self.cq, self.usage)
        fits = self.fits(self.work, [t.workload for t in self.targets], True)
        self.work.add_usage(self.cq, self.usage)
        return fits

    def first(self, candidates: Sequence[AdmittedWorkload], strategy: str,
              within_nominal: bool) -> tuple[bool, list[AdmittedWorkload]]:
        ordering = _TargetOrdering(self.shares, self.cq, candidates, self.order)
        retry: list[AdmittedWorkload] = []
        for target in ordering:
            if target == ordering.preemptor:
                if self.take(ordering.pop(target), IN_CLUSTER_QUEUE):
                    return True, []
                continue
            if within_nominal:
                if self.take(ordering.pop(target), IN_COHORT_RECLAMATION):
                    return True, []
                continue
            preemptor_new, target_old = ordering.shares_of(target)
            while ordering.has_workload(target):
                w = ordering.pop(target)
                if strategy_holds(strategy, preemptor_new, target_old, ordering.share_without(target, w)):
                    if self.take(w, IN_COHORT_FAIR_SHARING):
                        return True, []
                    break  # the shares changed: pick the target queue again
                retry.append(w)
        return False, retry

    def second(self, retry: Sequence[AdmittedWorkload]) -> bool:
        """Kueue's rule S2-b: ``LessThanInitialShare`` over the rejected candidates, at most
        one per ClusterQueue."""
        ordering = _TargetOrdering(self.shares, self.cq, retry, self.order)
        for target in ordering:
            preemptor_new, target_old = ordering.shares_of(target)
            if compare_drs(preemptor_new, target_old) < 0 and self.take(
                ordering.pop(target), IN_COHORT_FAIR_SHARING
            ):
                return True
            ordering.drop(target)
        return False


def fair_targets(
    candidates: Sequence[AdmittedWorkload],
    cq: str,
    quota: QuotaState,
    weights: Mapping[str, float],
    needs: frozenset[FlavorResource],
    usage: Mapping[FlavorResource, int],
    fits: FitCheck,
    priority: Callable[[AdmittedWorkload], int],
    strategies: Sequence[str],
    gates: FeatureGates,
    lq_usage: LqUsage | None = None,
) -> list[Target]:
    """Kueue's ``fairPreemptions`` for a preemptor of ClusterQueue ``cq`` needing ``usage``:
    the targets (empty when the strategies cannot make it fit). ``candidates``: Kueue's
    candidates (``preemption.find_candidates``), in any order."""
    if not candidates:
        return []

    def order(w: AdmittedWorkload) -> Any:
        return candidate_order_key(w, cq, priority, lq_usage)

    ordered = sorted(candidates, key=order)
    work = quota.clone()
    work.add_usage(cq, usage)
    search = _FairSearch(work, Shares(work, weights), cq, usage, fits, order)
    within_nominal = gates.enabled(GATE_PREEMPT_WITHIN_NOMINAL) and not any(
        work.used(cq, fr) > work.nominal(cq, fr) for fr in needs
    )
    strategy = strategies[0] if strategies else LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
    fits_now, retry = search.first(ordered, strategy, within_nominal)
    if not fits_now and len(strategies) > 1 and strategies[1] == LESS_THAN_INITIAL_SHARE:
        fits_now = search.second(retry)
    if not fits_now:
        return []
    work.remove_usage(cq, usage)
    return fill_back(search.targets, work, fits, True)
