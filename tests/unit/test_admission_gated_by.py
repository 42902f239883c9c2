"""``kueue.x-k8s.io/admission-gated-by`` at the door (Kueue's AdmissionGatedBy: on in v0.19, off
in v0.17): the format, and who may set and clear it, for jobs and Workloads, in Kueue's words.

Each case restates Kueue v0.19.2's own: ``pkg/controller/jobs/job/job_webhook_test.go``
(``TestValidateCreate`` and ``TestValidateUpdate``, the "AdmissionGatedBy" cases) and
``pkg/webhooks/workload_webhook_test.go`` (``TestValidateWorkload`` "AdmissionGatedBy" cases,
``TestValidateWorkloadUpdate`` "reject adding AdmissionGatedBy annotation after workload
creation"). Kueue's field errors are compared whole; toposched's fix follows after "; ".
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from admission import routes
from admission.review import answer
from admission.view import ClusterView
from admission.workloads import validate_workload
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.manifest.checks import manifest_verdict
from scheduler.adapter.manifest.gated_by import PATH, create_errors, update_errors
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates

ANN = "kueue.x-k8s.io/admission-gated-by"
V019, V017 = FeatureGates(release=KUEUE_V019), FeatureGates(release=KUEUE_V017)
ON, OFF = FeatureGates({"AdmissionGatedBy": True}), FeatureGates({"AdmissionGatedBy": False})
RFC1123 = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
           "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
           "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
INVALID_PATH = "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"


def job(gated: str | None = None) -> dict[str, Any]:
    annotations = {ANN: gated} if gated is not None else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "job", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "queue"},
                         "annotations": annotations},
            "spec": {"parallelism": 1, "completions": 1, "suspend": True, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}}


def kueue_words(errors: list[Any]) -> list[str]:
    """The field errors without toposched's fix: Kueue's own text."""
    return [str(e).split("; ", 1)[0] for e in errors]


# ------------------------------------------------------------------ job_webhook_test.go TestValidateCreate

@pytest.mark.parametrize("value", [
    "example.com/controller",                       # valid AdmissionGatedBy annotation with single gate
    "example.com/gate ",                            # trailing space
    "example.com/gate ,example.com/gate2",          # space before comma
    "example.com/gate, example.com/gate2",          # space after comma
    " example.com/gate",                            # leading space
    "example.com/a,not.example.com/b",              # valid ... with multiple gates
    "",                                             # with feature gate enabled - empty string
])
def test_valid_values_pass_at_creation(value: str) -> None:
    assert create_errors(job(value), ON) == []
    assert manifest_verdict(job(value), gates=V019).errors == []


@pytest.mark.parametrize(("value", "want"), [
    ("this is an invalid value",  # not in subdomain/path format
     f'{PATH}: Invalid value: "this is an invalid value": must be a domain-prefixed path (such as "acme.io/foo")'),
    ("duplicates.are/invalid,duplicates.are/invalid",  # duplicate gates
     f'{PATH}: Invalid value: "duplicates.are/invalid,duplicates.are/invalid": duplicate gate name: '
     "duplicates.are/invalid"),
    ("cannot.be.too.long/" + "but-this-is-too-long" * 20,  # gate name too long (field.TooLong)
     f"{PATH}: Too long: may not be more than 63 bytes"),
    ("example.com/gate name", f'{PATH}: Invalid value: "gate name": {INVALID_PATH}'),  # space in path component
    ("example .com/gate", f'{PATH}: Invalid value: "example .com": {RFC1123}'),  # space in domain component
    ("valid.com/gate,invalid gate.com/controller",  # multiple gates with one containing space
     f'{PATH}: Invalid value: "invalid gate.com": {RFC1123}'),
    ("a.io/x,,b.io/y", f'{PATH}: Invalid value: "a.io/x,,b.io/y": cannot contain empty gate names'),
])
def test_invalid_values_are_refused_with_kueues_words(value: str, want: str) -> None:
    errors = create_errors(job(value), ON)
    assert kueue_words(errors) == [want]
    assert "domain-prefixed path of at most 63 bytes" in str(errors[0])  # and how to fix it
    assert kueue_words(manifest_verdict(job(value), gates=V019).errors) == [want]


@pytest.mark.parametrize("value", ["example.com/gate", "this is an invalid value"])
def test_with_the_gate_off_the_annotation_is_not_judged(value: str) -> None:
    """"AdmissionGatedBy annotation with feature gate disabled - valid value / invalid value";
    and Kueue v0.17.0's default (alpha, off)."""
    assert create_errors(job(value), OFF) == []
    assert manifest_verdict(job(value), gates=V017).errors == []
    assert update_errors(job(), job(value), V017) == []


