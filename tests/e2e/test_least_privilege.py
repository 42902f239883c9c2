"""Least privilege, proven: the controller, the webhook and the extender run authenticated as
their own ServiceAccounts, with exactly the RBAC of deploy/ (rendered by kustomize and applied
to the local control plane), through the HyperPod flow: a managed Job is mutated and validated
by the webhook, admitted by the controller, and its pods bound by the extender on the assigned
nodes. Any 403 fails the test: the flow must complete, and no component may log a Forbidden.

The new kinds (issue 31) run as the same accounts: their CRDs are installed (no operator runs:
TrainJob, RayJob, RayCluster, RayService, HyperPodPyTorchJob objects are created as users would,
and pods as the operators would), Deployments and StatefulSets get their pods from
kube-controller-manager; each verb the registry grants is used (tests/unit/test_kind_registry.py
checks the grants are exactly the registry's, this proves none is missing).

Tokens come from the TokenRequest API (what the kubelet mounts into a Pod); each component gets
a kubeconfig with its token. The webhook runs in secret mode (deploy/'s): it watches the shipped
Secret and its two configurations by name, takes the Lease, and only updates caBundle.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from admission import configs
from scheduler.core.assignment import decode_topology_assignment
from scheduler.core.fakecluster import generate_nodes
from scheduler.devcluster import peers
from scheduler.devcluster.apply import apply_objects, create_nodes, load_documents, wait_nodes_settled
from scheduler.devcluster.binaries import repo_root
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, LocalCluster, default_scheduler_config, free_ports
from scheduler.devcluster.kuberay import kuberay_crd_files
from scheduler.devcluster.trainer import trainer_crd_files
from scheduler.extender.config import extender_entry, toposched_profile
from scheduler.k8s.client import api_client
from scheduler.k8s.informer import CLUSTER_QUEUES, JOBS, PODS, WORKLOADS, Api, Resource
from tests.e2e.conftest import QUEUES, Stack
from tests.e2e.test_hyperpod_flow import CLUSTER, L3, NS, node_labels, running_pods, workload_of
from tests.integration.test_deploy import render

SYSTEM_NS = "toposched-system"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret"}
FORBIDDEN = re.compile(r"Forbidden|forbidden|\bHTTP 403\b|\(403\)")


def service_account_kubeconfig(cluster: LocalCluster, api: Api, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as ``system:serviceaccount:toposched-system:<account>``."""
    review = api.request("POST", f"/api/v1/namespaces/{SYSTEM_NS}/serviceaccounts/{account}/token",
                         body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"expirationSeconds": 7200}})
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": account,
        "clusters": [{"name": "local", "cluster": {"server": cluster.server,
                                                   "certificate-authority": str(cluster.pki / "ca.crt")}}],
        "users": [{"name": account, "user": {"token": review["status"]["token"]}}],
        "contexts": [{"name": account, "context": {"cluster": "local", "user": account}}]}))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = Path(tmp_path_factory.mktemp("least-privilege"))
    cluster = LocalCluster(directory).start()
    try:
        kube = cluster.api_client()
        api = Api(kube)
        nodes = generate_nodes(CLUSTER)
        create_nodes(kube, nodes, FAKE_NODE_LABEL)
        wait_nodes_settled(kube, [n["metadata"]["name"] for n in nodes])
        apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}}])
        apply_objects(kube, load_documents(QUEUES))
        crds = [doc for path in (*trainer_crd_files(), *kuberay_crd_files(),
                                 repo_root() / "tests" / "data" / "hyp" / "hyperpodpytorchjob-crd.yaml")
                for doc in load_documents(path)]
        apply_objects(kube, crds)
        peers.wait_crds_established(kube, crds)
        # deploy/'s accounts, roles, bindings and the (empty) certificate Secret, as kustomize renders them.
        apply_objects(kube, [o for o in render() if o["kind"] in RBAC_KINDS])
        extender_port, webhook_port, health_port, grpc_port = free_ports(4)
        url = configs.url_client_config(f"https://127.0.0.1:{webhook_port}")
        # The configurations exist before the webhook starts (deploy/ ships them): it may only update them.
        apply_objects(kube, [configs.mutating_configuration(url, SYSTEM_NS),
                             configs.validating_configuration(url, SYSTEM_NS)])
        kc = {sa: service_account_kubeconfig(cluster, api, sa, directory / f"{sa}.kubeconfig")
              for sa in ("toposched-controller", "toposched-webhook", "toposched-scheduler")}
        python = [sys.executable, "-m", "scheduler.cli"]
        started = [
            (cluster.start_process("toposched-extender", [
                *python, "extender", "--kubeconfig", str(kc["toposched-scheduler"]), "--port", str(extender_port)]),
             f"http://127.0.0.1:{extender_port}/readyz"),
            (cluster.start_process("toposched-webhook", [
                *python, "webhook", "--kubeconfig", str(kc["toposched-webhook"]), "--port", str(webhook_port),
                "--namespace", SYSTEM_NS, "--cert-source", "secret", "--no-create-configs",
                "--webhook-url", f"https://127.0.0.1:{webhook_port}"]),
             f"https://127.0.0.1:{webhook_port}/readyz"),
            (cluster.start_process("toposched-controller", [
                *python, "controller", "--kubeconfig", str(kc["toposched-controller"]),
                "--health-port", str(health_port), "--grpc-port", str(grpc_port)]),
             f"http://127.0.0.1:{health_port}/readyz"),
        ]
        for proc, ready_url in started:
            peers.wait_http_ready(ready_url, proc, 120, verify_tls=False)
        cluster.reconfigure_scheduler(default_scheduler_config(
            cluster.dir / "scheduler.kubeconfig", extra_profiles=[toposched_profile()],
            extenders=[extender_entry(extender_port)]))
        yield Stack(cluster, api, kube, nodes)
    finally:
        cluster.stop()


