"""Kueue's requeuing backoff for NodeFailures evictions (issue 13, reproduction 6):
``status.requeueState.count`` / ``requeueAt`` written; the first requeue immediate as Kueue's, then
base 60 s doubling, capped at 3600 s."""

from __future__ import annotations

import datetime as dt

import pytest

from scheduler.core.kueue.failures import RequeueBackoff
from scheduler.kube import status as st
from scheduler.kube.eviction import evict
from tests.unit.kube.test_phases import Harness


def evict_and_release(harness: Harness, reason: str) -> dict:
    evict(harness.controller.writer, harness.workload(), reason, "gone", harness.clock())
    harness.sync()
    harness.controller.progress_evictions()  # suspend
    harness.sync()
    harness.controller.progress_evictions()  # pods gone: release and requeue
    harness.sync()
    return harness.workload()


def at(harness: Harness, seconds: float) -> str:
    return st.timestamp(harness.clock() + dt.timedelta(seconds=seconds))


def test_node_failure_evictions_back_off_as_kueue(harness: Harness) -> None:
    """The first NodeFailures requeue is immediate (Kueue v0.17); the second waits 60 s."""
    harness.admitted("train", 1)
    released = evict_and_release(harness, "NodeFailures")
    assert released["status"]["requeueState"] == {"count": 1}
    harness.controller.reconcile()
    harness.sync()
    readmitted = harness.workload()
    assert st.condition_true(readmitted, st.ADMITTED)
    harness.controller.start_admitted()
    harness.sync()
    again = evict_and_release(harness, "NodeFailures")
    assert again["status"]["requeueState"] == {"count": 2, "requeueAt": at(harness, 60)}
    harness.clock.advance(30)
    harness.controller.reconcile()
    assert not st.has_reservation(harness.workload())  # still backing off
    harness.clock.advance(31)
    harness.controller.reconcile()
    harness.sync()
    readmitted = harness.workload()
    assert st.condition_true(readmitted, st.ADMITTED)
    assert readmitted["status"]["requeueState"] == {"count": 2}  # requeueAt cleared, the count kept
    harness.controller.start_admitted()
    harness.sync()
    third = evict_and_release(harness, "NodeFailures")
    assert third["status"]["requeueState"] == {"count": 3, "requeueAt": at(harness, 120)}


def test_preemption_requeues_at_once(harness: Harness) -> None:
    harness.admitted("train", 1)
    released = evict_and_release(harness, "Preempted")
    assert "requeueState" not in released["status"]


def test_a_defragmentation_move_requeues_at_once_and_readmits(harness: Harness) -> None:
    """A defrag move is toposched's own preemption: Requeued=True on release, admitted again
    in the next cycle (an e2e run once held it Requeued=False like a PodsReady timeout)."""
    harness.admitted("train", 1)
    released = evict_and_release(harness, "Defragmentation")
    assert st.condition_true(released, st.REQUEUED)
    harness.controller.reconcile()
    harness.sync()
    assert st.condition_true(harness.workload(), st.ADMITTED)


@pytest.mark.parametrize("reason", ["PodsReadyTimeout", "ClusterQueueStopped"])
def test_other_evictions_are_held(harness: Harness, reason: str) -> None:
    harness.admitted("train", 1)
    released = evict_and_release(harness, reason)
    assert (st.find_condition(released, st.REQUEUED) or {}).get("status") == "False"


def test_backoff_doubles_up_to_the_cap() -> None:
    backoff = RequeueBackoff()
    assert [backoff.delay_s(n) for n in (1, 2, 3, 7, 8, 100, 10**6)] == [0, 60, 120, 1920, 3600, 3600, 3600]
    assert RequeueBackoff(base_s=1, max_s=10).delay_s(4) == 4
