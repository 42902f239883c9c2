"""Domain-clearing preemption: free ONE whole domain for a topology-constrained preemptor.

Kueue's classical preemption only considers candidates that use a flavor-resource needing
preemption and stops at the first candidate prefix that lets the preemptor fit anywhere. For a
workload that needs one domain (``required``) or wants one (``preferred``) that leaves it
pending when the domain is also held by policy-preemptible workloads that use none of those
resources (Kueue #10497, #12478), or scatters the freed capacity over several domains (a
``preferred`` preemptor fits across racks once enough single nodes are free: Kueue #10815).
Two strategies of ``preemption.strategies`` call :func:`clear_domain`:

* sticky targets, first: the preemptor already holds a sticky target (the domain its earlier
  preemptions were issued for, ``domain_target.ANN_PREEMPTION_TARGET`` on its Workload): the
  victims are taken inside that domain only, so evictions already issued are never abandoned
  for another domain;
* clear-domain, last: Kueue's classical selection (and the CP-SAT victim search) found no
  targets, or targets that scatter the preemptor: every domain of the requested level
  (``preferred``: that level, then each wider one) is tried with ALL policy-preemptible
  blockers in it, and the cheapest (``cost.victim_cost``) is kept.

Only victims the ClusterQueue's policy allows are taken (``plan.find_candidates``:
``withinClusterQueue``, ``reclaimWithinCohort`` of borrowing queues, ``borrowWithinCohort``
thresholds via the plan's attempts), with Kueue's reasons and messages, and those the
preemptor ClusterQueue's PreemptionConfig selects (``rules.configured_plan``: reason
``ConfigurablePreemption``); a PreemptionLimit may hold the clearing back (``strategies.Ask.clear``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.core.beyond.domain_target import DomainTarget, levels_to_try, selector_of
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.quota import FlavorResource, QuotaState
from scheduler.core.preemption.cost import Priority, SetCost, victim_cost
from scheduler.core.preemption.domains import DomainRequest, Domains
from scheduler.core.preemption.plan import Attempt
from scheduler.core.preemption.targets import CONFIGURABLE_PREEMPTION, FitCheck, Target, Victims
from scheduler.core.topology import TopologyTree


@dataclass(frozen=True)
class DomainChoice:
    """The victims that free ``target`` for the preemptor."""

    target: DomainTarget
    targets: tuple[Target, ...]
    gpus_lost: int


@dataclass(frozen=True)
class ClearContext:
    """What clearing one domain needs from the cycle."""

    cq: str
    quota: QuotaState
    needs: frozenset[FlavorResource]
    usage: Mapping[FlavorResource, int]  # the preemptor's quota usage
    fits: FitCheck  # the cycle's full check: quota and the real placement without the victims
    priority: Priority
    # Candidates the preemptor ClusterQueue's PreemptionConfig selected (rules.py): taken
    # regardless of the policy's borrowing re-check, reason ConfigurablePreemption.
    configured: frozenset[str] = frozenset()


def _take(ctx: ClearContext, victims: Victims, cand: AdmittedWorkload) -> None:
    """Take ``cand`` if the policy still allows it (an other-queue victim only while its queue
    borrows, as Kueue re-checks after every removal), or a PreemptionConfig rule selected it."""
    if cand.key in ctx.configured:
        victims.take(cand, CONFIGURABLE_PREEMPTION)
    elif victims.may_take(cand):
        victims.take(cand)


def _clear_one(ctx: ClearContext, doms: Domains, leaves: Sequence[int], attempt: Attempt) -> list[Target] | None:
    """Victims (Kueue order) that free ``leaves`` for the pods and the preemptor's quota, minimal."""
    victims = Victims(ctx.quota, ctx.cq, ctx.needs, attempt.allow_borrowing, attempt.borrow_below_priority,
                      ctx.priority)
    for cand in doms.blockers(leaves, attempt.candidates):
        if doms.pods_fit(leaves, victims.workloads):
            break
        _take(ctx, victims, cand)
    if not doms.pods_fit(leaves, victims.workloads):
        return None
    # Put back, newest choice first, every blocker the domain can do without.
    for t in list(reversed(victims.targets)):
        if doms.pods_fit(leaves, [x.workload for x in victims.targets if x is not t]):
            victims.put_back(t)
    work = victims.work
    for cand in attempt.candidates:  # quota still short: more victims, Kueue order
        if work.fits(ctx.cq, ctx.usage, victims.allow_borrowing):
            break
        short = {fr for fr, v in ctx.usage.items() if v > work.available(ctx.cq, fr)}
        taken = any(t.workload.key == cand.key for t in victims.targets)
        if not taken and any(cand.usage.get(fr, 0) > 0 for fr in short):
            _take(ctx, victims, cand)
    if not victims.targets or not victims.fit(ctx.fits):
        return None
    return victims.targets


def clear_domain(tree: TopologyTree, request: DomainRequest, required: bool, plan: Sequence[Attempt],
                 ctx: ClearContext, only: DomainTarget | None = None) -> DomainChoice | None:
    """The cheapest policy-allowed victim set that frees one domain for ``request``: with
    ``only``, that domain alone; else every domain of the levels to try, level by level (the
    narrowest level with a clearable domain wins). None when no domain can be freed."""
    pool = list({c.key: c for a in plan for c in a.candidates}.values())
    doms = Domains(tree, request, pool)
    for level in levels_to_try(tree, request.level, required):
        lvl = tree.level_index(level)
        best: tuple[SetCost, DomainChoice] | None = None
        for d in range(tree.domain_count(lvl)):
            selector = selector_of(tree, level, d)
            if only is not None and (only.level != level or only.selector != selector):
                continue
            leaves = doms.leaves(level, d)
            for attempt in plan:
                found = _clear_one(ctx, doms, leaves, attempt)
                if found is None:
                    continue
                cost = victim_cost([t.workload for t in found], ctx.priority)
                target = DomainTarget(request.pod_set, request.flavor, level, selector)
                choice = DomainChoice(target, tuple(found), cost.gpus_lost)
                if best is None or cost < best[0]:
                    best = (cost, choice)
                break
        if best is not None:
            return best[1]
    return None
