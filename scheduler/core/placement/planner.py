"""``place_workload``: choose the solver, enforce the time budget, return a :class:`Placement`.

``solver="greedy"`` is Kueue's algorithm exactly. ``"cpsat"`` runs the OR-Tools model for
every required/preferred pod set (greedy for unconstrained, implied and slice requests),
seeded with and never worse than the greedy answer. ``"auto"`` uses CP-SAT when the workload
is preferred or has several pod sets and the candidate set is nontrivial, greedy otherwise.
Pod sets are placed sequentially with assumed usage; the tree itself is never modified.

Imports inside functions: ``cpsat`` (OR-Tools, and the pandas it loads: about 250 ms and 50 MiB)
is imported where CP-SAT runs, so the webhook and the extender, which place greedily, never load it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from scheduler.core.placement import balanced, fragmentation, greedy, groups, tail
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.placement.types import (
    DEFAULT_GATES,
    DomainAssignment,
    Placement,
    PlacementError,
    PlacementGates,
    PodSetPlacement,
)
from scheduler.core.resources import with_pod_slot
from scheduler.core.spreading import SpreadCounts
from scheduler.core.topology import IntArray, TopologyTree
from scheduler.core.topology_request import without_inner_layers
from scheduler.core.workload import PodSetSpec

__all__ = [
    "DomainAssignment",
    "Placement",
    "PlacementError",
    "PlacementGates",
    "PodSetPlacement",
    "SOLVERS",
    "place_workload",
]

SOLVERS = ("auto", "greedy", "cpsat")

# "auto" skips CP-SAT when the whole decision is this small (one leaf fits it all, etc.).
_AUTO_MIN_CANDIDATE_LEAVES = 2


def _cpsat_eligible(prob: greedy.Problem) -> bool:
    """Required / preferred requests on a tree with levels to choose among; slices (one layer
    or a multi-layer request) when the outer slice size divides the count (partial slices stay
    greedy). Preferred node affinity scoring and spreading are not modelled: such pod sets
    stay greedy."""
    if prob.mode not in ("required", "preferred") or len(prob.tree.levels) <= 1:
        return False
    if prob.scores is not None or prob.spread is not None:
        return False
    return prob.pod_set.count % prob.slice_size == 0


def place_workload(
    tree: TopologyTree,
    pod_sets: Sequence[PodSetSpec],
    *,
    solver: str = "auto",
    time_budget_s: float = 0.1,
    implied_tas: bool = False,
    preferred_domains: Mapping[str, Mapping[str, str]] | None = None,
    gates: PlacementGates = DEFAULT_GATES,
    spread_counts: Mapping[str, SpreadCounts] | None = None,
    options: PlacementOptions | None = None,
) -> Placement:
    """Place ``pod_sets`` on ``tree`` (unchanged). ``preferred_domains`` (pod set name ->
    ``{level label: value}``) is a soft wish, e.g. the domain a requeued workload ran in
    before: the placement is tried inside it first and taken when everything fits there;
    otherwise the normal placement is returned. (Node selectors are honoured by the tree only
    when hostname is the lowest level, as in Kueue, so the wish is ignored elsewhere.)
    ``gates``: the Kueue feature gates placement reads (``PlacementGates.from_gates``).
    ``spread_counts``: pod set name -> its PodSet group's topology spreading counts.
    ``options``: toposched's policies beyond Kueue (:mod:`options`); None or all off = Kueue."""
    opts = options or PlacementOptions()
    if preferred_domains and tree.hostname_lowest:
        first = place_workload(tree, _with_preferred_domains(pod_sets, preferred_domains), solver=solver,
                               time_budget_s=time_budget_s / 2, implied_tas=implied_tas, gates=gates,
                               spread_counts=spread_counts, options=opts)
        if first.fits:
            return first
        time_budget_s /= 2
    healthy = fragmentation.healthy_only(tree, pod_sets) if opts.degraded_last else None
    if healthy is not None:
        first = place_workload(healthy, pod_sets, solver=solver, time_budget_s=time_budget_s / 2,
                               implied_tas=implied_tas, gates=gates, spread_counts=spread_counts,
                               options=replace(opts, degraded_last=False))
        if first.fits:
            return first
        time_budget_s /= 2
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {', '.join(SOLVERS)}")
    if not gates.multi_layer:  # Kueue without TASMultiLayerTopology places the outermost layer only
        pod_sets = [replace(ps, topology=without_inner_layers(ps.topology)) for ps in pod_sets]
    deadline = time.monotonic() + max(time_budget_s, 0.0)
    return _place_in_order(tree, pod_sets, solver, deadline, implied_tas, gates, spread_counts or {}, opts)


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
                    implied_tas: bool, gates: PlacementGates, spread_counts: Mapping[str, SpreadCounts],
                    opts: PlacementOptions) -> Placement:
    """Groups of pod sets one after another (Kueue's order), each seeing the assumed usage of
    those before it: greedy first, then CP-SAT's improvement where it is wanted, within the
    shared deadline. A leader + workers group is placed jointly (:mod:`groups`)."""
    multi = sum(1 for ps in pod_sets if ps.count > 0) > 1
    free = tree.free.copy()
    placed: dict[int, PodSetPlacement] = {}
    use = _SolverUse()
    for members in groups.group_order(pod_sets):
        current = members[0]
        try:
            if _placed_jointly(pod_sets, members):
                placed.update(_place_group(tree, pod_sets, members, free, solver, deadline, use, gates,
                                           spread_counts))
                use.all_optimal = False  # the leader stays where Kueue puts it: no optimality proof
                continue
            for current in members:
                placed[current] = _place_one(tree, pod_sets, current, free, solver, deadline, implied_tas, multi,
                                             use, gates, spread_counts, opts)
        except PlacementError as err:
            return Placement(False, str(err), use.name, False, (), failed_pod_set=pod_sets[current].name)
    ordered = tuple(placed[i] for i in range(len(pod_sets)))
    return Placement(True, "", use.name, use.used_cpsat and use.all_optimal, ordered)


