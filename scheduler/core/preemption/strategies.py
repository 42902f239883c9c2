"""The preemption strategies, in the order the cycle asks them: fair sharing -> sticky target ->
CP-SAT -> classical -> clear-domain (:data:`STRATEGIES`).

Each strategy has one contract: given the :class:`Ask` (the preemptor, the cluster as the
cycle sees it, the cycle's fit check) and the best targets an earlier strategy offered as a
fallback, it returns nothing (not its case, or no targets), targets that settle the question
(``final``), or targets the next strategies may beat (a fallback). :func:`choose_targets` walks
them and returns the first final answer, else the fallback, else no targets.

* fair sharing (Kueue's ``fairPreemptions``): with fair sharing on, the only strategy;
* sticky target (beyond Kueue): a preemptor that already preempted for a domain takes its
  victims inside that domain only, so evictions already issued are never abandoned;
* CP-SAT (beyond Kueue): the cheapest victims that free one domain for a domain-needing preemptor;
* classical (Kueue's heuristic): final, unless the capacity it frees scatters a preferred-level
  preemptor over several domains (a fallback then);
* clear-domain (beyond Kueue): the cheapest policy-allowed victims that free one whole domain,
  taken over the fallback when it preempts no more live workloads.

The two domain-clearing strategies (sticky, clear-domain) follow Kueue's PreemptionConfig and
PreemptionLimit where the preemptor's ClusterQueue has them (rules.py): the rules add
candidates, and a clearing a limit would exceed gives no answer (:func:`held_back`), the limit
recorded in the result (``Found.blocked_by_limit``) so the preemptor is told and asked again.

With domain preemption off (``Snapshot.domain_preemption``) the sticky and clear-domain
strategies never answer and classical's answer is final: Kueue's preemption.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from scheduler.core.beyond.domain_target import DomainTarget, parse_target
from scheduler.core.config import KueueConfig
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.flavorassigner import FlavorAssignment
from scheduler.core.kueue.quota import ClusterQueueSpec, CohortSpec, FlavorResource, QuotaState
from scheduler.core.preemption.classical import classical_targets
from scheduler.core.preemption.clear_domain import ClearContext, DomainChoice, clear_domain
from scheduler.core.preemption.cost import LqUsage, Priority, victim_cost
from scheduler.core.preemption.cpsat import tas_targets
from scheduler.core.preemption.domains import DomainRequest
from scheduler.core.preemption.fair_sharing import fair_targets
from scheduler.core.preemption.plan import Attempt, find_candidates, preemption_plan
from scheduler.core.preemption.rules import (
    NO_CONFIGURED_PREEMPTION,
    ConfiguredPreemption,
    configured_plan,
    limit_blocking,
)
from scheduler.core.preemption.targets import FitCheck, Target
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import WorkloadSpec


@dataclass(frozen=True)
class Preemptor:
    """The workload that needs preemption, as the strategies see it."""

    priority: int
    timestamp: float
    cq: ClusterQueueSpec
    assignment: FlavorAssignment
    needs: frozenset[FlavorResource]  # the flavor-resources whose quota (or topology) needs preemption
    spec: WorkloadSpec  # as queued: its labels (PreemptionConfig rules), its sticky target annotation
    request: DomainRequest | None = None  # one TAS pod set wanting one domain (never with fair sharing)
    required: bool = False  # the request's level is required (else preferred)

    @property
    def first_pod_set(self) -> str:
        """Domain clearing frees the resources of this pod set (the only one with a request)."""
        return self.spec.pod_sets[0].name

    @property
    def annotations(self) -> Mapping[str, str]:
        """Its sticky target, if any, is kept there."""
        return self.spec.annotations


@dataclass(frozen=True)
class Ask:
    """One preemptor's question to the strategies."""

    preemptor: Preemptor
    quota: QuotaState
    admitted: Sequence[AdmittedWorkload]
    priority: Priority
    lq_usage: LqUsage | None
    fits: FitCheck  # quota, and the preemptor's real placement without the victims
    scattered: Callable[[Sequence[Target]], bool]  # would these victims leave it spread over domains
    trees: Mapping[str, TopologyTree]
    config: KueueConfig
    weights: Mapping[str, float]  # fair sharing's weights
    domain_preemption: bool
    budget_s: float  # per CP-SAT victim search
    # Kueue's PreemptionConfig / toposched's PreemptionLimit for domain clearing (rules.py), at ``now``;
    # the ClusterQueues and Cohorts their scopes are read in.
    rules: ConfiguredPreemption = NO_CONFIGURED_PREEMPTION
    now: float = 0.0
    cluster_queues: Mapping[str, ClusterQueueSpec] = field(default_factory=dict)
    cohorts: Mapping[str, CohortSpec] = field(default_factory=dict)

    @cached_property
    def plan(self) -> list[Attempt]:
        """Kueue's attempts for the flavor-resources needing preemption."""
        p = self.preemptor
        return preemption_plan(p.priority, p.timestamp, p.cq, self.quota, self.admitted, p.needs, self.priority,
                               self.lq_usage)

    @property
    def domain_wanted(self) -> DomainRequest | None:
        """The domain request when domain preemption may answer it."""
        return self.preemptor.request if self.domain_preemption else None

    def clear(self, only: DomainTarget | None) -> Found | None:
        """Domain clearing (clear_domain.py): every policy-preemptible blocker on the flavor
        counts, whatever resource it uses, and every candidate the preemptor ClusterQueue's
        PreemptionConfig selects (rules.py); ``only``: that domain alone. A PreemptionLimit the
        clearing would exceed holds it back: no targets, the limit named (:func:`held_back`)."""
        request = self.domain_wanted
        if request is None:
            return None
        p = self.preemptor
        psf = next(ps for ps in p.assignment.pod_sets if ps.name == p.first_pod_set)
        needs = frozenset(fr for fr in psf.usage if fr[0] == request.flavor)
        plan = preemption_plan(p.priority, p.timestamp, p.cq, self.quota, self.admitted, needs, self.priority,
                               self.lq_usage)
        plan, configured = configured_plan(self.rules, plan, p.spec, p.cq.name, p.priority, self.admitted,
                                           self.priority, self.quota.fits(p.cq.name, p.assignment.usage),
                                           self.cluster_queues, self.cohorts)
        if not plan:
            return None
        ctx = ClearContext(p.cq.name, self.quota, needs, p.assignment.usage, self.fits, self.priority, configured)
        choice = clear_domain(self.trees[request.flavor], request, p.required, plan, ctx, only)
        if choice is None:
            return None
        blocked = limit_blocking(self.rules, self.now, p.cq.name, choice.targets)
        if blocked is not None:  # PreemptionLimit: no domain clearing for this preemptor now
            return held_back(blocked.name)
        return Found(choice.targets, True, choice)


