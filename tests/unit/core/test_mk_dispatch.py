"""The MultiKueue dispatchers on plain data (issue 43 item 2): Kueue v0.17.0's Incremental and
AllAtOnce restated, and toposched's topology-aware choice."""

from __future__ import annotations

import pytest

from scheduler.core.beyond.dispatch import DispatchInput, WorkerAnswer, choose, dispatch_pass
from scheduler.core.kueue.mk_dispatch import (
    ROUND_TIMEOUT_S,
    ManagerWorkload,
    all_at_once,
    incremental_round,
    needs_nomination,
    next_incremental_workers,
)

LETTERS = [chr(ord("A") + i) for i in range(15)]


# Kueue v0.17.0 pkg/controller/workloaddispatcher/incrementaldispatcher_test.go,
# TestGetNextNominatedWorkers-style table of nominateWorkers: (remotes, nominated, round
# started seconds ago or None, want nominated, want changed).
@pytest.mark.parametrize(("case", "remotes", "nominated", "ago", "want", "changed"), [
    ("one remote", ["A"], [], None, ["A"], True),
    ("two remotes", ["B", "A"], [], None, ["A", "B"], True),
    ("three remotes", ["C", "A", "B"], [], None, ["A", "B", "C"], True),
    ("fifteen remotes", LETTERS, [], None, ["A", "B", "C"], True),
    ("all already nominated (3)", ["A", "B", "C"], ["A", "B", "C"], None, ["A", "B", "C"], False),
    ("all already nominated (1)", ["A"], ["A"], None, ["A"], False),
    ("round expired, next set nominated", LETTERS[:8], ["A", "B", "C"], ROUND_TIMEOUT_S + 1,
     ["A", "B", "C", "D", "E", "F"], True),
    ("round in progress, keep current", LETTERS[:8], ["A", "B", "C"], 60.0, ["A", "B", "C"], False),
    ("round expired, nominate all", LETTERS[:8], ["A", "B", "C", "D", "E"], ROUND_TIMEOUT_S + 1,
     LETTERS[:8], True),
    ("no remotes", [], [], None, [], False),
])
def test_incremental_rounds_as_kueue(case: str, remotes: list[str], nominated: list[str], ago: float | None,
                                     want: list[str], changed: bool) -> None:
    now = 10_000.0
    rnd = incremental_round(nominated, remotes, None if ago is None else now - ago, now)
    assert (list(rnd.nominated), rnd.changed) == (want, changed), case
    if changed:
        assert rnd.round_start == now


def test_incremental_round_boundary_is_inclusive_as_kueue() -> None:
    # Kueue: `now.Sub(roundStart) <= incrementalDispatcherRoundTimeout` keeps the round
    assert not incremental_round(["A"], ["A", "B"], 0.0, ROUND_TIMEOUT_S).changed
    assert incremental_round(["A"], ["A", "B"], 0.0, ROUND_TIMEOUT_S + 0.001).nominated == ("A", "B")


def test_no_more_workers_is_empty() -> None:
    assert next_incremental_workers(["A"], ["A"]) == ()


def test_all_at_once_nominates_every_worker() -> None:
    assert all_at_once(["w2", "w1", "w3"]) == ("w2", "w1", "w3")


# Kueue v0.17.0 incrementaldispatcher_test.go TestReconcile's guards.
@pytest.mark.parametrize(("case", "changes", "want"), [
    ("workload has quota reserved", {}, True),
    ("workload deleted", {"deleted": True}, False),
    ("admission check nil", {"mk_check_state": None}, False),
    ("admission check is rejected", {"mk_check_state": "Rejected"}, False),
    ("admission check is ready", {"mk_check_state": "Ready"}, False),
    ("already assigned to cluster", {"cluster_name": "w1"}, False),
    ("workload is already finished", {"finished": True}, False),
    ("no quota reserved", {"quota_reserved": False}, False),
])
def test_needs_nomination_guards_as_kueue(case: str, changes: dict[str, object], want: bool) -> None:
    base = {"key": "ns/wl", "deleted": False, "finished": False, "quota_reserved": True,
            "mk_check_state": "Pending", "cluster_name": None, "nominated": ()}
    assert needs_nomination(ManagerWorkload(**{**base, **changes})) is want, case  # type: ignore[arg-type]


def _ans(name: str, fits: bool = True, domains: int = 1, free: int = 64) -> WorkerAnswer:
    return WorkerAnswer(name, fits, domains, free)


