"""Domain-clearing preemption: free ONE whole domain for a topology-constrained preemptor.

Kueue's classical preemption (``preemption.py``) only considers candidates that use a
flavor-resource needing preemption and stops at the first candidate prefix that lets the
preemptor fit anywhere. For a workload that needs one domain (``required``) or wants one
(``preferred``) that leaves it pending when the domain is also held by policy-preemptible
workloads that use none of those resources (Kueue #10497, #12478), or scatters the freed
capacity over several domains (a ``preferred`` preemptor fits across racks once enough
single nodes are free: Kueue #10815). This module is called by the cycle:

* first, when the preemptor already holds a **sticky target** (the domain its earlier
  preemptions were issued for, annotation :data:`ANN_PREEMPTION_TARGET` on its Workload,
  written by the controller through the writer): the victims are taken inside that domain
  only, so evictions already issued are never abandoned for another domain;
* last, when Kueue's classical selection (and toposched's CP-SAT victim search) finds no
  targets: every domain of the requested level (``preferred``: that level, then each wider
  one) is tried with ALL policy-preemptible blockers in it, and the cheapest is kept.

Only victims the ClusterQueue's policy allows are taken (``preemption.find_candidates``:
``withinClusterQueue``, ``reclaimWithinCohort`` of borrowing queues, ``borrowWithinCohort``
thresholds via the plan's attempts), with Kueue's reasons and messages.

Cost of a victim set, compared lexicographically: the victims' (priority, -reservation
time) sorted from the most expensive down (Kueue's candidate ordering: lower priority, then
more recently admitted, is cheaper; fewer victims is cheaper when one list is a prefix of
the other), then the GPUs they hold. Victims already being evicted cost nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.preemption import (
    AdmittedWorkload,
    Attempt,
    DomainRequest,
    FitCheck,
    Target,
    _cq_is_borrowing,
    _target_reason,
)
from scheduler.core.preemption_rules import CONFIGURABLE_PREEMPTION
from scheduler.core.quota import FlavorResource, QuotaState
from scheduler.core.resources import with_pod_slot
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import json_object_annotation

ANN_PREEMPTION_TARGET = "toposched.io/preemption-target"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")

Priority = Callable[[AdmittedWorkload], int]


@dataclass(frozen=True)
class DomainTarget:
    """The domain a preemptor preempts for: ``selector`` maps each topology level label from
    the root down to ``level`` to its value (a node selector for that domain)."""

    pod_set: str
    flavor: str
    level: str
    selector: Mapping[str, str]

    def encode(self) -> str:
        return json.dumps({"podSet": self.pod_set, "flavor": self.flavor, "level": self.level,
                           "domain": dict(self.selector)}, sort_keys=True)

    @property
    def name(self) -> str:
        """The domain's value at its level (what `explain` prints)."""
        return self.selector.get(self.level, "")


def parse_target(annotations: Mapping[str, str], key: str = ANN_PREEMPTION_TARGET) -> DomainTarget | None:
    """The sticky target recorded on a Workload under ``key`` (the preemption target, or the
    domain a compact wait holds: core/reservation.py), or None (absent or malformed: ignored)."""
    data = json_object_annotation(annotations, key)
    if data is None or not isinstance(data.get("domain"), dict):
        return None
    fields = (data.get("podSet"), data.get("flavor"), data.get("level"))
    if not all(isinstance(f, str) and f for f in fields):
        return None
    selector = {str(k): str(v) for k, v in data["domain"].items()}
    return DomainTarget(str(data["podSet"]), str(data["flavor"]), str(data["level"]), selector)


@dataclass(frozen=True)
class DomainChoice:
    """The victims that free ``target`` for the preemptor."""

    target: DomainTarget
    targets: tuple[Target, ...]
    gpus_lost: int


def gpus_held(w: AdmittedWorkload) -> int:
    return sum(v for (_, res), v in w.usage.items() if res in GPU_RESOURCES)


def victim_cost(victims: Sequence[AdmittedWorkload], priority: Priority) -> tuple[list[tuple[int, float]], int]:
    """Lexicographic cost (see the module docstring); evicting workloads are free."""
    live = [w for w in victims if not w.evicted]
    ranked = sorted(((priority(w), -w.reserved_at) for w in live), reverse=True)
    return ranked, sum(gpus_held(w) for w in live)


