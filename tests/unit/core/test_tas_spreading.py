# ruff: noqa: E501  (Kueue's messages are long single lines)
"""Topology spreading (``TASTopologySpreading``, Kueue's v0.20 cycle), restated from Kueue main's
``tas_spread_tree_count_test.go`` (counting), ``tas_spreading_test.go`` (``findLevelWithFitDomains``
with spreading); and through the cycle: a second replica of a group is spread away from the
first. The webhook's checks of the annotation: ``tests/unit/test_admission_spreading.py``."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from scheduler.core.config import FeatureGates, KueueConfig
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit
from scheduler.core.kueue.quota import FlavorSpec
from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.core.placement.planner import PlacementGates, place_workload
from scheduler.core.spreading import (
    ANN_SPREADING,
    GroupOccupancy,
    SpreadCounts,
    SpreadingError,
    count_spread,
    group_key,
    parse_spreading,
)
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, pod_set_from_template

from ._admission import admitted, cq, lqs, pending, rq, snapshot, wl
from ._helpers import BLOCK, HOST, LEVELS3, RACK, node, per_node, tree_of

SPREAD = PlacementGates(spreading=True)


def _spec(*rules: tuple[str, str, str], selector: bool = True) -> str:
    doc: dict[str, object] = {"rules": [{"topologyKey": k, "maxShareAllowingPlacement": s, "enforcementMode": m}
                                        for k, s, m in rules]}
    if selector:
        doc["workloadLabelSelectors"] = [{"key": "app", "operator": "In", "values": ["main"]}]
    return json.dumps(doc)


# ------------------------------------------------------------------ codec

def test_parse_defaults_and_share_in_milli() -> None:
    spec = parse_spreading(json.dumps({"workloadLabelSelectors": [{"key": "app", "operator": "In", "values": ["x"]}],
                                       "rules": [{"topologyKey": RACK, "maxShareAllowingPlacement": "0.45"},
                                                 {"topologyKey": BLOCK, "maxShareAllowingPlacement": 0.5}]}))
    assert [(r.topology_key, r.max_share_milli, r.mode) for r in spec.rules] == [(RACK, 450, "Required"), (BLOCK, 500, "Required")]
    assert spec.matches({"app": "x"}, "") and not spec.matches({"app": "y"}, "")


def test_without_selectors_the_group_is_the_job() -> None:
    spec = parse_spreading(_spec((RACK, "0.5", "Required"), selector=False))
    assert spec.matches({LABEL_JOB_UID: "j1"}, "j1") and not spec.matches({LABEL_JOB_UID: "j2"}, "j1")


@pytest.mark.parametrize(("value", "message"), [
    ("{", "failed to parse topology spreading annotation"),
    (json.dumps({"rules": []}), "topology spreading rules must contain between 1 and 2 entries: got 0"),
    (json.dumps({"rules": [{"topologyKey": "a"}] * 3}), "topology spreading rules must contain between 1 and 2 entries: got 3"),
])
def test_parse_errors(value: str, message: str) -> None:
    with pytest.raises(SpreadingError, match=message):
        parse_spreading(value)


@pytest.mark.parametrize(("value", "part"), [
    ("[" * 5000 + "]" * 5000, "json"),  # nested past the parser's recursion limit
    (json.dumps({"rules": [{"topologyKey": "a", "maxShareAllowingPlacement": "0.5"}], "workloadLabelSelectors": 5}),
     "selectors"),
    (json.dumps({"rules": [{"topologyKey": "a", "maxShareAllowingPlacement": "0.5"}],
                 "workloadLabelSelectors": [{"key": "a", "operator": "In", "values": 5}]}), "selectors"),
    (json.dumps({"rules": [{"topologyKey": "a", "maxShareAllowingPlacement": [1]}]}), "json"),
    (json.dumps({"rules": "a"}), "rules"),
])
def test_hostile_values_are_parse_errors_never_crashes(value: str, part: str) -> None:
    """Whatever a user writes, the parser raises SpreadingError (the controller then ignores the
    annotation, the webhook names the field): never TypeError or RecursionError."""
    with pytest.raises(SpreadingError) as err:
        parse_spreading(value)
    assert err.value.part == part


def test_pod_template_annotation_is_read() -> None:
    template = {"metadata": {"annotations": {ANN_SPREADING: _spec((RACK, "0.5", "Required"))}}, "spec": {}}
    assert pod_set_from_template("main", 1, template).spreading is not None
    broken = {"metadata": {"annotations": {ANN_SPREADING: "{"}}, "spec": {}}
    assert pod_set_from_template("main", 1, broken).spreading is None  # the webhook refuses it at creation


# ------------------------------------------------------------------ counting (TestTopologySpreadCounts)

def _occ(key: str, ns: str, app: str, placements: list[tuple[str, str]]) -> GroupOccupancy:
    paths = {"n1": ("b1", "r1", "n1"), "n2": ("b1", "r1", "n2"), "n3": ("b2", "r2", "n3")}
    leaves: dict[str, list[tuple[str, ...]]] = {}
    for group, host in placements:
        leaves.setdefault(group_key("x", group), []).append(paths[host])
    return GroupOccupancy(key, ns, {"app": app}, {g: tuple(v) for g, v in leaves.items()})


def test_topology_spread_counts() -> None:
    existing = [
        _occ("ns/wl-1", "ns", "main", [("group-a", "n1"), ("group-a", "n2"), ("group-b", "n3")]),
        _occ("ns/wl-2", "ns", "main", [("group-a", "n2")]),
        _occ("ns/other-label", "ns", "other", [("group-a", "n3")]),
        _occ("other-ns/other-ns", "other-ns", "main", [("group-a", "n3")]),
    ]
    spec_a = parse_spreading(_spec((BLOCK, "0.5", "Required"), (RACK, "0.5", "Required")))
    spec_b = parse_spreading(_spec((BLOCK, "0.5", "Required")))
    a = count_spread(spec_a, group_key("worker-a", "group-a"), "ns", "", "ns/incoming", LEVELS3, existing)
    b = count_spread(spec_b, group_key("worker-b", "group-b"), "ns", "", "ns/incoming", LEVELS3, existing)
    assert a == SpreadCounts(2, {("b1",): 2, ("b1", "r1"): 2})
    assert b == SpreadCounts(1, {("b2",): 1})


def test_topology_spread_counts_excludes_self_and_hostname_rule() -> None:
    existing = [_occ("ns/incoming", "ns", "main", [("group-a", "n1")]), _occ("ns/wl-1", "ns", "main", [("group-a", "n3")])]
    spec = parse_spreading(_spec((BLOCK, "0.5", "Required"), (RACK, "0.5", "Required")))
    assert count_spread(spec, group_key("a", "group-a"), "ns", "", "ns/incoming", LEVELS3, existing) == \
        SpreadCounts(1, {("b2",): 1, ("b2", "r2"): 1})
    host_rule = parse_spreading(_spec((HOST, "0.5", "Required")))
    assert count_spread(host_rule, group_key("a", "group-a"), "ns", "", "ns/x", LEVELS3, existing[:1]) == \
        SpreadCounts(1, {("b1", "r1", "n1"): 1, ("b1", "r1"): 1})


# ------------------------------------------------------------------ placement (TestFindLevelWithFitDomainsSpreading)

R1_USED = SpreadCounts(1, {("b1",): 1, ("b1", "r1"): 1})
BOTH_USED = SpreadCounts(1, {("b1",): 1, ("b1", "r1"): 1, ("b2",): 1, ("b2", "r2"): 1})


@pytest.mark.parametrize(("mode", "counts", "want"), [
    ("Required", R1_USED, {"n2": 1}),  # required worker excludes occupied rack
    ("Preferred", R1_USED, {"n2": 1}),  # preferred favors the unused rack
    ("Required", BOTH_USED, 'topology spreading excludes all topology domains at level: cloud.com/topology-rack'),
], ids=["required-excludes-occupied-rack", "preferred-favors-unused-rack", "required-excludes-all-racks"])
def test_find_level_with_fit_domains_spreading(mode: str, counts: SpreadCounts, want: dict[str, int] | str) -> None:
    tree = tree_of([node("n1", "b1", "r1"), node("n2", "b2", "r2")])
    spec = parse_spreading(_spec((RACK, "0.5", mode)))
    ps = PodSetSpec("main", 1, {"cpu": 1000}, TopologyRequest(required=RACK), spreading=spec)
    for solver in ("greedy", "cpsat"):
        placement = place_workload(tree, [ps], solver=solver, gates=SPREAD, spread_counts={"main": counts})
        if isinstance(want, str):
            assert not placement.fits and placement.reason == want
        else:
            assert per_node(placement) == want and placement.solver == "greedy"
    off = place_workload(tree, [ps], solver="greedy", spread_counts={"main": counts})  # gate off (default)
    assert per_node(off) == {"n1": 1}


def test_rule_below_the_requested_level_is_refused() -> None:
    tree = tree_of([node("n1", "b1", "r1"), node("n2", "b2", "r2")])
    ps = PodSetSpec("main", 1, {"cpu": 1000}, TopologyRequest(required=BLOCK),
                    spreading=parse_spreading(_spec((RACK, "0.5", "Required"))))
    placement = place_workload(tree, [ps], solver="greedy", gates=SPREAD, spread_counts={"main": SpreadCounts()})
    assert placement.reason == f"topology spreading level {RACK} is below the podset topology {BLOCK}"


def test_preferred_requests_are_not_spread() -> None:
    tree = tree_of([node("n1", "b1", "r1"), node("n2", "b2", "r2")])
    ps = PodSetSpec("main", 1, {"cpu": 1000}, TopologyRequest(preferred=RACK),
                    spreading=parse_spreading(_spec((RACK, "0.5", "Required"))))
    assert per_node(place_workload(tree, [ps], solver="greedy", gates=SPREAD, spread_counts={"main": R1_USED})) == {"n1": 1}


# ------------------------------------------------------------------ through the cycle

def _replica(name: str, created: float) -> object:
    spec = wl(name, 1, count=1, required=RACK, created=created)
    spreading = parse_spreading(_spec((RACK, "0.5", "Required")))
    return replace(spec, labels={"app": "main"},
                   pod_sets=(replace(spec.pod_sets[0], spreading=spreading),))


@pytest.mark.parametrize("gate", [True, False])
def test_cycle_spreads_replicas_across_racks(gate: bool) -> None:
    """Replica 1 runs in rack r1; replica 2 (same app) goes to r2 with the gate on, and next to
    replica 1 (BestFit) with it off. Counting reads the admitted replica's TAS assignment."""
    nodes = [node(f"{r}-n{i}", rack=r, cpu=4) for r in ("r1", "r2") for i in range(2)]
    tree = tree_of(nodes)
    first = admitted(_replica("one", 0.0), "a", "tas", hosts={"r1-n0": 1})  # type: ignore[arg-type]
    for u in first.tas:
        tree.add_usage(u.placement, u.per_pod)
    cqs = {"a": cq("a", {"tas": {"cpu": rq(100)}})}
    config = KueueConfig(feature_gates=FeatureGates({"TASTopologySpreading": gate}))
    snap = snapshot(cluster_queues=cqs, local_queues=lqs(("lq", "a")),
                    flavors={"tas": FlavorSpec("tas", {"pool": "gpu"}, topology_name="default")},
                    trees={"tas": tree}, admitted=[first], pending=[pending(_replica("two", 1.0))], config=config)
    [d] = run_cycle(snap)
    assert isinstance(d, Admit)
    topo = d.pod_sets[0].topology
    assert topo is not None
    racks = {v.values[0].split("-")[0] for v in topo.domains}
    assert racks == ({"r2"} if gate else {"r1"})


