"""The default deny on the real control plane (issue 31, item 5; scoped by issue 40, item 1): the
API server sends every queued object to toposched's catch-all webhook; one that would run pods
outside the queue (a DaemonSet; a CRD whose object holds a pod template: the kinds Kueue
integrates that toposched does not, AppWrapper and Spark, have no CRD on this cluster, their
lines are unit-tested) is refused with the one line naming the gap; one that runs nothing (a
Service, a ConfigMap: a Helm chart's common labels) is created, and kubectl prints the warning
that the label has no effect; a CronJob labelled on itself only is created with the warning that
says how to queue its Jobs. A bare pod with the label is held by the pod integration instead,
while the pods of a queued Job (the queue label on its template, as the HyperPod CLI writes it)
are let through and run once the Job is admitted, and objects without the label never reach the
webhook."""

from __future__ import annotations

import json
import subprocess
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
DAEMONSETS = Resource("apps", "v1", "daemonsets")
RUNNERS = Resource("e2e.toposched.io", "v1", "runners")
KUBECTL = "/usr/bin/kubectl"
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


def kubectl(stack: Stack, manifest: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl as a user runs it: its stderr carries the webhook's warnings ("Warning: ...")."""
    return subprocess.run([KUBECTL, "--kubeconfig", str(stack.cluster.kubeconfig), "-n", NS, *args, "-f", "-"],
                          input=json.dumps(manifest), text=True, capture_output=True, timeout=60)


def no_effect(spelled: str) -> str:
    return (f"Warning: toposched: the {LABEL_QUEUE_NAME} label has no effect on a {spelled}: it runs no pods, so "
            "there is nothing to queue (Kueue ignores it too)")


def test_labelled_objects_that_run_no_pods_are_created_with_a_warning(stack: Stack) -> None:
    """A chart's common labels on a Service and a ConfigMap (refused before issue 40)."""
    labels = {LABEL_QUEUE_NAME: QUEUE, "app.kubernetes.io/name": "web"}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": labels},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "labels": labels},
              "data": {"a": "b"}}
    for manifest, spelled in ((service, "v1 Service"), (config, "v1 ConfigMap")):
        out = kubectl(stack, manifest, "create")
        assert out.returncode == 0, out.stderr
        assert no_effect(spelled) in out.stderr, out.stderr
        out = kubectl(stack, manifest, "delete")
        assert out.returncode == 0, out.stderr


def test_a_cronjob_labelled_on_itself_only_is_created_with_how_to_queue_its_jobs(stack: Stack) -> None:
    def cronjob(name: str, template_labels: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": name, "labels": {LABEL_QUEUE_NAME: QUEUE}},
                "spec": {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {
                    "metadata": {"labels": template_labels},
                    "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}}}}}

    out = kubectl(stack, cronjob("nightly", {"app": "nightly"}), "create")
    assert out.returncode == 0, out.stderr
    assert (f"Warning: toposched: the {LABEL_QUEUE_NAME} label on a CronJob does not queue the Jobs it creates "
            "(they take their labels from spec.jobTemplate.metadata.labels) and they will run outside the queue: "
            "to queue them, put the label in spec.jobTemplate.metadata.labels") in out.stderr, out.stderr
    queued = kubectl(stack, cronjob("nightly-queued", {LABEL_QUEUE_NAME: QUEUE}), "create")
    assert queued.returncode == 0 and "Warning" not in queued.stderr, queued.stderr
    for name in ("nightly", "nightly-queued"):
        kubectl(stack, cronjob(name, {}), "delete")


def test_what_would_run_pods_outside_the_queue_is_refused_with_the_gap(stack: Stack) -> None:
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": "agent", "labels": {LABEL_QUEUE_NAME: QUEUE}},
                 "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                     "metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [CONTAINER]}}}}
    message = refused(lambda: stack.api.create(DAEMONSETS, daemonset, NS))
    assert message == ('admission webhook "vqueued.toposched.io" denied the request: apps/v1 DaemonSet is not '
                       "governed by toposched (Kueue does not govern DaemonSets: it runs a pod on every node it "
                       f"selects, outside the queue): remove the {LABEL_QUEUE_NAME} label to run it outside the "
                       "queue"), message
    # A CRD nobody here knows is judged by its object: with a pod template it is refused (fail
    # closed), without one it runs nothing and passes.
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "runners.e2e.toposched.io"},
           "spec": {"group": "e2e.toposched.io", "scope": "Namespaced",
                    "names": {"plural": "runners", "singular": "runner", "kind": "Runner"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    out = kubectl(stack, crd, "apply")
    assert out.returncode == 0, out.stderr
    crds = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)

    def established() -> bool:
        status = stack.api.get(crds, "runners.e2e.toposched.io").get("status") or {}  # conditions: null at first
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in status.get("conditions") or ())

    stack.wait(established, 60, "the Runner CRD established")
    runner = {"apiVersion": "e2e.toposched.io/v1", "kind": "Runner",
              "metadata": {"name": "r", "labels": {LABEL_QUEUE_NAME: QUEUE}},
              "spec": {"workers": [{"replicas": 2, "template": {"spec": {"containers": [CONTAINER]}}}]}}

    def denied() -> str | None:
        try:
            stack.api.create(RUNNERS, runner, NS)
        except client.ApiException as exc:
            if exc.status == 404:  # the new resource not served yet: retry
                return None
            body = exc.body.decode() if isinstance(exc.body, bytes) else exc.body
            return str(json.loads(body)["message"])
        raise AssertionError("a Runner holding a pod template was created")

    message = stack.wait(denied, 30, "the Runner refused")
    assert ("e2e.toposched.io/v1 Runner is not governed by toposched (not a kind Kueue integrates, and it runs pods: "
            "spec.workers[0].template is a pod template)") in message, message
    runner["spec"] = {"endpoint": "https://example.com"}
    stack.api.create(RUNNERS, runner, NS)
    stack.api.delete(RUNNERS, "r", NS)


def test_a_bare_pod_with_the_label_is_held_and_unlabelled_objects_are_never_sent(stack: Stack) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}, "data": {"a": "b"}}
    stack.api.create(CONFIGMAPS, config, NS)  # not queued: never sent to the webhook
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