def levels_to_try(tree: TopologyTree, level: str, required: bool) -> list[str]:
    """``required``: the level; ``preferred``: the level, then every wider level up to the root."""
    if not tree.has_level(level):
        return []
    if required:
        return [level]
    return list(reversed(tree.levels[: tree.level_index(level) + 1]))


def selector_of(tree: TopologyTree, level: str, domain: int) -> dict[str, str]:
    lvl = tree.level_index(level)
    return dict(zip(tree.levels[: lvl + 1], tree.paths[lvl][domain], strict=True))


def domain_of_placement(tree: TopologyTree, placement: PodSetPlacement, level: str) -> int | None:
    """The one domain at ``level`` holding every pod of ``placement``, or None if it spans more."""
    anc = tree.ancestors_array(tree.level_index(level))
    found = {int(anc[leaf]) for dom in placement.domains
             if (leaf := tree.leaf_for_values(placement.levels, dom.values)) is not None}
    return found.pop() if len(found) == 1 else None


def target_of_placement(tree: TopologyTree, flavor: str, placement: PodSetPlacement,
                        level: str, required: bool) -> DomainTarget | None:
    """The narrowest domain (``level`` first, wider for ``preferred``) holding the whole placement."""
    for lvl in levels_to_try(tree, level, required):
        d = domain_of_placement(tree, placement, lvl)
        if d is not None:
            return DomainTarget(placement.name, flavor, lvl, selector_of(tree, lvl, d))
    return None


