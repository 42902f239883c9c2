"""Kueue's AdmissionGatedBy on the real control plane, with toposched behaving as Kueue v0.19.2
(``--kueue-version v0.19``, where the gate is beta and on): a batch Job created with
``kueue.x-k8s.io/admission-gated-by`` waits with Kueue's condition until every named controller
has taken its name out; a tenant (impersonated, in system:masters: only the webhooks can refuse)
can neither add a name to the Job or its Workload nor lift the Job's gate by rewriting the
Workload; a malformed value is refused at CREATE in Kueue's words."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.informer import JOBS, WORKLOADS
from tests.e2e.conftest import Stack

NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
CLUSTER = {"name": "e2e-gated-by", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2], "nodesPerDomain": 2}
ANN = "kueue.x-k8s.io/admission-gated-by"
PATH = f"metadata.annotations[{ANN}]"
TWO = "example.com/controller1,example.com/controller2"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, kueue_version="v0.19")


def gated_job(name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE},
                         "annotations": {ANN: value}},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{
                    "name": "c", "image": "busybox", "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                  "limits": {"nvidia.com/gpu": "1"}}}]}}}}


def refusal(call: Any) -> str:
    with pytest.raises(client.ApiException) as refused:
        call()
    assert refused.value.status == 403, refused.value
    body = refused.value.body
    return str(json.loads(body.decode() if isinstance(body, bytes) else body)["message"])


def workload_of(stack: Stack, uid: str) -> dict[str, Any] | None:
    for wl in stack.api.list(WORKLOADS, NS)["items"]:
        if any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or ()):
            return dict(wl)
    return None


def quota_reserved(wl: dict[str, Any] | None) -> tuple[str, str, str] | None:
    for cond in ((wl or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] == "QuotaReserved":
            return cond["status"], cond["reason"], cond["message"]
    return None


def test_a_gated_job_waits_until_every_name_is_gone_and_only_removal_is_allowed(stack: Stack) -> None:
    tenant = stack.as_user("alice")
    uid = tenant.create(JOBS, gated_job("gated", TWO), NS)["metadata"]["uid"]
    gated = ("False", "AdmissionGated", f"Admission is gated by: {TWO}")
    wl = stack.wait(lambda: (w := workload_of(stack, uid)) and quota_reserved(w) == gated and w,
                    what="the Workload waits with Kueue's AdmissionGated condition")
    assert wl["metadata"]["annotations"][ANN] == TWO
    time.sleep(3)  # several controller passes: still held
    assert quota_reserved(workload_of(stack, uid)) == gated
    assert stack.api.get(JOBS, "gated", NS)["spec"]["suspend"] is True

    # Only removal: a tenant cannot add a name to the Job or to its Workload.
    message = refusal(lambda: tenant.merge_patch(
        JOBS, "gated", {"metadata": {"annotations": {ANN: f"{TWO},example.com/controller3"}}}, NS))
    assert f"{PATH}: Forbidden: can only remove gates, not add new ones" in message
    name = wl["metadata"]["name"]
    message = refusal(lambda: tenant.merge_patch(
        WORKLOADS, name, {"metadata": {"annotations": {ANN: "example.com/controller3"}}}, NS))
    assert f"{PATH}: Forbidden: can only remove gates, not add new ones" in message

    # Lifting the Workload's annotation does not lift the Job's gate: the controller copies it back.
    tenant.merge_patch(WORKLOADS, name, {"metadata": {"annotations": {ANN: None}}}, NS)
    stack.wait(lambda: (workload_of(stack, uid) or {})["metadata"].get("annotations", {}).get(ANN) == TWO,
               what="the Job's gate copied back onto its Workload")
    assert stack.api.get(JOBS, "gated", NS)["spec"]["suspend"] is True

    # Each controller takes its own name out; the last one lets the Job be admitted and started.
    tenant.merge_patch(JOBS, "gated", {"metadata": {"annotations": {ANN: "example.com/controller2"}}}, NS)
    stack.wait(lambda: (workload_of(stack, uid) or {})["metadata"].get("annotations", {}).get(ANN)
               == "example.com/controller2", what="one name removed from the Workload too")
    assert stack.api.get(JOBS, "gated", NS)["spec"]["suspend"] is True
    tenant.merge_patch(JOBS, "gated", {"metadata": {"annotations": {ANN: None}}}, NS)
    stack.wait(lambda: (quota_reserved(workload_of(stack, uid)) or ("",))[0] == "True",
               what="the Workload admitted once the gate is cleared")
    stack.wait(lambda: stack.api.get(JOBS, "gated", NS)["spec"]["suspend"] is False, what="the Job started")


def test_a_malformed_gate_is_refused_at_creation_in_kueues_words(stack: Stack) -> None:
    message = refusal(lambda: stack.as_user("alice").create(JOBS, gated_job("malformed", "this is an invalid value"),
                                                            NS))
    assert (f'{PATH}: Invalid value: "this is an invalid value": must be a domain-prefixed path (such as '
            '"acme.io/foo")') in message
