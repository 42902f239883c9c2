"""A requeued workload prefers the domain it ran in before, when that domain has room."""

from __future__ import annotations

import json

from scheduler.core.beyond.preferred_domains import ANN_PREVIOUS_DOMAINS, previous_domains
from scheduler.core.nodes import HOSTNAME_LABEL, NodeCondition, NodeInfo
from scheduler.core.placement.planner import place_workload
from scheduler.core.topology import DEFAULT_HYPERPOD_LEVELS, TopologyTree
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, WorkloadSpec

L1, L2, L3 = DEFAULT_HYPERPOD_LEVELS[:3]


def tree() -> TopologyTree:
    nodes = []
    # r1 has 2 nodes (the tight fit for 2 pods), r2 has 4: greedy BestFit picks r1.
    for rack, count in (("r1", 2), ("r2", 4)):
        for i in range(count):
            name = f"{rack}-n{i}"
            nodes.append(NodeInfo(name, {L1: "a", L2: "b", L3: rack, HOSTNAME_LABEL: name},
                                  {"nvidia.com/gpu": 8, "pods": 110}, conditions=(NodeCondition("Ready", "True"),)))
    return TopologyTree.build("default", DEFAULT_HYPERPOD_LEVELS, nodes)


def job(pods: int) -> list[PodSetSpec]:
    return [PodSetSpec("main", pods, {"nvidia.com/gpu": 8}, TopologyRequest(required=L3))]


def racks(placement_domains: tuple[object, ...]) -> set[str]:
    return {d.values[0].split("-")[0] for d in placement_domains}  # type: ignore[attr-defined]


def test_without_a_wish_greedy_takes_the_tight_fit() -> None:
    got = place_workload(tree(), job(2), solver="greedy")
    assert got.fits and racks(got.pod_sets[0].domains) == {"r1"}


def test_previous_domain_with_room_is_preferred() -> None:
    got = place_workload(tree(), job(2), solver="greedy", preferred_domains={"main": {L3: "r2"}})
    assert got.fits and racks(got.pod_sets[0].domains) == {"r2"}


def test_previous_domain_without_room_falls_back() -> None:
    got = place_workload(tree(), job(3), solver="greedy", preferred_domains={"main": {L3: "r1"}})
    assert got.fits and racks(got.pod_sets[0].domains) == {"r2"}


def test_annotation_round_trip_and_garbage() -> None:
    spec = WorkloadSpec("ns", "w", tuple(job(1)), annotations={ANN_PREVIOUS_DOMAINS: json.dumps({"main": {L3: "r2"}})})
    assert previous_domains(spec) == {"main": {L3: "r2"}}
    bad = WorkloadSpec("ns", "w", tuple(job(1)), annotations={ANN_PREVIOUS_DOMAINS: "{not json"})
    assert previous_domains(bad) is None