class Domains:
    """Per-leaf usage of every candidate on the request's flavor, and pod counting in a domain."""

    def __init__(self, tree: TopologyTree, request: DomainRequest, candidates: Sequence[AdmittedWorkload]) -> None:
        self.tree = tree
        self.request = request
        self.req = tree.request_vector(with_pod_slot(request.per_pod))
        self.usage = {c.key: self._leaf_usage(c) for c in candidates}
        per_pod = with_pod_slot(request.per_pod)
        fit = tree.leaf_fit(per_pod, request.node_selector, request.tolerations, free=tree.allocatable)
        self.eligible = fit.counts > 0

    def _leaf_usage(self, cand: AdmittedWorkload) -> dict[int, npt.NDArray[np.int64]]:
        out: dict[int, npt.NDArray[np.int64]] = {}
        for u in cand.tas:
            if u.flavor != self.request.flavor:
                continue
            vec = self.tree.request_vector(with_pod_slot(u.per_pod))
            for dom in u.placement.domains:
                leaf = self.tree.leaf_for_values(u.placement.levels, dom.values)
                if leaf is not None:
                    out[leaf] = out.get(leaf, np.zeros_like(vec)) + dom.count * vec
        return out

    def leaves(self, level: str, domain: int) -> list[int]:
        anc = self.tree.ancestors_array(self.tree.level_index(level))
        return [int(x) for x in np.nonzero((anc == domain) & self.eligible)[0]]

    def blockers(self, leaves: Sequence[int], candidates: Sequence[AdmittedWorkload]) -> list[AdmittedWorkload]:
        inside = set(leaves)
        return [c for c in candidates if inside & set(self.usage[c.key])]

    def pods_fit(self, leaves: Sequence[int], removed: Sequence[AdmittedWorkload]) -> bool:
        mask = self.req > 0
        total = 0
        for leaf in leaves:
            free = self.tree.free[leaf].copy()
            for w in removed:
                u = self.usage[w.key].get(leaf)
                if u is not None:
                    free = free + u
            total += int(np.min(np.maximum(free[mask], 0) // self.req[mask])) if mask.any() else 0
        return total >= self.request.count


@dataclass(frozen=True)
class ClearContext:
    """What clearing one domain needs from the cycle."""

    cq: str
    quota: QuotaState
    needs: frozenset[FlavorResource]
    usage: Mapping[FlavorResource, int]  # the preemptor's quota usage
    fits: FitCheck  # the cycle's full check: quota and the real placement without the victims
    priority: Priority
    # Candidates the preemptor ClusterQueue's PreemptionConfig selected (preemption_rules.py):
    # taken regardless of the policy's borrowing re-check, reason ConfigurablePreemption.
    configured: frozenset[str] = frozenset()


def _take(ctx: ClearContext, work: QuotaState, cand: AdmittedWorkload, attempt: Attempt,
          chosen: list[Target], allow: list[bool]) -> bool:
    """Remove ``cand`` from ``work`` if the policy still allows it (an other-queue victim only
    while its queue borrows, as Kueue re-checks after every removal), or a PreemptionConfig
    rule selected it."""
    if cand.key in ctx.configured:
        work.remove_usage(cand.cluster_queue, cand.usage)
        chosen.append(Target(cand, CONFIGURABLE_PREEMPTION))
        return True
    if cand.cluster_queue != ctx.cq and not _cq_is_borrowing(work, cand.cluster_queue, ctx.needs):
        return False
    reason, forbids = _target_reason(cand, ctx.cq, attempt.borrow_below_priority, ctx.priority)
    allow[0] = allow[0] and not forbids
    work.remove_usage(cand.cluster_queue, cand.usage)
    chosen.append(Target(cand, reason))
    return True


def _clear_one(ctx: ClearContext, doms: Domains, leaves: Sequence[int], attempt: Attempt) -> list[Target] | None:
    """Victims (Kueue order) that free ``leaves`` for the pods and the preemptor's quota, minimal."""
    work = ctx.quota.clone()
    chosen: list[Target] = []
    allow = [attempt.allow_borrowing]
    inside = doms.blockers(leaves, attempt.candidates)
    for cand in inside:
        if doms.pods_fit(leaves, [t.workload for t in chosen]):
            break
        _take(ctx, work, cand, attempt, chosen, allow)
    victims = [t.workload for t in chosen]
    if not doms.pods_fit(leaves, victims):
        return None
    # Put back, newest choice first, every blocker the domain can do without.
    for t in list(reversed(chosen)):
        rest = [x.workload for x in chosen if x is not t]
        if doms.pods_fit(leaves, rest):
            chosen.remove(t)
            work.add_usage(t.workload.cluster_queue, t.workload.usage)
    for cand in attempt.candidates:  # quota still short: more victims, Kueue order
        if work.fits(ctx.cq, ctx.usage, allow[0]):
            break
        short = {fr for fr, v in ctx.usage.items() if v > work.available(ctx.cq, fr)}
        taken = any(t.workload.key == cand.key for t in chosen)
        if not taken and any(cand.usage.get(fr, 0) > 0 for fr in short):
            _take(ctx, work, cand, attempt, chosen, allow)
    victims = [t.workload for t in chosen]
    if not victims or not ctx.fits(work, victims, allow[0]):
        return None
    return chosen


def clear_domain(tree: TopologyTree, request: DomainRequest, required: bool, plan: Sequence[Attempt],
                 ctx: ClearContext, only: DomainTarget | None = None) -> DomainChoice | None:
    """The cheapest policy-allowed victim set that frees one domain for ``request``: with
    ``only``, that domain alone; else every domain of the levels to try, level by level (the
    narrowest level with a clearable domain wins). None when no domain can be freed."""
    pool = list({c.key: c for a in plan for c in a.candidates}.values())
    doms = Domains(tree, request, pool)
    for level in levels_to_try(tree, request.level, required):
        lvl = tree.level_index(level)
        best: tuple[tuple[list[tuple[int, float]], int], DomainChoice] | None = None
        for d in range(tree.domain_count(lvl)):
            selector = selector_of(tree, level, d)
            if only is not None and (only.level != level or only.selector != selector):
                continue
            leaves = doms.leaves(level, d)
            for attempt in plan:
                found = _clear_one(ctx, doms, leaves, attempt)
                if found is None:
                    continue
                victims = [t.workload for t in found]
                cost = victim_cost(victims, ctx.priority)
                target = DomainTarget(request.pod_set, request.flavor, level, selector)
                choice = DomainChoice(target, tuple(found), cost[1])
                if best is None or cost < best[0]:
                    best = (cost, choice)
                break
        if best is not None:
            return best[1]
    return None
