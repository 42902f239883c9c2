"""OR-Tools CP-SAT placement for required / preferred pod sets: fewer domains than greedy.

Objective (lexicographic, compared as a tuple; see :func:`objective`): the number of domains
spanned at every level, outermost first, then fragmentation = free pod slots left over in the
touched leaves (so we prefer filling a node over starting a new one half-empty).

Why the model stays small:

* Let f be the deepest level where some single domain can hold the whole pod set. Any answer
  inside one such domain spans exactly 1 domain at every level <= f, which is the minimum, and
  any answer outside spans more at level f. So the model only contains the subtrees of the
  candidate domains at f (for ``required`` f is never above the required level, so required
  semantics hold: one domain of that level). If nothing fits in one top-level domain, the
  candidates are top-level domains.
* Leaves under the same parent domain with the same free pod count are interchangeable; they
  become one group with two integer variables (leaves used, pods placed) instead of one
  variable per node.
* Candidates are taken greedy-domain first, then tightest first, up to a group budget; when
  the budget cuts candidates off, ``optimal`` is False even if CP-SAT proves its sub-model.

The greedy answer is the solution hint, and the result is only used when its objective is
strictly better than greedy's; on ties the greedy (Kueue) answer is kept.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from scheduler.core.placement.greedy import Problem, descend
from scheduler.core.placement.types import PlacementError
from scheduler.core.topology import BoolArray, IntArray, TopologyTree

# Leaf groups per model per second of budget (model building is Python; ~600 groups at 100 ms).
GROUPS_PER_SECOND = 6000
MIN_GROUPS = 200
PRESOLVE_MAX_GROUPS = 150
MULTI_START = 8  # candidates also tried with Kueue's descent, best one seeds the model
NUM_WORKERS = 2


@dataclass
class Improvement:
    used: bool  # CP-SAT ran (its answer, or the equal greedy one, is returned)
    leaf_pods: dict[int, int] = field(default_factory=dict)
    optimal: bool = False
    objective: tuple[int, ...] = ()
    greedy_objective: tuple[int, ...] = ()
    bound: float | None = None  # CP-SAT's proven bound on the weighted objective
    value: float | None = None  # CP-SAT's weighted objective value
    candidates_complete: bool = True
    status: str = ""


def objective(tree: TopologyTree, fit: IntArray, leaf_pods: Mapping[int, int]) -> tuple[int, ...]:
    """(domains spanned at level 0, ..., at the leaf level, leftover free pods in touched leaves)."""
    leaves = sorted(n for n, c in leaf_pods.items() if c > 0)
    if not leaves:
        return (0,) * (len(tree.levels) + 1)
    idx = np.array(leaves, dtype=np.int64)
    spans = [len(idx)]
    for lvl in range(len(tree.levels) - 1, 0, -1):
        idx = tree.parent[lvl][idx]
        spans.append(len(np.unique(idx)))
    spans.reverse()
    frag = int(sum(int(fit[n]) - leaf_pods[n] for n in leaves))
    return (*spans, frag)


def _holds_all(prob: Problem, lvl: int) -> BoolArray:
    """Per domain at ``lvl``: can it hold the whole pod set? At or above the slice level in
    whole slices; below it a domain lies inside one slice domain, so pods are what count."""
    if prob.slice_size > 1 and lvl <= prob.slice_level:
        held: BoolArray = prob.units[lvl] >= prob.needed
        return held
    enough: BoolArray = prob.pod_counts[lvl] >= prob.pod_set.count
    return enough


def _fit_level(prob: Problem, count: int) -> int:
    """Deepest level (>= the required level) with one domain holding ``count`` pods; -1 if none."""
    low = prob.level if prob.mode == "required" else 0
    for lvl in range(len(prob.tree.levels) - 1, low - 1, -1):
        if len(prob.pod_counts[lvl]) and bool(_holds_all(prob, lvl).any()):
            return lvl
    return -1


def slice_layers(prob: Problem) -> dict[int, int]:
    """Every slice layer as level -> size: the outer one and, for a multi-layer request
    (``podset-slice-required-topology-constraints``), the inner ones. Each size divides the one
    above it, so whole slices in every domain of every layer's level can always be grouped into
    the request's nested slices."""
    layers = {lvl: size for lvl, size in prob.inner.items() if size > 1}
    if prob.slice_size > 1:
        layers[prob.slice_level] = prob.slice_size
    return layers


