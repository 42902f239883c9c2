"""``place_workload``: choose the solver, enforce the time budget, return a :class:`Placement`.

``solver="greedy"`` is Kueue's algorithm exactly. ``"cpsat"`` runs the OR-Tools model for
every required/preferred pod set (greedy for unconstrained, implied and slice requests),
seeded with and never worse than the greedy answer. ``"auto"`` uses CP-SAT when the workload
is preferred or has several pod sets and the candidate set is nontrivial, greedy otherwise.
Pod sets are placed sequentially with assumed usage; the tree itself is never modified.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler.core.placement import cpsat, greedy
from scheduler.core.placement.types import (
    DomainAssignment,
    Placement,
    PlacementError,
    PodSetPlacement,
)
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import PodSetSpec

__all__ = [
    "DomainAssignment",
    "Placement",
    "PlacementError",
    "PodSetPlacement",
    "SOLVERS",
    "place_workload",
]

SOLVERS = ("auto", "greedy", "cpsat")

# "auto" skips CP-SAT when the whole decision is this small (one leaf fits it all, etc.).
_AUTO_MIN_CANDIDATE_LEAVES = 2


def _cpsat_eligible(prob: greedy.Problem) -> bool:
    return prob.mode in ("required", "preferred") and prob.slice_size == 1 and len(prob.tree.levels) > 1


def place_workload(
    tree: TopologyTree,
    pod_sets: Sequence[PodSetSpec],
    *,
    solver: str = "auto",
    time_budget_s: float = 0.1,
    implied_tas: bool = False,
    preferred_domains: Mapping[str, Mapping[str, str]] | None = None,
) -> Placement:
    """Place ``pod_sets`` on ``tree`` (unchanged). ``preferred_domains`` (pod set name ->
    ``{level label: value}``) is a soft wish, e.g. the domain a requeued workload ran in
    before: the placement is tried inside it first and taken when everything fits there;
    otherwise the normal placement is returned. (Node selectors are honoured by the tree only
    when hostname is the lowest level, as in Kueue, so the wish is ignored elsewhere.)"""
    if preferred_domains and tree.hostname_lowest:
        first = place_workload(tree, _with_preferred_domains(pod_sets, preferred_domains), solver=solver,
                               time_budget_s=time_budget_s / 2, implied_tas=implied_tas)
        if first.fits:
            return first
        time_budget_s /= 2
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {', '.join(SOLVERS)}")
    if solver == "greedy":
        return greedy.place_greedy(tree, pod_sets, implied_tas=implied_tas)
    deadline = time.monotonic() + max(time_budget_s, 0.0)
    return _place_in_order(tree, pod_sets, solver, deadline, implied_tas)


def _with_preferred_domains(pod_sets: Sequence[PodSetSpec],
                            preferred_domains: Mapping[str, Mapping[str, str]]) -> list[PodSetSpec]:
    """The pod sets with their preferred domain added to the node selector (the first try)."""
    return [
        replace(ps, node_selector={**ps.node_selector, **preferred_domains[ps.name]})
        if ps.name in preferred_domains else ps
        for ps in pod_sets
    ]


@dataclass
class _SolverUse:
    """Which solver shaped the placement so far, and whether every pod set's answer is
    proven optimal (only CP-SAT proves it)."""

    used_cpsat: bool = False
    all_optimal: bool = True

    @property
    def name(self) -> str:
        return "cpsat" if self.used_cpsat else "greedy"


def _place_in_order(tree: TopologyTree, pod_sets: Sequence[PodSetSpec], solver: str, deadline: float,
                    implied_tas: bool) -> Placement:
    """Pod sets one after another, each seeing the assumed usage of those before it: greedy
    first, then CP-SAT's improvement where it is wanted, within the shared deadline."""
    multi = sum(1 for ps in pod_sets if ps.count > 0) > 1
    free = tree.free.copy()
    placed: list[PodSetPlacement] = []
    use = _SolverUse()
    for index, ps in enumerate(pod_sets):
        if ps.count <= 0:
            placed.append(PodSetPlacement(ps.name, 0, tree.assignment_levels(), ()))
            continue
        try:
            prob = greedy.prepare(tree, ps, implied_tas=implied_tas, free=free)
            leaf_pods = greedy.place_pod_set(prob)
        except PlacementError as err:
            return Placement(False, str(err), use.name, False, ())
        improved = False
        if _wants_cpsat(prob, leaf_pods, solver, multi):
            leaf_pods, improved = _improve(prob, leaf_pods, _time_share(deadline, pod_sets[index:]), use)
        else:
            use.all_optimal = False
        greedy.consume(tree, free, prob.per_pod, leaf_pods)
        placed.append(greedy.measured_placement(prob, leaf_pods, improved))
    return Placement(True, "", use.name, use.used_cpsat and use.all_optimal, tuple(placed))


def _wants_cpsat(prob: greedy.Problem, leaf_pods: Mapping[int, int], solver: str, multi: bool) -> bool:
    """CP-SAT for an eligible request when asked, or ("auto") when the request is preferred or
    shares the cluster with other pod sets, unless one leaf already holds it all."""
    want = _cpsat_eligible(prob) and (solver == "cpsat" or prob.mode == "preferred" or multi)
    if want and solver == "auto" and len(leaf_pods) < _AUTO_MIN_CANDIDATE_LEAVES:
        return False  # a single leaf holds it all: nothing to improve
    return want


def _time_share(deadline: float, rest: Sequence[PodSetSpec]) -> float:
    """This pod set's even share of the time left among the non-empty pod sets still to place."""
    remaining = max(deadline - time.monotonic(), 0.0)
    return remaining / max(1, sum(1 for p in rest if p.count > 0))


def _improve(prob: greedy.Problem, leaf_pods: dict[int, int], time_budget_s: float,
             use: _SolverUse) -> tuple[dict[int, int], bool]:
    """CP-SAT's leaf -> pods when it ran (never worse than greedy's), noting it in ``use``;
    and whether its answer is strictly better than greedy's (the metrics count those)."""
    result = cpsat.improve(prob, leaf_pods, time_budget_s=time_budget_s)
    if not result.used:
        use.all_optimal = False
        return leaf_pods, False
    use.used_cpsat = True
    use.all_optimal = use.all_optimal and result.optimal
    return result.leaf_pods, bool(result.objective) and result.objective < result.greedy_objective
