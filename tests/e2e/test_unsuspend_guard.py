"""Quota bypass closed (issue 13 item 3), on the real control plane: a user's ``kubectl patch`` that
unsuspends a queued, pending Job is refused by the webhook with the field and the fix; and when a
queued Job runs anyway without an admitted Workload (here: unsuspended with the controller's own
credentials, as a stolen token would), kube-scheduler shows the extender's refusal in the pods'
FailedScheduling events and no pod is bound. The controller's own unsuspend still works (job A
and C below; every other e2e test relies on it too)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import JOBS, PODS
from tests.e2e.conftest import Stack

NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
L3 = "topology.k8s.aws/network-node-layer-3"
# Two layer-3 domains of two nodes each (8 GPUs per node).
CLUSTER = {"name": "e2e-guard", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2], "nodesPerDomain": 2}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def gpu_job(name: str, pods: int, required_l3: bool) -> dict[str, Any]:
    annotations = {"kueue.x-k8s.io/podset-required-topology": L3} if required_l3 else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {LABEL_QUEUE_NAME: QUEUE}},
            "spec": {"parallelism": pods, "completions": pods, "template": {
                "metadata": {"annotations": annotations},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "c", "image": "busybox", "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                                  "limits": {"nvidia.com/gpu": "8"}}}]}}}}


def running(stack: Stack, job: str, count: int) -> bool:
    pods = stack.api.list(PODS, NS, labelSelector=f"job-name={job}")["items"]
    return len([p for p in pods if p["status"].get("phase") == "Running"]) == count


def test_a_user_cannot_unsuspend_a_pending_job_and_its_pods_cannot_bypass_the_queue(stack: Stack) -> None:
    # A fills one layer-3 domain, C one node of the other: B (2 nodes in one layer-3 domain) waits.
    stack.api.create(JOBS, gpu_job("a-fills-x", 2, True), NS)
    stack.wait(lambda: running(stack, "a-fills-x", 2), 120, "job A Running (the controller unsuspended it)")
    stack.api.create(JOBS, gpu_job("c-one-node", 1, False), NS)
    stack.wait(lambda: running(stack, "c-one-node", 1), 120, "job C Running")
    stack.api.create(JOBS, gpu_job("b-waits", 2, True), NS)

    with pytest.raises(client.ApiException) as refused:
        stack.as_user("alice").merge_patch(JOBS, "b-waits", {"spec": {"suspend": False}}, NS)
    assert refused.value.status == 403
    body = refused.value.body
    message = json.loads(body.decode() if isinstance(body, bytes) else body)["message"]
    assert message.startswith('admission webhook "vjob.toposched.io" denied the request: spec.suspend: Forbidden: '
                              "only toposched's controller may unsuspend a queued Job (user \"alice\" is not it)")
    assert f"remove the {LABEL_QUEUE_NAME} label" in message
    assert stack.api.get(JOBS, "b-waits", NS)["spec"]["suspend"] is True

    # Past the webhook anyway (with the controller's credentials, which the webhooks skip): its pods
    # carry no workload annotation, and the extender refuses them with the reason and the fix.
    stack.as_controller().merge_patch(JOBS, "b-waits", {"spec": {"suspend": False}}, NS)
    core = client.CoreV1Api(stack.kube)

    def refusal_event() -> str | None:
        for event in core.list_namespaced_event(NS).items:
            if (event.reason == "FailedScheduling" and event.involved_object.name.startswith("b-waits-")
                    and "has no admitted Workload" in (event.message or "")):
                return str(event.message)
        return None

    message = stack.wait(refusal_event, 120, "FailedScheduling event with the extender's refusal")
    assert "belongs to Job hyperpod-ns-team-a/b-waits" in message and "remove the" in message
    pods = stack.api.list(PODS, NS, labelSelector="job-name=b-waits")["items"]
    assert not any(p["spec"].get("nodeName") for p in pods), "a pod of the bypassing job was bound"
    for name in ("a-fills-x", "c-one-node", "b-waits"):
        stack.api.delete(JOBS, name, NS, propagationPolicy="Background")


def test_with_the_webhook_down_the_controller_still_starts_what_it_admits(stack: Stack) -> None:
    """The job kinds' validating webhooks (failurePolicy Fail) skip the controller's own writes
    (matchConditions, issue 34): an admitted job starts while the webhook is down, and nobody
    else can unsuspend a queued job meanwhile. Runs last in this module (stops the webhook)."""
    from scheduler.devcluster.stack import restart_component, stop_component

    stack.api.create(JOBS, gpu_job("d-fills", 2, True), NS)
    stack.wait(lambda: running(stack, "d-fills", 2), 120, "job D Running")
    stack.api.create(JOBS, gpu_job("e-waits", 4, False), NS)  # all four nodes: waits for D
    stop_component(stack.cluster, "toposched-webhook", kill=True)
    try:
        with pytest.raises(client.ApiException) as refused:
            stack.as_user("alice").merge_patch(JOBS, "e-waits", {"spec": {"suspend": False}}, NS)
        assert "failed calling webhook" in str(refused.value.body)
        stack.api.delete(JOBS, "d-fills", NS, propagationPolicy="Background")  # DELETE: no webhook
        stack.wait(lambda: running(stack, "e-waits", 4), 180,
                   "job E admitted and started by the controller with the webhook down")
    finally:
        restart_component(stack.cluster, "toposched-webhook")
    stack.api.delete(JOBS, "e-waits", NS, propagationPolicy="Background")