def _placed_jointly(pod_sets: Sequence[PodSetSpec], members: Sequence[int]) -> bool:
    """A group Kueue places in one descent: two non-empty pod sets, one of them a single pod
    (Kueue's webhook admits no other group shape)."""
    if len(members) != 2:
        return False
    counts = sorted(pod_sets[i].count for i in members)
    return counts[0] == 1


def _place_group(tree: TopologyTree, pod_sets: Sequence[PodSetSpec], members: Sequence[int], free: IntArray,
                 solver: str, deadline: float, use: _SolverUse,
                 gates: PlacementGates, spread_counts: Mapping[str, SpreadCounts]) -> dict[int, PodSetPlacement]:
    """Kueue's joint placement of a leader + workers group; with CP-SAT, the workers re-solved
    around the leader (see :func:`_improve_group_workers`)."""
    leader, workers = groups.leader_and_workers([pod_sets[i] for i in members])
    assert leader is not None  # two members
    spec = workers.spreading or leader.spreading
    counts = spread_counts.get(workers.name) or spread_counts.get(leader.name)
    result = groups.place_group(tree, leader, workers, free, gates, (spec, counts) if spec and counts else None)
    leader_per_pod = with_pod_slot(leader.requests)
    worker_pods, improved = result.worker_pods, False
    # A balanced answer is kept as it is (CP-SAT minimises domains, not imbalance), as for one pod set.
    if solver != "greedy" and not result.balanced and _cpsat_eligible(result.workers):
        worker_pods, improved = _improve_group_workers(tree, result, leader_per_pod, free,
                                                       max(deadline - time.monotonic(), 0.0), use)
    greedy.consume(tree, free, leader_per_pod, result.leader_pods)
    greedy.consume(tree, free, result.workers.per_pod, worker_pods)
    by_name = {
        leader.name: greedy.to_pod_set_placement(tree, leader, result.leader_pods),
        workers.name: greedy.measured_placement(result.workers, worker_pods, improved),
    }
    return {i: by_name[pod_sets[i].name] for i in members}


