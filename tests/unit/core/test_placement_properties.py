"""Property tests: every placement respects capacities and the required level; CP-SAT is
never worse than greedy on the lexicographic objective; fit/no-fit agrees with capacity."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.placement import cpsat, greedy
from scheduler.core.placement.planner import Placement, place_workload
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec
from tests.unit.core._helpers import BLOCK, HOST, LEVELS3, RACK, node, tree_of


@st.composite
def clusters(draw: st.DrawFn) -> TopologyTree:
    nodes = []
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 4))):
                cpu = draw(st.integers(0, 5))
                nodes.append(node(f"b{b}r{r}h{h}", f"b{b}", f"b{b}r{r}", cpu))
    return tree_of(nodes)


modes = st.sampled_from(
    [
        ("required", BLOCK),
        ("required", RACK),
        ("required", HOST),
        ("preferred", RACK),
        ("preferred", HOST),
        ("preferred", BLOCK),
    ]
)


def check_valid(tree: TopologyTree, spec: PodSetSpec, placement: Placement) -> dict[int, int]:
    fit = tree.leaf_fit({"cpu": 1000, "pods": 1}).counts
    (placed,) = placement.pod_sets
    leaf_pods: dict[int, int] = {}
    for dom in placed.domains:
        leaf = tree.leaf_for_values(placed.levels, dom.values)
        assert leaf is not None
        assert 0 < dom.count <= fit[leaf], "over capacity"
        leaf_pods[leaf] = dom.count
    assert sum(leaf_pods.values()) == spec.count
    assert spec.topology is not None
    if spec.topology.required:
        lvl = tree.level_index(spec.topology.required)
        assert len({tree.ancestor(leaf, lvl) for leaf in leaf_pods}) == 1, "required level violated"
    return leaf_pods


def capacity_allows(tree: TopologyTree, spec: PodSetSpec) -> bool:
    fit = tree.leaf_fit({"cpu": 1000, "pods": 1}).counts
    assert spec.topology is not None
    if spec.topology.required:
        sums = tree.subtree_sums(fit)[tree.level_index(spec.topology.required)]
        return bool(len(sums)) and int(sums.max()) >= spec.count
    return int(fit.sum()) >= spec.count


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(1, 24), modes)
def test_greedy_valid_and_fits_iff_capacity(tree: TopologyTree, count: int, mode: tuple[str, str]) -> None:
    spec = PodSetSpec("main", count, {"cpu": 1000}, TopologyRequest(**{mode[0]: mode[1]}))
    placement = place_workload(tree, [spec], solver="greedy")
    assert placement.fits == capacity_allows(tree, spec), placement.reason
    if placement.fits:
        check_valid(tree, spec, placement)
    else:
        assert placement.reason.startswith('topology "default" ')


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(1, 24), modes)
def test_cpsat_valid_and_never_worse_than_greedy(
    tree: TopologyTree, count: int, mode: tuple[str, str]
) -> None:
    spec = PodSetSpec("main", count, {"cpu": 1000}, TopologyRequest(**{mode[0]: mode[1]}))
    g = place_workload(tree, [spec], solver="greedy")
    c = place_workload(tree, [spec], solver="cpsat", time_budget_s=0.5)
    assert c.fits == g.fits
    if not g.fits:
        assert c.reason == g.reason
        return
    g_pods = check_valid(tree, spec, g)
    c_pods = check_valid(tree, spec, c)
    fit = tree.leaf_fit({"cpu": 1000, "pods": 1}).counts
    assert cpsat.objective(tree, fit, c_pods) <= cpsat.objective(tree, fit, g_pods)


def test_cpsat_strictly_better_when_greedy_fragments() -> None:
    # preferred=block, 5 pods: greedy re-packs racks BestFit and takes the tight rack r2 (five
    # 1-pod nodes); CP-SAT puts 3 + 2 on rack r1 (two nodes), lexicographically better.
    nodes = [
        node("a", rack="r1", cpu=3),
        node("b", rack="r1", cpu=3),
        node("c", rack="r2", cpu=1),
        node("d", rack="r2", cpu=1),
        node("e", rack="r2", cpu=1),
        node("f", rack="r2", cpu=1),
        node("g", rack="r2", cpu=1),
    ]
    tree = tree_of(nodes)
    spec = PodSetSpec("main", 5, {"cpu": 1000}, TopologyRequest(preferred=BLOCK))
    prob = greedy.prepare(tree, spec)
    g = greedy.place_pod_set(prob)
    result = cpsat.improve(prob, g, time_budget_s=1.0)
    assert result.used and result.optimal
    assert result.objective < result.greedy_objective
    assert result.objective[2] == 2  # two nodes (3 + 2) instead of five single-pod nodes
    placement = place_workload(tree, [spec], solver="cpsat", time_budget_s=1.0)
    assert placement.solver == "cpsat" and placement.optimal
    assert sorted(d.count for d in placement.pod_sets[0].domains) == [2, 3]


def test_cpsat_keeps_required_level_and_multi_podset_assumed_usage() -> None:
    nodes = [node(f"h{i}", "b1", f"r{i % 2}", 2) for i in range(4)] + [node("x", "b2", "r9", 8)]
    tree = tree_of(nodes)
    a = PodSetSpec("a", 4, {"cpu": 1000}, TopologyRequest(required=BLOCK))
    b = PodSetSpec("b", 6, {"cpu": 1000}, TopologyRequest(required=BLOCK))
    placement = place_workload(tree, [a, b], solver="cpsat", time_budget_s=1.0)
    assert placement.fits and placement.solver == "cpsat"
    fit = tree.leaf_fit({"cpu": 1000, "pods": 1}).counts
    used = np.zeros(tree.n_leaves, dtype=np.int64)
    for placed in placement.pod_sets:
        blocks = set()
        for dom in placed.domains:
            leaf = tree.leaf_for_values(placed.levels, dom.values)
            assert leaf is not None
            used[leaf] += dom.count
            blocks.add(tree.ancestor(leaf, 0))
        assert len(blocks) == 1
    assert (used <= fit).all()


def test_planner_auto_and_unknown_solver() -> None:
    tree = tree_of([node("n1", cpu=4), node("n2", cpu=4)])
    one_node = PodSetSpec("main", 2, {"cpu": 1000}, TopologyRequest(preferred=RACK))
    assert place_workload(tree, [one_node], solver="auto").solver == "greedy"  # one leaf holds it
    required = PodSetSpec("main", 6, {"cpu": 1000}, TopologyRequest(required=RACK))
    assert place_workload(tree, [required], solver="auto").solver == "greedy"  # single required pod set
    try:
        place_workload(tree, [one_node], solver="magic")
    except ValueError as err:
        assert "magic" in str(err)
    else:
        raise AssertionError("unknown solver accepted")


def test_levels_constant() -> None:
    assert LEVELS3[-1] == HOST
