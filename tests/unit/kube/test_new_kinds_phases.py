"""The controller's phases for the kinds issue 31 wires (TrainJob, Ray, HyperPodPyTorchJob, the
pod integration, StatefulSet) against the in-memory API server: Workloads created as Kueue's
reconcilers create them (or not: children, external frameworks, jobs on an existing cluster),
started with Kueue's topology gate, and pods of an admitted pod set released to their domain
by the topology ungater whoever created them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB
from scheduler.adapter.kinds.pod import role_hash
from scheduler.adapter.kinds.ray import RAYCLUSTER, RAYJOB
from scheduler.adapter.kinds.statefulset import STATEFULSET
from scheduler.adapter.kinds.trainjob import TRAINJOB
from scheduler.core.config import KueueConfig
from scheduler.core.kueue_names import GATE_ADMISSION, GATE_TOPOLOGY, LABEL_MANAGED, LABEL_POD_GROUP_NAME
from scheduler.core.topology_request import ANN_REQUIRED
from scheduler.core.workload import ANN_WORKLOAD, LABEL_PODSET, LABEL_QUEUE_NAME
from scheduler.k8s.informer import CLUSTER_QUEUES, PODS, WORKLOADS, Resource
from scheduler.kube import status as st
from scheduler.kube.controller import Controller
from scheduler.kube.jobs import resource_of
from scheduler.kube.settings import ControllerSettings
from tests.unit.kube.test_phases import BLOCK, GPU, HOST, NS, Harness

ROOT = Path(__file__).resolve().parents[3]
CLUSTER_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", namespaced=False)
Q = {LABEL_QUEUE_NAME: "lq"}


def pod_template(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"annotations": dict(annotations or {})},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "node", "image": "busybox", "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}]}}


def reconcile(harness: Harness, times: int = 1) -> None:
    for _ in range(times):
        harness.controller.reconcile()
        harness.sync()


def workloads(harness: Harness) -> list[dict[str, Any]]:
    return harness.api.objects(WORKLOADS, NS)


def create(harness: Harness, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    created = harness.api.create(resource, obj, NS)
    harness.sync()
    return created


# ---------------------------------------------------------------------------- TrainJob
def torch_runtime() -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "torch-distributed"},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": pod_template({ANN_REQUIRED: BLOCK})}}}]}}}}


def trainjob(name: str, nodes: int) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": NS, "labels": dict(Q)},
            "spec": {"suspend": True, "runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": nodes},
                     "runtimePatches": [{"manager": "kueue.x-k8s.io/manager",
                                         "trainingRuntimeSpec": {"template": {"spec": {}}}}]}}


def test_a_trainjob_is_one_workload_of_its_runtimes_pod_sets_started_with_the_topology_gate(harness: Harness) -> None:
    create(harness, resource_of(TRAINJOB), trainjob("tj", 2))
    reconcile(harness)
    assert not workloads(harness)  # no runtime: Kueue's "runtime ... not found", no Workload
    assert "CreatedWorkloadFailed" in harness.event_reasons()
    harness.api.create(CLUSTER_RUNTIMES, torch_runtime())
    harness.sync()
    reconcile(harness, 3)
    [wl] = workloads(harness)
    assert wl["metadata"]["name"].startswith("trainjob-tj-")
    [ps] = wl["spec"]["podSets"]
    assert (ps["name"], ps["count"], ps["topologyRequest"]["required"]) == ("node", 2, BLOCK)
    assert st.condition_true(wl, st.ADMITTED)
    started = harness.api.get(resource_of(TRAINJOB), "tj", NS)
    assert started["spec"]["suspend"] is False
    [kueue_patch] = started["spec"]["runtimePatches"]
    [rjob] = kueue_patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    template = rjob["template"]["spec"]["template"]
    assert template["spec"]["schedulingGates"] == [{"name": GATE_TOPOLOGY}]
    assert template["metadata"]["labels"][LABEL_PODSET] == "node"
    assert template["metadata"]["annotations"][ANN_WORKLOAD] == wl["metadata"]["name"]


def test_the_jobset_a_trainjob_created_is_governed_through_it(harness: Harness) -> None:
    harness.api.create(CLUSTER_RUNTIMES, torch_runtime())
    tj = create(harness, resource_of(TRAINJOB), trainjob("tj", 1))
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "tj", "namespace": NS, "labels": dict(Q), "ownerReferences": [{
                  "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj",
                  "uid": tj["metadata"]["uid"], "controller": True}]},
              "spec": {"suspend": True, "replicatedJobs": [{"name": "node", "replicas": 1, "template": {
                  "spec": {"parallelism": 1, "completions": 1, "template": pod_template()}}}]}}
    create(harness, Resource("jobset.x-k8s.io", "v1alpha2", "jobsets"), jobset)
    reconcile(harness, 2)
    assert [w["metadata"]["name"][:11] for w in workloads(harness)] == ["trainjob-tj"]  # none for the JobSet


# ---------------------------------------------------------------------------- Ray
def ray_cluster_spec() -> dict[str, Any]:
    return {"headGroupSpec": {"template": pod_template()},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "template": pod_template({ANN_REQUIRED: BLOCK})}]}


def test_a_rayjob_is_one_workload_its_cluster_none_and_one_on_an_existing_cluster_none(harness: Harness) -> None:
    # the default submitter asks for cpu and memory: the queue covers them too
    harness.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": [GPU, "cpu", "memory"], "flavors": [{"name": "gpu", "resources": [
            {"name": GPU, "nominalQuota": "32"}, {"name": "cpu", "nominalQuota": "8"},
            {"name": "memory", "nominalQuota": "8Gi"}]}]}]}})
    job = create(harness, resource_of(RAYJOB), {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj", "namespace": NS, "labels": dict(Q)},
        "spec": {"suspend": True, "submissionMode": "K8sJobMode", "shutdownAfterJobFinishes": True,
                 "rayClusterSpec": ray_cluster_spec()}})
    create(harness, resource_of(RAYCLUSTER), {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "rj-abcde", "namespace": NS, "labels": dict(Q), "ownerReferences": [{
            "apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": job["metadata"]["uid"],
            "controller": True}]},
        "spec": {"suspend": True, **ray_cluster_spec()}})
    create(harness, resource_of(RAYJOB), {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "on-existing", "namespace": NS,
                                                                  "labels": dict(Q)},
        "spec": {"clusterSelector": {"ray.io/cluster": "shared"}}})
    reconcile(harness, 3)
    [wl] = workloads(harness)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("head", 1), ("gpu", 1), ("submitter", 1)]
    started = harness.api.get(resource_of(RAYJOB), "rj", NS)
    assert started["spec"]["suspend"] is False
    gpu = started["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    assert gpu["spec"]["schedulingGates"] == [{"name": GATE_TOPOLOGY}]
    assert started["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["name"] == "ray-job-submitter"
    # the child RayCluster was never started on its own (KubeRay unsuspends it with the RayJob)
    assert harness.api.get(resource_of(RAYCLUSTER), "rj-abcde", NS)["spec"]["suspend"] is True


# ---------------------------------------------------------------------------- HyperPodPyTorchJob
def hyp_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((ROOT / "tests/data/hyp/hyp-create-pytorch-job-v1.1.yaml").read_text())
    job["metadata"]["namespace"] = NS
    job["metadata"]["labels"] = dict(Q)
    spec = job["spec"]["replicaSpecs"][0]
    spec.update(replicas=1, spares=1)
    spec["template"] = pod_template({ANN_REQUIRED: BLOCK})
    job["spec"]["runPolicy"] = {"suspend": True}
    return job


def test_a_hyperpod_job_is_governed_natively_charging_replicas_and_spares(harness: Harness) -> None:
    create(harness, resource_of(HYPERPODPYTORCHJOB), hyp_job())
    reconcile(harness, 3)
    [wl] = workloads(harness)
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("pod", 2)]  # 1 replica + 1 spare
    assert st.condition_true(wl, st.ADMITTED)
    started = harness.api.get(resource_of(HYPERPODPYTORCHJOB), "llama3-pretrain", NS)
    assert started["spec"]["runPolicy"]["suspend"] is False


def test_as_an_external_framework_its_operators_workload_is_admitted_never_duplicated(harness: Harness) -> None:
    harness.controller = Controller(harness.api, harness.cache, ControllerSettings(
        clock=harness.clock, config=KueueConfig(external_frameworks=(
            ("sagemaker.amazonaws.com", "v1", "HyperPodPytorchJob"),))), events=harness.events, is_leader=lambda: True)
    job = create(harness, resource_of(HYPERPODPYTORCHJOB), hyp_job())
    reconcile(harness, 2)
    assert not workloads(harness)  # the operator creates it
    operators = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                 "metadata": {"name": "hyperpodpytorchjob-llama3-pretrain", "namespace": NS, "ownerReferences": [{
                     "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
                     "name": "llama3-pretrain", "uid": job["metadata"]["uid"], "controller": True}]},
                 "spec": {"queueName": "lq", "podSets": [{"name": "pod", "count": 2, "template": pod_template(),
                                                          "topologyRequest": {"required": BLOCK}}]}}
    create(harness, WORKLOADS, operators)
    reconcile(harness, 3)
    [wl] = workloads(harness)
    assert st.condition_true(wl, st.ADMITTED)
    # its operator unsuspends it: toposched never writes the job
    assert harness.api.get(resource_of(HYPERPODPYTORCHJOB), "llama3-pretrain", NS)["spec"]["runPolicy"]["suspend"]


# ---------------------------------------------------------------------------- pods
def gated_pod(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
              owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod as the pod webhook leaves it (admission/pods.py): managed, gated, finalizer."""
    template = pod_template({ANN_REQUIRED: BLOCK, **(annotations or {})})
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {LABEL_MANAGED: "true", **(labels or {})},
                            "annotations": template["metadata"]["annotations"],
                            "finalizers": ["kueue.x-k8s.io/managed"]}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {**template["spec"], "schedulerName": "toposched",
                     "schedulingGates": [{"name": GATE_ADMISSION}, {"name": GATE_TOPOLOGY}]},
            "status": {"phase": "Pending"}}


def gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or ()]


def test_a_queued_pod_is_a_workload_released_to_its_domain_and_finished_with_it(harness: Harness) -> None:
    create(harness, PODS, gated_pod("solo", Q))
    reconcile(harness, 3)
    [wl] = workloads(harness)
    assert wl["metadata"]["name"].startswith("pod-solo-") and st.condition_true(wl, st.ADMITTED)
    pod = harness.api.get(PODS, "solo", NS)
    assert gates(pod) == []  # admission gate by the pod integration, topology gate by the ungater
    assert pod["metadata"]["annotations"][ANN_WORKLOAD] == wl["metadata"]["name"]
    [domain] = {d for d in (pod["spec"]["nodeSelector"].get(BLOCK),)}
    assert domain in ("b0", "b1") and pod["spec"]["nodeSelector"][HOST].startswith("n")
    harness.api.merge_patch(PODS, "solo", {"status": {"phase": "Succeeded"}}, NS, subresource="status")
    harness.sync()
    reconcile(harness, 2)
    assert st.condition_true(harness.api.get(WORKLOADS, wl["metadata"]["name"], NS), st.FINISHED)
    assert "finalizers" not in harness.api.get(PODS, "solo", NS)["metadata"]  # Kueue's finalizer released


def test_a_pod_group_is_one_workload_once_complete(harness: Harness) -> None:
    group = {**Q, LABEL_POD_GROUP_NAME: "grp"}
    count = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    create(harness, PODS, gated_pod("g-0", group, count))
    reconcile(harness, 2)
    assert not workloads(harness)  # 1 of 2 members: Kueue waits for the whole group
    create(harness, PODS, gated_pod("g-1", group, count))
    reconcile(harness, 3)
    [wl] = workloads(harness)
    assert wl["metadata"]["name"] == "grp" and sum(ps["count"] for ps in wl["spec"]["podSets"]) == 2
    released = [harness.api.get(PODS, n, NS) for n in ("g-0", "g-1")]
    assert all(gates(p) == [] for p in released)
    assert len({p["spec"]["nodeSelector"][BLOCK] for p in released}) == 1  # one block, as required


