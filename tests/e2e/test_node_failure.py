"""Node failure, end to end: a required-layer-3 training job on 8 fake p5 nodes survives a
HyperPod health failure (hot swap when its domain has a spare node, else eviction and
re-admission in another domain), counts its auto-resume retries, fails cleanly past the
limit, and a recovered node is used again. Times from failure to pods Running are printed."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.informer import JOBS, NODES, PODS, WORKLOADS
from scheduler.kube.nodefailures import ANN_RETRIES
from tests.e2e.conftest import Stack

L2 = "topology.k8s.aws/network-node-layer-2"
L3 = "topology.k8s.aws/network-node-layer-3"
HEALTH = "sagemaker.amazonaws.com/node-health-status"
HEALTH_TAINT = {"key": HEALTH, "value": "Unschedulable", "effect": "NoSchedule"}
NS = "hyperpod-ns-team-a"
# 3 layer-3 domains of 8 nodes each.
CLUSTER = {"name": "e2e-failures", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 3], "nodesPerDomain": 8}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    # A 1 s requeue backoff (Kueue's default base is 60 s) keeps the re-admission timings short.
    return stack_factory(CLUSTER, controller_args=("--node-failure-grace-seconds", "1",
                                                   "--node-failure-requeue-base-seconds", "1"))


def training_job(name: str, pods: int, max_retry: int | None = 1,
                 topology: dict[str, str] | None = None) -> dict[str, Any]:
    ann = {}
    if max_retry is not None:
        ann = {"sagemaker.amazonaws.com/enable-job-auto-resume": "true",
               "sagemaker.amazonaws.com/job-max-retry-count": str(max_retry)}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "annotations": ann,
                     "labels": {"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue"}},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 100,
                 "template": {
                     "metadata": {"annotations": topology or {"kueue.x-k8s.io/podset-required-topology": L3}},
                     "spec": {"restartPolicy": "Never", "containers": [{
                         "name": "trainer", "image": "busybox",
                         "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}},
    }


def running(stack: Stack, job: str) -> list[dict[str, Any]]:
    pods = stack.api.list(PODS, NS, labelSelector=f"job-name={job}")["items"]
    return [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def l3_of(stack: Stack) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"][L3] for n in stack.nodes}


def workload(stack: Stack, job_uid: str) -> dict[str, Any]:
    for wl in stack.api.list(WORKLOADS, NS)["items"]:
        if (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == job_uid:
            return wl
    raise AssertionError(f"no workload for job uid {job_uid}")


def fail_node(stack: Stack, node: str) -> None:
    current = stack.api.get(NODES, node)
    taints = [t for t in (current["spec"].get("taints") or []) if t["key"] != HEALTH] + [HEALTH_TAINT]
    stack.api.merge_patch(NODES, node, {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}},
                                        "spec": {"taints": taints}})


def recover_node(stack: Stack, node: str) -> None:
    current = stack.api.get(NODES, node)
    taints = [t for t in (current["spec"].get("taints") or []) if t["key"] != HEALTH]
    stack.api.merge_patch(NODES, node, {"metadata": {"labels": {HEALTH: "Schedulable"}},
                                        "spec": {"taints": taints or None}})


def all_running_in_one_domain(stack: Stack, job: str, pods: int, avoid: set[str]) -> list[dict[str, Any]] | None:
    got = running(stack, job)
    if len(got) != pods:
        return None
    nodes = {p["spec"]["nodeName"] for p in got}
    if nodes & avoid or len({l3_of(stack)[n] for n in nodes}) != 1:
        return None
    return got


def test_eviction_readmission_retry_limit_and_recovery(stack: Stack) -> None:
    job = stack.api.create(JOBS, training_job("trainer", 8, max_retry=1), NS)
    uid = job["metadata"]["uid"]
    pods = stack.wait(lambda: all_running_in_one_domain(stack, "trainer", 8, set()), 120, "8 trainer pods Running")
    first_domain = l3_of(stack)[pods[0]["spec"]["nodeName"]]
    victim = sorted(p["spec"]["nodeName"] for p in pods)[0]

    # 1. A node of a full domain fails: no spare node there -> NodeFailures eviction, re-admission elsewhere.
    t0 = time.monotonic()
    fail_node(stack, victim)
    pods = stack.wait(lambda: all_running_in_one_domain(stack, "trainer", 8, {victim}), 120,
                      "trainer re-admitted on healthy nodes")
    print(f"\n[node-failure] evict + re-admit: failure -> 8 pods Running again in {time.monotonic() - t0:.1f}s")
    second_domain = l3_of(stack)[pods[0]["spec"]["nodeName"]]
    assert second_domain != first_domain
    wl = workload(stack, uid)
    assert wl["metadata"]["annotations"][ANN_RETRIES] == "1"
    # The domain it held is remembered (re-admission prefers it when it has room; here it has not).
    assert json.loads(wl["metadata"]["annotations"]["toposched.dev/previous-domains"]) == {"main": {L3: first_domain}}
    conds = {c["type"]: c for c in wl["status"]["conditions"]}
    assert conds["Evicted"]["reason"] == "QuotaReserved"  # flipped back on re-admission
    assert "no replacement for unhealthy node(s): " + victim in conds["Evicted"]["message"]
    assert conds["Requeued"]["status"] == "True" and conds["Requeued"]["reason"] == "NodeFailures"
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "NodeFailures", "underlyingCause": "", "count": 1}]

    # 2. A second failure is beyond max-retry 1: the workload finishes as Failed, the job stays down.
    second_victim = sorted(p["spec"]["nodeName"] for p in pods)[0]
    fail_node(stack, second_victim)

    def finished_failed() -> dict[str, Any] | None:
        wl2 = workload(stack, uid)
        fin = next((c for c in wl2["status"].get("conditions", []) if c["type"] == "Finished"), None)
        return fin if fin and fin["status"] == "True" else None

    fin = stack.wait(finished_failed, 120, "workload Finished after retries are used up")
    assert fin["reason"] == "Failed"
    assert "exceeded the maximum number of auto-resume retries (1)" in fin["message"]
    stack.wait(lambda: running(stack, "trainer") == [], 60, "trainer pods gone")
    assert workload(stack, uid)["metadata"]["annotations"][ANN_RETRIES] == "2"

    # 3. The first failed node recovers: its domain is whole again and a new job uses it.
    recover_node(stack, victim)
    job2 = stack.api.create(JOBS, training_job("trainer-2", 8, max_retry=None), NS)
    pods2 = stack.wait(lambda: all_running_in_one_domain(stack, "trainer-2", 8, {second_victim}), 120,
                       "trainer-2 Running")
    assert victim in {p["spec"]["nodeName"] for p in pods2}
    stack.api.delete(JOBS, "trainer", NS, propagationPolicy="Background")
    stack.api.delete(JOBS, job2["metadata"]["name"], NS, propagationPolicy="Background")
    stack.wait(lambda: running(stack, "trainer-2") == [], 60, "trainer-2 pods gone")
    recover_node(stack, second_victim)


def test_hot_swap_replaces_only_the_failed_node(stack: Stack) -> None:
    job = stack.api.create(JOBS, training_job("swap", 6, max_retry=2), NS)
    uid = job["metadata"]["uid"]
    pods = stack.wait(lambda: all_running_in_one_domain(stack, "swap", 6, set()), 120, "6 swap pods Running")
    domain = l3_of(stack)[pods[0]["spec"]["nodeName"]]
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    victim = sorted(before.values())[0]
    t0 = time.monotonic()
    fail_node(stack, victim)
    after = stack.wait(lambda: all_running_in_one_domain(stack, "swap", 6, {victim}), 120, "swap pods re-placed")
    print(f"\n[node-failure] hot swap: failure -> 6 pods Running again in {time.monotonic() - t0:.1f}s")
    assert l3_of(stack)[after[0]["spec"]["nodeName"]] == domain  # same domain
    survivors = {p["metadata"]["name"] for p in after} & set(before)
    assert len(survivors) == 5  # only the failed node's pod was replaced
    wl = workload(stack, uid)
    assert (wl["metadata"].get("annotations") or {}).get(ANN_RETRIES) is None  # a hot swap is no retry
    assert not any(c["type"] == "Evicted" and c["status"] == "True" for c in wl["status"]["conditions"])
    stack.api.delete(JOBS, "swap", NS, propagationPolicy="Background")
    recover_node(stack, victim)


def test_hot_swap_keeps_each_slice_in_its_domain(stack: Stack) -> None:
    # 2 slices of 3 pods, each slice inside one layer-3 domain, the job inside the layer-2 block.
    sliced = {"kueue.x-k8s.io/podset-required-topology": L2,
              "kueue.x-k8s.io/podset-slice-required-topology": L3, "kueue.x-k8s.io/podset-slice-size": "3"}
    job = stack.api.create(JOBS, training_job("sliced", 6, max_retry=2, topology=sliced), NS)
    uid = job["metadata"]["uid"]

    def six_running(avoid: set[str]) -> list[dict[str, Any]] | None:
        got = running(stack, "sliced")
        return got if len(got) == 6 and not {p["spec"]["nodeName"] for p in got} & avoid else None

    def pods_per_l3(pods: list[dict[str, Any]]) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in pods:
            out[l3_of(stack)[p["spec"]["nodeName"]]] = out.get(l3_of(stack)[p["spec"]["nodeName"]], 0) + 1
        return out

    pods = stack.wait(lambda: six_running(set()), 120, "6 sliced pods Running")
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    per_l3 = pods_per_l3(pods)
    assert all(n % 3 == 0 for n in per_l3.values()), per_l3  # whole slices per layer-3 domain
    victim = sorted(before.values())[0]
    t0 = time.monotonic()
    fail_node(stack, victim)
    after = stack.wait(lambda: six_running({victim}), 120, "sliced pods re-placed")
    print(f"\n[node-failure] hot swap in a slice: failure -> 6 pods Running again in {time.monotonic() - t0:.1f}s")
    assert pods_per_l3(after) == per_l3  # the replacement stayed in the failed node's slice domain
    assert len({p["metadata"]["name"] for p in after} & set(before)) == 5
    wl = workload(stack, uid)
    assert not any(c["type"] == "Evicted" and c["status"] == "True" for c in wl["status"]["conditions"])
    stack.api.delete(JOBS, "sliced", NS, propagationPolicy="Background")
    stack.wait(lambda: running(stack, "sliced") == [], 60, "sliced pods gone")
    recover_node(stack, victim)


def test_two_nodes_failing_together_are_both_hot_swapped(stack: Stack) -> None:
    # Kueue evicts a workload as soon as two of its nodes fail; with spares in the required
    # domain toposched moves just those pods (all or none) and the other ranks keep running.
    job = stack.api.create(JOBS, training_job("pair", 5, max_retry=2), NS)
    uid = job["metadata"]["uid"]
    pods = stack.wait(lambda: all_running_in_one_domain(stack, "pair", 5, set()), 120, "5 pair pods Running")
    domain = l3_of(stack)[pods[0]["spec"]["nodeName"]]
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    victims = set(sorted(set(before.values()))[:2])
    t0 = time.monotonic()
    for node in sorted(victims):
        fail_node(stack, node)
    after = stack.wait(lambda: all_running_in_one_domain(stack, "pair", 5, victims), 120, "pair pods re-placed")
    print(f"\n[node-failure] two nodes at once: failure -> 5 pods Running again in {time.monotonic() - t0:.1f}s")
    assert l3_of(stack)[after[0]["spec"]["nodeName"]] == domain
    assert len({p["metadata"]["name"] for p in after} & set(before)) == 3  # only the failed nodes' pods moved
    wl = workload(stack, uid)
    assert not any(c["type"] == "Evicted" and c["status"] == "True" for c in wl["status"]["conditions"])
    assert (wl["metadata"].get("annotations") or {}).get(ANN_RETRIES) is None
    stack.api.delete(JOBS, "pair", NS, propagationPolicy="Background")
    stack.wait(lambda: running(stack, "pair") == [], 60, "pair pods gone")
    for node in victims:
        recover_node(stack, node)


def test_a_deleted_nodes_rank_restarts_once_its_kubelet_is_known_gone(stack: Stack) -> None:
    """The Node object of a running rank is deleted (an instance replaced): toposched moves the
    slot inside the domain at once, and deletes the rank's pod as soon as the API server
    confirms the Node is gone and its Lease in kube-node-lease expired or stayed gone (docs/health.md),
    not after kube-controller-manager's pod GC (40 s quarantine); no rank runs twice."""
    from scheduler.devcluster.apply import create_nodes
    from scheduler.devcluster.controlplane import FAKE_NODE_LABEL
    from scheduler.kube.gone_nodes import REASON

    job = stack.api.create(JOBS, training_job("deleted", 6, max_retry=2), NS)
    uid = job["metadata"]["uid"]
    pods = stack.wait(lambda: all_running_in_one_domain(stack, "deleted", 6, set()), 120, "6 pods Running")
    domain = l3_of(stack)[pods[0]["spec"]["nodeName"]]
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    victim = sorted(before.values())[0]
    node = next(n for n in stack.nodes if n["metadata"]["name"] == victim)
    doubled: list[str] = []

    def recovered() -> list[dict[str, Any]] | None:
        got = running(stack, "deleted")
        ranks = [p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in got]
        doubled.extend(r for r in set(ranks) if ranks.count(r) > 1 and not any(
            p["spec"]["nodeName"] == victim for p in got))  # a rank on two live nodes at once
        return got if len(got) == 6 and victim not in {p["spec"]["nodeName"] for p in got} else None

    t0 = time.monotonic()
    stack.api.delete(NODES, victim)
    try:
        after = stack.wait(recovered, 120, "the deleted node's rank running again")
        print(f"\n[node-failure] node deleted -> 6 pods Running again in {time.monotonic() - t0:.1f}s")
        assert doubled == []
        assert {l3_of(stack)[p["spec"]["nodeName"]] for p in after} == {domain}
        assert len({p["metadata"]["name"] for p in after} & set(before)) == 5
        events = client.CoreV1Api(stack.kube).list_namespaced_event(NS).items
        (event,) = [e for e in events if e.reason == REASON and e.involved_object.kind == "Workload"]
        assert event.involved_object.name == workload(stack, uid)["metadata"]["name"]
        evidence = f"bound to node {victim}: the Node object is gone and its Lease kube-node-lease/{victim}"
        assert evidence in event.message
        wl = workload(stack, uid)
        assert not any(c["type"] == "Evicted" and c["status"] == "True" for c in wl["status"]["conditions"])
    finally:
        stack.api.delete(JOBS, "deleted", NS, propagationPolicy="Background")
        stack.wait(lambda: running(stack, "deleted") == [], 60, "deleted's pods gone")
        create_nodes(stack.kube, [node], FAKE_NODE_LABEL)  # the instance's replacement registers
