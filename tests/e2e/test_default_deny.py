"""The default deny on the real control plane (issue 31, item 5): the API server sends every
queued object to toposched's catch-all webhook; one of a kind toposched does not govern (here a
ConfigMap: the kinds Kueue integrates that toposched does not, AppWrapper and Spark, have no CRD
on this cluster; their lines are unit-tested) is refused with the one line naming the gap, a bare
pod with the label is held by the pod integration instead, while the pods of a queued Job
(the queue label on its template, as the HyperPod CLI writes it) are let through and run once
the Job is admitted, and objects without the label never reach the webhook."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import JOBS, PODS, Resource
from tests.e2e.conftest import Stack

NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
CLUSTER = {"name": "e2e-deny", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 2}
CONFIGMAPS = Resource("", "v1", "configmaps")
CONTAINER = {"name": "c", "image": "busybox", "command": ["sleep", "3600"],
             "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def refused(call: Any) -> str:
    with pytest.raises(client.ApiException) as denied:
        call()
    body = denied.value.body
    return str(json.loads(body.decode() if isinstance(body, bytes) else body)["message"])


def test_queued_objects_toposched_does_not_govern_are_refused_with_the_gap(stack: Stack) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "settings", "labels": {LABEL_QUEUE_NAME: QUEUE}}, "data": {"a": "b"}}
    message = refused(lambda: stack.api.create(CONFIGMAPS, config, NS))
    assert message.startswith('admission webhook "vqueued.toposched.io" denied the request: v1 ConfigMap is not '
                              "governed by toposched (not a kind Kueue integrates)"), message
    assert "remove the kueue.x-k8s.io/queue-name label" in message
    del config["metadata"]["labels"]
    stack.api.create(CONFIGMAPS, config, NS)  # not queued: never sent to the webhook, never refused
    # A bare pod with the label is governed now (issue 31): held by Kueue's gates, not refused.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "labels": {LABEL_QUEUE_NAME: QUEUE}},
           "spec": {"containers": [CONTAINER]}}
    created = stack.api.create(PODS, pod, NS)
    assert {g["name"] for g in created["spec"]["schedulingGates"]} == {"kueue.x-k8s.io/admission",
                                                                       "kueue.x-k8s.io/topology"}
    stack.api.delete(PODS, "bare", NS)


def test_pods_of_a_queued_job_with_the_label_on_their_template_run(stack: Stack) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "labelled", "labels": {LABEL_QUEUE_NAME: QUEUE}},
           "spec": {"parallelism": 1, "completions": 1, "template": {
               "metadata": {"labels": {LABEL_QUEUE_NAME: QUEUE}},
               "spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}}}
    stack.api.create(JOBS, job, NS)

    def running() -> bool:
        pods = stack.api.list(PODS, NS, labelSelector="job-name=labelled")["items"]
        return any(p["status"].get("phase") == "Running" for p in pods)

    stack.wait(running, 120, "the queued Job's pod (queue label on its template) Running")
    stack.api.delete(JOBS, "labelled", NS, propagationPolicy="Background")
