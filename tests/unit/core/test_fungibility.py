"""Flavor fungibility against Kueue v0.17.0 ``shouldTryNextFlavor`` and ``isPreferred``
(pkg/scheduler/flavorassigner/flavorassigner.go)."""

from __future__ import annotations

import dataclasses

from scheduler.core.kueue import flavorassigner
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit
from scheduler.core.kueue.flavorassigner import Mode
from scheduler.core.kueue.quota import MAY_STOP_SEARCH, PREEMPTION_OVER_BORROWING, TRY_NEXT_FLAVOR, FlavorFungibility

from ._admission import admitted, cq, lqs, pending, rq, snapshot, wl


def test_a_preemption_that_also_borrows_tries_the_next_flavor_under_when_can_borrow() -> None:
    choice = flavorassigner._FlavorChoice(Mode.PREEMPT, True, "f", frozenset())
    assert not flavorassigner._stop_search(choice, FlavorFungibility(TRY_NEXT_FLAVOR, MAY_STOP_SEARCH))
    assert flavorassigner._stop_search(choice, FlavorFungibility(MAY_STOP_SEARCH, MAY_STOP_SEARCH))


def test_preference_orders_borrowing_against_preemption() -> None:
    borrow = flavorassigner._FlavorChoice(Mode.FIT, True, "a", frozenset())
    preempt = flavorassigner._FlavorChoice(Mode.PREEMPT, False, "b", frozenset())
    assert borrow.better_than(preempt)  # default BorrowingOverPreemption: the mode first
    assert not borrow.better_than(preempt, PREEMPTION_OVER_BORROWING)
    assert preempt.better_than(borrow, PREEMPTION_OVER_BORROWING)


def test_flavor_fallback_the_first_flavor_full_the_second_is_used() -> None:
    snap = snapshot(cluster_queues={"a": cq("a", {"first": {"cpu": rq(2)}, "second": {"cpu": rq(8)}})},
                    local_queues=lqs(("lq", "a")), pending=[pending(wl("x", 4))])
    (d,) = run_cycle(snap)
    assert isinstance(d, Admit) and d.pod_sets[0].flavors == {"cpu": "second"}


def _two_flavor_cq(when_can_preempt: str):  # type: ignore[no-untyped-def]
    base = cq("a", {"first": {"cpu": rq(4)}, "second": {"cpu": rq(4)}}, within="LowerPriority")
    return dataclasses.replace(base, flavor_fungibility=FlavorFungibility(MAY_STOP_SEARCH, when_can_preempt))


def test_may_stop_search_preempts_in_the_first_flavor_when_it_has_candidates() -> None:
    low = admitted(wl("low", 4, prio=1), "a", "first")
    snap = snapshot(cluster_queues={"a": _two_flavor_cq(MAY_STOP_SEARCH)}, local_queues=lqs(("lq", "a")),
                    admitted=[low], pending=[pending(wl("high", 4, prio=100))])
    assert [type(d).__name__ for d in run_cycle(snap)] == ["Preempt", "Pending"]


def test_no_preemption_candidates_send_the_search_to_the_next_flavor() -> None:
    # Kueue's oracle finds no victim (the admitted workload has a higher priority): the
    # assigner tries the next flavor even under whenCanPreempt: MayStopSearch.
    vip = admitted(wl("vip", 4, prio=100), "a", "first")
    snap = snapshot(cluster_queues={"a": _two_flavor_cq(MAY_STOP_SEARCH)}, local_queues=lqs(("lq", "a")),
                    admitted=[vip], pending=[pending(wl("low", 4, prio=1))])
    (d,) = run_cycle(snap)
    assert isinstance(d, Admit) and d.pod_sets[0].flavors == {"cpu": "second"}


def test_a_cluster_queue_under_a_cohort_cycle_admits_nothing_and_reads_as_kueue_writes_it() -> None:
    from scheduler.core.kueue.queue_status import queue_statuses
    from scheduler.core.kueue.quota import CohortSpec

    snap = snapshot(cluster_queues={"x": cq("x", cohort="loop-a")}, local_queues=lqs(("lq", "x")),
                    cohorts={"loop-a": CohortSpec("loop-a", "loop-b"), "loop-b": CohortSpec("loop-b", "loop-a")},
                    pending=[pending(wl("w", 1))])
    (d,) = run_cycle(snap)
    assert not isinstance(d, Admit) and d.message == "ClusterQueue x is inactive"
    status = queue_statuses(snap)[0]["x"]
    assert (status.active.active, status.active.reason, status.active.message) == (
        False, "Ready", "Can admit new workloads")
