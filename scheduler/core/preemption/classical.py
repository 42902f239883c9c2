"""Kueue's classical target selection (no fair sharing): the first attempt of the plan whose
minimal preemption set lets the preemptor fit. Each attempt takes candidates in order until the
preemptor fits, then puts back (in reverse) every target it can do without."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.quota import FlavorResource, QuotaState
from scheduler.core.preemption.cost import Priority
from scheduler.core.preemption.plan import Attempt
from scheduler.core.preemption.targets import FitCheck, Target, Victims


def minimal_preemptions(
    candidates: Sequence[AdmittedWorkload],
    cq: str,
    quota: QuotaState,
    needs: frozenset[FlavorResource],
    fits: FitCheck,
    allow_borrowing: bool,
    below_priority: int | None,
    priority: Priority,
) -> list[Target]:
    """Kueue ``minimalPreemptions``: remove in order until it fits, then fill back."""
    victims = Victims(quota, cq, needs, allow_borrowing, below_priority, priority)
    for cand in candidates:
        if not victims.may_take(cand):
            continue
        victims.take(cand)
        if victims.fit(fits):
            return victims.filled_back(fits)
    return []


def classical_targets(
    plan: Sequence[Attempt],
    cq: str,
    quota: QuotaState,
    needs: frozenset[FlavorResource],
    fits: FitCheck,
    priority: Priority,
) -> list[Target]:
    """Kueue's classical target selection: the first attempt of ``plan`` that finds targets."""
    for cands, allow_borrowing, threshold in plan:
        targets = minimal_preemptions(cands, cq, quota, needs, fits, allow_borrowing, threshold, priority)
        if targets:
            return targets
    return []
