"""Priority is bounded (issue 39 item 9): the controller gives a job's Workload the priority of a
class that exists and that the job's namespace may use, and holds the job (no Workload, a
Warning Event naming the class and the fix) otherwise. Before, a Job naming
``system-cluster-critical`` in its pod template got priority 2,000,000,000 in any namespace, and
a missing PriorityClass fell back to 0 without a word."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.priority_policy import ANN_ALLOWED_CLASSES
from scheduler.k8s.informer import (
    JOBS,
    NAMESPACES,
    PRIORITY_CLASSES,
    RESOURCE_QUOTAS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from scheduler.kube.events import EVENTS
from tests.unit.kube.test_phases import NS, Harness, job

CRITICAL = "system-cluster-critical"


def with_class(name: str, pc: str | None = None, wpc: str | None = None) -> dict[str, Any]:
    obj = job(name, 1)
    if pc is not None:
        obj["spec"]["template"]["spec"]["priorityClassName"] = pc
    if wpc is not None:
        obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = wpc
    return obj


def harness() -> Harness:
    h = Harness()
    h.api.create(PRIORITY_CLASSES, {"metadata": {"name": CRITICAL}, "value": 2000000000})
    h.api.create(PRIORITY_CLASSES, {"metadata": {"name": "team-high"}, "value": 5000})
    h.api.create(WORKLOAD_PRIORITY_CLASSES, {"metadata": {"name": "batch-low"}, "value": 10})
    h.api.create(WORKLOAD_PRIORITY_CLASSES, {"metadata": {"name": "batch-high"}, "value": 900})
    return h


def run(h: Harness, obj: dict[str, Any]) -> list[dict[str, Any]]:
    h.api.create(JOBS, obj, NS)
    h.sync()
    h.controller.ensure_workloads()
    return list(h.api.objects(WORKLOADS, NS))


def messages(h: Harness, reason: str) -> list[str]:
    h.events.flush()
    return [e["message"] for e in h.api.objects(EVENTS) if e["reason"] == reason]


def test_a_system_class_is_not_honoured_outside_kube_system_without_a_covering_quota() -> None:
    h = harness()
    assert run(h, with_class("grab", pc=CRITICAL)) == []
    (message,) = messages(h, "PriorityClassNotAllowed")
    assert f"PriorityClass \"{CRITICAL}\" is reserved for system components" in message
    assert f"namespace \"{NS}\"" in message and "ResourceQuota" in message


def test_a_resource_quota_scoped_to_the_class_lets_the_namespace_use_it() -> None:
    h = harness()
    h.api.create(RESOURCE_QUOTAS, {"metadata": {"name": "critical-pods", "namespace": NS}, "spec": {
        "hard": {"pods": "10"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": [CRITICAL]}]}}}, NS)
    (wl,) = run(h, with_class("ok", pc=CRITICAL))
    assert wl["spec"]["priority"] == 2000000000
    assert wl["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                              "name": CRITICAL}


def test_a_quota_of_another_scope_or_namespace_does_not() -> None:
    h = harness()
    h.api.create(RESOURCE_QUOTAS, {"metadata": {"name": "other", "namespace": NS}, "spec": {
        "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["team-high"]}]}}}, NS)
    h.api.create(RESOURCE_QUOTAS, {"metadata": {"name": "theirs", "namespace": "kube-system"}, "spec": {
        "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": [CRITICAL]}]}}}, "kube-system")
    assert run(h, with_class("grab", pc=CRITICAL)) == []


def test_a_missing_priority_class_holds_the_job_with_the_fix() -> None:
    h = harness()
    assert run(h, with_class("typo", pc="team-hgih")) == []
    (message,) = messages(h, "PriorityClassNotFound")
    assert message.startswith("PriorityClass \"team-hgih\" not found; create it")
    assert "spec.template.spec.priorityClassName" in message


def test_an_ordinary_priority_class_still_gives_its_value() -> None:
    h = harness()
    (wl,) = run(h, with_class("ok", pc="team-high"))
    assert wl["spec"]["priority"] == 5000


def test_the_namespace_allow_list_bounds_both_kinds_of_class() -> None:
    h = harness()
    h.api.merge_patch(NAMESPACES, NS, {"metadata": {"annotations": {ANN_ALLOWED_CLASSES: "batch-low, team-high"}}})
    assert run(h, with_class("high", wpc="batch-high")) == []
    (message,) = messages(h, "PriorityClassNotAllowed")
    assert f"WorkloadPriorityClass \"batch-high\" is not one namespace \"{NS}\" may use" in message
    assert "batch-low, team-high" in message
    (wl,) = run(h, with_class("low", wpc="batch-low"))
    assert wl["spec"]["priority"] == 10


def test_a_missing_workload_priority_class_keeps_kueues_event() -> None:
    h = harness()
    assert run(h, with_class("gone", wpc="nope")) == []
    assert messages(h, "WorkloadPriorityClassNotFound") == [
        "workloadPriorityClass \"nope\" not found; create it or fix label kueue.x-k8s.io/priority-class"]