def test_nominates_the_worker_where_the_job_spans_the_fewest_domains() -> None:
    inp = DispatchInput("ns/a", ("w1", "w2", "w3"), {"w1": _ans("w1", domains=3, free=200),
                                                      "w2": _ans("w2", domains=1, free=16),
                                                      "w3": _ans("w3", domains=2)}, demand=8)
    assert choose(inp, 0.0).nominated == ("w2",)


def test_ties_by_free_capacity_then_by_the_configs_order() -> None:
    answers = {"w1": _ans("w1", free=32), "w2": _ans("w2", free=48), "w3": _ans("w3", free=48)}
    assert choose(DispatchInput("ns/a", ("w3", "w1", "w2"), answers, demand=8), 0.0).nominated == ("w3",)
    assert choose(DispatchInput("ns/a", ("w2", "w3", "w1"), answers, demand=8), 0.0).nominated == ("w2",)


def test_never_nominates_a_worker_that_says_it_cannot_fit() -> None:
    inp = DispatchInput("ns/a", ("w1", "w2"), {"w1": _ans("w1", fits=False), "w2": _ans("w2", fits=False)},
                        demand=8)
    rnd = choose(inp, 0.0)
    assert (rnd.nominated, rnd.changed) == ((), False)


def test_workers_without_an_endpoint_are_nominated_as_incremental_when_none_fits() -> None:
    inp = DispatchInput("ns/a", ("t1", "k4", "k1", "k3", "k2"), {"t1": _ans("t1", fits=False)}, demand=8)
    assert choose(inp, 0.0).nominated == ("k1", "k2", "k3")


def test_a_fitting_toposched_worker_comes_before_kueue_workers() -> None:
    inp = DispatchInput("ns/a", ("k1", "t1"), {"t1": _ans("t1", domains=4)}, demand=8)
    assert choose(inp, 0.0).nominated == ("t1",)


def test_widens_after_the_bound_and_keeps_the_round_before_it() -> None:
    answers = {"t1": _ans("t1"), "t2": _ans("t2", domains=2)}
    inp = DispatchInput("ns/a", ("t1", "t2", "k1"), answers, nominated=("t1",), round_start=0.0, demand=8,
                        timeout_s=60.0)
    assert choose(inp, 30.0).nominated == ("t1",)
    assert choose(inp, 61.0).nominated == ("t1", "t2")
    later = DispatchInput("ns/a", ("t1", "t2", "k1"), answers, nominated=("t1", "t2"), round_start=61.0,
                          demand=8, timeout_s=60.0)
    assert choose(later, 122.0).nominated == ("t1", "t2", "k1")


def test_a_burst_is_spread_by_counting_in_flight_nominations() -> None:
    answers = {"t1": _ans("t1", free=16), "t2": _ans("t2", free=16)}
    burst = [DispatchInput(f"ns/j{i}", ("t1", "t2"), answers, demand=8) for i in range(4)]
    got = dispatch_pass(burst, 0.0)
    assert [got.rounds[f"ns/j{i}"].nominated for i in range(4)] == [("t1",), ("t2",), ("t1",), ("t2",)]
    assert got.in_flight == {"t1": 16, "t2": 16}


def test_earlier_nominations_count_as_in_flight() -> None:
    answers = {"t1": _ans("t1", free=16), "t2": _ans("t2", domains=2, free=16)}
    old = DispatchInput("ns/old", ("t1", "t2"), answers, nominated=("t1",), round_start=0.0, demand=16)
    new = DispatchInput("ns/new", ("t1", "t2"), answers, demand=8)
    # t1 is more compact but its free capacity is promised to ns/old: t2 has room
    assert dispatch_pass([old, new], 1.0).rounds["ns/new"].nominated == ("t2",)


def test_a_worker_without_room_after_in_flight_is_a_last_resort() -> None:
    answers = {"t1": _ans("t1", free=8)}
    old = DispatchInput("ns/old", ("t1",), answers, nominated=("t1",), round_start=0.0, demand=8)
    new = DispatchInput("ns/new", ("t1",), answers, demand=8)
    assert dispatch_pass([old, new], 1.0).rounds["ns/new"].nominated == ("t1",)


