"""The HyperPod sample, end to end on the real control plane: webhook -> controller ->
Job controller -> kube-scheduler + extender -> KWOK. All pods of a required-layer-3 job land
in one layer-3 domain; a preferred job on a fragmented cluster spans the fewest domains; a
malformed annotation is denied by the webhook with a readable message."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.devcluster.binaries import repo_root
from scheduler.k8s.informer import JOBS, PODS, WORKLOADS
from tests.e2e.conftest import Stack

L2, L3 = "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-3"
NS = "hyperpod-ns-team-a"
# 2 x 2 x 2 layer-3 domains of 4 nodes = 32 p5.48xlarge nodes (8 GPUs each).
CLUSTER = {"name": "e2e-flow", "instanceType": "ml.p5.48xlarge", "layers": [2, 2, 2], "nodesPerDomain": 4}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def sample_job(name: str, pods: int, gpus: int, annotation: tuple[str, str] | None) -> dict[str, Any]:
    job = yaml.safe_load((repo_root() / "examples" / "jobs" / "hyperpod-required-layer3.yaml").read_text())
    job = copy.deepcopy(job)
    job["metadata"]["name"] = name
    job["spec"]["template"]["metadata"].pop("labels", None)  # the Job controller sets job-name itself
    job["spec"]["parallelism"] = job["spec"]["completions"] = pods
    res = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    res["requests"]["nvidia.com/gpu"] = res["limits"]["nvidia.com/gpu"] = str(gpus)
    ann = job["spec"]["template"]["metadata"]["annotations"]
    ann.clear()
    if annotation:
        ann[annotation[0]] = annotation[1]
    return job


def node_labels(stack: Stack) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in stack.nodes}


def running_pods(stack: Stack, job: str) -> list[dict[str, Any]]:
    pods = stack.api.list(PODS, NS, labelSelector=f"job-name={job}")["items"]
    return [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def workload_of(stack: Stack, job_uid: str) -> dict[str, Any] | None:
    for wl in stack.api.list(WORKLOADS, NS)["items"]:
        if (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == job_uid:
            return wl
    return None


def test_required_layer3_sample_lands_in_one_layer3_domain(stack: Stack) -> None:
    job = stack.api.create(JOBS, yaml.safe_load(
        (repo_root() / "examples" / "jobs" / "hyperpod-required-layer3.yaml").read_text()), NS)
    # The webhook suspended it and routed its pods to our scheduler profile.
    assert job["spec"]["suspend"] is True
    assert job["spec"]["template"]["spec"]["schedulerName"] == "toposched"
    pods = stack.wait(lambda: (p := running_pods(stack, "test-tas-job")) and len(p) == 10 and p,
                      120, "10 pods of test-tas-job Running")
    labels = node_labels(stack)
    assert len({labels[p["spec"]["nodeName"]][L3] for p in pods}) == 1
    wl = workload_of(stack, job["metadata"]["uid"])
    assert wl is not None
    conds = {c["type"]: c for c in wl["status"]["conditions"]}
    assert conds["QuotaReserved"]["status"] == "True"
    assert conds["QuotaReserved"]["message"] == "Quota reserved in ClusterQueue hyperpod-ns-team-a-clusterqueue"
    assert conds["Admitted"]["status"] == "True"
    psa = wl["status"]["admission"]["podSetAssignments"][0]
    assert psa["count"] == 10 and psa["flavors"]["nvidia.com/gpu"] == "ml.p5.48xlarge"
    assert psa["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]
    # Never more pods on a node than the assignment gave it.
    from scheduler.core.assignment import decode_topology_assignment

    _levels, domains = decode_topology_assignment(psa["topologyAssignment"])
    assigned = {d.values[0]: d.count for d in domains}
    for node, count in Counter(p["spec"]["nodeName"] for p in pods).items():
        assert count <= assigned.get(node, 0)
    stack.api.delete(JOBS, "test-tas-job", NS, propagationPolicy="Background")


def test_preferred_on_fragmented_cluster_spans_fewest_layer3_domains(stack: Stack) -> None:
    labels = node_labels(stack)
    by_l3: dict[str, list[str]] = {}
    for name, lab in sorted(labels.items()):
        by_l3.setdefault(lab[L3], []).append(name)
    # Fragment: in every layer-3 domain fill 3 of 4 nodes with foreign (non-toposched) pods.
    core = client.CoreV1Api(stack.kube)
    for domain_nodes in by_l3.values():
        for node in domain_nodes[:3]:
            core.create_namespaced_pod("default", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"filler-{node}"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": {
                    "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}})
    stack.wait(lambda: len([p for p in core.list_namespaced_pod("default").items
                            if p.metadata.name.startswith("filler-") and p.status.phase == "Running"])
               == 3 * len(by_l3), 60, "filler pods Running")
    # 3 nodes' worth (24 GPUs): no layer-3 domain has more than 1 free node, so the best
    # possible placement spans 3 layer-3 domains, all under one layer-2 domain if possible.
    job = stack.api.create(JOBS, sample_job("pref-job", 3, 8, ("kueue.x-k8s.io/podset-preferred-topology", L3)), NS)
    pods = stack.wait(lambda: (p := running_pods(stack, "pref-job")) and len(p) == 3 and p, 120,
                      "3 pods of pref-job Running")
    l3s = {labels[p["spec"]["nodeName"]][L3] for p in pods}
    l2s = {labels[p["spec"]["nodeName"]][L2] for p in pods}
    assert len(l3s) == 3  # the minimum: each layer-3 domain has one free node
    assert len(l2s) == 2  # each layer-2 domain holds 2 layer-3 domains, so 3 of them need 2
    stack.api.delete(JOBS, job["metadata"]["name"], NS, propagationPolicy="Background")
    for domain_nodes in by_l3.values():
        for node in domain_nodes[:3]:
            core.delete_namespaced_pod(f"filler-{node}", "default")


def test_malformed_annotation_is_denied_with_a_readable_message(stack: Stack) -> None:
    job = sample_job("bad-job", 2, 1, ("kueue.x-k8s.io/podset-required-topology", L3))
    job["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] = L2
    with pytest.raises(client.ApiException) as err:
        stack.api.create(JOBS, job, NS)
    assert err.value.status in (400, 403, 422)
    body = str(err.value.body)
    assert "must not contain more than one topology annotation" in body
    assert "spec.template.metadata.annotations" in body


def test_indexed_job_ranks_fill_the_assigned_nodes_in_order(stack: Stack) -> None:
    # 12 pods x 2 GPUs in one layer-3 domain: 4 pods per node on 3 nodes. Kueue's rank-based
    # ordering puts ranks 0-3 on the first node of the assignment, 4-7 on the second, 8-11 on the
    # third, so NCCL ring neighbours share a node; the extender must do the same.
    from scheduler.core.assignment import decode_topology_assignment

    spec = sample_job("ranked", 12, 2, ("kueue.x-k8s.io/podset-required-topology", L3))
    spec["spec"]["completionMode"] = "Indexed"
    job = stack.api.create(JOBS, spec, NS)
    pods = stack.wait(lambda: (p := running_pods(stack, "ranked")) and len(p) == 12 and p, 120,
                      "12 pods of the indexed job Running")
    wl = workload_of(stack, job["metadata"]["uid"])
    assert wl is not None
    psa = wl["status"]["admission"]["podSetAssignments"][0]
    assert psa["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]
    _levels, domains = decode_topology_assignment(psa["topologyAssignment"])
    rank_nodes = [d.values[0] for d in domains for _ in range(d.count)]
    placed = {int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]): p["spec"]["nodeName"]
              for p in pods}
    assert placed == dict(enumerate(rank_nodes)), (placed, rank_nodes)
    print(f"\n[ranks] {len(domains)} nodes, ranks in order: {[d.count for d in domains]}")
    stack.api.delete(JOBS, "ranked", NS, propagationPolicy="Background")
