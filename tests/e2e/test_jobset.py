"""JobSet end to end: the real JobSet v0.10.1 controller (built from the Go module proxy, its
own webhooks served on loopback) next to toposched's webhook, controller, extender and the
real kube-scheduler. A JobSet is one Workload with one pod set per replicated job; its child
Jobs are never managed on their own."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from scheduler.core.assignment import decode_topology_assignment
from scheduler.devcluster.jobset import start_jobset
from scheduler.k8s.informer import JOBS, JOBSETS, PODS, WORKLOADS
from tests.e2e.conftest import Stack

CLUSTER = {"name": "e2e-jobset", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}
NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
L3 = "topology.k8s.aws/network-node-layer-3"
FAKE_PHASE = "toposched.dev/fake-phase"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, before_toposched=start_jobset)


def replicated_job(name: str, replicas: int, pods: int, gpus: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "template": {"spec": {
        "parallelism": pods, "completions": pods, "backoffLimit": 0,
        "template": {"metadata": {"annotations": annotations}, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {
                "requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}}


def jobset(name: str) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {"replicatedJobs": [
                replicated_job("leader", 1, 1, 1, {}),
                # 2 child Jobs x 2 pods x 4 GPUs in one layer-3 domain: 2 nodes, ranks in order
                replicated_job("workers", 2, 2, 4, {"kueue.x-k8s.io/podset-required-topology": L3}),
            ]}}


def pods_of(stack: Stack, name: str) -> list[dict[str, Any]]:
    pods = stack.api.list(PODS, NS, labelSelector=f"jobset.sigs.k8s.io/jobset-name={name}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def workloads_of(stack: Stack, uid: str) -> list[dict[str, Any]]:
    return [w for w in stack.api.list(WORKLOADS, NS)["items"]
            if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or ())]


def test_jobset_is_admitted_as_one_workload_and_placed_by_rank(stack: Stack) -> None:
    created = stack.api.create(JOBSETS, jobset("train"), NS)
    # toposched's webhook suspended it and routed every template to the toposched profile;
    # JobSet's own webhook defaulted it (both mutations applied)
    assert created["spec"]["suspend"] is True
    assert {rj["template"]["spec"]["template"]["spec"]["schedulerName"]
            for rj in created["spec"]["replicatedJobs"]} == {"toposched"}
    assert created["spec"]["replicatedJobs"][1]["template"]["spec"]["completionMode"] == "Indexed"

    def all_running() -> list[dict[str, Any]] | None:
        pods = pods_of(stack, "train")
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return running if len(running) == 5 else None

    pods = stack.wait(all_running, 120, "5 pods of the JobSet Running")
    [wl] = workloads_of(stack, created["metadata"]["uid"])
    assert wl["metadata"]["name"].startswith("jobset-train-")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("leader", 1), ("workers", 4)]
    assert wl["spec"]["podSets"][1]["topologyRequest"]["subGroupCount"] == 2
    assignments = {psa["name"]: decode_topology_assignment(psa["topologyAssignment"])[1]
                   for psa in wl["status"]["admission"]["podSetAssignments"]}
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in stack.nodes}
    workers = [p for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "workers"]
    assert len({labels[p["spec"]["nodeName"]][L3] for p in workers}) == 1  # required layer-3 held
    # rank = child-Job index x pods per Job + completion index; ranks fill the nodes in order
    rank_nodes = [d.values[0] for d in assignments["workers"] for _ in range(d.count)]
    placed = {int(p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]) * 2
              + int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]): p["spec"]["nodeName"]
              for p in workers}
    assert placed == dict(enumerate(rank_nodes)), (placed, rank_nodes)
    leader = next(p for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "leader")
    assert Counter([leader["spec"]["nodeName"]]) == Counter(d.values[0] for d in assignments["leader"])
    # the child Jobs are the JobSet's: no Workload of their own
    children = stack.api.list(JOBS, NS, labelSelector="jobset.sigs.k8s.io/jobset-name=train")["items"]
    assert len(children) == 3
    assert all(not workloads_of(stack, j["metadata"]["uid"]) for j in children)
    print(f"\n[jobset] workload {wl['metadata']['name']}: leader on {leader['spec']['nodeName']}, "
          f"workers ranks {placed}")

    # every pod succeeds: the JobSet completes and its Workload is Finished
    for p in pods:
        stack.api.merge_patch(PODS, p["metadata"]["name"], {"metadata": {"labels": {FAKE_PHASE: "Succeeded"}}}, NS)

    def finished() -> dict[str, Any] | None:
        [w] = workloads_of(stack, created["metadata"]["uid"])
        cond = {c["type"]: c for c in w["status"].get("conditions") or ()}.get("Finished", {})
        return cond if cond.get("status") == "True" else None

    cond = stack.wait(finished, 90, "Workload Finished after the JobSet completed")
    assert cond["reason"] == "Succeeded", cond
    stack.api.delete(JOBSETS, "train", NS, propagationPolicy="Background")


def test_preempted_jobset_is_suspended_restored_and_readmitted(stack: Stack) -> None:
    # low: 16 pods x 8 GPUs = the whole cluster; high: 2 whole nodes in one layer-3 domain.
    low = jobset("low")
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "fine-tuning-priority"
    low["spec"]["replicatedJobs"] = [replicated_job("workers", 4, 4, 8, {})]
    high = jobset("high")
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "inference-priority"
    high["spec"]["replicatedJobs"] = [replicated_job("serve", 1, 2, 8, {"kueue.x-k8s.io/podset-required-topology": L3})]

    def running(name: str, count: int) -> list[dict[str, Any]] | None:
        pods = [p for p in pods_of(stack, name) if p["status"].get("phase") == "Running"]
        return pods if len(pods) == count else None

    low_obj = stack.api.create(JOBSETS, low, NS)
    stack.wait(lambda: running("low", 16), 120, "16 pods of the low-priority JobSet Running")
    stack.api.create(JOBSETS, high, NS)
    stack.wait(lambda: running("high", 2), 120, "high-priority JobSet Running after preempting")

    [wl] = workloads_of(stack, low_obj["metadata"]["uid"])
    conds = {c["type"]: c for c in wl["status"]["conditions"]}
    assert conds["Preempted"]["status"] == "True" and conds["Preempted"]["reason"] == "InClusterQueue", conds
    assert wl["status"]["schedulingStats"]["evictions"] == [{"reason": "Preempted", "underlyingCause": "", "count": 1}]
    # the victim JobSet is suspended and, once its pods are gone, its templates are restored
    # (no node selector of the old assignment left) and its Workload waits again
    def restored() -> dict[str, Any] | None:
        js = stack.api.get(JOBSETS, "low", NS)
        tpl = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        [w] = workloads_of(stack, low_obj["metadata"]["uid"])
        qr = {c["type"]: c for c in w["status"]["conditions"]}["QuotaReserved"]
        ok = js["spec"]["suspend"] and not (tpl["spec"].get("nodeSelector") or {}) and qr["status"] == "False"
        return js if ok else None

    stack.wait(restored, 90, "low JobSet suspended, templates restored, Workload pending again")
    assert not [p for p in pods_of(stack, "low") if p["status"].get("phase") == "Running"]

    # the high-priority JobSet goes away: the low one is admitted again and runs everywhere
    stack.api.delete(JOBSETS, "high", NS, propagationPolicy="Background")
    pods = stack.wait(lambda: running("low", 16), 180, "low-priority JobSet re-admitted and Running")
    [wl] = workloads_of(stack, low_obj["metadata"]["uid"])
    assert {c["type"]: c for c in wl["status"]["conditions"]}["Admitted"]["status"] == "True"
    assert all(p["metadata"]["annotations"].get("kueue.x-k8s.io/workload") == wl["metadata"]["name"] for p in pods)
    stack.api.delete(JOBSETS, "low", NS, propagationPolicy="Background")
