"""The garbage-collection policy of the processes that hold watch caches (scheduler.k8s.gcpolicy):
freeze what survived after every pass, with a full collection first on the first pass and then
once per period; the pause log."""

from __future__ import annotations

import gc
import logging
import threading
import time

import pytest

from scheduler.k8s import gcpolicy
from scheduler.k8s.gcpolicy import GcPolicy


class FakeGc:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def collect(self) -> int:
        self.calls.append("collect")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")


def test_freezes_after_every_pass_and_collects_fully_once_per_period(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGc()
    monkeypatch.setattr(gcpolicy, "gc", fake)
    now = [100.0]
    policy = GcPolicy(refreeze_s=60, monotonic=lambda: now[0])
    assert policy.after_pass()
    assert fake.calls == ["unfreeze", "collect", "freeze"]  # collected before freezing: no garbage kept
    now[0] += 59
    assert not policy.after_pass()
    # what arrived since (a burst's objects) is frozen too, without a full walk (issue 42)
    assert fake.calls[3:] == ["freeze"]
    now[0] += 1
    assert policy.after_pass()
    assert fake.calls[4:] == ["unfreeze", "collect", "freeze"]


def test_the_doors_without_passes_freeze_on_a_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGc()
    monkeypatch.setattr(gcpolicy, "gc", fake)
    stop = threading.Event()
    thread = gcpolicy.start_freezing(GcPolicy(refreeze_s=3600), period_s=0.01, stop=stop)
    deadline = time.monotonic() + 5
    while fake.calls.count("freeze") < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(timeout=5)
    assert fake.calls[:4] == ["unfreeze", "collect", "freeze", "freeze"] and not thread.is_alive()


def test_long_pauses_are_logged_with_their_generation(caplog: pytest.LogCaptureFixture) -> None:
    clock = [0.0]
    pauses = gcpolicy.PauseLog(long_ms=50, clock=lambda: clock[0])
    with gcpolicy.pause_log() as installed:
        assert installed in gc.callbacks
    assert installed not in gc.callbacks  # a command run in another process leaves it as it was
    with caplog.at_level(logging.INFO, logger=gcpolicy.__name__):
        pauses("start", {"generation": 0})
        clock[0] += 0.001
        pauses("stop", {"generation": 0, "collected": 0})
        pauses("start", {"generation": 2})
        clock[0] += 0.3
        pauses("stop", {"generation": 2, "collected": 0})
    assert [r.getMessage() for r in caplog.records] == [
        "garbage collection of generation 2 paused the process 300 ms (0 freed; 0.3 s paused over 2 collections "
        "so far)"]
