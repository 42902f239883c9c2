"""deploy/ renders with kustomize and every object passes the real API server's validation
(server-side dry-run, dryRun=All: schema, defaulting, admission — nothing is persisted)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from admission import configs
from scheduler.k8s.informer import Api

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
NS = "toposched-system"

PLURALS = {
    "Namespace": ("/api/v1", "namespaces", False), "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Service": ("/api/v1", "services", True), "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "MutatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False),
    "ValidatingWebhookConfiguration": ("/apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations",
                                       False),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    # toposched's own PreemptionLimit CRD (toposched.io; nothing in Kueue's group: issue 41).
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
}


def render() -> list[dict[str, Any]]:
    out = subprocess.run([KUBECTL, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render()


def test_render_has_every_component(objects: list[dict[str, Any]]) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for want in [("Namespace", NS), ("Deployment", "toposched-controller"), ("Deployment", "toposched-webhook"),
                 ("Deployment", "toposched-scheduler"), ("Service", "toposched-webhook"),
                 ("Service", "toposched-controller"), ("MutatingWebhookConfiguration", "toposched-webhook"),
                 ("ValidatingWebhookConfiguration", "toposched-webhook")]:
        assert want in kinds, want
    assert {o["kind"] for o in objects} <= set(PLURALS), "a kind without a dry-run path"
    reader = next(o for o in objects if o["kind"] == "RoleBinding" and "authentication-reader" in o["metadata"]["name"])
    assert reader["metadata"]["namespace"] == "kube-system"
    # The controller reads node Leases (a deleted node's kubelet: docs/health.md) in their namespace.
    leases = [o for o in objects if o["metadata"]["name"] == "toposched-controller-node-leases"]
    assert {(o["kind"], o["metadata"]["namespace"]) for o in leases} == {("Role", "kube-node-lease"),
                                                                         ("RoleBinding", "kube-node-lease")}
    for o in objects:
        if PLURALS[o["kind"]][2] and o is not reader and not any(o is lease for lease in leases):
            assert o["metadata"].get("namespace") == NS, o["metadata"]


def test_webhook_configurations_match_the_code(objects: list[dict[str, Any]]) -> None:
    cc = configs.service_client_config(NS)
    for want in (configs.mutating_configuration(cc, NS), configs.validating_configuration(cc, NS)):
        got = next(o for o in objects if o["kind"] == want["kind"])
        assert got["webhooks"] == want["webhooks"]
        for hook in got["webhooks"]:
            assert hook["clientConfig"]["service"] == {"namespace": NS, "name": "toposched-webhook",
                                                       "path": hook["clientConfig"]["service"]["path"], "port": 443}
            exempt = hook["namespaceSelector"]["matchExpressions"][0]["values"]
            assert {"kube-system", "kube-node-lease", NS} <= set(exempt)
            managed = hook.get("objectSelector", {}).get("matchExpressions", [{}])[0].get("operator")
            if hook["name"] == "vpod-gated.toposched.io":
                # No label selects a pod whose labels were stripped: its old gates do (issue 39).
                assert [c["name"] for c in hook["matchConditions"]] == ["not-toposched-controller",
                                                                        "holds-a-kueue-gate"]
            elif hook["failurePolicy"] == "Fail" and hook["name"] != "vworkload.kueue.toposched.io":
                assert managed == "Exists", f"{hook['name']}: Fail only for Jobs carrying the queue label"
            if hook["failurePolicy"] == "Fail" and hook["name"] == "vworkload.kueue.toposched.io":
                # Every Workload is queued (spec.queueName); the controller's own writes never reach it.
                assert "system:serviceaccount:toposched-system:toposched-controller" in \
                    hook["matchConditions"][0]["expression"]


def test_scheduler_configuration(objects: list[dict[str, Any]]) -> None:
    cm = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith(
        "toposched-scheduler-config"))
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1" and cfg["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["toposched"]
    (ext,) = cfg["extenders"]
    # HTTPS with kube-scheduler's client certificate (issue 30): the extender serves nobody else.
    assert ext["urlPrefix"] == "https://127.0.0.1:8888" and ext["enableHTTPS"] is True
    tls_files = ext["tlsConfig"]
    assert set(tls_files) == {"certFile", "keyFile", "caFile"} and "insecure" not in tls_files
    # kube-scheduler binds (the default binder): filter only, and the extender runs to match.
    assert ext["filterVerb"] == "filter" and "prioritizeVerb" not in ext and "bindVerb" not in ext
    assert ext["nodeCacheCapable"] is True and ext["ignorable"] is False and ext["httpTimeout"] == "5s"
    assert ext["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]
    assert isinstance(ext["weight"], int) and ext["weight"] > 0
    dep = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "toposched-scheduler")
    volumes = dep["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["configMap"]["name"] == cm["metadata"]["name"]  # kustomize hash suffix wired through
    containers = {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}
    assert {"kube-scheduler", "extender"} == set(containers)
    assert "--port=8888" in containers["extender"]["args"]
    assert "--binder=kube-scheduler" in containers["extender"]["args"]
    # The init container issues the Pod's set into an in-memory volume both containers mount, at
    # the directory the extender serves from and kube-scheduler's tlsConfig names.
    (init,) = dep["spec"]["template"]["spec"]["initContainers"]
    tls_dir = next(a.split("=", 1)[1] for a in init["args"] if a.startswith("--issue-certs="))
    assert f"--tls-dir={tls_dir}" in containers["extender"]["args"]
    assert "--client-name=toposched-scheduler" in containers["extender"]["args"]
    assert {f"{tls_dir}/client.crt", f"{tls_dir}/client.key", f"{tls_dir}/ca.crt"} == set(tls_files.values())
    volume = next(v for v in volumes if "emptyDir" in v)
    assert volume["emptyDir"]["medium"] == "Memory"
    for container in (init, containers["kube-scheduler"], containers["extender"]):
        assert {"name": volume["name"], "mountPath": tls_dir} == {
            k: m[k] for m in container["volumeMounts"] if m["name"] == volume["name"] for k in ("name", "mountPath")}


def test_every_object_passes_server_side_dry_run(kube_api: client.ApiClient, objects: list[dict[str, Any]]) -> None:
    api = Api(kube_api)
    try:  # namespaced dry-runs need the namespace to exist for real
        api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    failures = []
    for obj in objects:
        base, plural, namespaced = PLURALS[obj["kind"]]
        ns = obj["metadata"].get("namespace")
        path = f"{base}/namespaces/{ns}/{plural}" if namespaced else f"{base}/{plural}"
        try:
            api.request("POST", path, query={"dryRun": "All", "fieldValidation": "Strict"}, body=obj)
        except client.ApiException as exc:
            if exc.status == 409 and obj["kind"] == "Namespace":
                continue
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.status} {exc.body}")
    assert not failures, "\n".join(failures)


def test_kind_config_labels_workers_with_topology() -> None:
    cfg = yaml.safe_load((DEPLOY / "kind" / "cluster.yaml").read_text())
    workers = [n for n in cfg["nodes"] if n["role"] == "worker"]
    assert len(workers) >= 3
    for w in workers:
        for level in (1, 2, 3):
            assert f"topology.k8s.aws/network-node-layer-{level}" in w["labels"]
