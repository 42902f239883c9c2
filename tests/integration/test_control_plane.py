"""The local control plane is the real thing: objects round-trip through kube-apiserver and
etcd, Kueue's CRDs validate, and the real kube-scheduler binds pods to fake nodes."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from scheduler.devcluster.apply import apply_objects, create_nodes, wait_nodes_settled
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, FAKE_POD_PHASE_LABEL

KUEUE = ("kueue.x-k8s.io", "v1beta2")


def _node(name: str, layer3: str, gpus: int = 8) -> dict[str, Any]:
    capacity = {"cpu": "192", "memory": "2048Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
                "topology.k8s.aws/network-node-layer-1": "nn-l1",
                "topology.k8s.aws/network-node-layer-2": "nn-l2",
                "topology.k8s.aws/network-node-layer-3": layer3,
            },
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _wait(predicate: Any, timeout_s: float = 30, interval_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s}s")


def test_kueue_objects_and_suspended_job_round_trip(kube_api: client.ApiClient, namespace: str) -> None:
    create_nodes(kube_api, [_node(f"rt-{namespace}-{i}", "nn-rt") for i in range(2)], FAKE_NODE_LABEL)
    topo, flavor, cq = f"topo-{namespace}", f"rf-{namespace}", f"cq-{namespace}"
    objects = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": topo},
         "spec": {"levels": [{"nodeLabel": "topology.k8s.aws/network-node-layer-3"},
                             {"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}, "topologyName": topo}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
         "spec": {"namespaceSelector": {},
                  "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                      "flavors": [{"name": flavor, "resources": [
                                          {"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "lq", "namespace": namespace}, "spec": {"clusterQueue": cq}},
    ]
    apply_objects(kube_api, objects)
    custom = client.CustomObjectsApi(kube_api)
    got_cq = custom.get_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    assert got_cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "16"
    # Defaults applied by Kueue's CRD schema prove the real CRD is installed, not a loose one.
    assert got_cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
    got_topo = custom.get_cluster_custom_object(*KUEUE, "topologies", topo)
    assert [lv["nodeLabel"] for lv in got_topo["spec"]["levels"]][-1] == "kubernetes.io/hostname"
    lq = custom.get_namespaced_custom_object(*KUEUE, namespace, "localqueues", "lq")
    assert lq["spec"]["clusterQueue"] == cq

    batch = client.BatchV1Api(kube_api)
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "suspended", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"suspend": True, "parallelism": 2, "completions": 2, "template": {
            "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology":
                                         "topology.k8s.aws/network-node-layer-3"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    }
    batch.create_namespaced_job(namespace, job)
    got = batch.read_namespaced_job("suspended", namespace)
    assert got.spec.suspend is True
    assert got.metadata.labels["kueue.x-k8s.io/queue-name"] == "lq"
    # A suspended Job gets no pods from the real Job controller.
    time.sleep(1.0)
    pods = client.CoreV1Api(kube_api).list_namespaced_pod(namespace).items
    assert pods == []


def test_kueue_crd_validation_rejects_hostname_above_last_level(kube_api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(kube_api)
    bad = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "bad-hostname-first"},
           "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"},
                               {"nodeLabel": "topology.k8s.aws/network-node-layer-3"}]}}
    with pytest.raises(client.ApiException) as err:
        custom.create_cluster_custom_object(*KUEUE, "topologies", bad)
    assert err.value.status == 422


def test_real_scheduler_binds_plain_pod_and_kwok_runs_it(kube_api: client.ApiClient, namespace: str) -> None:
    node_name = f"bind-{namespace}"
    create_nodes(kube_api, [_node(node_name, "nn-bind")], FAKE_NODE_LABEL)
    core = client.CoreV1Api(kube_api)
    wait_nodes_settled(kube_api, [node_name])
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node_name},
            "containers": [{"name": "c", "image": "busybox",
                            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    core.create_namespaced_pod(namespace, pod)
    running = _wait(lambda: (p := core.read_namespaced_pod("plain", namespace)).status.phase == "Running" and p)
    assert running.spec.node_name == node_name
    core.patch_namespaced_pod("plain", namespace, {"metadata": {"labels": {FAKE_POD_PHASE_LABEL: "Succeeded"}}})
    _wait(lambda: core.read_namespaced_pod("plain", namespace).status.phase == "Succeeded")


def test_real_job_controller_creates_pods_for_an_unsuspended_job(kube_api: client.ApiClient, namespace: str) -> None:
    create_nodes(kube_api, [_node(f"job-{namespace}", "nn-job")], FAKE_NODE_LABEL)
    batch = client.BatchV1Api(kube_api)
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "run", "namespace": namespace},
        "spec": {"parallelism": 3, "completions": 3, "template": {"spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"topology.k8s.aws/network-node-layer-3": "nn-job"},
            "containers": [{"name": "c", "image": "busybox"}]}}},
    }
    batch.create_namespaced_job(namespace, job)
    core = client.CoreV1Api(kube_api)

    def all_running() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace).items
        return pods if len(pods) == 3 and all(p.status.phase == "Running" for p in pods) else None

    pods = _wait(all_running)
    assert {p.spec.node_name for p in pods} == {f"job-{namespace}"}