def slice_step(prob: Problem) -> int:
    """Pods per leaf must be a multiple of this: the size of the layer whose slices are leaves."""
    return slice_layers(prob).get(len(prob.tree.levels) - 1, 1)


def slices_respected(prob: Problem, leaf_pods: Mapping[int, int]) -> bool:
    """Every domain of every slice layer's level holds whole slices of that layer, and the
    total is the pod set's count."""
    if sum(leaf_pods.values()) != prob.pod_set.count:
        return False
    for lvl, size in slice_layers(prob).items():
        per_domain: dict[int, int] = {}
        for leaf, pods in leaf_pods.items():
            dom = prob.tree.ancestor(leaf, lvl)
            per_domain[dom] = per_domain.get(dom, 0) + pods
        if any(pods % size for pods in per_domain.values()):
            return False
    return True


@dataclass(frozen=True)
class _Budget:
    """The wall-clock budget of one :func:`improve` call (checked between steps)."""

    started: float
    seconds: float

    def spent(self) -> float:
        return time.monotonic() - self.started

    def past(self, fraction: float) -> bool:
        return self.spent() > fraction * self.seconds


@dataclass(frozen=True)
class _Candidates:
    """The subtrees the model may use: domains at level ``top`` and the leaf groups under them.

    A leaf group = the live leaves of one parent domain with the same free pod count; its key
    is ``parent * max_fit + fit``."""

    top: int
    anc_top: IntArray  # per leaf, its ancestor at ``top``
    parent_level: int  # level of a leaf's parent (-1: the root)
    leaf_parent: IntArray  # per leaf, its parent domain (0 for the root)
    live: IntArray  # leaves with room for a pod
    max_fit: int
    group_keys: IntArray
    group_parent: IntArray
    group_top: IntArray  # per group, its domain at ``top``
    tops: list[int]  # chosen domains at ``top``, greedy's first, then most promising
    in_model: BoolArray  # per domain at ``top``: chosen
    complete: bool  # every domain that could hold the pod set was chosen


@dataclass(frozen=True)
class _Hint:
    """The best answer known before solving (greedy, or a better multi-start descent)."""

    leaf_pods: dict[int, int]
    objective: tuple[int, ...]


@dataclass
class _LeafVars:
    """One (leaves used, pods placed) pair of variables per leaf group in the model."""

    used: list[cp_model.IntVar] = field(default_factory=list)
    pods: list[cp_model.IntVar] = field(default_factory=list)
    caps: list[int] = field(default_factory=list)  # free pods per leaf of the group
    members: list[list[int]] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)  # per group, its leaves' parent domain
    step: int = 1  # pods per leaf come in multiples of this (leaf-level slices)


