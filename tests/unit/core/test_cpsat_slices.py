"""CP-SAT for sliced requests (one slice layer): whole slices in every slice-level domain, the
required level held, never worse than greedy (Kueue) by the objective, and ``solver: cpsat``."""

from __future__ import annotations

import random

import pytest

from scheduler.core.placement import cpsat, greedy
from scheduler.core.placement.planner import place_workload
from scheduler.core.topology_request import SliceConstraint, TopologyRequest
from scheduler.core.workload import PodSetSpec
from tests.unit.core._helpers import BLOCK, HOST, LEVELS3, MULTI_LAYER, RACK, node, tree_of


def _leaf_pods(tree, placement):  # type: ignore[no-untyped-def]
    return {tree.leaf_for_values(placement.levels, d.values): d.count for d in placement.domains}


def test_sliced_request_is_solved_by_cpsat() -> None:
    """Rack slices of 2: greedy (Kueue) takes the roomiest block's racks first; CP-SAT may not
    do worse, and it says it ran."""
    nodes = [node("a1", "b1", "r1", 3), node("a2", "b1", "r2", 3), node("c1", "b2", "r3", 4)]
    ps = PodSetSpec("main", 4, {"cpu": 1000},
                    TopologyRequest(preferred=BLOCK, slice_constraints=(SliceConstraint(RACK, 2),)))
    placement = place_workload(tree_of(nodes), [ps], solver="cpsat", time_budget_s=1.0)
    assert placement.fits and placement.solver == "cpsat"


@pytest.mark.parametrize("seed", range(40))
def test_cpsat_slices_whole_and_never_worse(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [node(f"n{i}", f"b{rng.randint(1, 3)}", f"r{rng.randint(1, 3)}", rng.randint(0, 7))
             for i in range(rng.randint(2, 12))]
    tree = tree_of(nodes)
    size = rng.choice([2, 3])
    slice_level = rng.choice([RACK, HOST])
    mode = rng.choice(["required", "preferred"])
    level = rng.choice([lvl for lvl in LEVELS3 if LEVELS3.index(lvl) <= LEVELS3.index(slice_level)])
    ps = PodSetSpec("main", size * rng.randint(1, 5), {"cpu": 1000},
                    TopologyRequest(**{mode: level}, slice_constraints=(SliceConstraint(slice_level, size),)))
    both = _greedy_and_cpsat(tree, ps)
    if both is None:
        return
    plain, solved = both
    mine = _leaf_pods(tree, solved.pod_sets[0])
    assert cpsat.slices_respected(greedy.prepare(tree, ps), mine)
    _assert_held_and_never_worse(tree, ps, mine, plain, mode, level)


def _greedy_and_cpsat(tree, ps):  # type: ignore[no-untyped-def]
    """Both answers; None when neither fits (then with the same reason)."""
    plain = place_workload(tree, [ps], solver="greedy", gates=MULTI_LAYER)
    solved = place_workload(tree, [ps], solver="cpsat", time_budget_s=1.0, gates=MULTI_LAYER)
    assert solved.fits == plain.fits
    if not plain.fits:
        assert solved.reason == plain.reason
        return None
    return plain, solved


def _assert_held_and_never_worse(tree, ps, mine, plain, mode, level) -> None:  # type: ignore[no-untyped-def]
    """A required level is one domain, no leaf over its free pods, and the objective no worse."""
    if mode == "required":
        assert len({tree.ancestor(leaf, LEVELS3.index(level)) for leaf in mine}) == 1
    fit = greedy.prepare(tree, ps).fit.counts
    assert all(mine[leaf] <= fit[leaf] for leaf in mine)
    assert cpsat.objective(tree, fit, mine) <= cpsat.objective(tree, fit, _leaf_pods(tree, plain.pod_sets[0]))


def _whole_per_layer(tree, leaf_pods, layers) -> bool:  # type: ignore[no-untyped-def]
    """Independent of cpsat: every domain of every layer's level holds a multiple of its size."""
    for level, size in layers:
        lvl = LEVELS3.index(level)
        per: dict[int, int] = {}
        for leaf, pods in leaf_pods.items():
            per[tree.ancestor(leaf, lvl)] = per.get(tree.ancestor(leaf, lvl), 0) + pods
        if any(p % size for p in per.values()):
            return False
    return True


@pytest.mark.parametrize("seed", range(40))
def test_cpsat_multi_layer_slices_whole_and_never_worse(seed: int) -> None:
    """podset-slice-required-topology-constraints (block or rack slices made of rack or host
    slices): CP-SAT runs, every layer's slices are whole, the required level is held, and the
    answer is never worse than greedy (Kueue) by the objective."""
    rng = random.Random(1000 + seed)
    nodes = [node(f"n{i}", f"b{rng.randint(1, 3)}", f"r{rng.randint(1, 4)}", rng.randint(0, 8))
             for i in range(rng.randint(3, 14))]
    tree = tree_of(nodes)
    inner = rng.choice([1, 2])
    outer_size = inner * rng.choice([2, 3])
    outer_level, inner_level = rng.choice([(BLOCK, RACK), (BLOCK, HOST), (RACK, HOST)])
    layers = ((outer_level, outer_size), (inner_level, inner))
    mode = rng.choice(["required", "preferred"])
    level = rng.choice([lvl for lvl in LEVELS3 if LEVELS3.index(lvl) <= LEVELS3.index(outer_level)])
    constraints = tuple(SliceConstraint(lv, sz) for lv, sz in layers)
    ps = PodSetSpec("main", outer_size * rng.randint(1, 3), {"cpu": 1000},
                    TopologyRequest(**{mode: level}, slice_constraints=constraints, layered_slices=True))
    both = _greedy_and_cpsat(tree, ps)
    if both is None:
        return
    plain, solved = both
    assert solved.solver == "cpsat"
    mine = _leaf_pods(tree, solved.pod_sets[0])
    assert sum(mine.values()) == ps.count and _whole_per_layer(tree, mine, layers)
    _assert_held_and_never_worse(tree, ps, mine, plain, mode, level)