@pytest.mark.parametrize(("mode", "counts", "want"), [
    ("Required", R1_USED, "n2"),  # required leader excludes occupied rack
    ("Preferred", R1_USED, "n2"),  # preferred leader favors unused rack
    ("Required", BOTH_USED, "topology spreading excludes all topology domains at level: cloud.com/topology-rack"),
], ids=["required-leader-excludes-occupied-rack", "preferred-leader-favors-unused-rack", "required-leader-excludes-all-racks"])
def test_find_level_with_fit_domains_spreading_with_leader(mode: str, counts: SpreadCounts, want: str) -> None:
    """The same cases with a leader + workers group (placed jointly, groups.py)."""
    tree = tree_of([node("n1", "b1", "r1", cpu=2), node("n2", "b2", "r2", cpu=2)])
    spec = parse_spreading(_spec((RACK, "0.5", mode)))
    topo = TopologyRequest(required=RACK, group_name="g")
    leader = PodSetSpec("leader", 1, {"cpu": 1000}, topo, spreading=spec)
    workers = PodSetSpec("workers", 1, {"cpu": 1000}, topo, spreading=spec)
    placement = place_workload(tree, [leader, workers], solver="greedy", gates=SPREAD,
                               spread_counts={"leader": counts, "workers": counts})
    if want.startswith("topology"):
        assert not placement.fits and placement.reason == want
        return
    assert per_node(placement, 0) == {want: 1} and per_node(placement, 1) == {want: 1}
    off = place_workload(tree, [leader, workers], solver="greedy", spread_counts={"workers": counts})
    assert per_node(off, 0) == {"n1": 1}
