"""What runs is what was admitted (issue 39): the equivalence phase (``scheduler/kube/equivalence.py``,
Kueue's ``EquivalentToWorkload``) against the in-memory API server. Each test fails on the code
before it: a job edited after admission ran with its new pod sets on the old admission, and a
tenant's rewrite of its pending Workload was admitted as written."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB
from scheduler.adapter.kinds.ray import RAYCLUSTER
from scheduler.adapter.kinds.trainjob import TRAINJOB
from scheduler.core.workload import ANN_WORKLOAD
from scheduler.k8s.informer import JOBS, WORKLOADS, Resource
from scheduler.kube import status as st
from scheduler.kube.equivalence import DELETED_NOT_MATCHING, NO_MATCHING_RESTORING, UPDATED_NOT_MATCHING
from scheduler.kube.jobs import resource_of
from tests.unit.kube.test_new_kinds_phases import (
    CLUSTER_RUNTIMES,
    Q,
    create,
    hyp_job,
    pod_template,
    reconcile,
    torch_runtime,
    trainjob,
    workloads,
)
from tests.unit.kube.test_phases import GPU, NS, Harness, job


def messages(harness: Harness, reason: str, name: str) -> list[str]:
    return [e["message"] for e in harness.events_of(reason) if e["involvedObject"]["name"] == name]


def requeued_as(harness: Harness, resource: Resource, name: str, old: dict[str, Any]) -> dict[str, Any]:
    """The job was stopped with Kueue's message, the stale Workload deleted once its pods were
    gone, and one new Workload built from the job is queued: returned."""
    assert messages(harness, "Stopped", name) == [NO_MATCHING_RESTORING]
    key = f"{NS}/{old['metadata']['name']}"
    assert messages(harness, "DeletedWorkload", name) == [DELETED_NOT_MATCHING.format(key)]
    [new] = workloads(harness)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert harness.api.get(resource, name, NS)["spec"].get("suspend", True) is not False or \
        not st.condition_true(new, st.ADMITTED)
    return new


def gpus(ps: dict[str, Any]) -> str:
    return str(ps["template"]["spec"]["containers"][0]["resources"]["requests"][GPU])


# ---------------------------------------------------------------------------- batch Job
def test_a_running_jobs_parallelism_raised_stops_it_and_queues_a_workload_of_the_job(harness: Harness) -> None:
    old = harness.admitted("train", 1)
    assert harness.job("train")["spec"]["suspend"] is False
    harness.api.merge_patch(JOBS, "train", {"spec": {"parallelism": 3, "completions": 3}}, NS)
    harness.sync()
    reconcile(harness)
    assert harness.job("train")["spec"]["suspend"] is True  # stopped in the pass that saw it
    reconcile(harness, 2)
    new = requeued_as(harness, JOBS, "train", old)
    assert [ps["count"] for ps in new["spec"]["podSets"]] == [3]
    assert ANN_WORKLOAD not in (harness.job("train")["spec"]["template"]["metadata"].get("annotations") or {})


def test_a_partially_admitted_job_running_its_admitted_count_keeps_running(harness: Harness) -> None:
    """Kueue's exception (a guard, passes on the old code too): what runs is the admitted count."""
    body = job("partial", 6)  # 6 x 8 GPUs, at least 1: one block (2 nodes) admits 2
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    harness.api.create(JOBS, body, NS)
    harness.sync()
    reconcile(harness, 4)
    [wl] = workloads(harness)
    assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    running = harness.job("partial")
    assert running["spec"]["suspend"] is False and running["spec"]["parallelism"] == 2
    assert messages(harness, "Stopped", "partial") == []


def test_an_admitted_workload_that_no_longer_matches_its_suspended_job_is_never_started(harness: Harness) -> None:
    harness.api.create(JOBS, job("late", 1), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    harness.sync()
    harness.controller.admit()
    harness.sync()
    template = harness.job("late")["spec"]["template"]
    template["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    harness.api.merge_patch(JOBS, "late", {"spec": {"parallelism": 4, "completions": 4, "template": template}}, NS)
    harness.sync()
    harness.controller.start_admitted()  # between the phases: the admission is not the job's
    harness.sync()
    assert harness.job("late")["spec"]["suspend"] is True
    reconcile(harness, 2)
    assert messages(harness, "DeletedWorkload", "late")
    assert [(ps["count"], gpus(ps)) for ps in workloads(harness)[0]["spec"]["podSets"]] == [(4, "1")]


# ---------------------------------------------------------------------------- a tenant's Workload
def test_a_tenant_rewriting_its_pending_workloads_pod_sets_gets_them_rewritten_from_the_job(harness: Harness) -> None:
    harness.api.create(JOBS, job("big", 5), NS)  # 5 x 8 GPUs > the 32-GPU quota: stays pending
    harness.sync()
    reconcile(harness)
    [wl] = workloads(harness)
    assert not st.condition_true(wl, st.QUOTA_RESERVED)
    pod_sets = wl["spec"]["podSets"]
    pod_sets[0]["template"]["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    harness.api.merge_patch(WORKLOADS, wl["metadata"]["name"], {"spec": {"podSets": pod_sets,
                                                                        "maximumExecutionTimeSeconds": 60}}, NS)
    harness.sync()
    reconcile(harness, 3)
    [after] = workloads(harness)
    assert after["metadata"]["uid"] == wl["metadata"]["uid"]  # Kueue updates a pending one in place
    assert gpus(after["spec"]["podSets"][0]) == "8" and "maximumExecutionTimeSeconds" not in after["spec"]
    assert not st.condition_true(after, st.QUOTA_RESERVED) and harness.job("big")["spec"]["suspend"] is True
    key = f"{NS}/{wl['metadata']['name']}"
    assert messages(harness, "UpdatedWorkload", "big") == [UPDATED_NOT_MATCHING.format(key)]


