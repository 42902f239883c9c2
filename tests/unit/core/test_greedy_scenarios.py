# ruff: noqa: E501  (exact Kueue messages are long single lines)
"""Kueue TAS semantics as a data table (reference kueue.md §1.3-1.8): expected pods per node,
or the exact no-fit message. Every case runs through the greedy solver (Kueue-equivalent)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from scheduler.core.nodes import NodeInfo, PodInfo, Taint, Toleration
from scheduler.core.placement.planner import place_workload
from scheduler.core.topology_request import SliceConstraint, TopologyRequest
from scheduler.core.workload import PodSetSpec
from tests.unit.core._helpers import BLOCK, HOST, LEVELS3, MULTI_LAYER, RACK, node, per_node, tree_of


def _without(n: NodeInfo, label: str) -> NodeInfo:
    return replace(n, labels={k: v for k, v in n.labels.items() if k != label})


SLICE_HOST_2 = (SliceConstraint(HOST, 2),)


def ps(count: int, cpu: int = 1, name: str = "main", **topo: object) -> PodSetSpec:
    sel = topo.pop("node_selector", {})
    tols = topo.pop("tolerations", ())
    req = TopologyRequest(**topo) if topo else None  # type: ignore[arg-type]
    return PodSetSpec(name, count, {"cpu": cpu * 1000}, req, node_selector=sel, tolerations=tols)  # type: ignore[arg-type]


@dataclass
class Case:
    id: str
    nodes: list
    pod_sets: list
    want: dict[str, int] | str
    levels: tuple[str, ...] = LEVELS3
    pods: list = field(default_factory=list)
    implied: bool = False
    second: dict[str, int] | None = None  # expected for pod set #2


KEP_RACK = [node("n1", cpu=3), node("n2", cpu=3), node("n3", cpu=2), node("n4", cpu=1)]
KEP_SLICES = [node(f"n{i}", cpu=c) for i, c in enumerate([6, 5, 4, 3, 2], 1)]
TWO_RACKS = [node("a", rack="r1", cpu=3), node("b", rack="r2", cpu=1), node("c", rack="r2", cpu=1)]
ZERO = [node(f"x{i}", cpu=0) for i in range(4)]
CLIMB = [
    node("h1", "b1", "r1", 2),
    node("h2", "b1", "r2", 2),
    node("h3", "b2", "r3", 1),
]
SPREAD = [
    node("a1", "bA", "r1", 3),
    node("a2", "bA", "r2", 3),
    node("b1", "bB", "r3", 4),
]


CASES = [
    Case("kep-bestfit-3-3-2-1", KEP_RACK, [ps(7, required=RACK)], {"n1": 3, "n2": 3, "n4": 1}),
    Case("kep-preferred-same-as-required", KEP_RACK, [ps(7, preferred=RACK)], {"n1": 3, "n2": 3, "n4": 1}),
    Case(
        "kep-leastfree-unconstrained",
        KEP_RACK,
        [ps(7, unconstrained=True)],
        {"n4": 1, "n3": 2, "n1": 3, "n2": 1},
    ),
    Case(
        "kep-slices-bestfit-12",
        KEP_SLICES,
        [ps(12, required=RACK, slice_constraints=SLICE_HOST_2)],
        {"n1": 6, "n3": 4, "n5": 2},
    ),
    Case(
        "kep-slices-leastfree-10",
        KEP_SLICES,
        [ps(10, slice_constraints=SLICE_HOST_2)],
        {"n2": 2, "n3": 4, "n4": 2, "n5": 2},
    ),
    Case("required-exact-fit", KEP_RACK, [ps(9, required=RACK)], {"n1": 3, "n2": 3, "n3": 2, "n4": 1}),
    Case(
        "required-one-short",
        KEP_RACK,
        [ps(10, required=RACK)],
        'topology "default" allows to fit only 9 out of 10 pod(s)',
    ),
    Case(
        "required-largest-rack-reported",
        TWO_RACKS,
        [ps(4, required=RACK)],
        'topology "default" allows to fit only 3 out of 4 pod(s)',
    ),
    Case(
        "zero-capacity-nodes",
        ZERO,
        [ps(1, required=RACK)],
        "topology \"default\" doesn't allow to fit any of 1 pod(s). Total nodes: 4; excluded: resource \"cpu\": 4",
    ),
    Case("required-tight-fit-not-largest", TWO_RACKS, [ps(2, required=RACK)], {"b": 1, "c": 1}),
    Case(
        "tie-broken-by-value-path",
        [node("z", rack="r2", cpu=2), node("y", rack="r1", cpu=2)],
        [ps(2, required=RACK)],
        {"y": 2},
    ),
    Case("missing-level", KEP_RACK, [ps(1, required="cloud.com/zone")], "no requested topology level: cloud.com/zone"),
    Case(
        "missing-slice-level",
        KEP_RACK,
        [ps(2, required=RACK, slice_constraints=(SliceConstraint("x/y", 2),))],
        "no requested topology level for slices: x/y",
    ),
    Case(
        "slice-above-podset-level",
        KEP_RACK,
        [ps(2, required=RACK, slice_constraints=(SliceConstraint(BLOCK, 2),))],
        f"podset slice topology {BLOCK} is above the podset topology {RACK}",
    ),
    Case(
        "slice-size-zero",
        KEP_RACK,
        [ps(2, required=RACK, slice_constraints=(SliceConstraint(HOST, 0),))],
        "slice topology requested, but slice size not provided",
    ),
    Case(
        "slices-word-in-message",
        [node("n1", cpu=3), node("n2", cpu=1)],
        [ps(4, required=RACK, slice_constraints=SLICE_HOST_2)],
        'topology "default" allows to fit only 1 out of 2 slice(s)',
    ),
    Case("preferred-climbs-to-block", CLIMB, [ps(3, preferred=RACK)], {"h1": 2, "h2": 1}),
    Case(
        "required-block-holds-across-racks",
        CLIMB,
        [ps(4, required=BLOCK)],
        {"h1": 2, "h2": 2},
    ),
    Case(
        "preferred-spreads-over-blocks-and-repacks-racks-globally",
        SPREAD,
        [ps(8, preferred=RACK)],
        {"b1": 4, "a1": 3, "a2": 1},
    ),
    Case(
        "preferred-beyond-total",
        SPREAD,
        [ps(11, preferred=RACK)],
        'topology "default" allows to fit only 10 out of 11 pod(s)',
    ),
    Case(
        "pods-resource-limits",
        [node("n1", cpu=100, pods=2), node("n2", cpu=100, pods=0)],
        [ps(3, required=RACK)],
        'topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 2; excluded: resource "pods": 1',
    ),
    Case(
        "bound-pods-use-capacity-and-a-pod-slot",
        [node("n1", cpu=4, pods=2), node("n2", cpu=4)],
        [ps(5, required=RACK)],
        {"n1": 1, "n2": 4},
        pods=[
            PodInfo("ns", "p1", node_name="n1", phase="Running", requests={"cpu": 1000}),
            PodInfo("ns", "done", node_name="n2", phase="Succeeded", requests={"cpu": 4000}),
            PodInfo("ns", "tas", node_name="n2", phase="Running", requests={"cpu": 4000},
                    annotations={"kueue.x-k8s.io/podset-required-topology": RACK}),
            PodInfo("ns", "unbound", requests={"cpu": 4000}),
        ],
    ),
    Case(
        "not-ready-and-unschedulable-nodes-do-not-count",
        [node("n1", cpu=2), node("n2", cpu=8, ready=False), node("n3", cpu=8, unschedulable=True)],
        [ps(3, required=RACK)],
        'topology "default" allows to fit only 2 out of 3 pod(s)',
    ),
    Case(
        "nodes-without-level-label-excluded",
        [_without(node("n1", cpu=2), RACK), node("n2", cpu=1)],
        [ps(2, required=RACK)],
        'topology "default" allows to fit only 1 out of 2 pod(s)',
    ),
    Case(
        "no-domains-at-level",
        [node("n1", cpu=2)],
        [ps(1, required=RACK)],
        f"no topology domains at level: {RACK}",
        levels=("zone", RACK, HOST),
    ),
    Case(
        "untolerated-taint-excluded",
        [node("n1", cpu=2, taints=[Taint("gpu", "bad", "NoSchedule")]), node("n2", cpu=1)],
        [ps(2, required=RACK)],
        'topology "default" allows to fit only 1 out of 2 pod(s). Total nodes: 2; excluded: taint "gpu=bad:NoSchedule": 1',
    ),
    Case(
        "tolerated-taint-and-prefer-no-schedule-ok",
        [node("n1", cpu=2, taints=[Taint("gpu", "bad", "NoSchedule")]),
         node("n2", cpu=1, taints=[Taint("soft", "", "PreferNoSchedule")])],
        [ps(3, required=RACK, tolerations=(Toleration("gpu", "Equal", "bad", "NoSchedule"),))],
        {"n1": 2, "n2": 1},
    ),
    Case(
        "node-selector-mismatch",
        [node("n1", cpu=2, labels={"pool": "a"}), node("n2", cpu=2, labels={"pool": "b"})],
        [ps(3, required=RACK, node_selector={"pool": "a"})],
        'topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 2; excluded: nodeSelector: 1',
    ),
    Case(
        "rack-lowest-ignores-taints-and-aggregates-nodes",
        [node("n1", rack="r1", cpu=1, taints=[Taint("k", "v", "NoSchedule")]), node("n2", rack="r1", cpu=1),
         node("n3", rack="r2", cpu=0)],
        [ps(3, required=BLOCK)],
        'topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 2; excluded: resource "cpu": 1',
        levels=(BLOCK, RACK),
    ),
    Case(
        "rack-lowest-assignment-is-full-path",
        [node("n1", rack="r1", cpu=1), node("n2", rack="r1", cpu=1), node("n3", rack="r2", cpu=3)],
        [ps(2, required=BLOCK)],
        {"b1/r1": 2},
        levels=(BLOCK, RACK),
    ),
    Case(
        "implied-tas-is-leastfree-at-hostname",
        KEP_RACK,
        [ps(4)],
        {"n4": 1, "n3": 2, "n1": 1},
        implied=True,
    ),
    Case("no-annotation-not-implied", KEP_RACK, [ps(1)], "topology level not specified"),
    Case("unconstrained-false-has-no-level", KEP_RACK, [ps(1, unconstrained=False)], "topology level not specified"),
    Case(
        "multiple-pod-sets-assumed-usage",
        [node("n1", cpu=3), node("n2", cpu=2)],
        [ps(2, required=RACK, name="a"), ps(3, required=RACK, name="b")],
        {"n2": 2},
        second={"n1": 3},
    ),
    Case(
        "multiple-pod-sets-second-does-not-fit",
        [node("n1", cpu=3), node("n2", cpu=2)],
        [ps(3, required=RACK, name="a"), ps(3, required=RACK, name="b")],
        'topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 2; excluded: resource "cpu": 1',
    ),
    Case("count-zero-pod-set-skipped", KEP_RACK, [ps(0, required=RACK), ps(1, required=RACK, name="w")],
         {}, second={"n4": 1}),
    Case(
        "multi-layer-rounds-inner-slices",
        [node("n1", rack="r1", cpu=3), node("n2", rack="r1", cpu=3), node("n3", rack="r2", cpu=4)],
        [ps(4, required=BLOCK, slice_constraints=(SliceConstraint(RACK, 4), SliceConstraint(HOST, 2)))],
        {"n1": 2, "n2": 2},
    ),
    Case(
        "multi-layer-no-fit-when-only-odd-hosts",
        [node("n1", rack="r1", cpu=3), node("n2", rack="r1", cpu=3)],
        [ps(6, required=BLOCK, slice_constraints=(SliceConstraint(RACK, 6), SliceConstraint(HOST, 2)))],
        # Kueue's multiLayerNotFitMessage (issue 15): per layer, slices that fit in the best block
        'topology "default" doesn\'t allow to fit; 0/1 slice(s) fit on level cloud.com/topology-rack; '
        "2/3 slice(s) fit on level kubernetes.io/hostname",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scenario(case: Case) -> None:
    tree = tree_of(case.nodes, case.levels, case.pods)
    placement = place_workload(tree, case.pod_sets, solver="greedy", implied_tas=case.implied, gates=MULTI_LAYER)
    assert placement.solver == "greedy"
    if isinstance(case.want, str):
        assert not placement.fits
        assert placement.reason == case.want
        assert placement.pod_sets == ()
        return
    assert placement.fits, placement.reason
    assert per_node(placement) == case.want
    if case.second is not None:
        assert per_node(placement, 1) == case.second
    for placed, spec in zip(placement.pod_sets, case.pod_sets, strict=True):
        assert sum(d.count for d in placed.domains) == spec.count
        want_levels = (HOST,) if case.levels[-1] == HOST else case.levels
        assert placed.levels == want_levels
        assert [d.values for d in placed.domains] == sorted(d.values for d in placed.domains)


def test_tree_is_not_modified_by_place_workload() -> None:
    tree = tree_of(KEP_RACK)
    before = tree.free.copy()
    place_workload(tree, [ps(7, required=RACK)], solver="greedy")
    place_workload(tree, [ps(7, preferred=RACK)], solver="cpsat")
    assert (tree.free == before).all()
