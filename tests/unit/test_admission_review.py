"""The AdmissionReview protocol: uid echo, allowed, status, base64 JSONPatch, warnings."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from admission import review, routes, steps
from admission.view import ClusterView
from scheduler.adapter.kinds.batch import BATCH_JOB


def rev(obj: dict[str, Any], operation: str = "CREATE", kind: str = "Job", old: Any = None) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "abc-123", "kind": {"group": "batch", "version": "v1", "kind": kind}, "operation": operation,
        "namespace": "team-a", "object": obj, "oldObject": old}}


def job(ann: dict[str, str] | None = None, queue: str | None = "lq") -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": labels},
            "spec": {"template": {"metadata": {"annotations": ann or {}}, "spec": {"containers": []}}}}


def test_mutate_response_shape() -> None:
    out = review.handle(BATCH_JOB.mutate_path, rev(job()), ClusterView())
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    resp = out["response"]
    assert resp["uid"] == "abc-123" and resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(resp["patch"])) == [
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/template/spec/schedulerName", "value": "toposched"}]


def test_empty_patch_is_omitted() -> None:
    resp = review.handle(BATCH_JOB.mutate_path, rev(job(queue=None)), ClusterView())["response"]
    assert resp == {"uid": "abc-123", "allowed": True}


def test_denial_shape() -> None:
    bad = job({"kueue.x-k8s.io/podset-required-topology": "a/b", "kueue.x-k8s.io/podset-preferred-topology": "a/c"})
    resp = review.handle(BATCH_JOB.validate_path, rev(bad), ClusterView())["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 403 and resp["status"]["reason"] == "Forbidden"
    assert resp["status"]["message"].startswith("spec.template.metadata.annotations: Invalid value: must not contain")


def test_warnings_pass_through() -> None:
    view = ClusterView(local_queues={"team-a/lq": {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "gone"}}})
    resp = review.handle(BATCH_JOB.validate_path, rev(job()), view)["response"]
    assert resp["allowed"] is True and 'ClusterQueue "gone"' in resp["warnings"][0]


def test_kueue_object_paths() -> None:
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "a/b"}]}}
    for version in ("v1beta1", "v1beta2"):
        resp = review.handle(routes.validate_kueue_path("Topology", version), rev(topo, kind="Topology"), None)
        assert resp["response"]["allowed"] is False
        assert "can only be used at the lowest level" in resp["response"]["status"]["message"]


def test_delete_is_allowed() -> None:
    assert review.handle(BATCH_JOB.validate_path, rev(job(), operation="DELETE"), None)["response"]["allowed"]


@pytest.mark.parametrize("body", [{}, {"kind": "AdmissionReview"}, {"kind": "AdmissionReview", "request": {}}, []])
def test_malformed(body: Any) -> None:
    with pytest.raises(review.ReviewError):
        review.handle(BATCH_JOB.validate_path, body, None)


def test_unknown_path() -> None:
    with pytest.raises(review.ReviewError, match="unknown path"):
        review.handle("/nope", rev(job()), None)


class _BrokenView(ClusterView):
    def local_queue(self, namespace: str, name: str, live: bool = True) -> Any:
        raise RuntimeError("boom")


def test_internal_validation_error_fails_closed_for_a_managed_job() -> None:
    resp = review.handle(BATCH_JOB.validate_path, rev(job()), _BrokenView())["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 500
    message = resp["status"]["message"]
    assert "could not validate Job j: boom" in message and "kueue.x-k8s.io/queue-name" in message


def test_internal_validation_error_lets_an_unmanaged_job_through_with_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(steps, "validate_job", broken)
    resp = review.handle(BATCH_JOB.validate_path, rev(job(queue=None)), ClusterView())["response"]
    assert resp["allowed"] is True and "internal error: boom" in resp["warnings"][0]
    resp = review.handle(BATCH_JOB.validate_path, rev(job()), ClusterView())["response"]
    assert resp["allowed"] is False


@pytest.mark.parametrize("body, fragment", [
    (b"{", "not JSON"),
    (b"[" * 50_000 + b"]" * 50_000, "nests deeper than 100 levels"),
    (json.dumps({"kind": "AdmissionReview", "request": {"uid": "u", "object": {"a": [[[[[[[[[[[[{}]]]]]]]]]]]]}}}
                ).replace("{}", "[" * 120 + "]" * 120).encode(), "nests deeper"),
    (b'{"kind": "AdmissionReview", "request": {"uid": "u", "kind": "Job", "object": []}}', "not a Kubernetes"),
    (b'{"kind": "AdmissionReview", "request": {"uid": 7}}', "no request.uid"),
    (b"[]", "not an AdmissionReview"),
])
def test_answer_is_always_a_well_formed_review(body: bytes, fragment: str) -> None:
    code, out = review.answer(BATCH_JOB.validate_path, body, ClusterView())
    assert code == 400 and out["kind"] == "AdmissionReview"
    assert out["response"]["allowed"] is False and fragment in out["response"]["status"]["message"]


def test_answer_refuses_a_managed_job_when_deciding_breaks() -> None:
    code, out = review.answer(BATCH_JOB.validate_path, json.dumps(rev(job())).encode(), _BrokenView())
    assert code == 200 and out["response"]["uid"] == "abc-123" and out["response"]["allowed"] is False


def test_non_object_request_kind_is_answered() -> None:
    body = rev(job())
    body["request"]["kind"] = "Job"
    code, out = review.answer(BATCH_JOB.validate_path, json.dumps(body).encode(), ClusterView())
    assert code == 200 and out["response"]["uid"] == "abc-123"