# ------------------------------------------------------------------ job_webhook_test.go TestValidateUpdate

@pytest.mark.parametrize(("old", "new", "want"), [
    (None, "example.com/controller1",  # reject adding AdmissionGatedBy annotation after Job creation
     [f"{PATH}: Forbidden: cannot add admission gate after creation"]),
    ("example.com/controller1", None, []),  # allow removing ... with single gate
    ("example.com/controller1,example.com/controller2", None, []),  # allow removing ... with multiple gates
    ("example.com/controller1,example.com/controller2", "example.com/controller2", []),  # remove one gate
    ("example.com/controller1,example.com/controller2", "example.com/controller3",  # reject injecting new gate
     [f"{PATH}: Forbidden: can only remove gates, not add new ones"]),
    ("example.com/controller1,example.com/controller2", "example.com/controller2,example.com/controller1", []),
    ("", "example.com/controller1", [f"{PATH}: Forbidden: cannot add admission gate after creation"]),
])
def test_names_may_only_be_removed(old: str | None, new: str | None, want: list[str]) -> None:
    assert kueue_words(update_errors(job(old), job(new), ON)) == want
    assert kueue_words(manifest_verdict(job(new), job(old), V019).errors) == want


def test_an_update_through_the_webhook_is_refused_for_the_job_and_the_workload() -> None:
    """The whole door: a tenant adds a gate name to a queued Job and to a Workload (v0.19)."""
    def review(path: str, obj: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "operation": "UPDATE", "namespace": "default", "userInfo": {"username": "alice"},
            "object": obj, "oldObject": old}}
        code, out = answer(path, json.dumps(body).encode(), ClusterView(), gates=V019)
        assert code == 200
        return dict(out["response"])

    refused = review(BATCH_JOB.validate_path, job("a.io/x,b.io/y"), job("a.io/x"))
    assert refused["allowed"] is False
    assert f"{PATH}: Forbidden: can only remove gates, not add new ones" in refused["status"]["message"]
    assert review(BATCH_JOB.validate_path, job("a.io/x"), job("a.io/x,b.io/y"))["allowed"] is True

    wl = workload(None)
    refused = review(routes.VALIDATE_WORKLOAD, workload("example.com/controller1"), wl)
    assert f"{PATH}: Forbidden: cannot add admission gate after creation" in refused["status"]["message"]
    assert review(routes.VALIDATE_WORKLOAD, wl, workload("example.com/controller1"))["allowed"] is True


# ------------------------------------------------------------------ workload_webhook_test.go

def workload(gated: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default", "annotations": {}},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}
    if gated is not None:
        out["metadata"]["annotations"][ANN] = gated
    return out


@pytest.mark.parametrize(("value", "allowed"), [
    ("example.com/controller", True), ("example.com/a,not.example.com/b", True), (" example.com/gate", True),
    ("example.com/gate ,example.com/gate2", True), ("example.com/gate, example.com/gate2", True),
    ("example.com/gate ", True), ("this is an invalid value", False),
    ("duplicates.are/invalid,duplicates.are/invalid", False), ("example.com/gate name", False),
    ("example .com/gate", False), ("valid.com/gate,invalid gate.com/controller", False),
])
def test_a_workload_created_directly_is_held_to_the_same_format(value: str, allowed: bool) -> None:
    verdict = validate_workload(workload(value), None, None, "alice", (), V019)
    assert verdict.allowed is allowed
    assert all(e.path == PATH for e in verdict.errors)
    assert validate_workload(workload(value), None, None, "alice", (), V017).allowed  # v0.17: not judged


def test_a_workload_keeps_other_edits_while_gated() -> None:
    old = workload("example.com/controller1")
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "a"}
    assert update_errors(old, new, ON) == []
