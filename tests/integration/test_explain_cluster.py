"""toposched explain --kubeconfig against the real local control plane: nodes, queues and a
Workload that cannot fit are created as objects (no controller runs; explain only reads)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler import cli
from scheduler.core.fakecluster import generate_nodes
from scheduler.devcluster.apply import apply_objects, create_nodes, wait_nodes_settled
from scheduler.devcluster.binaries import repo_root
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL
from scheduler.k8s.informer import CLUSTER_QUEUES, JOBS, RESOURCE_FLAVORS, TOPOLOGIES, WORKLOADS, Api
from scheduler.kube.jobs import BatchJob, workload_for_job

KQ = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
POOL = "toposched.dev/explain-test-pool"


@pytest.fixture
def setup(kube_api: client.ApiClient, namespace: str) -> Iterator[dict[str, Any]]:
    # 4 nodes of 8 GPUs, 2 per layer-3 domain, in a pool of their own (other tests' nodes are ignored
    # by the flavor's nodeLabels); node 3 reported failed by HyperPod.
    desc = {"name": f"explain-{namespace}", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2],
            "nodesPerDomain": 2, "labels": {POOL: namespace},
            "nodes": [{"index": 3, "labels": {"sagemaker.amazonaws.com/node-health-status":
                                              "UnschedulablePendingReplacement"}}]}
    nodes = generate_nodes(desc)
    create_nodes(kube_api, nodes, FAKE_NODE_LABEL)
    # KWOK marks them Ready asynchronously and the node-lifecycle controller lifts its not-ready
    # taint on a later pass: explain must see the final health, not the start-up.
    wait_nodes_settled(kube_api, [n["metadata"]["name"] for n in nodes])
    topo, flavor, cq = f"topo-{namespace}", f"rf-{namespace}", f"cq-{namespace}"
    objects = [
        {"apiVersion": KQ, "kind": "Topology", "metadata": {"name": topo}, "spec": {"levels": [
            {"nodeLabel": f"topology.k8s.aws/network-node-layer-{i}"} for i in (1, 2, 3)]
            + [{"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": {POOL: namespace}, "topologyName": topo}},
        {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [
                {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "100"},
                                               {"name": GPU, "nominalQuota": "8"}]}]}]}},
        {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
         "spec": {"clusterQueue": cq}},
    ]
    apply_objects(kube_api, objects)
    api = Api(kube_api)
    job = yaml.safe_load((repo_root() / "examples/jobs/hyperpod-required-layer3.yaml").read_text())
    job["metadata"]["namespace"] = namespace
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    job = api.create(JOBS, job, namespace)  # 10 pods x 1 GPU, required layer-3
    api.create(WORKLOADS, workload_for_job(BatchJob(), job, 0, None), namespace)
    try:
        yield {"namespace": namespace, "nodes": [n["metadata"]["name"] for n in nodes], "cq": cq}
    finally:
        core = client.CoreV1Api(kube_api)
        for n in nodes:
            try:
                core.delete_node(n["metadata"]["name"])
            except client.ApiException:
                pass
        for res, name in ((CLUSTER_QUEUES, cq), (RESOURCE_FLAVORS, flavor), (TOPOLOGIES, topo)):
            try:
                api.delete(res, name)
            except Exception:
                pass


def test_explain_reads_the_cluster_once_and_gives_the_numbers(
        local_cluster: Any, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    ns = setup["namespace"]
    kubeconfig = str(local_cluster.kubeconfig)
    assert cli.main(["explain", f"{ns}/test-tas-job", "--kubeconfig", kubeconfig, "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workload"].startswith("job-test-tas-job-") and not out["admitted"]
    assert out["clusterQueue"] == setup["cq"]
    gpu = next(r for r in out["quota"]["resources"] if r["resource"] == GPU)
    assert (gpu["requested"], gpu["available"], gpu["short"]) == ("10", "8", "2")
    assert out["reasons"][0]["reason"] in ("ExceedsMaxQuota", "WaitingForQuota")
    (topo,) = out["topology"]
    # layer-3 domains: 2 nodes x 8 GPUs; one has a failed node -> 16 pods fit in the best one.
    # "now" also subtracts pods bound there; in the shared session cluster other tests' pending
    # pods may land on these fresh nodes, so "now" is bounded and the empty-cluster figure exact.
    assert topo["mode"] == "required" and topo["now"]["domains"] == 2 and topo["now"]["podsFit"] <= 16
    assert topo["empty"]["podsFit"] == 16, topo
    assert out["health"]["nodes"] == 4 and out["health"]["excluded"] == 1
    assert out["queue"]["position"] == 1
    assert cli.main(["explain", f"{ns}/test-tas-job", "--kubeconfig", kubeconfig]) == 0
    text = capsys.readouterr().out
    assert "short by 2" in text and "Health: 1 of 4 nodes excluded" in text


def test_explain_unknown_job_exits_1(local_cluster: Any, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", f"{namespace}/nope", "--kubeconfig", str(local_cluster.kubeconfig)]) == 1
    assert f"no Job or Workload 'nope' in namespace '{namespace}'" in capsys.readouterr().err
