"""The writes of one phase run side by side (``Writer.run_each``), as Kueue's scheduler writes
admissions in goroutines (issue 18, items 3 and 5): failures stay per object and are reported
in item order, a nested run cannot stall the bounded pool, and a pass still ends only after
every write of it has been answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.cache import ClusterCache
from scheduler.kube.writer import Writer
from tests.unit.kube.test_phases import NS, Harness, job


def writer(concurrency: int) -> Writer:
    api = FakeApi()
    return Writer(api, ClusterCache.create(api), lambda: True, concurrency=concurrency)


def test_steps_run_side_by_side() -> None:
    # Two steps that each wait for the other: only possible when they run at the same time.
    meeting = threading.Barrier(2, timeout=5)
    failures = writer(concurrency=4).run_each(["a", "b"], lambda _item: meeting.wait())
    assert failures == []


def test_concurrency_one_runs_serially() -> None:
    meeting = threading.Barrier(2, timeout=0.2)
    failures = writer(concurrency=1).run_each(["a", "b"], lambda _item: meeting.wait())
    assert [item for item, _ in failures] == ["a", "b"]
    assert all(isinstance(exc, threading.BrokenBarrierError) for _, exc in failures)


def test_failures_come_back_in_item_order_and_the_others_still_run() -> None:
    done: list[int] = []
    lock = threading.Lock()

    def step(item: int) -> None:
        if item % 3 == 0:
            raise ValueError(f"bad {item}")
        with lock:
            done.append(item)

    failures = writer(concurrency=4).run_each(list(range(10)), step)
    assert [(item, str(exc)) for item, exc in failures] == [(0, "bad 0"), (3, "bad 3"), (6, "bad 6"), (9, "bad 9")]
    assert sorted(done) == [1, 2, 4, 5, 7, 8]


def test_a_step_that_runs_its_own_batch_does_not_stall_the_pool() -> None:
    w = writer(concurrency=2)
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def inner(pair: tuple[int, int]) -> None:
        with lock:
            seen.append(pair)

    def outer(item: int) -> None:
        assert w.run_each([(item, j) for j in range(3)], inner) == []

    runner = threading.Thread(target=lambda: w.run_each(list(range(4)), outer), daemon=True)
    runner.start()
    runner.join(timeout=10)
    assert not runner.is_alive(), "nested run_each stalled the pool"
    assert sorted(seen) == [(i, j) for i in range(4) for j in range(3)]


def slow_writes(api: FakeApi, delay_s: float) -> Callable[[], int]:
    """Wrap the fake API server's merge patch so each takes ``delay_s``; returns the most
    patches that were in flight at once."""
    original = api.merge_patch
    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    def patched(*args: Any, **kwargs: Any) -> Any:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        try:
            time.sleep(delay_s)
            return original(*args, **kwargs)
        finally:
            with lock:
                state["now"] -= 1

    api.merge_patch = patched  # type: ignore[method-assign]
    return lambda: state["most"]


@pytest.mark.parametrize("concurrency", [1, 8])
def test_one_pass_writes_its_admissions_side_by_side(harness: Harness, concurrency: int) -> None:
    harness.controller.writer.concurrency = concurrency
    for i in range(4):
        harness.api.create(JOBS, job(f"j{i}", 1), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    harness.sync()
    most_in_flight = slow_writes(harness.api, 0.05)
    harness.controller.admit()
    workloads = harness.api.objects(WORKLOADS, NS)
    assert len(workloads) == 4
    # The pass returns only after every admission was answered, whatever the concurrency.
    assert all(st.condition_true(wl, st.QUOTA_RESERVED) for wl in workloads)
    assert sorted(name for kind, name in harness.decisions if kind == "admitted") == \
        sorted(wl["metadata"]["name"] for wl in workloads)
    if concurrency == 1:
        assert most_in_flight() == 1
    else:
        assert most_in_flight() >= 2
