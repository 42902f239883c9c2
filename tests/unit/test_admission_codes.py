"""The HTTP code of each webhook refusal: Kueue's field errors as Kueue's webhooks send them
(controller-runtime's ``admission.Denied``: 403, reason Forbidden); toposched's own refusals of
what Kueue would accept (a missing queue, a job that can never fit, the default deny) 422,
reason Invalid, which kubectl prints as "The request is invalid: ..." and the ``hyp`` CLI does
not read as "Access denied to resource"."""

from __future__ import annotations

import copy
from typing import Any

from admission import review
from scheduler.adapter.kinds.batch import BATCH_JOB
from tests.unit.test_admission_validation import L3, cluster, job
from tests.unit.test_default_deny import AW, decide, obj

R = "kueue.x-k8s.io/podset-required-topology"


def status(obj: dict[str, Any], view: Any = None) -> dict[str, Any]:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "batch", "version": "v1", "kind": "Job"}, "operation": "CREATE",
        "namespace": "team-a", "userInfo": {"username": "alice"}, "object": obj}}
    resp = review.handle(BATCH_JOB.validate_path, body, cluster() if view is None else view)["response"]
    assert resp["allowed"] is False, resp
    return dict(resp["status"])


def test_kueues_field_errors_are_403_forbidden_as_kueues_webhooks_send_them() -> None:
    both = job(ann={R: L3, "kueue.x-k8s.io/podset-preferred-topology": L3})
    st = status(both)
    assert (st["code"], st["reason"]) == (403, "Forbidden")


def test_a_job_that_can_never_fit_is_422_invalid() -> None:
    st = status(job(5, ann={R: L3}))  # 5 x 8 GPUs in one layer-3 domain of 4 nodes
    assert (st["code"], st["reason"]) == (422, "Invalid")
    assert "can never be admitted by ClusterQueue" in st["message"]


def test_a_missing_local_queue_is_422_invalid() -> None:
    st = status(job(1, queue="typo"))
    assert (st["code"], st["reason"]) == (422, "Invalid") and "typo" in st["message"]


def test_a_multi_pod_set_job_that_can_never_fit_is_422_too() -> None:
    template = job(5, ann={R: L3})["spec"]["template"]
    pytorch = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
               "metadata": {"name": "p", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
               "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": copy.deepcopy(template)},
                                                "Worker": {"replicas": 5, "template": copy.deepcopy(template)}}}}
    from scheduler.adapter.kinds.pytorchjob import PYTORCHJOB

    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}, "operation": "CREATE",
        "namespace": "team-a", "userInfo": {"username": "alice"}, "object": pytorch}}
    resp = review.handle(PYTORCHJOB.validate_path, body, cluster())["response"]
    assert resp["allowed"] is False and (resp["status"]["code"], resp["status"]["reason"]) == (422, "Invalid"), resp


def test_the_default_deny_is_422_invalid() -> None:
    resp = decide(obj(*AW))
    assert resp["allowed"] is False and (resp["status"]["code"], resp["status"]["reason"]) == (422, "Invalid")
