"""Kubeflow MPIJob end to end: the real mpi-operator v0.8.0 (built from the Go module proxy; the
release Kueue v0.17.0 is built against) next to toposched's webhook, controller, extender and
the real kube-scheduler. An MPIJob is one Workload with a ``launcher`` and a ``worker`` pod set,
suspended and resumed through ``spec.runPolicy.suspend``; the mpi-operator's launcher Job is
the MPIJob's, never managed on its own. The webhook's fit checks cover the MPIJob's pod sets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from scheduler.core.assignment import decode_topology_assignment
from scheduler.devcluster.mpioperator import start_mpi_operator
from scheduler.k8s.informer import JOBS, MPIJOBS, PODS, WORKLOADS
from tests.e2e.conftest import Stack

CLUSTER = {"name": "e2e-mpijob", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}
NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
L3 = "topology.k8s.aws/network-node-layer-3"
FAKE_PHASE = "toposched.dev/fake-phase"
ROLE = "training.kubeflow.org/job-role"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, before_toposched=start_mpi_operator)


def replica(replicas: int, gpus: int, annotations: dict[str, str]) -> dict[str, Any]:
    resources = {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {"replicas": replicas, "template": {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "mpi", "image": "busybox", "resources": resources}]}}}


def mpijob(name: str, workers: int, worker_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {"slotsPerWorker": 8, "mpiReplicaSpecs": {
                "Launcher": replica(1, 0, {}), "Worker": replica(workers, 8, worker_annotations or {})}}}


def running(stack: Stack, name: str, count: int) -> list[dict[str, Any]] | None:
    pods = stack.api.list(PODS, NS, labelSelector=f"training.kubeflow.org/job-name={name}")["items"]
    up = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return up if len(up) == count else None


def workloads_of(stack: Stack, uid: str) -> list[dict[str, Any]]:
    return [w for w in stack.api.list(WORKLOADS, NS)["items"]
            if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or ())]


def conditions(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or ()}


def test_mpijob_is_one_workload_placed_by_replica_index_and_finishes(stack: Stack) -> None:
    created = stack.api.create(MPIJOBS, mpijob("allreduce", 4, {"kueue.x-k8s.io/podset-required-topology": L3}), NS)
    assert created["spec"]["runPolicy"]["suspend"] is True  # toposched's webhook
    assert {rs["template"]["spec"]["schedulerName"] for rs in created["spec"]["mpiReplicaSpecs"].values()} == {
        "toposched"}
    pods = stack.wait(lambda: running(stack, "allreduce", 5), 180, "launcher + 4 workers of the MPIJob Running")
    [wl] = workloads_of(stack, created["metadata"]["uid"])
    assert wl["metadata"]["name"].startswith("mpijob-allreduce-")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("launcher", 1), ("worker", 4)]
    # the launcher Job belongs to the MPIJob: no Workload of its own
    launchers = [j for j in stack.api.list(JOBS, NS)["items"]
                 if any(r.get("kind") == "MPIJob" for r in j["metadata"].get("ownerReferences") or ())]
    assert launchers and all(not workloads_of(stack, j["metadata"]["uid"]) for j in launchers)
    psa = {p["name"]: p for p in wl["status"]["admission"]["podSetAssignments"]}
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in stack.nodes}
    workers = [p for p in pods if p["metadata"]["labels"].get(ROLE) == "worker"]
    assert len({labels[p["spec"]["nodeName"]][L3] for p in workers}) == 1  # required layer-3 held
    rank_nodes = [d.values[0] for d in decode_topology_assignment(psa["worker"]["topologyAssignment"])[1]
                  for _ in range(d.count)]
    placed = {int(p["metadata"]["labels"]["training.kubeflow.org/replica-index"]): p["spec"]["nodeName"]
              for p in workers}
    assert placed == dict(enumerate(rank_nodes)), (placed, rank_nodes)
    print(f"\n[mpijob] workload {wl['metadata']['name']}: worker ranks {placed}")

    launcher = next(p for p in pods if p["metadata"]["labels"].get(ROLE) == "launcher")
    assert launcher["metadata"]["annotations"].get("kueue.x-k8s.io/workload") == wl["metadata"]["name"]
    stack.api.merge_patch(PODS, launcher["metadata"]["name"], {"metadata": {"labels": {FAKE_PHASE: "Succeeded"}}}, NS)

    def finished() -> dict[str, Any] | None:
        [w] = workloads_of(stack, created["metadata"]["uid"])
        cond = conditions(w).get("Finished", {})
        return cond if cond.get("status") == "True" else None

    assert stack.wait(finished, 120, "Workload Finished after the MPIJob succeeded")["reason"] == "Succeeded"
    stack.api.delete(MPIJOBS, "allreduce", NS, propagationPolicy="Background")


def test_webhook_denies_an_mpijob_whose_workers_can_never_share_the_level(stack: Stack) -> None:
    """A layer-3 domain has 4 nodes of 8 GPUs: 5 workers of 8 GPUs can never share one."""
    with pytest.raises(client.ApiException) as denied:
        stack.api.create(MPIJOBS, mpijob("toolarge", 5, {"kueue.x-k8s.io/podset-required-topology": L3}), NS)
    message = json.loads(denied.value.body)["message"]
    assert "spec.mpiReplicaSpecs[Worker].template.metadata.annotations" in message, message
    assert 'pod set "worker" (5 pod(s)) can never be admitted by ClusterQueue' in message, message