# ---------------------------------------------------------------------------- the other kinds
def test_a_rayclusters_worker_group_scaled_after_admission_is_stopped_and_queued_again(harness: Harness) -> None:
    one_gpu = pod_template()
    one_gpu["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    head = pod_template()
    head["spec"]["containers"][0]["resources"] = {}
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "rc", "namespace": NS, "labels": dict(Q)},
               "spec": {"suspend": True, "headGroupSpec": {"template": head},
                        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "template": one_gpu}]}}
    create(harness, resource_of(RAYCLUSTER), cluster)
    reconcile(harness, 3)
    [old] = workloads(harness)
    started = harness.api.get(resource_of(RAYCLUSTER), "rc", NS)
    assert st.condition_true(old, st.ADMITTED) and started["spec"]["suspend"] is False
    group = started["spec"]["workerGroupSpecs"][0]
    group["replicas"] = 30
    group["template"]["spec"]["containers"][0]["resources"] = {"requests": {GPU: "8"}, "limits": {GPU: "8"}}
    harness.api.merge_patch(resource_of(RAYCLUSTER), "rc", {"spec": {"workerGroupSpecs": [group]}}, NS)
    harness.sync()
    reconcile(harness, 3)
    assert harness.api.get(resource_of(RAYCLUSTER), "rc", NS)["spec"]["suspend"] is True
    new = requeued_as(harness, resource_of(RAYCLUSTER), "rc", old)
    assert [(ps["name"], ps["count"]) for ps in new["spec"]["podSets"]] == [("head", 1), ("gpu", 30)]
    assert not st.condition_true(new, st.QUOTA_RESERVED)  # 240 GPUs never fit the 32-GPU quota


def test_a_hyperpod_jobs_replicas_raised_after_admission_stop_it(harness: Harness) -> None:
    resource = resource_of(HYPERPODPYTORCHJOB)
    create(harness, resource, hyp_job())
    reconcile(harness, 3)
    [old] = workloads(harness)
    running = harness.api.get(resource, "llama3-pretrain", NS)
    assert running["spec"]["runPolicy"]["suspend"] is False
    spec = running["spec"]["replicaSpecs"]
    spec[0]["replicas"] = 8
    harness.api.merge_patch(resource, "llama3-pretrain", {"spec": {"replicaSpecs": spec}}, NS)
    harness.sync()
    reconcile(harness, 3)
    assert harness.api.get(resource, "llama3-pretrain", NS)["spec"]["runPolicy"]["suspend"] is True
    assert messages(harness, "Stopped", "llama3-pretrain") == [NO_MATCHING_RESTORING]
    [new] = workloads(harness)
    assert new["metadata"]["uid"] != old["metadata"]["uid"] and new["spec"]["podSets"][0]["count"] == 9


def test_a_trainjobs_num_nodes_raised_after_admission_stop_it(harness: Harness) -> None:
    harness.api.create(CLUSTER_RUNTIMES, torch_runtime())
    create(harness, resource_of(TRAINJOB), trainjob("tj", 2))
    reconcile(harness, 3)
    [old] = workloads(harness)
    assert harness.api.get(resource_of(TRAINJOB), "tj", NS)["spec"]["suspend"] is False
    harness.api.merge_patch(resource_of(TRAINJOB), "tj", {"spec": {"trainer": {"numNodes": 3}}}, NS)
    harness.sync()
    reconcile(harness, 3)
    new = requeued_as(harness, resource_of(TRAINJOB), "tj", old)
    assert [ps["count"] for ps in new["spec"]["podSets"]] == [3]


def test_jobs_that_still_match_are_left_alone(harness: Harness) -> None:
    harness.admitted("steady", 2)
    harness.api.merge_patch(JOBS, "steady", {"metadata": {"labels": {"team": "x"}}}, NS)  # not a pod set
    harness.sync()
    reconcile(harness, 3)
    assert harness.job("steady")["spec"]["suspend"] is False
    assert not harness.events_of("Stopped") and not harness.events_of("DeletedWorkload")
