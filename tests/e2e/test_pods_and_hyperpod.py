"""Kueue's pod-level contracts and the HyperPodPyTorchJob end to end, on one control plane: the
real kube-apiserver calls toposched's pod webhook, the real Deployment, StatefulSet and
ReplicaSet controllers make the pods, the real kube-scheduler binds them.

- A plain pod and a pod group carrying the queue label are held by Kueue's
  ``kueue.x-k8s.io/admission`` and ``kueue.x-k8s.io/topology`` scheduling gates, become one
  Workload each (the group once all its members exist), and are released into the admitted
  domain; a user cannot remove the gates themselves.
- A Deployment's replicas are single-pod Workloads; a StatefulSet is one prebuilt Workload whose
  pods are placed by ordinal.
- The HyperPodPyTorchJob the real ``hyp`` CLI writes (tests/data/hyp/, on the test-only CRD: the
  operator is not public) is queued, charged replicas + spares, started through
  ``spec.runPolicy.suspend``; its pods, created here from its template as the operator would, land
  in the admitted domain. With AWS's ``externalFrameworks`` entry (a second control plane), the
  Workload its operator creates is admitted and none is created beside it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.adapter.kinds.deployment import DEPLOYMENT
from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB
from scheduler.adapter.kinds.statefulset import STATEFULSET
from scheduler.core.assignment import decode_topology_assignment
from scheduler.devcluster.apply import apply_objects, load_documents
from scheduler.devcluster.binaries import repo_root
from scheduler.devcluster.controlplane import LocalCluster
from scheduler.devcluster.peers import wait_crds_established
from scheduler.k8s.informer import CLUSTER_QUEUES, PODS, WORKLOADS
from scheduler.kube.jobs import resource_of
from tests.e2e.conftest import Stack

CLUSTER = {"name": "e2e-pods", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}
NS = "hyperpod-ns-team-a"
L3 = "topology.k8s.aws/network-node-layer-3"
HOST = "kubernetes.io/hostname"
EXAMPLES = repo_root() / "examples" / "jobs"
HYP = repo_root() / "tests" / "data" / "hyp"
GATES = {"kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"}


def install_hyperpod_crd(cluster: LocalCluster) -> None:
    crds = load_documents(HYP / "hyperpodpytorchjob-crd.yaml")
    apply_objects(cluster.api_client(), crds)
    wait_crds_established(cluster.api_client(), crds)


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, before_toposched=install_hyperpod_crd)


def conditions(wl: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or ()}


def workload(stack: Stack, name: str) -> dict[str, Any] | None:
    try:
        return stack.api.get(WORKLOADS, name, NS)
    except client.ApiException:
        return None


def owned(stack: Stack, uid: str) -> list[dict[str, Any]]:
    return [w for w in stack.api.list(WORKLOADS, NS)["items"]
            if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or ())]


def running(stack: Stack, selector: str, count: int) -> list[dict[str, Any]] | None:
    pods = stack.api.list(PODS, NS, labelSelector=selector)["items"]
    up = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return up if len(up) == count else None


def gates(pod: dict[str, Any]) -> set[str]:
    return {g["name"] for g in pod["spec"].get("schedulingGates") or ()}


def hosts_of(wl: dict[str, Any]) -> set[str]:
    return {d.values[-1] for psa in wl["status"]["admission"]["podSetAssignments"]
            for d in decode_topology_assignment(psa["topologyAssignment"])[1]}


def domain(stack: Stack, node: str) -> str:
    return next(n["metadata"]["labels"][L3] for n in stack.nodes if n["metadata"]["name"] == node)


def test_a_plain_pod_is_gated_admitted_and_released_and_its_gates_are_the_controllers(stack: Stack) -> None:
    [pod] = load_documents(EXAMPLES / "pod-single.yaml")
    created = stack.api.create(PODS, pod, NS)
    assert GATES <= gates(created)  # Kueue's pod webhook contract
    assert created["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert created["spec"]["schedulerName"] == "toposched"
    [up] = stack.wait(lambda: running(stack, "kueue.x-k8s.io/queue-name", 1), 120, "the pod Running")
    [wl] = owned(stack, created["metadata"]["uid"])
    assert wl["metadata"]["name"].startswith("pod-notebook-eval-") and conditions(wl)["Admitted"] == "True"
    assert up["spec"]["nodeName"] in hosts_of(wl) and not gates(up)
    stack.api.delete(PODS, "notebook-eval", NS)
    stack.wait(lambda: not stack.api.list(PODS, NS, labelSelector="kueue.x-k8s.io/queue-name")["items"], 60,
               "the pod gone: toposched released Kueue's finalizer")

    held = copy.deepcopy(pod)
    held["metadata"]["name"] = "held"
    held["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "9"},
                                                  "limits": {"nvidia.com/gpu": "9"}}  # fits no node: stays pending
    stack.api.create(PODS, held, NS)
    alice = stack.as_user("alice")  # RBAC allows it, only the webhook refuses
    with pytest.raises(client.ApiException) as refused:
        alice.merge_patch(PODS, "held", {"spec": {"schedulingGates": None}}, NS)
    message = json.loads(refused.value.body)["message"]
    assert "only toposched's controller may remove kueue.x-k8s.io/admission" in message
    stack.api.delete(PODS, "held", NS)


def test_a_pod_group_is_one_workload_released_into_one_domain_by_rank(stack: Stack) -> None:
    first, second = load_documents(EXAMPLES / "pod-group.yaml")
    stack.api.create(PODS, first, NS)
    assert workload(stack, "allreduce") is None  # 1 of 2 members: Kueue waits for the whole group
    stack.api.create(PODS, second, NS)
    pods = stack.wait(lambda: running(stack, "kueue.x-k8s.io/pod-group-name=allreduce", 2), 120, "the group Running")
    wl = workload(stack, "allreduce")
    assert wl is not None and sum(ps["count"] for ps in wl["spec"]["podSets"]) == 2
    assert len({domain(stack, p["spec"]["nodeName"]) for p in pods}) == 1  # required layer-3
    for pod in pods:
        stack.api.delete(PODS, pod["metadata"]["name"], NS)


def test_deployment_replicas_are_single_pod_workloads_and_a_statefulset_one(stack: Stack) -> None:
    [deployment] = load_documents(EXAMPLES / "deployment-serving.yaml")
    [statefulset] = load_documents(EXAMPLES / "statefulset-serving.yaml")
    dep = stack.api.create(resource_of(DEPLOYMENT), deployment, NS)
    assert dep["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "deployment"
    sts = stack.api.create(resource_of(STATEFULSET), statefulset, NS)
    replicas = stack.wait(lambda: running(stack, "app=llm-endpoint", 2), 180, "the Deployment's 2 replicas Running")
    for pod in replicas:
        [wl] = owned(stack, pod["metadata"]["uid"])  # one Workload per pod
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 1)]
    members = stack.wait(lambda: running(stack, "app=kv-cache", 2), 180, "the StatefulSet's 2 pods Running")
    [wl] = owned(stack, sts["metadata"]["uid"])
    assert wl["metadata"]["name"].startswith("statefulset-kv-cache-")
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("main", 2)]
    [psa] = wl["status"]["admission"]["podSetAssignments"]
    ranked = [d.values[-1] for d in decode_topology_assignment(psa["topologyAssignment"])[1] for _ in range(d.count)]
    by_ordinal = {int(p["metadata"]["labels"]["apps.kubernetes.io/pod-index"]): p["spec"]["nodeName"]
                  for p in members}
    assert by_ordinal == dict(enumerate(ranked))  # pod i on the host of rank i
    stack.api.merge_patch(resource_of(STATEFULSET), "kv-cache", {"spec": {"replicas": 0}}, NS)
    stack.wait(lambda: not owned(stack, sts["metadata"]["uid"]), 90, "scaling to 0 releases the Workload")
    stack.api.delete(resource_of(DEPLOYMENT), "llm-endpoint", NS, propagationPolicy="Background")
    stack.api.delete(resource_of(STATEFULSET), "kv-cache", NS, propagationPolicy="Background")


def operator_pods(job: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The pods the HyperPod training operator would create from the job's replica template (its
    metadata and spec copied, owned by the job): what toposched relies on the operator for."""
    spec = job["spec"]["replicaSpecs"][0]
    out = []
    for i in range(count):
        template = copy.deepcopy(spec["template"])
        meta = {k: v for k, v in template["metadata"].items() if k in ("labels", "annotations")}
        meta.update(name=f"{job['metadata']['name']}-{spec['name']}-{i}", namespace=NS, ownerReferences=[{
            "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob", "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"], "controller": True}])
        meta["labels"] = {**meta.get("labels", {}), "hyperpod-replica": str(i)}
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]})
    return out