def _later(name: str, ever_domains: int = 1, capacity: int = 64, ever_fits: bool = True) -> WorkerAnswer:
    """A worker where the job does not fit now; on its whole healthy capacity as given."""
    return WorkerAnswer(name, False, 0, 0, ever_fits, ever_domains, capacity)


def test_a_job_that_fits_nowhere_now_waits_where_it_could_ever_fit() -> None:
    # issue 43 item 3: on main it was nominated nowhere, so it held no place in any queue
    inp = DispatchInput("ns/a", ("w1", "w2"), {"w1": _later("w1", ever_fits=False), "w2": _later("w2")}, demand=8)
    rnd = choose(inp, 5.0)
    assert (rnd.nominated, rnd.round_start, rnd.changed) == (("w2",), 5.0, True)


def test_it_waits_where_it_would_be_most_compact() -> None:
    answers = {"w1": _later("w1", ever_domains=2), "w2": _later("w2", ever_domains=1, capacity=16)}
    assert choose(DispatchInput("ns/a", ("w1", "w2"), answers, demand=8), 0.0).nominated == ("w2",)


def test_ties_by_the_smallest_backlog_relative_to_capacity() -> None:
    answers = {"w1": _later("w1", capacity=64), "w2": _later("w2", capacity=256)}
    inp = DispatchInput("ns/a", ("w1", "w2"), answers, demand=8)
    # w2 has the larger backlog (32) but the smaller share of its capacity (1/8 against 1/4)
    assert choose(inp, 0.0, {"w1": 16, "w2": 32}).nominated == ("w2",)
    assert choose(inp, 0.0, {"w1": 8, "w2": 64}).nominated == ("w1",)


def test_a_burst_that_fits_nowhere_now_spreads_over_the_backlogs() -> None:
    answers = {"w1": _later("w1"), "w2": _later("w2")}
    burst = [DispatchInput(f"ns/j{i}", ("w1", "w2"), answers, demand=16) for i in range(4)]
    got = dispatch_pass(burst, 0.0)
    assert [got.rounds[f"ns/j{i}"].nominated for i in range(4)] == [("w1",), ("w2",), ("w1",), ("w2",)]


def test_a_job_already_waiting_in_a_queue_gets_no_second_copy_while_it_fits_nowhere() -> None:
    inp = DispatchInput("ns/a", ("w1", "w2"), {"w1": _later("w1"), "w2": _later("w2")}, nominated=("w1",),
                        round_start=0.0, demand=8, timeout_s=60.0)
    rnd = choose(inp, 61.0)
    assert (rnd.nominated, rnd.changed) == (("w1",), False)


def test_a_worker_that_fits_now_still_comes_first() -> None:
    answers = {"w1": _later("w1"), "w2": _ans("w2", domains=3)}
    assert choose(DispatchInput("ns/a", ("w1", "w2"), answers, demand=8), 0.0).nominated == ("w2",)


def test_the_workers_own_backlog_is_not_room() -> None:
    # issue 43: t1 holds the job in one domain now, but its own queue asks for all its free GPUs
    answers = {"t1": WorkerAnswer("t1", True, 1, 16, backlog=16), "t2": WorkerAnswer("t2", True, 2, 16)}
    assert choose(DispatchInput("ns/a", ("t1", "t2"), answers, demand=8), 0.0).nominated == ("t2",)
    # with room after its backlog, the most compact worker is still first
    roomy = {**answers, "t1": WorkerAnswer("t1", True, 1, 32, backlog=16)}
    assert choose(DispatchInput("ns/a", ("t1", "t2"), roomy, demand=8), 0.0).nominated == ("t1",)


def test_a_job_that_fits_nowhere_now_waits_behind_the_least_work_for_the_capacity() -> None:
    # w1 would hold it in one domain, but its own queue is a whole capacity long; w2's is empty
    answers = {"w1": WorkerAnswer("w1", False, 0, 0, True, 1, 64, backlog=64),
               "w2": WorkerAnswer("w2", False, 0, 0, True, 2, 64)}
    assert choose(DispatchInput("ns/a", ("w1", "w2"), answers, demand=8), 0.0).nominated == ("w2",)
    # in-flight nominations and the backlog add up: 48 in flight on w2 and 16 queued on w1
    answers = {**answers, "w1": WorkerAnswer("w1", False, 0, 0, True, 1, 64, backlog=16)}
    assert choose(DispatchInput("ns/a", ("w1", "w2"), answers, demand=8), 0.0, {"w2": 48}).nominated == ("w1",)