def forbidden_lines(stack: Stack) -> list[str]:
    hits = []
    for name in ("toposched-controller", "toposched-webhook", "toposched-extender"):
        log = Path(stack.cluster.state.processes[name].log)
        hits += [f"{name}: {line}" for line in log.read_text(errors="replace").splitlines() if FORBIDDEN.search(line)]
    return hits


def test_hyperpod_flow_as_service_accounts(stack: Stack) -> None:
    job = stack.api.create(JOBS, yaml.safe_load(
        (repo_root() / "examples" / "jobs" / "hyperpod-required-layer3.yaml").read_text()), NS)
    assert job["spec"]["suspend"] is True, "mutated by the webhook running as toposched-webhook"
    assert job["spec"]["template"]["spec"]["schedulerName"] == "toposched"
    pods = stack.wait(lambda: (p := running_pods(stack, "test-tas-job")) and len(p) == 10 and p,
                      120, "10 pods of test-tas-job Running (controller and extender as their accounts)")
    labels = node_labels(stack)
    assert len({labels[p["spec"]["nodeName"]][L3] for p in pods}) == 1
    wl = workload_of(stack, job["metadata"]["uid"])
    assert wl is not None
    conds = {c["type"]: c["status"] for c in wl["status"]["conditions"]}
    assert conds["QuotaReserved"] == "True" and conds["Admitted"] == "True"
    _levels, domains = decode_topology_assignment(wl["status"]["admission"]["podSetAssignments"][0]
                                                  ["topologyAssignment"])
    assigned = {d.values[0]: d.count for d in domains}
    for node, count in Counter(p["spec"]["nodeName"] for p in pods).items():
        assert count <= assigned.get(node, 0), "pods bound only on the assigned nodes"
    # The controller's queue writes went through: ClusterQueue status and the in-use finalizer.
    cq = stack.api.get(CLUSTER_QUEUES, wl["status"]["admission"]["clusterQueue"])
    assert "kueue.x-k8s.io/resource-in-use" in (cq["metadata"].get("finalizers") or [])
    assert (cq.get("status") or {}).get("admittedWorkloads", 0) >= 1
    stack.api.delete(JOBS, "test-tas-job", NS, propagationPolicy="Background")
    assert not forbidden_lines(stack), "\n".join(forbidden_lines(stack)[:20])


def test_webhook_cannot_touch_other_configurations(stack: Stack) -> None:
    """The webhook's CA-injection role names its two configurations; another one is out of reach."""
    other = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
             "metadata": {"name": "someone-elses-webhook"}, "webhooks": []}
    apply_objects(stack.kube, [other])
    token_kubeconfig = stack.cluster.dir / "toposched-webhook.kubeconfig"
    as_webhook = Api(api_client(token_kubeconfig))
    with pytest.raises(client.ApiException) as err:
        as_webhook.get(configs.VALIDATING, "someone-elses-webhook")
    assert err.value.status == 403
    with pytest.raises(client.ApiException) as err:
        as_webhook.request("GET", "/api/v1/namespaces/toposched-system/secrets")
    assert err.value.status == 403, "no Secret but its own"