def test_the_manifest_the_hyp_cli_writes_is_queued_charged_with_spares_and_placed(stack: Stack) -> None:
    manifest = yaml.safe_load((HYP / "hyp-create-pytorch-job-v1.1.yaml").read_text())
    manifest["spec"]["replicaSpecs"][0]["spares"] = 2  # the CLI writes spares: 0; 4 replicas + 2 spares
    created = stack.api.create(resource_of(HYPERPODPYTORCHJOB), manifest, NS)
    assert created["spec"]["runPolicy"]["suspend"] is True  # toposched's webhook: the CLI writes no suspend
    assert created["spec"]["replicaSpecs"][0]["template"]["spec"]["schedulerName"] == "toposched"

    def admitted() -> dict[str, Any] | None:
        found = owned(stack, created["metadata"]["uid"])
        return found[0] if len(found) == 1 and conditions(found[0]).get("Admitted") == "True" else None

    wl = stack.wait(admitted, 90, "the HyperPodPyTorchJob's Workload admitted")
    assert wl["metadata"]["name"].startswith("hyperpodpytorchjob-llama3-pretrain-")
    [ps] = wl["spec"]["podSets"]
    assert (ps["name"], ps["count"], ps["topologyRequest"]) == ("pod", 6, {"preferred": L3})  # replicas + spares
    usage = stack.wait(lambda: stack.api.get(CLUSTER_QUEUES, "hyperpod-ns-team-a-clusterqueue")["status"].get(
        "flavorsUsage"), 30, "the ClusterQueue's usage")
    gpus = {r["name"]: r["total"] for f in usage for r in f["resources"]}["nvidia.com/gpu"]
    assert gpus == "48", usage  # 6 x 8 GPUs: the spares are charged
    started = stack.api.get(resource_of(HYPERPODPYTORCHJOB), "llama3-pretrain", NS)
    assert started["spec"]["runPolicy"]["suspend"] is False
    template = started["spec"]["replicaSpecs"][0]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == wl["metadata"]["name"]
    assert {"name": "kueue.x-k8s.io/topology"} in template["spec"]["schedulingGates"]

    for pod in operator_pods(started, 4):  # the running replicas; the spares' quota stays reserved
        stack.api.create(PODS, pod, NS)
    pods = stack.wait(lambda: running(stack, "hyperpod-replica", 4), 120, "the operator's 4 pods Running")
    assert {p["spec"]["nodeName"] for p in pods} <= hosts_of(wl)
    print(f"\n[hyperpod] workload {wl['metadata']['name']}: pods on "
          f"{sorted((p['spec']['nodeName'], domain(stack, p['spec']['nodeName'])) for p in pods)}")
    stack.api.delete(resource_of(HYPERPODPYTORCHJOB), "llama3-pretrain", NS, propagationPolicy="Background")
    for pod in pods:
        stack.api.delete(PODS, pod["metadata"]["name"], NS)


