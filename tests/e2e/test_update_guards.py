"""What runs is what was admitted (issue 39), on the real control plane: a tenant with normal
namespace rights (impersonated by the admin, in system:masters, so RBAC allows every write and
only the webhooks can refuse) cannot unhook its work after CREATE.

- A held pod keeps its managed and queue labels and its role hash (the webhook's, not the one it
  was created with); had its labels been stripped past the webhook (here: with the controller's
  credentials), its gates still stay until the controller lifts them.
- A running queued Job keeps its queue label (Kueue's "field is immutable").
- A queued Deployment updated to ``default-scheduler`` without its ``pod-suspending-parent``
  stamp gets both back from the mutating webhook; its queue label cannot be removed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from scheduler.adapter.kinds.deployment import DEPLOYMENT
from scheduler.adapter.kinds.pod import role_hash
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import JOBS, PODS
from scheduler.kube.jobs import resource_of
from tests.e2e.conftest import Stack

NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
CLUSTER = {"name": "e2e-update-guards", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2], "nodesPerDomain": 2}
MANAGED, ROLE_HASH = "kueue.x-k8s.io/managed", "kueue.x-k8s.io/role-hash"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
GATES = {"kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"}
DEPLOYMENTS = resource_of(DEPLOYMENT)


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def container(gpus: int) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                          "limits": {"nvidia.com/gpu": str(gpus)}}}


def refusal(call: Any) -> str:
    with pytest.raises(client.ApiException) as refused:
        call()
    assert refused.value.status == 403, refused.value
    body = refused.value.body
    return str(json.loads(body.decode() if isinstance(body, bytes) else body)["message"])


def gates(pod: dict[str, Any]) -> set[str]:
    return {g["name"] for g in pod["spec"].get("schedulingGates") or ()}


def test_a_held_pod_keeps_its_keys_and_its_gates_in_one_step_or_several(stack: Stack) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "held", "namespace": NS, "labels": {LABEL_QUEUE_NAME: QUEUE},
                        "annotations": {ROLE_HASH: "forged"}},
           "spec": {"restartPolicy": "Never", "containers": [container(9)]}}  # fits no node: stays held
    created = stack.as_user("alice").create(PODS, pod, NS)
    assert GATES <= gates(created)
    assert created["metadata"]["annotations"][ROLE_HASH] == role_hash(created["spec"]) != "forged"

    alice = stack.as_user("alice")
    message = refusal(lambda: alice.merge_patch(PODS, "held", {"metadata": {"labels": {
        MANAGED: None, LABEL_QUEUE_NAME: None}}}, NS))
    assert f'metadata.labels[{MANAGED}]: Invalid value: "": field is immutable' in message
    assert f'metadata.labels[{LABEL_QUEUE_NAME}]: Invalid value: "": field is immutable' in message
    message = refusal(lambda: alice.merge_patch(PODS, "held", {"metadata": {"annotations": {ROLE_HASH: "leader"}}},
                                                NS))
    assert f'metadata.annotations[{ROLE_HASH}]: Invalid value: "leader": field is immutable' in message

    # Had the labels gone past the webhook (the controller's credentials skip it), the gates stay.
    controller = stack.as_controller()
    controller.merge_patch(PODS, "held", {"metadata": {"labels": {MANAGED: None, LABEL_QUEUE_NAME: None}}}, NS)
    message = refusal(lambda: alice.merge_patch(PODS, "held", {"spec": {"schedulingGates": None}}, NS))
    assert "spec.schedulingGates: Forbidden: only toposched's controller may remove kueue.x-k8s.io/admission" \
        in message
    assert GATES <= gates(stack.api.get(PODS, "held", NS))
    controller.merge_patch(PODS, "held", {"metadata": {"finalizers": None}}, NS)
    stack.api.delete(PODS, "held", NS)


def test_a_running_queued_jobs_queue_label_is_immutable(stack: Stack) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "runs", "namespace": NS, "labels": {LABEL_QUEUE_NAME: QUEUE}},
           "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
               "restartPolicy": "Never", "containers": [container(1)]}}}}
    stack.as_user("alice").create(JOBS, job, NS)
    stack.wait(lambda: stack.api.get(JOBS, "runs", NS)["spec"].get("suspend") is False, 120,
               "the Job admitted and started by the controller")
    message = refusal(lambda: stack.as_user("alice").merge_patch(
        JOBS, "runs", {"metadata": {"labels": {LABEL_QUEUE_NAME: None}}}, NS))
    assert message.startswith('admission webhook "vjob.toposched.io" denied the request: '
                              f'metadata.labels[{LABEL_QUEUE_NAME}]: Invalid value: "": field is immutable')
    assert stack.api.get(JOBS, "runs", NS)["metadata"]["labels"][LABEL_QUEUE_NAME] == QUEUE
    stack.api.delete(JOBS, "runs", NS, propagationPolicy="Background")


def test_a_queued_deployment_is_stamped_again_and_keeps_its_queue_label(stack: Stack) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "serve", "namespace": NS, "labels": {LABEL_QUEUE_NAME: QUEUE}},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "serve"}}, "template": {
                      "metadata": {"labels": {"app": "serve"}}, "spec": {"containers": [container(9)]}}}}
    alice = stack.as_user("alice")
    created = alice.create(DEPLOYMENTS, deployment, NS)
    assert created["spec"]["template"]["metadata"]["annotations"][PARENT] == "deployment"

    updated = alice.merge_patch(DEPLOYMENTS, "serve", {"spec": {"template": {
        "metadata": {"annotations": {PARENT: None}, "labels": {MANAGED: None, LABEL_QUEUE_NAME: None}},
        "spec": {"schedulerName": "default-scheduler"}}}}, NS)
    template = updated["spec"]["template"]
    assert template["spec"]["schedulerName"] == "toposched"
    assert template["metadata"]["annotations"][PARENT] == "deployment"
    labels = template["metadata"]["labels"]
    assert labels[MANAGED] == "true" and labels[LABEL_QUEUE_NAME] == QUEUE

    message = refusal(lambda: alice.merge_patch(DEPLOYMENTS, "serve", {"metadata": {"labels": {
        LABEL_QUEUE_NAME: None}}}, NS))
    assert f'metadata.labels[{LABEL_QUEUE_NAME}]: Invalid value: "": field is immutable' in message
    stack.api.delete(DEPLOYMENTS, "serve", NS, propagationPolicy="Background")
