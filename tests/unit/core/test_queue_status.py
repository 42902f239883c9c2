"""ClusterQueue / LocalQueue status as Kueue v0.17 writes it: counts, usage tables, the Active
condition with Kueue's reasons and messages; and the cycle admitting nothing in a queue that
is not Active."""

from __future__ import annotations

import dataclasses

from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit, Pending
from scheduler.core.kueue.queue_status import FlavorUsage, ResourceUsage, queue_statuses
from scheduler.core.kueue.queueing import ActiveCondition, LocalQueueSpec
from scheduler.core.kueue.quota import FlavorSpec
from scheduler.core.kueue.snapshot import after_decisions, snapshot_queues

from ._admission import NS, admitted, cq, lqs, pending, rq, snapshot, wl


def test_counts_and_usage_of_a_borrowing_cluster_queue_and_its_local_queues() -> None:
    cqs = {"a": cq("a", {"f": {"cpu": rq(4)}, "g": {"cpu": rq(2)}}, cohort="co"),
           "b": cq("b", {"f": {"cpu": rq(4)}}, cohort="co")}
    snap = snapshot(
        cluster_queues=cqs, local_queues=lqs(("la", "a"), ("la2", "a"), ("lb", "b")),
        admitted=[admitted(wl("big", 5, queue="la"), "a"), admitted(wl("one", 1, queue="la2"), "a", "g")],
        pending=[pending(wl("p1", 1, queue="la")), pending(wl("p2", 1, queue="la2")),
                 pending(wl("p3", 1, queue="lb")), pending(wl("lost", 1, queue="nowhere"))],
    )
    cq_status, lq_status = queue_statuses(snap)
    a = cq_status["a"]
    assert (a.pending_workloads, a.reserving_workloads, a.admitted_workloads) == (2, 2, 2)
    assert a.active == ActiveCondition(True, "Ready", "Can admit new workloads")
    # flavors in spec order; 5 cpu used of a nominal 4 in f: 1 borrowed, reported as Kueue quantities
    assert a.flavors_usage == (FlavorUsage("f", (ResourceUsage("cpu", "5", "1"),)),
                               FlavorUsage("g", (ResourceUsage("cpu", "1", "0"),)))
    assert a.flavors_reservation == a.flavors_usage
    b = cq_status["b"]
    assert (b.pending_workloads, b.reserving_workloads) == (1, 0)
    assert b.flavors_usage == (FlavorUsage("f", (ResourceUsage("cpu", "0", "0"),)),)
    la = lq_status[f"{NS}/la"]
    assert (la.pending_workloads, la.reserving_workloads, la.admitted_workloads) == (1, 1, 1)
    assert la.active == ActiveCondition(True, "Ready", "Can submit new workloads to localQueue")
    # a LocalQueue's table has every flavor of its ClusterQueue and no "borrowed"
    assert la.flavors_usage == (FlavorUsage("f", (ResourceUsage("cpu", "5"),)),
                                FlavorUsage("g", (ResourceUsage("cpu", "0"),)))


def test_pending_counts_are_the_same_from_the_snapshots_queues_and_after_admissions() -> None:
    cqs = {"a": cq("a", {"f": {"cpu": rq(4)}})}
    snap = snapshot(cluster_queues=cqs, local_queues=lqs(("la", "a"), ("la2", "a")),
                    pending=[pending(wl(f"p{i}", 1, queue="la" if i % 3 else "la2")) for i in range(9)])
    counted = queue_statuses(snap)
    with_queues = dataclasses.replace(snap, queues=snapshot_queues(snap))
    assert queue_statuses(with_queues) == counted
    assert counted[1][f"{NS}/la"].pending_workloads == 6
    decisions = run_cycle(with_queues)
    admits = sum(isinstance(d, Admit) for d in decisions)
    assert admits
    after = after_decisions(with_queues, decisions)  # carries its queues, less the admitted
    assert after.queues is not None and after.queues.pending is after.pending
    assert queue_statuses(after) == queue_statuses(dataclasses.replace(after, queues=None))
    assert queue_statuses(after)[0]["a"].pending_workloads == 9 - admits