def kind_resource(api_version: str, plural: str) -> Resource:
    group, _, version = api_version.rpartition("/")
    return Resource(group, version, plural)


def admitted_and_started(stack: Stack, uid: str) -> bool:
    wls = [w for w in stack.api.list(WORKLOADS, NS)["items"]
           if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or ())]
    return len(wls) == 1 and {c["type"]: c["status"] for c in (wls[0].get("status") or {}).get(
        "conditions") or ()}.get("Admitted") == "True"


def test_the_new_kinds_as_service_accounts(stack: Stack) -> None:
    """Controller: list/watch/patch (+ finalizers) on TrainJobs, Ray kinds and HyperPodPyTorchJobs,
    list/watch on runtimes and StatefulSets, list/watch/patch/delete on pods. Webhook: get on each
    kind an owner reference names (a ReplicaSet's Deployment, a pod's StatefulSet). Extender: get
    on each suspendable kind, reading the owner of a pod that names no Workload."""
    runtime, trainjob = load_documents(repo_root() / "examples" / "jobs" / "trainjob-torch.yaml")
    apply_objects(stack.kube, [runtime])
    objs = [trainjob, *(load_documents(repo_root() / "examples" / "jobs" / f"{n}.yaml")[0]
                        for n in ("raycluster", "rayjob", "rayservice"))]
    hyp = yaml.safe_load((repo_root() / "tests" / "data" / "hyp" / "hyp-create-pytorch-job-v1.1.yaml").read_text())
    created = {}
    for obj in (*objs, hyp):
        created[obj["kind"]] = stack.api.create(kind_resource(obj["apiVersion"], obj["kind"].lower() + "s"), obj, NS)
    for kind, obj in created.items():  # Workload created, admitted, the object unsuspended: patch
        stack.wait(lambda o=obj: admitted_and_started(stack, o["metadata"]["uid"]), 120, f"{kind} admitted")
    # A pod that names no Workload under each queued object: the extender reads its owner (get)
    # and refuses it as a pod of a queued object, never as an unreadable owner.
    for kind, obj in created.items():
        stack.api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"stray-{kind.lower()}", "namespace": NS, "ownerReferences": [{
                "apiVersion": obj["apiVersion"], "kind": kind, "name": obj["metadata"]["name"],
                "uid": obj["metadata"]["uid"], "controller": True}]},
            "spec": {"schedulerName": "toposched", "containers": [{  # a GPU pod: the extender's managed resource
                "name": "c", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                               "limits": {"nvidia.com/gpu": "1"}}}]}}, NS)
    core = client.CoreV1Api(stack.kube)

    def refused_as_queued() -> set[str]:
        return {e.involved_object.name for e in core.list_namespaced_event(NS).items
                if e.reason == "FailedScheduling" and "has no admitted Workload" in (e.message or "")}

    stack.wait(lambda: refused_as_queued() >= {f"stray-{k.lower()}" for k in created}, 120,
               "the extender refused every stray pod as a queued object's")
    # Pods: a plain pod (gated, Workload owned by it, released, its finalizer released on delete),
    # a Deployment (the webhook reads the ReplicaSet's Deployment) and a StatefulSet (listed,
    # its pods labelled into its Workload and read as their owner by the webhook).
    for name in ("pod-single", "deployment-serving", "statefulset-serving"):
        for obj in load_documents(repo_root() / "examples" / "jobs" / f"{name}.yaml"):
            resource = PODS if obj["kind"] == "Pod" else kind_resource(obj["apiVersion"], obj["kind"].lower() + "s")
            stack.api.create(resource, obj, NS)
    stack.wait(lambda: (p := [x for x in stack.api.list(PODS, NS)["items"] if x["status"].get("phase") == "Running"
                              and x["metadata"]["name"].startswith(("notebook-eval", "llm-endpoint", "kv-cache"))])
               and len(p) == 5, 180, "the plain pod, 2 Deployment and 2 StatefulSet pods Running")
    stack.api.delete(PODS, "notebook-eval", NS)
    stack.wait(lambda: "notebook-eval" not in [p["metadata"]["name"] for p in stack.api.list(PODS, NS)["items"]],
               60, "the plain pod gone (the controller released Kueue's finalizer)")
    assert not forbidden_lines(stack), "\n".join(forbidden_lines(stack)[:20])
