"""The inputs the long fuzz runs found (issue 39): each was an internal-error refusal (500) on the
old code; now a decided answer. Runs: the structure-aware fuzz of tests/fuzzing.py for 3 x 5
minutes (about 340,000 reviews, sizes up to 20,000 items), Hypothesis' structure-aware test at
150 examples per path, and an exhaustive pass putting 15 wrongly typed values at every field of
every path's seed, in the object and in the old object (110,070 reviews)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from admission import review
from admission.routes import ROUTES
from admission.view import ClusterView
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.pod import POD
from tests.unit.test_fuzz_webhook import VIEW


def answer(path: str, obj: Any, operation: str = "CREATE", old: Any = None) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": operation, "namespace": "ns", "userInfo": {"username": "alice"},
        "object": obj, "oldObject": old}}).encode()
    return review.answer(path, body, ClusterView())


def message(out: dict[str, Any]) -> str:
    return str((out["response"].get("status") or {}).get("message", ""))


# A queued pod's nodeSelector that is not an object reached the role hash, which assumed a map.
@pytest.mark.parametrize("node_selector", ["three", [1], -1, float("inf"), True])
def test_a_pod_with_a_node_selector_that_is_not_a_map_gets_a_decided_answer(node_selector: Any) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"nodeSelector": node_selector, "containers": [{"name": "c"}]}}
    for path in (POD.mutate_path, POD.validate_path):
        code, out = answer(path, pod)
        assert code == 200 and "internal error" not in message(out), message(out)


WORKLOAD = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                                                     "template": {"spec": {"containers": [{"name": "c"}]}}}]}}


# An old Workload whose status is not an object: "does it hold quota" read it as one
# (AttributeError, reported through the review's could-not-validate path).
@pytest.mark.parametrize("status, error", [
    ("x", 'status: Invalid value: "x": must be an object'),
    (1, "status: Invalid value: 1: must be an object"),
    ([1], "status: Invalid value: must be an object"),
    ({"conditions": "x"}, 'status.conditions: Invalid value: "x": must be a list'),
    ({"conditions": [1]}, "status.conditions[0]: Invalid value: 1: must be an object"),
    ({"conditions": [{"type": 1}]}, "status.conditions[0].type: Invalid value: 1: must be a string"),
])
@pytest.mark.parametrize("path", sorted(p for p, route in ROUTES.items() if route.kind_name == "Workload"))
def test_a_workload_update_whose_old_status_is_not_an_object_is_refused_naming_the_field(
        path: str, status: Any, error: str) -> None:
    code, out = answer(path, WORKLOAD, "UPDATE", {**WORKLOAD, "status": status})
    assert code == 200 and out["response"]["allowed"] is False
    assert message(out).startswith(error) and "could not validate" not in message(out), message(out)


# A queued object of a kind whose spec has no pod template (a JobSet) carrying a `spec.template`
# that is not an object: the priority check read it as a pod template (AttributeError, reported
# through the could-not-validate path); found by Hypothesis after the priority bounds landed.
@pytest.mark.parametrize("template", [True, "x", [1], {"spec": 1}, {"spec": {"priorityClassName": 7}}])
def test_a_spec_template_of_the_wrong_type_is_no_internal_error(template: Any) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"parallelism": 0, "completions": 0, "template": template}}
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "namespace": "team-a", "userInfo": {"username": "alice"},
        "object": job}}).encode()
    code, out = review.answer(JOBSET.validate_path, body, VIEW)
    assert code == 200 and "could not validate" not in message(out) and "internal error" not in message(out)