def _improve_group_workers(tree: TopologyTree, result: groups.GroupResult, leader_per_pod: Mapping[str, int],
                           free: IntArray, time_budget_s: float, use: _SolverUse) -> tuple[dict[int, int], bool]:
    """CP-SAT for a group's workers with the leader kept on Kueue's leaf: the workers may use
    only the leader's domain at the requested level (so the group stays together) and the
    capacity the leader leaves. Taken only when leader + workers together span strictly fewer
    domains (the objective) than Kueue's answer; Kueue's otherwise."""
    from scheduler.core.placement import cpsat  # see the module's note on imports inside functions

    prob = result.workers
    if len(result.leader_pods) != 1:
        # Kueue v0.17.0's descent can drop a leader below the slice level (v0.19.1 keeps it:
        # groups.py): nothing to re-solve around, Kueue's answer stands (this raised before).
        return result.worker_pods, False
    (leader_leaf,) = result.leader_pods
    home = tree.ancestor(leader_leaf, prob.level)
    inside = tree.ancestors_array(prob.level) == home
    if not all(bool(inside[leaf]) for leaf in result.worker_pods):
        return result.worker_pods, False  # Kueue spread the group (preferred): keep its answer
    around_leader = free.copy()
    around_leader[leader_leaf] -= tree.request_vector(leader_per_pod)
    around_leader[~inside] = 0
    try:
        inner = greedy.prepare(tree, prob.pod_set, free=around_leader)
    except PlacementError:
        return result.worker_pods, False
    found = cpsat.improve(inner, dict(result.worker_pods), time_budget_s=time_budget_s)
    if not found.used:
        return result.worker_pods, False
    use.used_cpsat = True

    def together(worker_pods: Mapping[int, int]) -> tuple[int, ...]:
        merged = dict(worker_pods)
        merged[leader_leaf] = merged.get(leader_leaf, 0) + 1
        return cpsat.objective(tree, inner.fit.counts + (np.arange(tree.n_leaves) == leader_leaf), merged)

    if cpsat.slices_respected(inner, found.leaf_pods) and together(found.leaf_pods) < together(result.worker_pods):
        return found.leaf_pods, True
    return result.worker_pods, False


def _place_one(tree: TopologyTree, pod_sets: Sequence[PodSetSpec], index: int, free: IntArray, solver: str,
               deadline: float, implied_tas: bool, multi: bool, use: _SolverUse,
               gates: PlacementGates, spread_counts: Mapping[str, SpreadCounts],
               opts: PlacementOptions) -> PodSetPlacement:
    """One pod set on its own (raises PlacementError with Kueue's message)."""
    ps = pod_sets[index]
    if ps.count <= 0:  # count-0 pod sets are skipped by TAS
        return PodSetPlacement(ps.name, 0, tree.assignment_levels(), ())
    spread = (ps.spreading, spread_counts[ps.name]) if ps.spreading and ps.name in spread_counts else None
    prob = greedy.prepare(tree, ps, implied_tas=implied_tas, free=free, gates=gates, spread=spread)
    balanced_pods = balanced.place(prob) if gates.balanced and not prob.tail else None
    if balanced_pods is not None:
        leaf_pods = balanced_pods
    elif prob.tail:
        leaf_pods = tail.place(prob)
    elif opts.fragmentation_aware and fragmentation.applies(prob):
        leaf_pods = fragmentation.place(prob, free)  # toposched's hierarchical LeastFreeCapacity
    else:
        leaf_pods = greedy.place_pod_set(prob)
    improved = False
    if balanced_pods is None and _wants_cpsat(prob, leaf_pods, solver, multi):
        leaf_pods, improved = _improve(prob, leaf_pods, _time_share(deadline, pod_sets[index:]), use)
    else:
        use.all_optimal = False
    greedy.consume(tree, free, prob.per_pod, leaf_pods)
    return greedy.measured_placement(prob, leaf_pods, improved)


def _wants_cpsat(prob: greedy.Problem, leaf_pods: Mapping[int, int], solver: str, multi: bool) -> bool:
    """CP-SAT for an eligible request when asked, or ("auto") when the request is preferred or
    shares the cluster with other pod sets, unless one leaf already holds it all."""
    if solver == "greedy":
        return False
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
    from scheduler.core.placement import cpsat  # see the module's note on imports inside functions

    result = cpsat.improve(prob, leaf_pods, time_budget_s=time_budget_s)
    if not result.used:
        use.all_optimal = False
        return leaf_pods, False
    use.used_cpsat = True
    use.all_optimal = use.all_optimal and result.optimal
    return result.leaf_pods, bool(result.objective) and result.objective < result.greedy_objective
