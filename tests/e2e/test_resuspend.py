"""Kueue's re-suspension on the real control plane (issue 13, reproduction 2): a user patches
``suspend: false`` on their own pending Job; toposched suspends it again with Kueue's event and
none of its pods ever runs (the extender places no pod without an admitted assignment)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.informer import JOBS, PODS
from scheduler.kube.events import EVENTS
from tests.e2e.conftest import Stack

L3 = "topology.k8s.aws/network-node-layer-3"
NS = "hyperpod-ns-team-a"
CLUSTER = {"name": "e2e-resuspend", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 4}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def training_job(name: str, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue"}},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                 "template": {
                     "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": L3}},
                     "spec": {"restartPolicy": "Never", "containers": [{
                         "name": "trainer", "image": "busybox",
                         "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}},
    }


def pods_of(stack: Stack, job: str) -> list[dict[str, Any]]:
    return list(stack.api.list(PODS, NS, labelSelector=f"job-name={job}")["items"])


def test_a_user_unsuspending_a_pending_job_is_suspended_again(stack: Stack) -> None:
    stack.api.create(JOBS, training_job("holder", 4), NS)  # every node of the only domain
    stack.wait(lambda: len([p for p in pods_of(stack, "holder") if p["status"].get("phase") == "Running"]) == 4,
               120, "holder Running")
    stack.api.create(JOBS, training_job("sneaky", 1), NS)  # no room left: stays pending
    stack.wait(lambda: stack.api.get(JOBS, "sneaky", NS)["spec"].get("suspend") is True, 30, "sneaky suspended")
    time.sleep(2)  # its Workload exists and is pending
    try:
        stack.api.merge_patch(JOBS, "sneaky", {"spec": {"suspend": False}}, NS)
        unsuspended = True
    except client.ApiException as exc:  # a webhook that denies the unsuspend is the first guard
        assert exc.status in (400, 403), exc
        unsuspended = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # never a pod bound to a node, whatever happens meanwhile
        assert not [p["metadata"]["name"] for p in pods_of(stack, "sneaky") if p["spec"].get("nodeName")]
        time.sleep(0.25)
    assert stack.api.get(JOBS, "sneaky", NS)["spec"]["suspend"] is True
    if unsuspended:
        events = stack.api.list(EVENTS, NS, fieldSelector="involvedObject.name=sneaky")["items"]
        assert any(e["reason"] == "Stopped" and e["message"] == "Not admitted by cluster queue" for e in events)
    stack.wait(lambda: not [p for p in pods_of(stack, "sneaky") if not p["metadata"].get("deletionTimestamp")],
               60, "sneaky's pods gone")
    for name in ("holder", "sneaky"):
        stack.api.delete(JOBS, name, NS, propagationPolicy="Background")