def improve(prob: Problem, greedy_leaf_pods: dict[int, int], *, time_budget_s: float = 0.1) -> Improvement:
    """CP-SAT's answer when its objective beats greedy's, else greedy's (never worse)."""
    budget = _Budget(time.monotonic(), time_budget_s)
    tree = prob.tree
    fit = prob.fit.counts
    count = prob.pod_set.count
    greedy_obj = objective(tree, fit, greedy_leaf_pods)
    f = _fit_level(prob, count)
    if f == len(tree.levels) - 1:
        return _single_leaf(prob, greedy_leaf_pods, greedy_obj)
    greedy_leaves = np.array(sorted(greedy_leaf_pods), dtype=np.int64)
    cands = _candidates(prob, f, greedy_leaves, time_budget_s)
    hint = _multi_start(prob, f, cands.tops, _Hint(dict(greedy_leaf_pods), greedy_obj), budget)

    def fallback(status: str) -> Improvement:
        """No CP-SAT answer: the multi-start answer if it beats greedy, else greedy's."""
        if hint.objective < greedy_obj:
            return Improvement(
                True, hint.leaf_pods, False, hint.objective, greedy_obj, None, None, cands.complete, status
            )
        return Improvement(
            False, dict(greedy_leaf_pods), False, greedy_obj, greedy_obj, None, None, cands.complete, status
        )

    model = cp_model.CpModel()
    sel = _select_one_top(model, f, cands, hint)
    dom_vars = _domain_vars(model, prob, f, cands, sel, greedy_leaves)
    leaf_vars = _leaf_groups(model, prob, f, cands, sel, dom_vars, hint, budget)
    if leaf_vars is None:
        return fallback("BUDGET_SPENT_BUILDING")
    if not leaf_vars.pods:
        return fallback("EMPTY_MODEL")
    model.add(sum(leaf_vars.pods) == count)
    _whole_slices(model, prob, cands, leaf_vars)
    if not _minimize(model, prob, f, dom_vars, leaf_vars):
        return fallback("OBJECTIVE_OVERFLOW")
    solver = cp_model.CpSolver()
    remaining = time_budget_s - budget.spent()
    if remaining < 0.2 * time_budget_s:
        return fallback("BUDGET_SPENT_BUILDING")
    status = _solve(solver, model, remaining, time_budget_s, len(leaf_vars.pods))
    status_name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return fallback(status_name)
    result = _read_solution(solver, leaf_vars)
    if not slices_respected(prob, result):  # never expected; a wrong answer must not escape
        return fallback("SLICES_VIOLATED")
    obj = objective(tree, fit, result)
    best_pods, best_obj = (result, obj) if obj <= hint.objective else (hint.leaf_pods, hint.objective)
    if not best_obj < greedy_obj:  # ties keep the greedy (Kueue) answer
        best_pods, best_obj = dict(greedy_leaf_pods), greedy_obj
    return Improvement(
        used=True,
        leaf_pods=best_pods,
        optimal=status == cp_model.OPTIMAL and cands.complete,
        objective=best_obj,
        greedy_objective=greedy_obj,
        bound=float(solver.best_objective_bound),
        value=float(solver.objective_value),
        candidates_complete=cands.complete,
        status=status_name,
    )


def _single_leaf(prob: Problem, greedy_leaf_pods: dict[int, int], greedy_obj: tuple[int, ...]) -> Improvement:
    """One leaf holds it all: the optimum is the tightest such leaf (enumeration is proof)."""
    fit = prob.fit.counts
    count = prob.pod_set.count
    ok = np.nonzero(fit >= count)[0]
    best = int(ok[np.argmin(fit[ok])])
    leaf_pods = {best: count}
    obj = objective(prob.tree, fit, leaf_pods)
    chosen = leaf_pods if obj < greedy_obj else dict(greedy_leaf_pods)
    return Improvement(True, chosen, True, min(obj, greedy_obj), greedy_obj, status="ENUMERATED")


def _candidate_pool(prob: Problem, f: int, top: int) -> IntArray:
    """Domains at ``top`` that can take part, most promising first."""
    count = prob.pod_set.count
    pods_top = prob.pod_counts[top]
    if f >= 0:
        pool = np.nonzero(_holds_all(prob, top))[0]
        # Most promising first: fewest children needed at level f+1 (a lower bound on the
        # next objective term), then tightest.
        need = _children_needed(prob, f, count)[pool]
        ordered: IntArray = pool[np.lexsort((pool, pods_top[pool], need))]
        return ordered
    pool = np.nonzero(pods_top > 0)[0]
    largest_first: IntArray = pool[np.lexsort((pool, -pods_top[pool]))]
    return largest_first