def test_a_pod_group_releases_no_more_pods_than_admitted_whatever_role_hash_a_tenant_writes(
        harness: Harness) -> None:
    """Issue 39 item 4: the Workload is built from two 1-GPU members; an 8-GPU pod that claims
    their role hash, and a third 1-GPU pod, join the group later. The webhook recomputes a role
    at creation (admission/pods.py) and no one but the controller may change it; here the
    controller alone is tested: whatever role a late member claims, no role gets more pods
    released than it was admitted for (before: both were released and ran charged as the
    group's 2 GPUs)."""
    group = {**Q, LABEL_POD_GROUP_NAME: "grp"}
    count = {"kueue.x-k8s.io/pod-group-total-count": "2"}

    def member(name: str, gpus: str, role: str | None = None) -> dict[str, Any]:
        pod = gated_pod(name, group, count)
        pod["spec"]["containers"][0]["resources"] = {"requests": {GPU: gpus}, "limits": {GPU: gpus}}
        # as the pod webhook writes it at creation (recomputed), or a claimed one
        pod["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = role or role_hash(pod["spec"])
        return pod

    for name in ("g-0", "g-1"):
        create(harness, PODS, member(name, "1"))
    reconcile(harness, 3)
    [wl] = workloads(harness)
    [pod_set] = wl["spec"]["podSets"]
    assert pod_set["count"] == 2 and st.condition_true(wl, st.ADMITTED)
    assert all(gates(harness.api.get(PODS, n, NS)) == [] for n in ("g-0", "g-1"))
    create(harness, PODS, member("g-big", "8", role=pod_set["name"]))  # claims the 1-GPU pods' role
    create(harness, PODS, member("g-extra", "1"))  # the same role, past the admitted count
    reconcile(harness, 3)
    assert GATE_ADMISSION in gates(harness.api.get(PODS, "g-big", NS))
    assert GATE_ADMISSION in gates(harness.api.get(PODS, "g-extra", NS))


def test_an_evicted_pod_workload_deletes_its_pods(harness: Harness) -> None:
    create(harness, PODS, gated_pod("solo", Q))
    reconcile(harness, 3)
    [wl] = workloads(harness)
    conditions = st.set_condition(st.conditions_of(wl), st.EVICTED, "True", "Preempted", "Preempted by test",
                                  harness.clock())
    harness.api.merge_patch(WORKLOADS, wl["metadata"]["name"], {"status": {"conditions": conditions}}, NS,
                            subresource="status")
    harness.sync()
    reconcile(harness, 2)
    assert "solo" not in [p["metadata"]["name"] for p in harness.api.objects(PODS, NS)]  # a pod is not suspended
    assert st.condition_true(harness.api.get(WORKLOADS, wl["metadata"]["name"], NS), st.REQUEUED)


def test_a_statefulset_is_one_prebuilt_workload_whose_pods_are_released(harness: Harness) -> None:
    sts = create(harness, resource_of(STATEFULSET), {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": NS, "labels": dict(Q)},
        "spec": {"replicas": 2, "template": copy.deepcopy(pod_template({ANN_REQUIRED: BLOCK}))}})
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": sts["metadata"]["uid"],
             "controller": True}
    for i in range(2):
        pod = gated_pod(f"web-{i}", {"apps.kubernetes.io/pod-index": str(i)},
                        {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"}, owner)
        pod["metadata"].pop("finalizers")  # held for its parent: no finalizer (Kueue's default)
        create(harness, PODS, pod)
    reconcile(harness, 4)
    [wl] = workloads(harness)
    assert wl["metadata"]["name"].startswith("statefulset-web-")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 2)]
    pods = [harness.api.get(PODS, f"web-{i}", NS) for i in range(2)]
    assert all(p["metadata"]["labels"][LABEL_POD_GROUP_NAME] == wl["metadata"]["name"] for p in pods)
    assert all(gates(p) == [] for p in pods)
    # ranked by ordinal: pod i in the domain of rank i
    assert [p["spec"]["nodeSelector"][HOST] for p in pods] == sorted(p["spec"]["nodeSelector"][HOST] for p in pods)
