"""Elastic jobs on the real control plane under ``--kueue-version v0.19`` (Kueue v0.19.2's
ElasticJobsViaWorkloadSlices, on by default there): a batch Job annotated
``kueue.x-k8s.io/elastic-job: "true"`` scales up through a new workload slice that is admitted
and replaces the old one (Finished ``WorkloadSliceReplaced``, Kueue's message), its new pods run,
and it scales down in place; the job is never suspended by a scale. Its pods carry Kueue's
elastic scheduling gate until the controller's ungater lifts it as the admitted slice grants.
The webhook refuses what Kueue's refuses for elastic jobs. Fails on main: the parallelism change stopped the job."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.k8s.informer import JOBS, PODS, WORKLOADS
from tests.e2e.conftest import Stack

NS = "hyperpod-ns-team-a"
CLUSTER = {"name": "e2e-elastic", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 4}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, kueue_version="v0.19")


def elastic_job(name: str, parallelism: int, *, template_annotations: dict[str, str] | None = None,
                annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue"},
                     "annotations": {ws.ELASTIC_ANNOTATION: "true", **(annotations or {})}},
        "spec": {"parallelism": parallelism, "completions": 4,
                 "template": {
                     "metadata": {"annotations": template_annotations or {}},
                     "spec": {"restartPolicy": "Never", "containers": [{
                         "name": "trainer", "image": "busybox",
                         "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}},
    }


def workloads(stack: Stack, job: str) -> list[dict[str, Any]]:
    uid = stack.api.get(JOBS, job, NS)["metadata"]["uid"]
    return [w for w in stack.api.list(WORKLOADS, NS)["items"]
            if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or ())]


def condition(wl: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or () if c["type"] == type_), None)


def is_true(wl: dict[str, Any], type_: str) -> bool:
    c = condition(wl, type_)
    return c is not None and c["status"] == "True"


def running(stack: Stack, job: str) -> int:
    pods = stack.api.list(PODS, NS, labelSelector=f"job-name={job}")["items"]
    return len([p for p in pods
                if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")])


def watch_never_suspended(stack: Stack, job: str, until: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert stack.api.get(JOBS, job, NS)["spec"].get("suspend") is not True, f"{job} suspended during {what}"
        value = until()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"{what}: not met within {timeout_s}s; logs in {stack.cluster.logs}")


def test_an_elastic_job_scales_up_through_a_new_slice_and_down_in_place(stack: Stack) -> None:
    stack.api.create(JOBS, elastic_job("elastic", 1), NS)
    template = stack.api.get(JOBS, "elastic", NS)["spec"]["template"]["spec"]
    assert {"name": ws.SCHEDULING_GATE} in template["schedulingGates"]  # Kueue's job webhook Default
    stack.wait(lambda: running(stack, "elastic") == 1, 120, "one pod Running")
    [first] = workloads(stack, "elastic")
    assert first["metadata"]["annotations"][ws.SLICE_NAME] == first["metadata"]["name"]

    stack.api.merge_patch(JOBS, "elastic", {"spec": {"parallelism": 3}}, NS)

    def replaced() -> dict[str, Any] | None:
        slices = workloads(stack, "elastic")
        old = next(w for w in slices if w["metadata"]["name"] == first["metadata"]["name"])
        new = [w for w in slices if (w["metadata"].get("annotations") or {}).get(ws.REPLACEMENT_FOR)]
        done = condition(old, "Finished")
        return new[0] if new and is_true(new[0], "Admitted") and done and done["status"] == "True" else None

    new = watch_never_suspended(stack, "elastic", replaced, 90, "the scale-up")
    assert new["metadata"]["annotations"][ws.REPLACEMENT_FOR] == f"{NS}/{first['metadata']['name']}"
    assert new["metadata"]["annotations"][ws.SLICE_NAME] == first["metadata"]["name"]
    assert new["spec"]["podSets"][0]["count"] == 3
    old = stack.api.get(WORKLOADS, first["metadata"]["name"], NS)
    finished = condition(old, "Finished")
    assert finished is not None and finished["reason"] == "WorkloadSliceReplaced"
    job_uid = stack.api.get(JOBS, "elastic", NS)["metadata"]["uid"]
    assert finished["message"] == (f"Replaced to accommodate a workload (UID: {new['metadata']['uid']}, "
                                   f"JobUID: {job_uid}) due to workload slice aggregation")
    watch_never_suspended(stack, "elastic", lambda: running(stack, "elastic") == 3, 120, "three pods Running")

    stack.api.merge_patch(JOBS, "elastic", {"spec": {"parallelism": 2}}, NS)
    after = watch_never_suspended(
        stack, "elastic",
        lambda: next((w for w in [stack.api.get(WORKLOADS, new["metadata"]["name"], NS)]
                      if w["spec"]["podSets"][0]["count"] == 2), None), 60, "the scale-down")
    assert is_true(after, "Admitted") and not is_true(after, "Finished")
    assert len([w for w in workloads(stack, "elastic") if not is_true(w, "Finished")]) == 1
    watch_never_suspended(stack, "elastic", lambda: running(stack, "elastic") == 2, 120, "two pods Running")
    stack.api.delete(JOBS, "elastic", NS, propagationPolicy="Background")


@pytest.mark.parametrize(("body", "message"), [
    (elastic_job("topo", 1, template_annotations={"kueue.x-k8s.io/podset-required-topology":
                                                  "topology.k8s.aws/network-node-layer-3"}),
     "spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]: Forbidden: "
     "required topology is not supported with elastic jobs"),
    (elastic_job("partial", 2, annotations={"kueue.x-k8s.io/job-min-parallelism": "1"}),
     'metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: "1": '
     "partial admission and elastic job cannot be used together"),
])
def test_the_webhook_refuses_what_kueue_refuses_for_elastic_jobs(stack: Stack, body: dict[str, Any],
                                                                 message: str) -> None:
    with pytest.raises(client.ApiException) as refused:
        stack.api.create(JOBS, body, NS)
    assert refused.value.status in (400, 403, 422)
    assert message in json.loads(refused.value.body)["message"]