def _candidates(prob: Problem, f: int, greedy_leaves: IntArray, time_budget_s: float) -> _Candidates:
    """Group the leaves, then choose candidate domains at ``max(f, 0)`` within a group budget:
    greedy's own domains first, then the pool in order."""
    tree = prob.tree
    fit = prob.fit.counts
    count = prob.pod_set.count
    parent_level = len(tree.levels) - 2
    leaf_parent = (
        tree.ancestors_array(parent_level) if parent_level >= 0 else np.zeros(tree.n_leaves, np.int64)
    )
    top = max(f, 0)
    anc_top = tree.ancestors_array(top)
    live = np.nonzero(fit > 0)[0]
    max_fit = int(fit.max()) + 1
    group_keys = np.unique(leaf_parent[live] * max_fit + fit[live])
    group_parent = group_keys // max_fit
    if parent_level >= top:
        group_top = group_parent if parent_level == top else _lift(tree, group_parent, parent_level, top)
    else:  # only when there is a single level
        group_top = np.zeros(len(group_keys), dtype=np.int64)
    max_groups = max(MIN_GROUPS, int(GROUPS_PER_SECOND * time_budget_s))
    groups_per_top = np.bincount(group_top, minlength=tree.domain_count(top))
    pods_top = prob.pod_counts[top]
    pool = _candidate_pool(prob, f, top)
    preferred_first = [int(d) for d in np.unique(anc_top[greedy_leaves])] if len(greedy_leaves) else []
    tops: list[int] = []
    spent = 0
    seen: set[int] = set()
    for dom in [*preferred_first, *pool.tolist()]:
        if dom in seen:
            continue
        seen.add(dom)
        cost = int(groups_per_top[dom])
        if tops and spent + cost > max_groups and (f >= 0 or _covered(pods_top, tops, count)):
            continue
        tops.append(dom)
        spent += cost
    in_model = np.zeros(tree.domain_count(top), dtype=np.bool_)
    in_model[tops] = True
    return _Candidates(
        top, anc_top, parent_level, leaf_parent, live, max_fit, group_keys, group_parent, group_top,
        tops, in_model, complete=set(pool.tolist()) <= set(tops),
    )


def _multi_start(prob: Problem, f: int, tops: list[int], greedy: _Hint, budget: _Budget) -> _Hint:
    """Kueue's descent inside each of the most promising candidates; the best seeds the model."""
    best = greedy
    if f < 0:
        return best
    for cand in tops[:MULTI_START]:
        if budget.past(0.4):
            break
        try:
            units = prob.needed if f <= prob.slice_level else prob.pod_set.count  # slices or pods at f
            tried = descend(prob, f, [(cand, units)])
        except PlacementError:
            continue
        tried_obj = objective(prob.tree, prob.fit.counts, tried)
        if tried_obj < best.objective:
            best = _Hint(tried, tried_obj)
    return best


def _select_one_top(
    model: cp_model.CpModel, f: int, cands: _Candidates, hint: _Hint
) -> dict[int, cp_model.IntVar]:
    """Exactly one candidate domain at level f (none when nothing fits in one top-level domain)."""
    sel: dict[int, cp_model.IntVar] = {}
    if f < 0:
        return sel
    hint_leaves = np.array(sorted(hint.leaf_pods), dtype=np.int64)
    hint_tops = [int(d) for d in np.unique(cands.anc_top[hint_leaves])] if len(hint_leaves) else []
    for dom in cands.tops:
        sel[dom] = model.new_bool_var(f"s{dom}")
    model.add_exactly_one(sel.values())
    for dom in cands.tops:
        model.add_hint(sel[dom], int(dom in hint_tops and len(hint_tops) == 1))
    return sel


def _domain_vars(
    model: cp_model.CpModel,
    prob: Problem,
    f: int,
    cands: _Candidates,
    sel: Mapping[int, cp_model.IntVar],
    greedy_leaves: IntArray,
) -> list[dict[int, cp_model.IntVar]]:
    """Domain booleans for levels f+1 .. n_levels-2 inside the candidate subtrees; a domain
    is used only when its parent is."""
    tree = prob.tree
    n_levels = len(tree.levels)
    dom_vars: list[dict[int, cp_model.IntVar]] = [{} for _ in range(n_levels)]
    greedy_touch: list[set[int]] = []
    for lvl in range(n_levels):
        greedy_touch.append(
            set(tree.ancestors_array(lvl)[greedy_leaves].tolist()) if len(greedy_leaves) else set()
        )
    for lvl in range(f + 1, n_levels - 1):
        anc = _level_to_top(tree, lvl, cands.top)
        doms = np.nonzero(cands.in_model[anc] & (prob.pod_counts[lvl] > 0))[0]
        for dom in doms.tolist():
            var = model.new_bool_var(f"d{lvl}_{dom}")
            dom_vars[lvl][dom] = var
            par = int(tree.parent[lvl][dom])
            if lvl - 1 > f:
                pvar = dom_vars[lvl - 1].get(par)
                if pvar is None:
                    model.add(var == 0)
                else:
                    model.add_implication(var, pvar)
            elif f >= 0:
                model.add_implication(var, sel[par])
            model.add_hint(var, int(dom in greedy_touch[lvl]))
    return dom_vars


