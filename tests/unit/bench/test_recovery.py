"""The recovery bench's pure parts (scripts/bench/recovery.py): which pods run which rank, when
the job counts as recovered, ranks doubled / restarted / moved, and the ratios."""

from __future__ import annotations

import math

import pytest

from tests.unit.bench.scripts import load_bench

bench = load_bench("recovery")


def pod(uid: str, rank: int, node: str | None, phase: str = "Running", deleting: bool = False) -> dict:
    meta = {"uid": uid, "annotations": {bench.INDEX: str(rank)}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def test_only_bound_running_pods_that_are_not_being_deleted_run_a_rank() -> None:
    ranks = bench.running_ranks([
        pod("a", 0, "n0"), pod("b", 1, "n1"),
        pod("c", 1, "n2"),  # a second copy of rank 1
        pod("d", 2, "n3", deleting=True), pod("e", 3, None, phase="Pending"), pod("f", 4, "n4", phase="Failed"),
    ])
    assert ranks == {0: [("a", "n0")], 1: [("b", "n1"), ("c", "n2")]}


def track() -> object:
    before = {0: ("a", "n0"), 1: ("b", "n1"), 2: ("c", "n2")}
    domains = {"n0": "d1", "n1": "d1", "n2": "d1", "n3": "d1", "n9": "d2"}
    t = bench.RecoveryTrack(3, "n1", before, domains)
    t.injected = 100.0
    return t


def test_a_hot_swap_restarts_one_rank_inside_the_domain() -> None:
    t = track()
    assert not t.observe(101.0, {0: [("a", "n0")], 1: [("b", "n1")], 2: [("c", "n2")]})  # nothing yet
    assert t.first_change is None
    assert not t.observe(104.0, {0: [("a", "n0")], 2: [("c", "n2")]})  # rank 1 gone
    assert t.first_change == 104.0
    assert t.observe(107.5, {0: [("a", "n0")], 1: [("x", "n3")], 2: [("c", "n2")]})
    r = bench.result_of(t, "toposched", "health", "1 1 1")
    assert (r.recovered_s, r.reacted_s) == (7.5, 4.0)
    assert (r.ranks_doubled, r.ranks_restarted, r.ranks_out_of_domain) == (0, 1, 0)


def test_running_on_the_failed_node_is_not_recovered_and_two_copies_are_doubled() -> None:
    t = track()
    # the old pod still runs on the failed node while a replacement runs too: doubled, not recovered
    assert not t.observe(103.0, {0: [("a", "n0")], 1: [("b", "n1"), ("x", "n3")], 2: [("c", "n2")]})
    assert t.doubled == {1}
    assert not t.observe(104.0, {0: [("a", "n0")], 1: [("b", "n1")], 2: [("c", "n2")]})
    assert t.recovered is None


def test_an_eviction_to_another_domain_restarts_and_moves_every_rank() -> None:
    t = track()
    t.domain_of = {**t.domain_of, "n7": "d2", "n8": "d2"}
    assert t.observe(160.0, {0: [("x", "n7")], 1: [("y", "n8")], 2: [("z", "n9")]})
    r = bench.result_of(t, "kueue", "deleted", "")
    assert (r.ranks_restarted, r.ranks_out_of_domain) == (3, 3)


def test_no_reaction_is_nan_not_zero() -> None:
    r = bench.result_of(track(), "kueue", "health", "")
    assert math.isnan(r.recovered_s) and math.isnan(r.reacted_s)
    assert "NOT recovered within the timeout; no reaction at all" in bench.describe(r)


def test_ratios_pair_the_engines_of_one_round_and_kind() -> None:
    def res(engine: str, kind: str, s: float) -> object:
        return bench.RecoveryResult(engine, kind, s, s, 0, 1, 0, "")

    results = [res("kueue", "health", math.nan), res("kueue", "deleted", 40.0),
               res("toposched", "health", 8.0), res("toposched", "deleted", 10.0)]
    lines = bench.ratio_lines(results, rounds=1)
    assert lines[0] == "round 1 health: toposched 8.0s, Kueue not recovered: Kueue did not recover within the " \
                       "timeout and did not react"
    assert lines[1].endswith("toposched/Kueue 0.25x")


def test_arguments_are_checked() -> None:
    args = bench.parse_args([])
    assert (args.engines, args.kinds, args.pods) == (["kueue", "toposched"], ["health", "notready", "deleted"], 16)
    for bad in (["--kinds", "meteor"], ["--pods", "21"], ["--engines", "volcano"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)
