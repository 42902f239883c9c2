"""A forged owner reference opts nothing out of the queue (issue 30, finding 2), on the real
control plane: a Job labelled ``kueue.x-k8s.io/queue-name`` whose controller ownerReference
names ``kubeflow.org/v2beta1 MPIJob`` (any uid; no such MPIJob) is created suspended by the
webhook, may not be unsuspended by its user, gets a Workload of its own from the controller,
and runs only once that Workload is admitted by quota and topology. On the code before the fix
the webhook trusted the reference by its kind: the Job was created unsuspended, got no
Workload, and its pods ran at once on the nodes a queued job held."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kubernetes import client

from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import JOBS, PODS, WORKLOADS
from tests.e2e.conftest import Stack

NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
L3 = "topology.k8s.aws/network-node-layer-3"
# One layer-3 domain of two nodes (8 GPUs each).
CLUSTER = {"name": "e2e-owner", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 2}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def gpu_job(name: str, pods: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {LABEL_QUEUE_NAME: QUEUE}},
            "spec": {"parallelism": pods, "completions": pods, "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": L3}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "c", "image": "busybox", "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                                  "limits": {"nvidia.com/gpu": "8"}}}]}}}}


def pods_of(stack: Stack, job: str) -> list[dict[str, Any]]:
    return list(stack.api.list(PODS, NS, labelSelector=f"job-name={job}")["items"])


def running(stack: Stack, job: str, count: int) -> bool:
    return len([p for p in pods_of(stack, job) if p["status"].get("phase") == "Running"]) == count


def workload_of(stack: Stack, uid: str) -> dict[str, Any] | None:
    return next((wl for wl in stack.api.list(WORKLOADS, NS)["items"]
                 if any(r.get("uid") == uid for r in wl["metadata"].get("ownerReferences") or ())), None)


def condition(wl: dict[str, Any] | None, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in ((wl or {}).get("status") or {}).get(
        "conditions") or ())


def test_a_forged_owner_reference_is_queued_like_any_other_job(stack: Stack) -> None:
    stack.api.create(JOBS, gpu_job("filler", 2), NS)  # both nodes of the one layer-3 domain
    stack.wait(lambda: running(stack, "filler", 2), 120, "the filler Job Running")

    forged = gpu_job("forged", 1)
    forged["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                                              "name": "nccl", "uid": str(uuid.uuid4()), "controller": True}]
    created = stack.api.create(JOBS, forged, NS)
    assert created["spec"]["suspend"] is True, "the webhook trusted the forged owner reference"
    assert created["spec"]["template"]["spec"]["schedulerName"] == "toposched"
    uid = created["metadata"]["uid"]
    wl = stack.wait(lambda: workload_of(stack, uid), 60, "a Workload of the forged-owner Job")
    assert wl["spec"]["queueName"] == QUEUE

    with pytest.raises(client.ApiException) as refused:
        stack.as_user("mallory").merge_patch(JOBS, "forged", {"spec": {"suspend": False}}, NS)
    body = refused.value.body
    message = json.loads(body.decode() if isinstance(body, bytes) else body)["message"]
    assert refused.value.status == 403 and "only toposched's controller may unsuspend a queued Job" in message

    core = client.CoreV1Api(stack.kube)
    stack.wait(lambda: any(e.reason == "OwnerReferenceNotHonoured" and e.involved_object.name == "forged"
                           for e in core.list_namespaced_event(NS).items), 60, "the OwnerReferenceNotHonoured Event")
    assert not condition(workload_of(stack, uid), "Admitted") and pods_of(stack, "forged") == []

    stack.api.delete(JOBS, "filler", NS, propagationPolicy="Background")  # frees the domain
    stack.wait(lambda: running(stack, "forged", 1), 180, "the forged-owner Job Running once admitted")
    assert condition(workload_of(stack, uid), "Admitted")
    (pod,) = pods_of(stack, "forged")
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == wl["metadata"]["name"]
    stack.api.delete(JOBS, "forged", NS, propagationPolicy="Background")
