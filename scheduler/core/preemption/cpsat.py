"""CP-SAT victims for a preemptor that needs one topology domain (one TAS pod set with a
required or preferred level): the cheapest victim set (``cost.solver_weights``: fewest
workloads, then lowest priority, then most recently admitted) whose removal frees one domain at
that level large enough (per-leaf pod capacity modelled exactly). :func:`tas_targets` verifies
the set by the cycle's own fit check (quota, and the placement re-run without the victims) and
minimises it again, so nothing is evicted that is not needed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ortools.sat.python import cp_model

from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.quota import ClusterQueueSpec, FlavorResource, QuotaState
from scheduler.core.preemption.cost import Priority, solver_weights
from scheduler.core.preemption.domains import DomainRequest, Domains, pods_fit
from scheduler.core.preemption.plan import Attempt
from scheduler.core.preemption.targets import FitCheck, Target, Victims, cq_is_borrowing
from scheduler.core.topology import TopologyTree


def _feasible_domains(doms: Domains, candidates: Sequence[AdmittedWorkload]) -> dict[int, list[int]]:
    """Domains at the request's level worth modelling, with their eligible leaves: they hold
    some candidate usage and could hold the pods if every candidate inside were removed."""
    tree, level = doms.tree, doms.request.level
    anc = tree.ancestors_array(tree.level_index(level))
    touched = sorted({int(anc[leaf]) for per_leaf in doms.usage.values() for leaf in per_leaf})
    feasible: dict[int, list[int]] = {}
    for d in touched:
        leaves = doms.leaves(level, d)
        if doms.pods_fit(leaves, candidates):
            feasible[d] = leaves
    return feasible


def _require_one_domain(
    model: cp_model.CpModel,
    doms: Domains,
    cands: Sequence[AdmittedWorkload],
    x: Sequence[cp_model.IntVar],
    feasible: Mapping[int, list[int]],
) -> None:
    """Exactly one domain is chosen and, with the chosen victims gone, holds the pods (per
    leaf: pods x request <= free + the victims' usage there, for every requested resource)."""
    req = doms.req
    y = {d: model.new_bool_var(f"y{d}") for d in feasible}
    model.add_exactly_one(y.values())
    for d, leaves in feasible.items():
        terms: list[cp_model.LinearExprT] = []
        const = 0
        for leaf in leaves:
            holders = [(i, doms.usage[c.key][leaf]) for i, c in enumerate(cands) if leaf in doms.usage[c.key]]
            base = doms.tree.free[leaf]
            if not holders:
                const += pods_fit(base, req)
                continue
            ub = pods_fit(doms.freed(leaf, [cands[i] for i, _ in holders]), req)
            p = model.new_int_var(0, ub, f"p{leaf}")
            for r in (req > 0).nonzero()[0]:
                model.add(int(req[r]) * p <= int(base[r]) + sum(int(u[r]) * x[i] for i, u in holders))
            terms.append(p)
        model.add(sum(terms) + const >= doms.request.count).only_enforce_if(y[d])


def cheapest_domain_victims(
    tree: TopologyTree,
    request: DomainRequest,
    candidates: Sequence[AdmittedWorkload],
    priority: Priority,
    quota_shortfall: Mapping[FlavorResource, int] | None = None,
    excluded_sets: Sequence[frozenset[str]] = (),
    time_budget_s: float = 0.5,
) -> list[AdmittedWorkload] | None:
    """CP-SAT: the cheapest subset of ``candidates`` whose removal lets ``request.count`` pods
    fit inside ONE domain at ``request.level`` (per-leaf capacity, every requested resource
    and the pod slot), and covers ``quota_shortfall``. ``excluded_sets`` are victim sets (keys)
    already rejected by verification. None when no subset works (or the solver finds none in
    time)."""
    if not tree.has_level(request.level) or request.count <= 0:
        return None
    cands = list(candidates)
    doms = Domains(tree, request, cands)
    feasible = _feasible_domains(doms, cands)
    if not feasible:
        return None
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{i}") for i in range(len(cands))]
    _require_one_domain(model, doms, cands, x, feasible)
    for fr, need in (quota_shortfall or {}).items():
        if need > 0:
            model.add(sum(int(c.usage.get(fr, 0)) * x[i] for i, c in enumerate(cands)) >= need)
    for rejected in excluded_sets:
        idx = [i for i, c in enumerate(cands) if c.key in rejected]
        if len(idx) == len(rejected):
            model.add(sum(x[i] for i in idx) <= len(idx) - 1)
    model.minimize(sum(x[i] * w for i, w in enumerate(solver_weights(cands, priority))))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 1
    solver.parameters.max_deterministic_time = max(time_budget_s, 0.01) * 10
    solver.parameters.max_time_in_seconds = max(time_budget_s, 0.01) * 4
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return [c for i, c in enumerate(cands) if solver.value(x[i])]


def tas_targets(
    request: DomainRequest,
    tree: TopologyTree,
    cq: ClusterQueueSpec,
    quota: QuotaState,
    plan: Sequence[Attempt],
    needs: frozenset[FlavorResource],
    request_usage: Mapping[FlavorResource, int],
    fits: FitCheck,
    priority: Priority,
    max_candidates: int = 400,
    max_rounds: int = 4,
    time_budget_s: float = 0.5,
) -> list[Target] | None:
    """Verified cheapest victims for a domain-needing preemptor, or None (use the classical
    heuristic instead)."""
    for cands, allow_borrowing, threshold in plan:
        pool = [c for c in cands if c.cluster_queue == cq.name or cq_is_borrowing(quota, c.cluster_queue, needs)]
        pool = pool[:max_candidates]
        if not pool:
            continue
        shortfall = {
            fr: v - quota.available(cq.name, fr)
            for fr, v in request_usage.items()
            if fr in needs and v > quota.available(cq.name, fr)
        }
        rejected: list[frozenset[str]] = []
        for _ in range(max_rounds):
            chosen = cheapest_domain_victims(tree, request, pool, priority, shortfall, rejected, time_budget_s)
            if chosen is None:
                break
            order = {c.key: i for i, c in enumerate(pool)}
            chosen.sort(key=lambda c: order[c.key])
            victims = Victims(quota, cq.name, needs, allow_borrowing, threshold, priority)
            valid = True
            for c in chosen:
                valid = valid and victims.may_take(c)
                victims.take(c)
            if valid and victims.fit(fits):
                return victims.filled_back(fits)
            rejected.append(frozenset(c.key for c in chosen))
    return None
