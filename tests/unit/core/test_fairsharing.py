"""Fair sharing (core/kueue/fairsharing.py): shares, admission order and preemption, as data tables.

The preemption table restates cases of Kueue v0.17's ``pkg/scheduler/preemption/
preemption_fair_test.go`` (same queues, usage and expected victims), run through the whole
cycle with ``fairSharing`` enabled.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from scheduler.core.config import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    FairSharing,
    FeatureGates,
    KueueConfig,
)
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit, Preempt
from scheduler.core.kueue.fairsharing import DRS, Shares, compare_drs, node_weights, status_shares
from scheduler.core.kueue.quota import ClusterQueueSpec, CohortSpec, FlavorQuotas, QuotaState, ResourceGroup, cq_node

from ._admission import admitted, cq, lqs, pending, rq, snapshot, summary, wl

BOTH = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


def fair(*strategies: str, gates: dict[str, bool] | None = None) -> KueueConfig:
    return KueueConfig(feature_gates=FeatureGates(gates or {}),
                       fair_sharing=FairSharing(True, tuple(strategies) or BOTH))


def weighted(spec: ClusterQueueSpec, weight: float) -> ClusterQueueSpec:
    return replace(spec, fair_weight=weight)


# ---------------------------------------------------------------------- DRS


def test_drs_is_borrowed_over_lendable_per_mille_divided_by_weight() -> None:
    cqs = [cq("a", {"f": {"cpu": rq(3)}}, cohort="all"), weighted(cq("b", {"f": {"cpu": rq(3)}}, cohort="all"), 2),
           cq("c", {"f": {"cpu": rq(3)}}, cohort="all")]
    q = QuotaState(cqs)
    q.add_usage("a", {("f", "cpu"): 5000})
    q.add_usage("b", {("f", "cpu"): 4000})
    weights = node_weights({c.name: c for c in cqs}, {})
    shares = Shares(q, weights)
    a = shares.cluster_queue("a")
    # a borrows 2 of the 9 cpu the cohort could lend it: 2000 * 1000 / 9000
    assert a.ratio == pytest.approx(2000 * 1000 / 9000)
    assert a.dominant_resource == "cpu" and a.borrowing
    assert a.status_value() == 223  # ceil(222.2)
    assert shares.cluster_queue("b").weighted_share() == pytest.approx(1000 * 1000 / 9000 / 2)
    assert shares.cluster_queue("c") == DRS()  # within nominal: share 0
    cq_status, co_status = status_shares(q, weights, ["a", "b", "c"], ["all"])
    assert cq_status == {"a": 223, "b": 56, "c": 0}
    assert co_status == {"all": 0}  # a root cohort has no share


def test_dominant_resource_is_the_largest_ratio_alphabetical_on_ties() -> None:
    quotas = {"f": {"cpu": rq(2), "memory": rq(2)}}
    q = QuotaState([cq("a", quotas, cohort="co"), cq("b", quotas, cohort="co")])
    q.add_usage("a", {("f", "cpu"): 3000, ("f", "memory"): 3})
    d = Shares(q, {}).cluster_queue("a")
    assert d.dominant_resource == "cpu"  # 1000/4000 vs 1/4: equal ratios, "cpu" sorts first
    assert d.ratio == 250


def test_zero_weight() -> None:
    borrowing_zero = DRS(0.0, 10.0, "cpu", frozenset({("f", "cpu")}))
    assert borrowing_zero.weighted_share() == math.inf
    assert borrowing_zero.status_value() == 2**63 - 1
    assert DRS(0.0).weighted_share() == 0 and DRS(0.0).status_value() == 0
    assert compare_drs(borrowing_zero, DRS(1.0, 999.0, "cpu")) == 1
    assert compare_drs(borrowing_zero, replace(borrowing_zero, ratio=20.0)) == -1


def test_cohort_share_in_a_tree() -> None:
    cqs = [cq("a", {"f": {"cpu": rq(2)}}, cohort="left"), cq("b", {"f": {"cpu": rq(2)}}, cohort="right")]
    left = CohortSpec("left", "root", fair_weight=0.5)
    q = QuotaState(cqs, [left, CohortSpec("right", "root"), CohortSpec("root")])
    q.add_usage("a", {("f", "cpu"): 3000})
    weights = node_weights({c.name: c for c in cqs}, {"left": left})
    _, cohorts = status_shares(q, weights, [], ["left", "right", "root"])
    # left borrows 1 of root's lendable 4 (its own 2 + right's 2): 250 / 0.5
    assert cohorts == {"left": 500, "right": 0, "root": 0}


# ---------------------------------------------------------------------- admission order


def _two_teams(a_used: int, b_used: int, **kw: object):  # type: ignore[no-untyped-def]
    cqs = {"a": cq("a", {"f": {"cpu": rq(4)}}, cohort="co"), "b": cq("b", {"f": {"cpu": rq(4)}}, cohort="co")}
    cqs.update(kw.pop("cqs", {}))  # type: ignore[arg-type]
    adm = []
    if a_used:
        adm.append(admitted(wl("a-old", a_used, queue="la"), "a"))
    if b_used:
        adm.append(admitted(wl("b-old", b_used, queue="lb"), "b"))
    return snapshot(cluster_queues=cqs, local_queues=lqs(("la", "a"), ("lb", "b")), admitted=adm, **kw)


def test_lower_share_is_admitted_first() -> None:
    # One cpu left in the cohort (12 in all); both heads would borrow it. With its head a would
    # borrow 2, b only 1: b goes first under fair sharing although a's head is older and of
    # higher priority (the classical order).
    pend = [pending(wl("a-new", 1, queue="la", prio=5, created=1)), pending(wl("b-new", 1, queue="lb", created=2))]
    idle = cq("c", {"f": {"cpu": rq(4)}}, cohort="co")
    snap = _two_teams(5, 4, pending=pend, cqs={"c": idle})
    snap = replace(snap, admitted=(*snap.admitted, admitted(wl("c-old", 2, queue="lc"), "c")))
    assert summary(run_cycle(snap)) == [("admit", "a-new", "a"), ("pending", "b-new", "Pending")]
    fs = summary(run_cycle(replace(snap, config=fair())))
    assert fs == [("admit", "b-new", "b"), ("pending", "a-new", "Pending")]


def test_non_borrowing_head_first_then_priority_then_time() -> None:
    pend = [pending(wl("a-new", 1, queue="la", created=1)), pending(wl("b-new", 1, queue="lb", prio=3, created=2))]
    snap = replace(_two_teams(3, 0, pending=pend), config=fair())
    # neither head borrows: equal shares (0), so priority decides
    assert [d.workload for d in run_cycle(snap) if isinstance(d, Admit)] == ["team/b-new", "team/a-new"]
    pend = [pending(wl("a-new", 1, queue="la", created=1)), pending(wl("b-new", 1, queue="lb", created=2))]
    snap = replace(_two_teams(3, 0, pending=pend), config=fair())
    assert [d.workload for d in run_cycle(snap) if isinstance(d, Admit)] == ["team/a-new", "team/b-new"]


def test_weights_two_to_one() -> None:
    # a weighs 2: with the same borrowing its share is half of b's, so a's head goes first.
    cqs = {"a": weighted(cq("a", {"f": {"cpu": rq(4)}}, cohort="co"), 2),
           "b": cq("b", {"f": {"cpu": rq(4)}}, cohort="co"), "idle": cq("idle", {"f": {"cpu": rq(4)}}, cohort="co")}
    pend = [pending(wl("b-new", 2, queue="lb", created=1)), pending(wl("a-new", 2, queue="la", created=2))]
    adm = [admitted(wl("a-old", 5, queue="la"), "a"), admitted(wl("b-old", 5, queue="lb"), "b")]
    snap = snapshot(cluster_queues=cqs, local_queues=lqs(("la", "a"), ("lb", "b")), admitted=adm, pending=pend,
                    config=fair())
    assert summary(run_cycle(snap))[0] == ("admit", "a-new", "a")
    snap = replace(snap, cluster_queues={**cqs, "a": weighted(cqs["a"], 1)})
    assert summary(run_cycle(snap))[0] == ("admit", "b-new", "b")  # equal weights: FIFO


def test_fair_sharing_off_keeps_classical_order() -> None:
    pend = [pending(wl("a-new", 2, queue="la", prio=5, created=1)), pending(wl("b-new", 2, queue="lb", created=2))]
    snap = _two_teams(5, 1, pending=pend)
    assert summary(run_cycle(snap)) == summary(run_cycle(replace(snap, config=KueueConfig())))


# ---------------------------------------------------------------------- preemption (Kueue's table)

_BASE = dict(within="LowerPriority", reclaim="Any", borrow_within="LowerPriority", threshold=-3)


def _base_cqs() -> dict[str, ClusterQueueSpec]:
    out = {n: cq(n, {"f": {"cpu": rq(3)}}, cohort="all", **_BASE) for n in "abc"}  # type: ignore[arg-type]
    out["preemptible"] = cq("preemptible", {"f": {"cpu": rq(0)}}, cohort="all")
    return out


def _units(cq_name: str, n: int, prio: int = 0, prefix: str | None = None) -> list[tuple[str, str, int, int]]:
    return [(f"{prefix or cq_name}{i}", cq_name, 1000, prio) for i in range(1, n + 1)]


FAIR_CASES = [
    ("reclaim nominal from user using the most", BOTH, _units("a", 3) + _units("b", 5) + _units("c", 1),
     ("c", 1000), {("b1", "InCohortReclamation")}),
    ("reclaim borrowable quota from user using the most", BOTH, _units("a", 3) + _units("b", 5) + _units("c", 1),
     ("a", 1000), {("b1", "InCohortFairSharing")}),
    ("preempt one from each CQ borrowing", BOTH,
     [("a1", "a", 500, 0), ("a2", "a", 500, 0), ("a3", "a", 3000, 0),
      ("b1", "b", 500, 0), ("b2", "b", 500, 0), ("b3", "b", 3000, 0)],
     ("c", 2000), {("a1", "InCohortReclamation"), ("b1", "InCohortReclamation")}),
    ("can't preempt when everyone under nominal", BOTH, _units("a", 3) + _units("b", 3) + _units("c", 3),
     ("c", 1000), set()),
    ("can't preempt when it would switch the imbalance", BOTH, _units("a", 3) + _units("b", 5), ("a", 2000), set()),
    ("can preempt lower priority workloads from same CQ", BOTH,
     [("a1_low", "a", 1000, -1), ("a2_low", "a", 1000, -1), ("a3", "a", 1000, 0), ("a4", "a", 1000, 0)]
     + _units("b", 5), ("a", 2000), {("a1_low", "InClusterQueue"), ("a2_low", "InClusterQueue")}),
    ("can preempt a combination of same CQ and highest user", BOTH,
     [("a_low", "a", 1000, -1), ("a2", "a", 1000, 0), ("a3", "a", 1000, 0)] + _units("b", 6),
     ("a", 2000), {("a_low", "InClusterQueue"), ("b1", "InCohortFairSharing")}),
    ("preempt huge workload if there is no other option", BOTH, [("b1", "b", 9000, 0)], ("a", 2000),
     {("b1", "InCohortReclamation")}),
    ("can't preempt huge workload if the incoming is also huge", BOTH,
     [("a1", "a", 2000, 0), ("b1", "b", 7000, 0)], ("a", 5000), set()),
    ("can't preempt 2 smaller workloads if the incoming is huge", BOTH,
     [("b1", "b", 2000, 0), ("b2", "b", 2000, 0), ("b3", "b", 3000, 0)], ("a", 6000), set()),
    ("preempt from target and others even if over nominal", BOTH,
     [("a1_low", "a", 2000, -1), ("a2_low", "a", 1000, -1), ("b1", "b", 3000, 0), ("b2", "b", 3000, 0)],
     ("a", 4000), {("a1_low", "InClusterQueue"), ("b1", "InCohortFairSharing")}),
    ("prefer to preempt workloads that don't make the target CQ have the biggest share", BOTH,
     [("b1", "b", 2000, 0), ("b2", "b", 1000, 0), ("b3", "b", 2000, 0), ("c1", "c", 1000, 0)],
     ("a", 3500), {("b2", "InCohortFairSharing")}),
    ("preempt from different cluster queues if the end result has a smaller max share", BOTH,
     [("b1", "b", 2000, 0), ("b2", "b", 2500, 0), ("c1", "c", 2000, 0), ("c2", "c", 2500, 0)],
     ("a", 3500), {("b1", "InCohortFairSharing"), ("c1", "InCohortFairSharing")}),
    ("scenario above does not flap", BOTH,
     [("a1", "a", 3500, 0), ("b2", "b", 2500, 0), ("c2", "c", 2500, 0)], ("b", 2000), set()),
    ("cannot preempt if it would make the candidate CQ go under nominal", BOTH,
     [("b1", "b", 3000, 0), ("b2", "b", 3000, 0), ("c1", "c", 3000, 0)], ("a", 4000), set()),
    ("workloads under priority threshold not capriciously preempted", BOTH,
     _units("a", 3) + _units("b", 3) + _units("preemptible", 3, -3), ("a", 2000), set()),
    ("LessThanInitialShare: preempt lower priority first, even if big", (LESS_THAN_INITIAL_SHARE,),
     [("a1", "a", 3000, 0), ("b_low", "b", 5000, 0), ("b_high", "b", 1000, 1)], ("a", 1000),
     {("b_low", "InCohortFairSharing")}),
    ("LessThanOrEqualToFinalShare: preempt what doesn't transfer the imbalance", (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
     [("a1", "a", 3000, 0), ("b_low", "b", 5000, 0), ("b_high", "b", 1000, 1)], ("a", 1000),
     {("b_high", "InCohortFairSharing")}),
]


@pytest.mark.parametrize("case,strategies,adm,incoming,expected", FAIR_CASES, ids=[c[0] for c in FAIR_CASES])
def test_fair_preemption_matches_kueue(case: str, strategies: tuple[str, ...], adm: list[tuple[str, str, int, int]],
                                       incoming: tuple[str, int], expected: set[tuple[str, str]]) -> None:
    cqs = _base_cqs()
    rows = [admitted(wl(n, 0, prio=p, queue="l" + q, extra={"cpu": m}), q, at=1.0) for n, q, m, p in adm]
    target, milli = incoming
    pre = pending(wl(f"{target}_incoming", 0, queue="l" + target, created=50, extra={"cpu": milli}))
    snap = snapshot(cluster_queues=cqs, local_queues=lqs(*((f"l{n}", n) for n in cqs)), admitted=rows,
                    pending=[pre], config=fair(*strategies))
    decisions = run_cycle(snap)
    got = {(d.workload.split("/", 1)[1], d.reason) for d in decisions if isinstance(d, Preempt)}
    assert got == expected


def _weighted_cqs(weights: dict[str, float]) -> dict[str, ClusterQueueSpec]:
    return {n: weighted(cq(n, {"f": {"cpu": rq(3)}}, cohort="all", within="LowerPriority", reclaim="Any"),
                        weights.get(n, 1.0)) for n in "abc"}


@pytest.mark.parametrize("weights,adm,incoming,expected", [
    ({"a": 2}, _units("a", 3) + _units("b", 6), 2000, {("b1", "InCohortFairSharing"), ("b2", "InCohortFairSharing")}),
    ({"b": 0}, _units("a", 3) + _units("b", 6), 3000,
     {("b1", "InCohortFairSharing"), ("b2", "InCohortFairSharing"), ("b3", "InCohortFairSharing")}),
], ids=["CQ with higher weight can preempt more", "can preempt anything borrowing from CQ with 0 weight"])
def test_fair_preemption_weights(weights: dict[str, float], adm: list[tuple[str, str, int, int]], incoming: int,
                                 expected: set[tuple[str, str]]) -> None:
    cqs = _weighted_cqs(weights)
    rows = [admitted(wl(n, 0, queue="l" + q, extra={"cpu": m}), q, at=1.0) for n, q, m, _ in adm]
    pre = pending(wl("a_incoming", 0, queue="la", created=50, extra={"cpu": incoming}))
    snap = snapshot(cluster_queues=cqs, local_queues=lqs(*((f"l{n}", n) for n in cqs)), admitted=rows,
                    pending=[pre], config=fair())
    got = {(d.workload.split("/", 1)[1], d.reason) for d in run_cycle(snap) if isinstance(d, Preempt)}
    assert got == expected


def test_fair_preemption_message() -> None:
    cqs = _base_cqs()
    rows = [admitted(wl(n, 0, queue="l" + q, extra={"cpu": m}), q, at=1.0) for n, q, m, _ in
            _units("a", 3) + _units("b", 5) + _units("c", 1)]
    pre = replace(wl("a_incoming", 0, queue="la", created=50, extra={"cpu": 1000}),
                  labels={"kueue.x-k8s.io/job-uid": "job-1"})
    snap = snapshot(cluster_queues=cqs, local_queues=lqs(*((f"l{n}", n) for n in cqs)), admitted=rows,
                    pending=[pending(pre)], config=fair())
    [p] = [d for d in run_cycle(snap) if isinstance(d, Preempt)]
    assert p.message == ("Preempted to accommodate a workload (UID: uid-a_incoming, JobUID: job-1) due to Fair Sharing "
                         "within the cohort; preemptor path: /all/a; preemptee path: /all/b")


def test_preempt_within_nominal_gate_off_uses_the_strategy() -> None:
    # "reclaim nominal from user using the most" with the v0.17 gate off: the strategy decides
    # (b's share stays above c's after the preemption), reason InCohortFairSharing.
    cqs = _base_cqs()
    rows = [admitted(wl(n, 0, queue="l" + q, extra={"cpu": m}), q, at=1.0) for n, q, m, _ in
            _units("a", 3) + _units("b", 5) + _units("c", 1)]
    pre = pending(wl("c_incoming", 0, queue="lc", created=50, extra={"cpu": 1000}))
    snap = snapshot(cluster_queues=cqs, local_queues=lqs(*((f"l{n}", n) for n in cqs)), admitted=rows,
                    pending=[pre], config=fair(gates={"FairSharingPreemptWithinNominal": False}))
    got = {(d.workload.split("/", 1)[1], d.reason) for d in run_cycle(snap) if isinstance(d, Preempt)}
    assert got == {("b1", "InCohortFairSharing")}


def test_node_weights_cover_cohorts() -> None:
    co = CohortSpec("co", fair_weight=3.0, resource_groups=(ResourceGroup(("cpu",), (FlavorQuotas("f", {}),)),))
    w = node_weights({"a": weighted(cq("a"), 0.5)}, {"co": co})
    assert w[cq_node("a")] == 0.5 and w["cohort:co"] == 3.0


# ---------------------------------------------------------------------- preemption in cohort trees (Kueue's table)


def _co(name: str, parent: str | None = None, cpu: int = 0, weight: float = 1.0) -> CohortSpec:
    groups = (ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": rq(cpu * 1000)}),)),) if cpu else ()
    return CohortSpec(name, parent, groups, weight)


def _pre_cq(name: str, cohort: str, cpu: int, weight: float = 1.0, preempts: bool = False) -> ClusterQueueSpec:
    policy = dict(within="LowerPriority", reclaim="Any") if preempts else {}
    return weighted(cq(name, {"f": {"cpu": rq(cpu)}}, cohort=cohort, **policy), weight)  # type: ignore[arg-type]


_HIER = [_pre_cq("a", "LEFT", 1, 2.0, True), _pre_cq("b", "LEFT", 1), _pre_cq("c", "ROOT", 1),
         _pre_cq("d", "RIGHT", 1), _pre_cq("e", "RIGHT", 1, 0.99)]
_DEEP_COHORTS = [_co("ROOT"), _co("A", "ROOT", weight=1.01), _co("AA", "A"), _co("AAA", "AA"),
                 _co("B", "ROOT", weight=0.99), _co("BB", "B"), _co("BBB", "BB"), _co("C", "ROOT"), _co("CC", "C"),
                 _co("CCC", "CC"), _co("CCCC", "CCC", cpu=1)]

TREE_CASES = [
    ("hierarchical preemption", _HIER,
     [_co("ROOT", cpu=5), _co("LEFT", "ROOT", 5, 2.0), _co("RIGHT", "ROOT", 5)],
     [(f"{q}{i}", q, 1000, i) for q in "bcde" for i in range(1, 6)], 5000,
     {(n, "InCohortFairSharing") for n in ("b1", "b2", "c1", "c2", "e1")}),
    ("borrowing cq in non-borrowing cohort is protected",
     [_pre_cq("a", "ROOT", 5, 10.0, True), _pre_cq("b", "RIGHT", 0, 0.1)],
     [_co("ROOT"), _co("RIGHT", "ROOT", 1, 0.1)],
     [("a1", "a", 1000, -1), ("a2", "a", 1000, -1), ("a3", "a", 1000, -1), ("b1", "b", 1000, -1)], 5000,
     {("a1", "InClusterQueue"), ("a2", "InClusterQueue"), ("a3", "InClusterQueue")}),
    ("forced to preempt within clusterqueue because borrowing workload too important",
     [_pre_cq("a", "ROOT", 5, 10.0, True), _pre_cq("b", "RIGHT", 0, 0.1)],
     [_co("ROOT"), _co("RIGHT", "ROOT", 3, 0.1)],
     [("a1", "a", 1000, -1), ("a2", "a", 1000, -1), ("a3", "a", 1000, -1), ("b1", "b", 4000, 100)], 4000,
     {("a1", "InClusterQueue"), ("a2", "InClusterQueue"), ("a3", "InClusterQueue")}),
    ("deep preemption", [_pre_cq("a", "AAA", 0, preempts=True), _pre_cq("b", "BBB", 0)], _DEEP_COHORTS,
     [("b1", "b", 1000, 0)], 1000, {("b1", "InCohortFairSharing")}),
    ("cq with zero weight can reclaim nominal quota", [_pre_cq("a", "ROOT", 1, 0.0, True), _pre_cq("b", "ROOT", 0)],
     [], [("b1", "b", 1000, 0)], 1000, {("b1", "InCohortReclamation")}),
    ("cohort with zero weight can reclaim nominal quota",
     [_pre_cq("a", "A", 0, 0.0, True), _pre_cq("b", "ROOT", 0)], [_co("A", "ROOT", 1, 0.0)],
     [("b1", "b", 1000, 0)], 1000, {("b1", "InCohortFairSharing")}),
    ("can't preempt nominal from Cohort with 0 weight",
     [_pre_cq("left-cq", "root", 0, preempts=True), _pre_cq("right-cq", "right-cohort", 0, 0.0)],
     [_co("right-cohort", "root", 1, 0.0)], [("right-1", "right-cq", 1000, 0)], 1000, set()),
]


@pytest.mark.parametrize("case,cqs,cohorts,adm,incoming,expected", TREE_CASES, ids=[c[0] for c in TREE_CASES])
def test_fair_preemption_in_cohort_trees(case: str, cqs: list[ClusterQueueSpec], cohorts: list[CohortSpec],
                                         adm: list[tuple[str, str, int, int]], incoming: int,
                                         expected: set[tuple[str, str]]) -> None:
    by_name = {c.name: c for c in cqs}
    rows = [admitted(wl(n, 0, prio=p, queue="l" + q, extra={"cpu": m}), q, at=1.0) for n, q, m, p in adm]
    first = cqs[0].name
    pre = pending(wl("incoming", 0, queue="l" + first, created=50, extra={"cpu": incoming}))
    snap = snapshot(cluster_queues=by_name, cohorts={c.name: c for c in cohorts},
                    local_queues=lqs(*((f"l{n}", n) for n in by_name)), admitted=rows, pending=[pre], config=fair())
    got = {(d.workload.split("/", 1)[1], d.reason) for d in run_cycle(snap) if isinstance(d, Preempt)}
    assert got == expected
