"""Kubeflow PyTorchJob end to end: the real training-operator v1.9.3 (built from the Go module
proxy, PyTorchJob only, its validating webhook on loopback) next to toposched's webhook,
controller, extender and the real kube-scheduler. A PyTorchJob is one Workload with a
``master`` and a ``worker`` pod set, suspended and resumed through ``spec.runPolicy.suspend``."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.assignment import decode_topology_assignment
from scheduler.devcluster.kubeflow import start_training_operator
from scheduler.k8s.informer import PODS, PYTORCHJOBS, WORKLOADS
from tests.e2e.conftest import Stack

CLUSTER = {"name": "e2e-pytorch", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}
NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
L3 = "topology.k8s.aws/network-node-layer-3"
FAKE_PHASE = "toposched.dev/fake-phase"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, before_toposched=start_training_operator)


def replica(replicas: int, gpus: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {"replicas": replicas, "restartPolicy": "Never", "template": {
        "metadata": {"annotations": annotations},
        "spec": {"containers": [{"name": "pytorch", "image": "busybox", "resources": {
            "requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}


def pytorchjob(name: str, workers: int, priority: str | None = None,
               worker_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": QUEUE}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1, 8, {}),
                                             "Worker": replica(workers, 8, worker_annotations or {})}}}


def running(stack: Stack, name: str, count: int) -> list[dict[str, Any]] | None:
    pods = stack.api.list(PODS, NS, labelSelector=f"training.kubeflow.org/job-name={name}")["items"]
    up = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return up if len(up) == count else None


def workloads_of(stack: Stack, uid: str) -> list[dict[str, Any]]:
    return [w for w in stack.api.list(WORKLOADS, NS)["items"]
            if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or ())]


def conditions(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or ()}


def test_pytorchjob_is_one_workload_placed_by_replica_index_and_finishes(stack: Stack) -> None:
    created = stack.api.create(PYTORCHJOBS, pytorchjob("llama", 4, worker_annotations={
        "kueue.x-k8s.io/podset-required-topology": L3}), NS)
    assert created["spec"]["runPolicy"]["suspend"] is True  # toposched's webhook
    assert {rs["template"]["spec"]["schedulerName"] for rs in created["spec"]["pytorchReplicaSpecs"].values()} == {
        "toposched"}
    pods = stack.wait(lambda: running(stack, "llama", 5), 120, "5 pods of the PyTorchJob Running")
    [wl] = workloads_of(stack, created["metadata"]["uid"])
    assert wl["metadata"]["name"].startswith("pytorchjob-llama-")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("master", 1), ("worker", 4)]
    psa = {p["name"]: p for p in wl["status"]["admission"]["podSetAssignments"]}
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in stack.nodes}
    workers = [p for p in pods if p["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"]
    assert len({labels[p["spec"]["nodeName"]][L3] for p in workers}) == 1  # required layer-3 held
    rank_nodes = [d.values[0] for d in decode_topology_assignment(psa["worker"]["topologyAssignment"])[1]
                  for _ in range(d.count)]
    placed = {int(p["metadata"]["labels"]["training.kubeflow.org/replica-index"]): p["spec"]["nodeName"]
              for p in workers}
    assert placed == dict(enumerate(rank_nodes)), (placed, rank_nodes)
    print(f"\n[pytorchjob] workload {wl['metadata']['name']}: worker ranks {placed}")

    master = next(p for p in pods if p["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "master")
    stack.api.merge_patch(PODS, master["metadata"]["name"], {"metadata": {"labels": {FAKE_PHASE: "Succeeded"}}}, NS)

    def finished() -> dict[str, Any] | None:
        [w] = workloads_of(stack, created["metadata"]["uid"])
        cond = conditions(w).get("Finished", {})
        return cond if cond.get("status") == "True" else None

    assert stack.wait(finished, 90, "Workload Finished after the PyTorchJob succeeded")["reason"] == "Succeeded"
    stack.api.delete(PYTORCHJOBS, "llama", NS, propagationPolicy="Background")


def test_preempted_pytorchjob_is_suspended_restored_and_readmitted(stack: Stack) -> None:
    low = stack.api.create(PYTORCHJOBS, pytorchjob("low", 15, priority="fine-tuning-priority"), NS)  # 16 nodes
    stack.wait(lambda: running(stack, "low", 16), 120, "16 pods of the low-priority PyTorchJob Running")
    high = pytorchjob("high", 1, priority="inference-priority",
                      worker_annotations={"kueue.x-k8s.io/podset-required-topology": L3})
    stack.api.create(PYTORCHJOBS, high, NS)
    stack.wait(lambda: running(stack, "high", 2), 120, "high-priority PyTorchJob Running after preempting")
    [wl] = workloads_of(stack, low["metadata"]["uid"])
    c = conditions(wl)
    assert c["Preempted"]["status"] == "True" and c["Preempted"]["reason"] == "InClusterQueue", c

    def restored() -> bool:
        job = stack.api.get(PYTORCHJOBS, "low", NS)
        specs = job["spec"]["pytorchReplicaSpecs"].values()
        [w] = workloads_of(stack, low["metadata"]["uid"])
        return bool(job["spec"]["runPolicy"].get("suspend")) and conditions(w)["QuotaReserved"]["status"] == "False" \
            and not any(rs["template"]["spec"].get("nodeSelector") for rs in specs)

    stack.wait(restored, 90, "low PyTorchJob suspended, templates restored, Workload pending again")
    stack.api.delete(PYTORCHJOBS, "high", NS, propagationPolicy="Background")
    pods = stack.wait(lambda: running(stack, "low", 16), 180, "low-priority PyTorchJob re-admitted and Running")
    [wl] = workloads_of(stack, low["metadata"]["uid"])
    assert conditions(wl)["Admitted"]["status"] == "True"
    assert all(p["metadata"]["annotations"].get("kueue.x-k8s.io/workload") == wl["metadata"]["name"] for p in pods)
    stack.api.delete(PYTORCHJOBS, "low", NS, propagationPolicy="Background")
