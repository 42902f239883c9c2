"""A review's cost is bounded by its size (issue 39): a review larger than any normal object's is
refused with 413 before it is parsed, and a large real object (a JobSet of 8 replicated Jobs with
big env lists) stays well inside the cap."""

from __future__ import annotations

import json
from typing import Any

import pytest

from admission.review import answer
from admission.review_size import MAX_REVIEW_BYTES
from admission.view import ClusterView
from scheduler.adapter.kinds.jobset import JOBSET


def big_jobset(env_vars: int) -> dict[str, Any]:
    """8 replicated Jobs, 2 containers each with ``env_vars`` environment variables."""
    container = [{"name": f"c{c}", "image": "registry.example.com/team/train:2026.12.01-abcdef",
                  "env": [{"name": f"ENV_VAR_NUMBER_{k}", "value": "some-configuration-value-" + "x" * 40}
                          for k in range(env_vars)],
                  "resources": {"requests": {"cpu": "8", "memory": "64Gi"}}} for c in range(2)]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "big", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "replicatedJobs": [
                {"name": f"rj{i}", "replicas": 1, "template": {"spec": {
                    "parallelism": 4, "completions": 4, "template": {"spec": {"containers": container}}}}}
                for i in range(8)]}}


def body(obj: Any, operation: str = "UPDATE", old: Any = None, kind: str = "JobSet") -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"kind": kind}, "operation": operation, "namespace": "ns",
        "userInfo": {"username": "alice"}, "object": obj, "oldObject": old}}).encode()


def test_a_large_real_jobset_update_is_far_inside_the_cap() -> None:
    raw = body(big_jobset(100), "UPDATE", big_jobset(100))
    assert 300_000 < len(raw) < MAX_REVIEW_BYTES / 2
    code, out = answer(JOBSET.mutate_path, raw, ClusterView())
    assert code == 200 and out["response"]["allowed"] is True


@pytest.mark.parametrize("path", [JOBSET.mutate_path, JOBSET.validate_path])
def test_a_review_over_the_cap_is_refused_with_413_before_it_is_parsed(path: str) -> None:
    raw = body(big_jobset(400), "UPDATE", big_jobset(400))  # about 1.4 MB
    assert len(raw) > MAX_REVIEW_BYTES
    code, out = answer(path, raw, ClusterView())
    assert code == 413
    response = out["response"]
    assert response["allowed"] is False and response["status"]["code"] == 413
    assert response["status"]["reason"] == "RequestEntityTooLarge"
    message = response["status"]["message"]
    assert f"AdmissionReview of {len(raw)} bytes is over the webhook's limit of {MAX_REVIEW_BYTES} bytes" in message
    assert "ConfigMap" in message
    code, _ = answer(path, b"{" * (MAX_REVIEW_BYTES + 1), ClusterView())  # not even JSON: never parsed
    assert code == 413