def test_outside_a_cohort_borrowed_is_zero_and_still_written() -> None:
    snap = snapshot(cluster_queues={"solo": cq("solo", {"f": {"cpu": rq(4)}})}, local_queues=lqs(("l", "solo")),
                    admitted=[admitted(wl("x", 3, queue="l"), "solo")])
    cq_status, _ = queue_statuses(snap)
    assert cq_status["solo"].flavors_usage == (FlavorUsage("f", (ResourceUsage("cpu", "3", "0"),)),)


def test_inactive_cluster_queue_reasons_in_kueue_order_and_words() -> None:
    stopped_and_missing = cq("s", {"gone": {"cpu": rq(1)}, "also-gone": {"cpu": rq(1)}, "f": {"cpu": rq(1)}},
                             stop="Hold")
    tas = cq("t", {"tas": {"cpu": rq(1)}})
    terminating = dataclasses.replace(cq("d", {"f": {"cpu": rq(1)}}, stop="Hold"), terminating=True)
    snap = snapshot(cluster_queues={"s": stopped_and_missing, "t": tas, "d": terminating},
                    flavors={"f": FlavorSpec("f"), "tas": FlavorSpec("tas", topology_name="hyperpod-default")},
                    local_queues=lqs(("ls", "s"), ("lt", "t"), ("ld", "d"), ("orphan", "never-created")))
    cq_status, lq_status = queue_statuses(snap)
    assert cq_status["s"].active == ActiveCondition(
        False, "Stopped",
        "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): gone,also-gone.")
    assert cq_status["t"].active == ActiveCondition(
        False, "TopologyNotFound",
        "Can't admit new workloads: there is no Topology \"hyperpod-default\" for TAS flavor \"tas\".")
    assert cq_status["d"].active == ActiveCondition(
        False, "Terminating", "Can't admit new workloads; clusterQueue is terminating")
    assert lq_status[f"{NS}/lt"].active == ActiveCondition(
        False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
    orphan = lq_status[f"{NS}/orphan"]
    assert orphan.active == ActiveCondition(False, "ClusterQueueDoesNotExist",
                                            "Can't submit new workloads to clusterQueue")
    assert orphan.flavors_usage == () and orphan.reserving_workloads == 0


def test_stopped_local_queue_reports_no_pending_workloads() -> None:
    local = {f"{NS}/l": LocalQueueSpec(NS, "l", "a", stop_policy="Hold")}
    snap = snapshot(cluster_queues={"a": cq("a")}, local_queues=local, pending=[pending(wl("p", 1, queue="l"))])
    cq_status, lq_status = queue_statuses(snap)
    assert lq_status[f"{NS}/l"].active == ActiveCondition(False, "Stopped", "LocalQueue is stopped")
    assert lq_status[f"{NS}/l"].pending_workloads == 0
    assert cq_status["a"].pending_workloads == 1  # still queued in the ClusterQueue


def test_terminating_cluster_queue_admits_nothing_new_but_keeps_what_it_holds() -> None:
    terminating = dataclasses.replace(cq("a", {"f": {"cpu": rq(10)}}), terminating=True)
    snap = snapshot(cluster_queues={"a": terminating}, local_queues=lqs(("l", "a")),
                    admitted=[admitted(wl("running", 2, queue="l"), "a")], pending=[pending(wl("new", 1, queue="l"))])
    [decision] = run_cycle(snap)
    assert isinstance(decision, Pending) and decision.message == "ClusterQueue a is inactive"
    cq_status, _ = queue_statuses(snap)
    assert cq_status["a"].reserving_workloads == 1
    live = snapshot(cluster_queues={"a": cq("a", {"f": {"cpu": rq(10)}})}, local_queues=lqs(("l", "a")),
                    pending=[pending(wl("new", 1, queue="l"))])
    assert isinstance(run_cycle(live)[0], Admit)
