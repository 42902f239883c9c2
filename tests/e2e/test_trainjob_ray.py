"""TrainJob, RayCluster, RayJob and RayService end to end against their real controllers: the
Kubeflow Trainer v2.2.0 and KubeRay ray-operator v1.6.0 (built from the Go module proxy at the
versions Kueue v0.17.0 requires; ``toposched dev up --trainjob --ray``) next to toposched's
webhook, controller, extender and the real kube-scheduler, on one control plane for the module.

As Kueue's integrations: each object is one Workload of its pod sets (a TrainJob's rendered from
its runtime), created suspended and started with Kueue's topology gate in its templates; the
JobSet the Trainer creates and the RayCluster KubeRay creates for a RayJob or RayService are
governed through their parent (no Workload of their own); the controllers' pods are pinned to
their assigned domain by the topology ungater. Under KWOK nothing answers KubeRay's calls to
Ray: a RayJob never finishes and a RayService never becomes ready, so admission, pod sets,
suspension, placement and preemption are what is tested (docs/integrations.md)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.ray import RAYCLUSTER, RAYJOB, RAYSERVICE
from scheduler.adapter.kinds.trainjob import TRAINJOB
from scheduler.core.assignment import decode_topology_assignment
from scheduler.devcluster.apply import apply_objects, load_documents
from scheduler.devcluster.binaries import repo_root
from scheduler.devcluster.controlplane import LocalCluster
from scheduler.devcluster.kuberay import start_kuberay
from scheduler.devcluster.trainer import start_trainer
from scheduler.k8s.informer import JOBS, PODS, WORKLOADS
from scheduler.kube.jobs import resource_of
from tests.e2e.conftest import Stack

CLUSTER = {"name": "e2e-trainjob-ray", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}
NS = "hyperpod-ns-team-a"
L3 = "topology.k8s.aws/network-node-layer-3"
FAKE_PHASE = "toposched.dev/fake-phase"
EXAMPLES = repo_root() / "examples" / "jobs"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"


def start_peers(cluster: LocalCluster) -> None:
    start_trainer(cluster)
    start_kuberay(cluster)


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, before_toposched=start_peers)


def workloads_of(stack: Stack, uid: str) -> list[dict[str, Any]]:
    return [w for w in stack.api.list(WORKLOADS, NS)["items"]
            if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or ())]


def conditions(wl: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or ()}


def admitted(stack: Stack, uid: str) -> dict[str, Any] | None:
    found = workloads_of(stack, uid)
    return found[0] if len(found) == 1 and conditions(found[0]).get("Admitted") == "True" else None


def running(stack: Stack, selector: str, count: int) -> list[dict[str, Any]] | None:
    pods = stack.api.list(PODS, NS, labelSelector=selector)["items"]
    up = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return up if len(up) == count else None


def node_labels(stack: Stack) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in stack.nodes}


def assigned_hosts(wl: dict[str, Any], pod_set: str) -> set[str]:
    [psa] = [p for p in wl["status"]["admission"]["podSetAssignments"] if p["name"] == pod_set]
    return {d.values[-1] for d in decode_topology_assignment(psa["topologyAssignment"])[1]}


def test_trainjob_runs_as_one_workload_its_jobset_pinned_to_the_admitted_domain(stack: Stack) -> None:
    runtime, trainjob = load_documents(EXAMPLES / "trainjob-torch.yaml")
    apply_objects(stack.kube, [runtime])
    created = stack.api.create(resource_of(TRAINJOB), trainjob, NS)
    assert created["spec"]["suspend"] is True  # toposched's webhook, as Kueue's
    [kueue_patch] = [p for p in created["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager"]
    assert kueue_patch["trainingRuntimeSpec"]["template"]["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue"}
    wl = stack.wait(lambda: admitted(stack, created["metadata"]["uid"]), 90, "the TrainJob's Workload admitted")
    assert wl["metadata"]["name"].startswith("trainjob-llama-finetune-")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("node", 4)]
    pods = stack.wait(lambda: running(stack, "jobset.sigs.k8s.io/jobset-name=llama-finetune", 4), 180,
                      "the TrainJob's 4 pods Running")
    # the Trainer's JobSet (queue label from Kueue's runtime patch) is governed through the TrainJob
    jobset = stack.api.get(resource_of(JOBSET), "llama-finetune", NS)
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
    assert not workloads_of(stack, jobset["metadata"]["uid"])
    # its pods run under the runtime's scheduler: the topology ungater pinned each to its host
    labels = node_labels(stack)
    assert {p["spec"]["nodeName"] for p in pods} == assigned_hosts(wl, "node")
    assert len({labels[p["spec"]["nodeName"]][L3] for p in pods}) == 1
    assert all(not p["spec"].get("schedulingGates") and p["spec"]["nodeSelector"].get(L3) for p in pods)
    print(f"\n[trainjob] workload {wl['metadata']['name']}: hosts {sorted(assigned_hosts(wl, 'node'))}")

    for pod in pods:  # the training ends: the TrainJob completes, its Workload finishes
        stack.api.merge_patch(PODS, pod["metadata"]["name"], {"metadata": {"labels": {FAKE_PHASE: "Succeeded"}}}, NS)

    def finished() -> dict[str, Any] | None:
        [w] = workloads_of(stack, created["metadata"]["uid"])
        return w if conditions(w).get("Finished") == "True" else None

    stack.wait(finished, 120, "the TrainJob's Workload Finished")
    stack.api.delete(resource_of(TRAINJOB), "llama-finetune", NS, propagationPolicy="Background")


def test_raycluster_is_admitted_whole_placed_and_suspended_when_preempted(stack: Stack) -> None:
    [raycluster] = load_documents(EXAMPLES / "raycluster.yaml")
    created = stack.api.create(resource_of(RAYCLUSTER), raycluster, NS)
    assert created["spec"]["suspend"] is True
    wl = stack.wait(lambda: admitted(stack, created["metadata"]["uid"]), 90, "the RayCluster's Workload admitted")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("head", 1), ("gpu", 4)]
    pods = stack.wait(lambda: running(stack, "ray.io/cluster=ray-train", 5), 180, "head + 4 workers Running")
    workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/group") == "gpu"]
    labels = node_labels(stack)
    assert {p["spec"]["nodeName"] for p in workers} == assigned_hosts(wl, "gpu")
    assert len({labels[p["spec"]["nodeName"]][L3] for p in workers}) == 1  # required layer-3 held

    # A higher-priority Job that needs every node preempts it: the RayCluster is suspended (KubeRay
    # deletes its pods), its Workload requeued, as under Kueue ("preemption deletes the cluster").
    urgent = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "urgent", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue",
                                                       "kueue.x-k8s.io/priority-class": "inference-priority"}},
        "spec": {"parallelism": 16, "completions": 16, "completionMode": "Indexed", "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}}}
    stack.api.create(JOBS, urgent, NS)
    stack.wait(lambda: stack.api.get(resource_of(RAYCLUSTER), "ray-train", NS)["spec"].get("suspend") is True, 90,
               "the preempted RayCluster suspended")
    stack.wait(lambda: not stack.api.list(PODS, NS, labelSelector="ray.io/cluster=ray-train")["items"], 90,
               "KubeRay deleted the preempted cluster's pods")
    stack.wait(lambda: running(stack, "job-name=urgent", 16), 180, "the urgent Job Running on every node")
    [requeued] = workloads_of(stack, created["metadata"]["uid"])
    assert conditions(requeued).get("Admitted") != "True"
    stack.api.delete(JOBS, "urgent", NS, propagationPolicy="Background")
    stack.wait(lambda: running(stack, "ray.io/cluster=ray-train", 5), 180, "the RayCluster back once capacity frees")
    stack.api.delete(resource_of(RAYCLUSTER), "ray-train", NS, propagationPolicy="Background")


def test_rayjob_and_rayservice_are_one_workload_each_their_clusters_none(stack: Stack) -> None:
    [rayjob] = load_documents(EXAMPLES / "rayjob.yaml")
    [rayservice] = load_documents(EXAMPLES / "rayservice.yaml")
    job = stack.api.create(resource_of(RAYJOB), rayjob, NS)
    service = stack.api.create(resource_of(RAYSERVICE), rayservice, NS)
    assert job["spec"]["suspend"] is True and service["spec"]["rayClusterConfig"]["suspend"] is True
    job_wl = stack.wait(lambda: admitted(stack, job["metadata"]["uid"]), 90, "the RayJob's Workload admitted")
    assert [(ps["name"], ps["count"]) for ps in job_wl["spec"]["podSets"]] == [("head", 1), ("gpu", 2),
                                                                                ("submitter", 1)]
    service_wl = stack.wait(lambda: admitted(stack, service["metadata"]["uid"]), 90,
                            "the RayService's Workload admitted")
    assert [(ps["name"], ps["count"]) for ps in service_wl["spec"]["podSets"]] == [("head", 1), ("gpu", 2)]

    def cluster_of(owner_uid: str) -> dict[str, Any] | None:
        found = [c for c in stack.api.list(resource_of(RAYCLUSTER), NS)["items"]
                 if any(r.get("uid") == owner_uid for r in c["metadata"].get("ownerReferences") or ())]
        return found[0] if found else None

    for owner, wl in ((job, job_wl), (service, service_wl)):
        cluster = stack.wait(lambda o=owner: cluster_of(o["metadata"]["uid"]), 90,
                             f"the {owner['kind']}'s RayCluster")
        name = cluster["metadata"]["name"]
        pods = stack.wait(lambda n=name: running(stack, f"ray.io/cluster={n}", 3), 180, f"{name}: head + 2 workers")
        assert not workloads_of(stack, cluster["metadata"]["uid"])  # governed through its parent
        workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/group") == "gpu"]
        assert {p["spec"]["nodeName"] for p in workers} == assigned_hosts(wl, "gpu")
        assert all(p["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == wl["metadata"]["name"] for p in pods)
    for resource, name in ((resource_of(RAYJOB), "ray-batch-inference"), (resource_of(RAYSERVICE), "ray-serve")):
        stack.api.delete(resource, name, NS, propagationPolicy="Background")
