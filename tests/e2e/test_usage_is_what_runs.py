"""Usage is what runs (issue 39 item 10), on the real control plane: another team's unqueued
8-GPU pods carrying Kueue's ``kueue.x-k8s.io/podset-unconstrained-topology`` annotation run on
both nodes; a queued job that needs a node's 8 GPUs is not admitted onto nodes with no GPU left
(before: the annotated pods were skipped as "a TAS pod", the job was admitted and its pod never
ran), and is admitted and runs as soon as those pods are gone."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from scheduler.devcluster.apply import apply_objects
from scheduler.k8s.informer import PODS
from tests.e2e.conftest import Stack
from tests.e2e.test_quota_flows import (
    FLAVOR,
    admitted,
    cluster_queue,
    gpu_job,
    local_queue,
    namespace,
    running,
    stays,
    submit,
    workload_of,
)

CLUSTER = {"name": "e2e-usage", "instanceType": FLAVOR, "layers": [1, 1, 1], "nodesPerDomain": 2}
NS, OTHER = "usage", "usage-other"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    stack = stack_factory(CLUSTER)
    apply_objects(stack.kube, [namespace(NS), namespace(OTHER), cluster_queue("usage-cq", 64),
                               local_queue(NS, "lq", "usage-cq")])
    return stack


def unqueued_pod(name: str, node: str) -> dict[str, Any]:
    """Another team's pod outside the queue, dressed as a workload's TAS pod."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": OTHER, "annotations": {UNCONSTRAINED: "true"},
                         "labels": {"kueue.x-k8s.io/tas": "true", "kueue.x-k8s.io/podset": "main"}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "c", "image": "busybox", "resources": {
                         "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}


def bound(stack: Stack, name: str) -> bool:
    return bool(stack.api.get(PODS, name, OTHER)["spec"].get("nodeName"))


def gone(stack: Stack, name: str) -> bool:
    try:
        stack.api.get(PODS, name, OTHER)
    except client.ApiException as exc:
        return exc.status == 404
    return False


def test_unqueued_annotated_pods_are_usage_of_their_nodes(stack: Stack) -> None:
    names = [n["metadata"]["name"] for n in stack.nodes]
    squatters = [f"squatter-{i}" for i in range(len(names))]
    for pod_name, node in zip(squatters, names, strict=True):
        stack.api.create(PODS, unqueued_pod(pod_name, node), OTHER)
    for pod_name in squatters:
        stack.wait(lambda p=pod_name: bound(stack, p), 60, f"{pod_name} bound")

    job = submit(stack, gpu_job("needs-a-node", NS, "lq", 8))
    stack.wait(lambda: workload_of(stack, NS, job["metadata"]["uid"]), 30, "the job's Workload")
    # Several admission cycles: every node's GPUs are taken by the squatters.
    stays(lambda: not admitted(stack, job), 15, "the job was admitted onto nodes with no GPU left")

    for pod_name in squatters:
        stack.api.delete(PODS, pod_name, OTHER, gracePeriodSeconds=0)
    for pod_name in squatters:
        stack.wait(lambda p=pod_name: gone(stack, p), 60, f"{pod_name} deleted")
    stack.wait(lambda: admitted(stack, job), 60, "the job admitted once the GPUs are free")
    stack.wait(lambda: running(stack, job), 90, "the job's pod running")
