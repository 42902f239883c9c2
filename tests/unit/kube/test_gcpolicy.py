"""The controller's garbage-collection policy (scheduler.kube.gcpolicy): freeze after the first
pass, then again only once per period, each time after a full collection of unfrozen objects."""

from __future__ import annotations

import pytest

from scheduler.kube import gcpolicy
from scheduler.kube.gcpolicy import GcPolicy
from tests.unit.kube.test_phases import Harness


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


def test_freezes_after_the_first_pass_then_once_per_period(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGc()
    monkeypatch.setattr(gcpolicy, "gc", fake)
    now = [100.0]
    policy = GcPolicy(refreeze_s=60, monotonic=lambda: now[0])
    assert policy.after_pass()
    assert fake.calls == ["unfreeze", "collect", "freeze"]  # collected before freezing: no garbage kept
    now[0] += 59
    assert not policy.after_pass()
    assert len(fake.calls) == 3
    now[0] += 1
    assert policy.after_pass()
    assert fake.calls[3:] == ["unfreeze", "collect", "freeze"]


def test_the_controller_runs_its_policy_after_each_pass_and_has_none_by_default(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGc()
    monkeypatch.setattr(gcpolicy, "gc", fake)
    harness.controller.reconcile()
    assert harness.controller.gc_policy is None and fake.calls == []  # tests, simulators: untouched
    harness.rebuild(gc_policy=GcPolicy(refreeze_s=60, monotonic=lambda: 0.0))
    harness.controller.reconcile()
    harness.controller.reconcile()
    assert fake.calls == ["unfreeze", "collect", "freeze"]