def _leaf_groups(
    model: cp_model.CpModel,
    prob: Problem,
    f: int,
    cands: _Candidates,
    sel: Mapping[int, cp_model.IntVar],
    dom_vars: list[dict[int, cp_model.IntVar]],
    hint: _Hint,
    budget: _Budget,
) -> _LeafVars | None:
    """Two integer variables per leaf group in the candidate subtrees, tied to the group's
    parent domain; None when building eats too much of the budget."""
    count = prob.pod_set.count
    fit = prob.fit.counts
    in_model = cands.in_model[cands.group_top]
    group_keys, group_parent = cands.group_keys[in_model], cands.group_parent[in_model]
    key_of_leaf = cands.leaf_parent * cands.max_fit + fit
    members: dict[int, list[int]] = {}
    live_in = cands.live[cands.in_model[cands.anc_top[cands.live]]]
    for leaf, key in zip(live_in.tolist(), key_of_leaf[live_in].tolist(), strict=True):
        members.setdefault(int(key), []).append(int(leaf))
    hinted = set(hint.leaf_pods)
    step = slice_step(prob)
    out = _LeafVars(step=step)
    for gi, (key, par) in enumerate(zip(group_keys.tolist(), group_parent.tolist(), strict=True)):
        if gi % 64 == 0 and budget.past(0.75):
            return None
        leaves = members[int(key)]
        cap = (int(key) % cands.max_fit) // step * step  # whole leaf-level slices only
        m = len(leaves)
        used = model.new_int_var(0, m if cap else 0, f"u{key}")
        pods = model.new_int_var(0, min(m * cap, count), f"p{key}")
        model.add(pods <= cap * used)
        model.add(pods >= step * used)
        if step > 1:  # whole slices per leaf: with pods >= step * used, each used leaf gets k * step
            model.add(pods == step * model.new_int_var(0, count // step, f"k{key}"))
        if cands.parent_level > f:
            pvar = dom_vars[cands.parent_level].get(int(par))
            if pvar is None:
                model.add(used == 0)
            else:
                model.add(used <= m * pvar)
        elif f >= 0 and cands.parent_level == f:
            model.add(used <= m * sel[int(par)])
        model.add_hint(used, sum(1 for leaf in leaves if leaf in hinted))
        model.add_hint(pods, sum(hint.leaf_pods.get(leaf, 0) for leaf in leaves))
        out.used.append(used)
        out.pods.append(pods)
        out.caps.append(cap)
        out.members.append(leaves)
        out.parents.append(int(par))
    return out


def _whole_slices(model: cp_model.CpModel, prob: Problem, cands: _Candidates, leaf_vars: _LeafVars) -> None:
    """Slices above the leaves, layer by layer: the pods under each domain of the layer's level
    are a multiple of its size (a slice never straddles two such domains). Leaf-level slices
    are handled per group (multiples of the size per leaf)."""
    tree = prob.tree
    parents = np.array(leaf_vars.parents, dtype=np.int64)
    count = prob.pod_set.count
    for lvl, size in sorted(slice_layers(prob).items()):
        if lvl == len(tree.levels) - 1:
            continue
        # a leaf group's parent is one level above the leaves, so at or below every such layer
        doms = _lift(tree, parents, cands.parent_level, lvl) if cands.parent_level > lvl else parents
        by_domain: dict[int, list[cp_model.IntVar]] = {}
        for dom, pods in zip(doms.tolist(), leaf_vars.pods, strict=True):
            by_domain.setdefault(int(dom), []).append(pods)
        for dom, pods_vars in by_domain.items():
            slices = model.new_int_var(0, count // size, f"slices{lvl}_{dom}")
            model.add(sum(pods_vars) == size * slices)


def _minimize(
    model: cp_model.CpModel,
    prob: Problem,
    f: int,
    dom_vars: list[dict[int, cp_model.IntVar]],
    leaf_vars: _LeafVars,
) -> bool:
    """The lexicographic objective as one weighted sum (each term's weight exceeds every term
    after it at its bound); False when the weights would overflow int64."""
    n_levels = len(prob.tree.levels)
    count = prob.pod_set.count
    terms: list[tuple[cp_model.LinearExprT, int]] = []
    for lvl in range(f + 1, n_levels - 1):
        terms.append((sum(dom_vars[lvl].values()), max(len(dom_vars[lvl]), 1)))
    total_leaves = sum(len(g) for g in leaf_vars.members)
    terms.append((sum(leaf_vars.used), min(count, total_leaves)))
    frag_bound = sum(c * len(g) for c, g in zip(leaf_vars.caps, leaf_vars.members, strict=True))
    frag = sum(c * u for c, u in zip(leaf_vars.caps, leaf_vars.used, strict=True)) - sum(leaf_vars.pods)
    terms.append((frag, frag_bound))
    weights = [1] * len(terms)
    for i in range(len(terms) - 2, -1, -1):
        weights[i] = weights[i + 1] * (terms[i + 1][1] + 1)
    if weights[0] * (terms[0][1] + 1) >= 2**62:
        return False
    model.minimize(sum(w * t for w, (t, _) in zip(weights, terms, strict=True)))
    return True


def _solve(
    solver: cp_model.CpSolver, model: cp_model.CpModel, remaining: float, time_budget_s: float, groups: int
) -> cp_model.CpSolverStatus:
    # Keep ~35% of the budget (CP-SAT overshoots its limit by a few ms) for extracting and checking the answer.
    solver.parameters.max_time_in_seconds = max(remaining - 0.35 * time_budget_s, 0.002)
    solver.parameters.num_workers = NUM_WORKERS
    solver.parameters.random_seed = 1
    # Presolve pays off on small models only; on large ones it eats the whole budget.
    solver.parameters.cp_model_presolve = groups <= PRESOLVE_MAX_GROUPS
    return solver.solve(model)


def _read_solution(solver: cp_model.CpSolver, leaf_vars: _LeafVars) -> dict[int, int]:
    """Pods per leaf: each used leaf of a group gets one pod, the rest fills them in order."""
    result: dict[int, int] = {}
    groups = zip(leaf_vars.used, leaf_vars.pods, leaf_vars.caps, leaf_vars.members, strict=True)
    step = leaf_vars.step
    for used, pods, cap, leaves in groups:
        u, p = int(solver.value(used)), int(solver.value(pods))
        if u == 0 or p == 0:
            continue
        take = sorted(leaves)[:u]
        rest = p - step * u
        for leaf in take:
            extra = min(cap - step, rest)
            result[leaf] = step + extra
            rest -= extra
    return result


def _lift(tree: TopologyTree, doms: IntArray, from_level: int, to_level: int) -> IntArray:
    out = doms
    for lvl in range(from_level, to_level, -1):
        out = tree.parent[lvl][out]
    return out


def _level_to_top(tree: TopologyTree, level: int, top: int) -> IntArray:
    """For every domain at ``level``, its ancestor at ``top`` (identity when equal)."""
    return _lift(tree, np.arange(tree.domain_count(level), dtype=np.int64), level, top)


def _children_needed(prob: Problem, level: int, count: int) -> IntArray:
    """For every domain at ``level``: the fewest children (at level+1) whose capacities add up
    to ``count`` (their number when even all children together are short)."""
    tree = prob.tree
    child = level + 1
    pc = prob.pod_counts[child]
    par = tree.parent[child]
    order = np.lexsort((-pc, par))
    sorted_pc, sorted_par = pc[order], par[order]
    cum = np.cumsum(sorted_pc)
    starts = tree.child_start[level]
    base = np.where(starts > 0, cum[np.maximum(starts - 1, 0)], 0)
    before = cum - sorted_pc - base[sorted_par]
    need: IntArray = np.bincount(
        sorted_par, weights=(before < count).astype(np.float64), minlength=tree.domain_count(level)
    ).astype(np.int64)
    return need


def _covered(pods_top: IntArray, chosen: list[int], count: int) -> bool:
    return int(pods_top[chosen].sum()) >= count
