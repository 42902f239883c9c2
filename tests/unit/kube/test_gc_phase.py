"""The controller runs its garbage-collection policy (scheduler.k8s.gcpolicy) after each pass, and
a Controller built without one (tests, simulators) leaves the collector alone."""

from __future__ import annotations

import pytest

from scheduler.k8s import gcpolicy
from scheduler.k8s.gcpolicy import GcPolicy
from tests.unit.k8s.test_gcpolicy import FakeGc
from tests.unit.kube.test_phases import Harness


def test_the_controller_runs_its_policy_after_each_pass_and_has_none_by_default(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGc()
    monkeypatch.setattr(gcpolicy, "gc", fake)
    harness.controller.reconcile()
    assert harness.controller.gc_policy is None and fake.calls == []  # tests, simulators: untouched
    harness.rebuild(gc_policy=GcPolicy(refreeze_s=60, monotonic=lambda: 0.0))
    harness.controller.reconcile()
    harness.controller.reconcile()
    assert fake.calls == ["unfreeze", "collect", "freeze", "freeze"]
