"""A job without ``kueue.x-k8s.io/priority-class`` in a cluster with a WorkloadPriorityClass named
``default``: Kueue v0.17 and v0.19 give its Workload no class and priority 0 (the gate
``WorkloadPriorityClassDefaulting`` is alpha and off there); with the gate on the controller
names ``default`` as the webhook does (docs/kueue-versions.md). Before, the controller fell
back to ``default`` whatever the gate said."""

from __future__ import annotations

import pytest

from scheduler.core.config import FeatureGates, KueueConfig
from scheduler.k8s.informer import JOBS, WORKLOAD_PRIORITY_CLASSES
from scheduler.kube.controller import Controller
from scheduler.kube.settings import ControllerSettings
from tests.unit.kube.test_phases import NS, Harness, job


@pytest.mark.parametrize(("gate", "priority", "ref"), [
    (False, 0, None),
    (True, 100, {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "default"}),
])
def test_the_default_class_follows_the_gate(gate: bool, priority: int | None, ref: object) -> None:
    h = Harness()
    h.api.create(WORKLOAD_PRIORITY_CLASSES, {"metadata": {"name": "default"}, "value": 100})
    config = KueueConfig(feature_gates=FeatureGates({"WorkloadPriorityClassDefaulting": gate}))
    h.controller = Controller(h.api, h.cache, ControllerSettings(clock=h.clock, config=config), is_leader=lambda: True,
                              events=h.events)
    h.api.create(JOBS, job("train", 1), NS)
    h.sync()
    h.controller.ensure_workloads()
    spec = h.workload()["spec"]
    assert spec.get("priority") == priority and spec.get("priorityClassRef") == ref
