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
from scheduler.core.topology import IntArray, TopologyTree

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


def _fit_level(prob: Problem, count: int) -> int:
    """Deepest level (>= the required level) with one domain holding ``count`` pods; -1 if none."""
    low = prob.level if prob.mode == "required" else 0
    for lvl in range(len(prob.tree.levels) - 1, low - 1, -1):
        if len(prob.pod_counts[lvl]) and int(prob.pod_counts[lvl].max()) >= count:
            return lvl
    return -1


def improve(prob: Problem, greedy_leaf_pods: dict[int, int], *, time_budget_s: float = 0.1) -> Improvement:
    started = time.monotonic()
    tree = prob.tree
    n_levels = len(tree.levels)
    count = prob.pod_set.count
    fit = prob.fit.counts
    greedy_obj = objective(tree, fit, greedy_leaf_pods)
    f = _fit_level(prob, count)
    greedy_leaves = np.array(sorted(greedy_leaf_pods), dtype=np.int64)

    if f == n_levels - 1:
        # One leaf holds it all: the optimum is the tightest such leaf (enumeration is proof).
        ok = np.nonzero(fit >= count)[0]
        best = int(ok[np.argmin(fit[ok])])
        leaf_pods = {best: count}
        obj = objective(tree, fit, leaf_pods)
        chosen = leaf_pods if obj < greedy_obj else dict(greedy_leaf_pods)
        return Improvement(True, chosen, True, min(obj, greedy_obj), greedy_obj, status="ENUMERATED")

    # ---- candidate subtrees ------------------------------------------------------------
    parent_level = n_levels - 2  # level of a leaf's parent (-1: the root)
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
    if f >= 0:
        pool = np.nonzero(pods_top >= count)[0]
        # Most promising first: fewest children needed at level f+1 (a lower bound on the
        # next objective term), then tightest.
        need = _children_needed(prob, f, count)[pool]
        pool = pool[np.lexsort((pool, pods_top[pool], need))]
    else:
        pool = np.nonzero(pods_top > 0)[0]
        pool = pool[np.lexsort((pool, -pods_top[pool]))]  # largest first
    preferred_first = [int(d) for d in np.unique(anc_top[greedy_leaves])] if len(greedy_leaves) else []
    chosen_tops: list[int] = []
    budget = 0
    seen: set[int] = set()
    for dom in [*preferred_first, *pool.tolist()]:
        if dom in seen:
            continue
        seen.add(dom)
        cost = int(groups_per_top[dom])
        if chosen_tops and budget + cost > max_groups and (f >= 0 or _covered(pods_top, chosen_tops, count)):
            continue
        chosen_tops.append(dom)
        budget += cost
    complete = set(pool.tolist()) <= set(chosen_tops)
    top_set = np.zeros(tree.domain_count(top), dtype=np.bool_)
    top_set[chosen_tops] = True

    # ---- multi-start: Kueue's descent inside the most promising candidates -------------------
    hint_pods, hint_obj = dict(greedy_leaf_pods), greedy_obj
    if f >= 0:
        for cand in chosen_tops[:MULTI_START]:
            if time.monotonic() - started > 0.4 * time_budget_s:
                break
            try:
                tried = descend(prob, f, [(cand, count)])
            except PlacementError:
                continue
            tried_obj = objective(tree, fit, tried)
            if tried_obj < hint_obj:
                hint_pods, hint_obj = tried, tried_obj
    hint_leaves = np.array(sorted(hint_pods), dtype=np.int64)

    def fallback(status: str) -> Improvement:
        """No CP-SAT answer: the multi-start answer if it beats greedy, else greedy's."""
        if hint_obj < greedy_obj:
            return Improvement(True, hint_pods, False, hint_obj, greedy_obj, None, None, complete, status)
        return Improvement(
            False, dict(greedy_leaf_pods), False, greedy_obj, greedy_obj, None, None, complete, status
        )

    hint_tops = [int(d) for d in np.unique(anc_top[hint_leaves])] if len(hint_leaves) else []

    # ---- model ---------------------------------------------------------------------------
    model = cp_model.CpModel()
    greedy_set = set(hint_pods)
    sel: dict[int, cp_model.IntVar] = {}
    if f >= 0:
        for dom in chosen_tops:
            sel[dom] = model.new_bool_var(f"s{dom}")
        model.add_exactly_one(sel.values())
        for dom in chosen_tops:
            model.add_hint(sel[dom], int(dom in hint_tops and len(hint_tops) == 1))
    # Domain booleans for levels f+1 .. n_levels-2, restricted to candidate subtrees.
    dom_vars: list[dict[int, cp_model.IntVar]] = [{} for _ in range(n_levels)]
    greedy_touch: list[set[int]] = []
    for lvl in range(n_levels):
        greedy_touch.append(
            set(tree.ancestors_array(lvl)[greedy_leaves].tolist()) if len(greedy_leaves) else set()
        )
    for lvl in range(f + 1, n_levels - 1):
        anc = _level_to_top(tree, lvl, top)
        doms = np.nonzero(top_set[anc] & (prob.pod_counts[lvl] > 0))[0]
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
    # Leaf groups.
    in_model = top_set[group_top]
    group_keys, group_parent = group_keys[in_model], group_parent[in_model]
    key_of_leaf = leaf_parent * max_fit + fit
    members: dict[int, list[int]] = {}
    live_in = live[top_set[anc_top[live]]]
    for leaf, key in zip(live_in.tolist(), key_of_leaf[live_in].tolist(), strict=True):
        members.setdefault(int(key), []).append(int(leaf))
    used_vars: list[cp_model.IntVar] = []
    pod_vars: list[cp_model.IntVar] = []
    caps: list[int] = []
    group_members: list[list[int]] = []
    for gi, (key, par) in enumerate(zip(group_keys.tolist(), group_parent.tolist(), strict=True)):
        if gi % 64 == 0 and time.monotonic() - started > 0.75 * time_budget_s:
            return fallback("BUDGET_SPENT_BUILDING")
        leaves = members[int(key)]
        cap = int(key) % max_fit
        m = len(leaves)
        used = model.new_int_var(0, m, f"u{key}")
        pods = model.new_int_var(0, min(m * cap, count), f"p{key}")
        model.add(pods <= cap * used)
        model.add(pods >= used)
        if parent_level > f:
            pvar = dom_vars[parent_level].get(int(par))
            if pvar is None:
                model.add(used == 0)
            else:
                model.add(used <= m * pvar)
        elif f >= 0 and parent_level == f:
            model.add(used <= m * sel[int(par)])
        g_used = sum(1 for leaf in leaves if leaf in greedy_set)
        model.add_hint(used, g_used)
        model.add_hint(pods, sum(hint_pods.get(leaf, 0) for leaf in leaves))
        used_vars.append(used)
        pod_vars.append(pods)
        caps.append(cap)
        group_members.append(leaves)
    if not pod_vars:
        return fallback("EMPTY_MODEL")
    model.add(sum(pod_vars) == count)
    terms: list[tuple[cp_model.LinearExprT, int]] = []
    for lvl in range(f + 1, n_levels - 1):
        terms.append((sum(dom_vars[lvl].values()), max(len(dom_vars[lvl]), 1)))
    total_leaves = sum(len(g) for g in group_members)
    terms.append((sum(used_vars), min(count, total_leaves)))
    frag_bound = sum(c * len(g) for c, g in zip(caps, group_members, strict=True))
    frag = sum(c * u for c, u in zip(caps, used_vars, strict=True)) - sum(pod_vars)
    terms.append((frag, frag_bound))
    weights = [1] * len(terms)
    for i in range(len(terms) - 2, -1, -1):
        weights[i] = weights[i + 1] * (terms[i + 1][1] + 1)
    if weights[0] * (terms[0][1] + 1) >= 2**62:
        return fallback("OBJECTIVE_OVERFLOW")
    model.minimize(sum(w * t for w, (t, _) in zip(weights, terms, strict=True)))

    solver = cp_model.CpSolver()
    remaining = time_budget_s - (time.monotonic() - started)
    if remaining < 0.2 * time_budget_s:
        return fallback("BUDGET_SPENT_BUILDING")
    # Keep ~35% of the budget (CP-SAT overshoots its limit by a few ms) for extracting and checking the answer.
    solver.parameters.max_time_in_seconds = max(remaining - 0.35 * time_budget_s, 0.002)
    solver.parameters.num_workers = NUM_WORKERS
    solver.parameters.random_seed = 1
    # Presolve pays off on small models only; on large ones it eats the whole budget.
    solver.parameters.cp_model_presolve = len(pod_vars) <= PRESOLVE_MAX_GROUPS
    status = solver.solve(model)
    status_name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return fallback(status_name)
    result: dict[int, int] = {}
    for used, pods, cap, leaves in zip(used_vars, pod_vars, caps, group_members, strict=True):
        u, p = int(solver.value(used)), int(solver.value(pods))
        if u == 0 or p == 0:
            continue
        take = sorted(leaves)[:u]
        rest = p - u
        for leaf in take:
            extra = min(cap - 1, rest)
            result[leaf] = 1 + extra
            rest -= extra
    obj = objective(tree, fit, result)
    optimal = status == cp_model.OPTIMAL and complete
    best_pods, best_obj = (result, obj) if obj <= hint_obj else (hint_pods, hint_obj)
    if not best_obj < greedy_obj:  # ties keep the greedy (Kueue) answer
        best_pods, best_obj = dict(greedy_leaf_pods), greedy_obj
    return Improvement(
        used=True,
        leaf_pods=best_pods,
        optimal=optimal,
        objective=best_obj,
        greedy_objective=greedy_obj,
        bound=float(solver.best_objective_bound),
        value=float(solver.objective_value),
        candidates_complete=complete,
        status=status_name,
    )


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