@dataclass(frozen=True)
class Found:
    targets: tuple[Target, ...]
    final: bool = True  # False: a fallback the next strategies may beat
    domain: DomainChoice | None = None  # the domain clearing frees
    # The PreemptionLimit that held a domain clearing back on the way ("" none): the preemptor
    # is told (Pending.blocked_by_limit) whatever the other strategies found.
    blocked_by_limit: str = ""


NOTHING = Found(())


def held_back(limit: str) -> Found:
    """A domain clearing a PreemptionLimit held back: no answer, but the limit is remembered."""
    return Found((), final=False, blocked_by_limit=limit)
Strategy = Callable[[Ask, Found | None], Found | None]


def fair_sharing(ask: Ask, fallback: Found | None) -> Found | None:
    if not ask.config.fair_sharing.enabled:
        return None
    p = ask.preemptor
    candidates = find_candidates(p.priority, p.timestamp, p.cq, ask.quota, ask.admitted, p.needs, ask.priority)
    targets = fair_targets(
        candidates, p.cq.name, ask.quota, ask.weights, p.needs, p.assignment.usage, ask.fits, ask.priority,
        ask.config.fair_sharing.preemption_strategies, ask.config.feature_gates, ask.lq_usage,
    )
    return Found(tuple(targets))


def sticky_target(ask: Ask) -> DomainTarget | None:
    """The domain this preemptor preempted for in an earlier cycle, if it still applies."""
    request = ask.domain_wanted
    if request is None:
        return None
    target = parse_target(ask.preemptor.annotations)
    if target is None or target.flavor != request.flavor or target.pod_set != request.pod_set:
        return None
    return target


def sticky(ask: Ask, fallback: Found | None) -> Found | None:
    target = sticky_target(ask)
    return ask.clear(target) if target is not None else None


def cpsat(ask: Ask, fallback: Found | None) -> Found | None:
    request, p = ask.preemptor.request, ask.preemptor
    if request is None or not ask.plan:
        return None
    found = tas_targets(request, ask.trees[request.flavor], p.cq, ask.quota, ask.plan, p.needs, p.assignment.usage,
                        ask.fits, ask.priority, time_budget_s=ask.budget_s)
    return Found(tuple(found)) if found else None


def classical(ask: Ask, fallback: Found | None) -> Found | None:
    if not ask.plan:
        return None
    p = ask.preemptor
    found = classical_targets(ask.plan, p.cq.name, ask.quota, p.needs, ask.fits, ask.priority)
    return Found(tuple(found), final=not ask.scattered(found)) if found else None


def _live(found: Found, ask: Ask) -> int:
    """How many workloads preempting ``found`` evicts (those being evicted already cost nothing)."""
    return len(victim_cost([t.workload for t in found.targets], ask.priority).victims)


def clear_any_domain(ask: Ask, fallback: Found | None) -> Found | None:
    cleared = ask.clear(None)
    if cleared is None or cleared.blocked_by_limit:
        return cleared
    if fallback is not None and _live(cleared, ask) > _live(fallback, ask):
        return None
    return cleared


STRATEGIES: tuple[Strategy, ...] = (fair_sharing, sticky, cpsat, classical, clear_any_domain)


def choose_targets(ask: Ask, strategies: Sequence[Strategy] = STRATEGIES) -> Found:
    """The first final answer of ``strategies``, else the last fallback, else no targets; with
    the first PreemptionLimit that held a domain clearing back on the way."""
    fallback: Found | None = None
    blocked = ""
    for strategy in strategies:
        found = strategy(ask, fallback)
        if found is None:
            continue
        if found.blocked_by_limit and not found.targets:  # held back: no answer from it
            blocked = blocked or found.blocked_by_limit
            continue
        if found.final:
            return replace(found, blocked_by_limit=blocked)
        fallback = found
    return replace(fallback if fallback is not None else NOTHING, blocked_by_limit=blocked)