def test_as_an_external_framework_the_operators_workload_is_admitted_never_duplicated(stack_factory: Any) -> None:
    """AWS's entry (HyperPodPytorchJob, lower-case t) names the CLI's kind: toposched neither
    suspends the job nor creates a Workload for it; the one the operator creates (here: as the
    operator would, owned by the job) is admitted."""
    external = stack_factory({**CLUSTER, "name": "e2e-hyp-external", "layers": [1, 1, 2]},
                             before_toposched=install_hyperpod_crd,
                             kueue_config={"integrations": {"frameworks": ["batch/job"], "externalFrameworks": [
                                 "HyperPodPytorchJob.v1.sagemaker.amazonaws.com"]}})
    manifest = yaml.safe_load((HYP / "hyp-create-pytorch-job-v1.1.yaml").read_text())
    manifest["spec"]["runPolicy"] = {"suspend": True}  # as the operator's own webhook would
    created = external.api.create(resource_of(HYPERPODPYTORCHJOB), manifest, NS)
    assert "schedulerName" not in created["spec"]["replicaSpecs"][0]["template"]["spec"]  # toposched's webhook: no
    spec = created["spec"]["replicaSpecs"][0]
    operators = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {
        "name": "hyperpodpytorchjob-llama3-pretrain-op", "namespace": NS, "ownerReferences": [{
            "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob", "name": "llama3-pretrain",
            "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"queueName": "hyperpod-ns-team-a-localqueue", "podSets": [
            {"name": "pod", "count": 4, "template": spec["template"],
             "topologyRequest": {"preferred": L3}}]}}
    external.api.create(WORKLOADS, operators, NS)

    def admitted() -> dict[str, Any] | None:
        wl = workload(external, "hyperpodpytorchjob-llama3-pretrain-op")
        return wl if wl is not None and conditions(wl).get("Admitted") == "True" else None

    external.wait(admitted, 90, "the operator's Workload admitted")
    assert [w["metadata"]["name"] for w in owned(external, created["metadata"]["uid"])] == [
        "hyperpodpytorchjob-llama3-pretrain-op"]  # never duplicated
    job = external.api.get(resource_of(HYPERPODPYTORCHJOB), "llama3-pretrain", NS)
    assert job["spec"]["runPolicy"]["suspend"] is True  # the operator starts it, not toposched
