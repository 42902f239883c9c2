"""What runs is what was admitted, on the real control plane (issue 39): a Job edited after
admission is stopped and queued again with a Workload built from it (Kueue's "No matching
Workload"); a tenant's rewrite of its pending Workload's pod sets (2 x 8 GPUs to 2 x 1, which
would fit) is undone from the Job before it can be admitted; an unlabelled Job owned by its
tenant's queued, never admitted Job is suspended (Kueue's shouldSuspendChildJob). Each fails on
the code before it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes.client import ApiException

from scheduler.k8s.informer import JOBS, PODS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.equivalence import NO_MATCHING_RESTORING
from scheduler.kube.events import EVENTS
from scheduler.kube.resuspend import CHILD_SUSPENDED_MESSAGE
from tests.e2e.conftest import Stack
from tests.e2e.test_resuspend import CLUSTER, NS, training_job

GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(dict(CLUSTER, name="e2e-equivalence"))


def workloads_of(stack: Stack, job: str) -> list[dict[str, Any]]:
    return [w for w in stack.api.list(WORKLOADS, NS)["items"]
            if any(r.get("name") == job for r in w["metadata"].get("ownerReferences") or ())]


def bound_pods(stack: Stack, job: str) -> list[dict[str, Any]]:
    return [p for p in stack.api.list(PODS, NS, labelSelector=f"job-name={job}")["items"]
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]


def events(stack: Stack, name: str, reason: str) -> list[str]:
    return [e["message"] for e in stack.api.list(EVENTS, NS, fieldSelector=f"involvedObject.name={name}")["items"]
            if e["reason"] == reason]


def cleanup(stack: Stack, *names: str) -> None:
    for name in names:
        try:
            stack.api.delete(JOBS, name, NS, propagationPolicy="Background")
        except ApiException as exc:
            if exc.status != 404:  # a child may already be gone with its parent (garbage collection)
                raise
    stack.wait(lambda: not [p for n in names for p in stack.api.list(PODS, NS, labelSelector=f"job-name={n}")["items"]],
               120, "pods gone")


def test_a_running_jobs_parallelism_raised_is_stopped_and_admitted_again_as_it_now_is(stack: Stack) -> None:
    body = training_job("grow", 1)
    body["spec"]["completions"] = 2  # parallelism 1 of 2 completions: one pod
    stack.api.create(JOBS, body, NS)
    stack.wait(lambda: len(bound_pods(stack, "grow")) == 1, 120, "grow running")
    [old] = workloads_of(stack, "grow")
    stack.api.merge_patch(JOBS, "grow", {"spec": {"parallelism": 2}}, NS)  # now two pods: not what was admitted
    stack.wait(lambda: NO_MATCHING_RESTORING in events(stack, "grow", "Stopped"), 60, "grow stopped")
    stack.wait(lambda: [w for w in workloads_of(stack, "grow") if w["metadata"]["uid"] != old["metadata"]["uid"]
                        and st.condition_true(w, st.ADMITTED)], 120, "a new Workload admitted")
    [new] = workloads_of(stack, "grow")
    assert [ps["count"] for ps in new["spec"]["podSets"]] == [2]
    stack.wait(lambda: events(stack, "grow", "DeletedWorkload"), 30, "Kueue's DeletedWorkload event")
    stack.wait(lambda: len(bound_pods(stack, "grow")) == 2, 120, "grow running its two pods")
    cleanup(stack, "grow")


def hold_three_nodes(stack: Stack, name: str) -> None:
    stack.api.create(JOBS, training_job(name, 3), NS)
    stack.wait(lambda: len(bound_pods(stack, name)) == 3, 120, f"{name} running")


def test_a_tenants_rewrite_of_its_pending_workload_is_undone_from_its_job(stack: Stack) -> None:
    hold_three_nodes(stack, "holder")
    stack.api.create(JOBS, training_job("big", 2), NS)  # 2 x 8 GPUs, one node free: pending
    stack.wait(lambda: workloads_of(stack, "big"), 30, "big's Workload")
    time.sleep(2)
    [wl] = workloads_of(stack, "big")
    pod_sets = wl["spec"]["podSets"]
    pod_sets[0]["template"]["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    stack.as_user("tenant").merge_patch(WORKLOADS, wl["metadata"]["name"], {"spec": {"podSets": pod_sets}}, NS)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # never admitted as the tenant wrote it, never a pod bound
        [now] = workloads_of(stack, "big")
        assert not st.condition_true(now, st.QUOTA_RESERVED) and not bound_pods(stack, "big")
        time.sleep(0.25)
    [after] = workloads_of(stack, "big")
    requests = after["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests[GPU] == "8" and events(stack, "big", "UpdatedWorkload")
    cleanup(stack, "big", "holder")


def test_an_unlabelled_job_owned_by_a_queued_pending_job_is_suspended(stack: Stack) -> None:
    hold_three_nodes(stack, "holder2")
    parent = stack.api.create(JOBS, training_job("parent", 2), NS)  # one node free: never admitted
    child = training_job("child", 1)
    del child["metadata"]["labels"]
    child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "parent",
                                             "uid": parent["metadata"]["uid"], "controller": True}]
    stack.api.create(JOBS, child, NS)
    stack.wait(lambda: stack.api.get(JOBS, "child", NS)["spec"].get("suspend") is True, 30, "child suspended")
    stack.wait(lambda: CHILD_SUSPENDED_MESSAGE in events(stack, "child", "Suspended"), 30, "Kueue's event")
    stack.wait(lambda: not bound_pods(stack, "child"), 60, "child's pods gone")
    cleanup(stack, "parent", "child", "holder2")
