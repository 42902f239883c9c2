"""Partial admission (Kueue v0.17 ``PodSetReducer`` in ``getInitialAssignments``): a pod set
with ``minCount`` is admitted with the most pods that fit, by quota and by topology."""

from __future__ import annotations

import dataclasses

from scheduler.core.config import FeatureGates, KueueConfig
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit, Pending
from scheduler.core.kueue.nominate import partial_search
from scheduler.core.kueue.quota import FlavorSpec
from scheduler.core.workload import PodSetSpec

from ._admission import cq, lqs, pending, rq, snapshot, wl
from ._helpers import RACK, node, tree_of


def with_min(spec, minimum):  # type: ignore[no-untyped-def]
    (ps,) = spec.pod_sets
    return dataclasses.replace(spec, pod_sets=(dataclasses.replace(ps, min_count=minimum),))


def quota_snapshot(spec, gate: bool = True):  # type: ignore[no-untyped-def]
    config = KueueConfig(feature_gates=FeatureGates({"PartialAdmission": gate}))
    return snapshot(cluster_queues={"a": cq("a", {"f": {"cpu": rq(5)}})}, local_queues=lqs(("lq", "a")),
                    pending=[pending(spec)], config=config)


def test_the_most_pods_that_fit_the_quota_are_admitted() -> None:
    (d,) = run_cycle(quota_snapshot(with_min(wl("x", 1, count=8), 2)))
    assert isinstance(d, Admit)
    assert d.pod_sets[0].count == 5 and d.pod_sets[0].resource_usage == {"cpu": 5000}


def test_below_min_count_it_stays_pending_with_the_full_count_message() -> None:
    (d,) = run_cycle(quota_snapshot(with_min(wl("x", 1, count=8), 6)))
    assert isinstance(d, Pending)
    assert d.message == ("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor f, "
                         "previously considered podsets requests (0) + current podset request (8) > "
                         "maximum capacity (5)")


def test_without_min_count_or_with_the_gate_off_nothing_is_reduced() -> None:
    assert isinstance(run_cycle(quota_snapshot(wl("x", 1, count=8)))[0], Pending)
    assert isinstance(run_cycle(quota_snapshot(with_min(wl("x", 1, count=8), 2), gate=False))[0], Pending)


def test_the_search_is_kueues_binary_search_over_the_shared_reduction() -> None:
    sets = [PodSetSpec("a", 10, {}, min_count=2), PodSetSpec("b", 4, {}, min_count=4), PodSetSpec("c", 6, {},
                                                                                                min_count=0)]
    tried: list[list[int]] = []

    def fits(counts):  # type: ignore[no-untyped-def]
        tried.append(list(counts))
        return counts if sum(counts) <= 12 else None

    # smallest share i of 14 with 8i//14 + 6i//14 >= 8 is 9: a gives up 5, c gives up 3
    assert partial_search(sets, fits) == [5, 4, 3]
    assert tried[0] == [10 - 8 * 7 // 14, 4, 6 - 6 * 7 // 14]  # first probe: the middle of [0, 14]
    assert partial_search([PodSetSpec("a", 3, {})], fits) is None  # nothing to give up


def test_topology_aware_the_reduced_count_is_placed_in_one_rack() -> None:
    nodes = [node(f"{r}-n{i}", rack=r, cpu=4) for r in ("r1", "r2") for i in range(2)]
    tree = tree_of(nodes)
    spec = with_min(wl("x", 4, count=4, required=RACK), 1)  # a rack holds 2 such pods
    snap = snapshot(cluster_queues={"a": cq("a", {"tas": {"cpu": rq(100)}})}, local_queues=lqs(("lq", "a")),
                    flavors={"tas": FlavorSpec("tas", {"pool": "gpu"}, topology_name="default")},
                    trees={"tas": tree}, pending=[pending(spec)])
    (d,) = run_cycle(snap)
    assert isinstance(d, Admit) and d.pod_sets[0].count == 2
    topo = d.pod_sets[0].topology
    assert topo is not None and sum(x.count for x in topo.domains) == 2
    assert len({x.values[0].split("-")[0] for x in topo.domains}) == 1
