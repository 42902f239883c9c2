"""`toposched webhook` as a real process behind the real kube-apiserver.

The webhook registers its own configurations (url https://127.0.0.1:<port>/...) with its
self-signed CA as caBundle; the API server calls it over TLS for every Job we create here.
The configurations are deleted at the end, so other tests of the session are unaffected.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.devcluster import processes
from scheduler.devcluster.apply import apply_objects, create_nodes
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, free_port

L1, L2, L3 = (f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3))
HOST = "kubernetes.io/hostname"
REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
Q = "kueue.x-k8s.io/queue-name"
KUBECTL = "/usr/bin/kubectl"


def _wait(predicate: Any, timeout_s: float = 30, interval_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # not up yet
            last = exc
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s}s (last error: {last})")


@pytest.fixture(scope="module")
def webhook(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    port = free_port()
    cert_dir = Path(tmp_path_factory.mktemp("webhook-certs"))
    name = f"toposched-webhook-e2e-{port}"
    proc = local_cluster.start_process(name, [
        sys.executable, "-m", "scheduler.cli", "webhook", "--kubeconfig", str(local_cluster.kubeconfig),
        "--port", str(port), "--cert-dir", str(cert_dir), "--namespace", "toposched-system"])
    api = local_cluster.api_client()
    adm = client.AdmissionregistrationV1Api(api)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        _wait(lambda: urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2).status == 200,
              60)
        _wait(lambda: all(h.client_config.ca_bundle for h in
                          adm.read_validating_webhook_configuration("toposched-webhook").webhooks), 30)
        _wait(lambda: adm.read_mutating_webhook_configuration("toposched-webhook").webhooks, 30)
        yield {"port": port, "proc": proc, "cert_dir": cert_dir}
    finally:
        processes.stop(proc)
        for delete in (adm.delete_mutating_webhook_configuration, adm.delete_validating_webhook_configuration):
            try:
                delete("toposched-webhook")
            except client.ApiException:
                pass


def _queues(kube_api: client.ApiClient, ns: str) -> dict[str, str]:
    pool = f"wh-{ns}"
    topo, flavor, cq = f"topo-{ns}", f"rf-{ns}", f"cq-{ns}"
    create_nodes(kube_api, [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"{pool}-{i}", "labels": {HOST: f"{pool}-{i}", "toposched.dev/pool": pool,
                                                       L1: "b1", L2: "s1", L3: f"r{i // 2}"}},
        "status": {"capacity": {"cpu": "96", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                   "allocatable": {"cpu": "96", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}},
    } for i in range(4)], FAKE_NODE_LABEL)
    apply_objects(kube_api, [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": topo},
         "spec": {"levels": [{"nodeLabel": lv} for lv in (L1, L2, L3, HOST)]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": {"toposched.dev/pool": pool}, "topologyName": topo}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
             {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "32"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns},
         "spec": {"clusterQueue": cq}},
    ])
    return {"topology": topo, "flavor": flavor, "cq": cq}


def _job(name: str, ns: str, pods: int = 2, ann: dict[str, str] | None = None, queue: str | None = "lq") -> dict:
    labels = {Q: queue} if queue else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"parallelism": pods, "completions": pods, "template": {
                "metadata": {"annotations": ann or {}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {
                    "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}}}


def _kubectl(local_cluster: Any, manifest: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KUBECTL, "--kubeconfig", str(local_cluster.kubeconfig), *args, "-f", "-"],
                          input=json.dumps(manifest), text=True, capture_output=True, timeout=60)


def test_managed_job_is_mutated(local_cluster: Any, kube_api: client.ApiClient, namespace: str,
                                webhook: dict[str, Any]) -> None:
    _queues(kube_api, namespace)
    batch = client.BatchV1Api(kube_api)
    created = _wait(lambda: batch.create_namespaced_job(namespace, _job("train", namespace, 2, {REQ: L3})), 20)
    assert created.spec.suspend is True
    assert created.spec.template.spec.scheduler_name == "toposched"


def test_unlabelled_job_is_untouched(kube_api: client.ApiClient, namespace: str, webhook: dict[str, Any]) -> None:
    batch = client.BatchV1Api(kube_api)
    created = batch.create_namespaced_job(namespace, _job("plain", namespace, 1, queue=None))
    assert not created.spec.suspend
    assert created.spec.template.spec.scheduler_name == "default-scheduler"
    assert Q not in (created.metadata.labels or {})


def test_malformed_annotations_are_denied_readably(local_cluster: Any, kube_api: client.ApiClient, namespace: str,
                                                   webhook: dict[str, Any]) -> None:
    names = _queues(kube_api, namespace)
    batch = client.BatchV1Api(kube_api)
    with pytest.raises(client.ApiException) as err:
        batch.create_namespaced_job(namespace, _job("two", namespace, 2, {REQ: L3, PREF: L2}))
    body = json.loads(err.value.body)
    assert 'admission webhook "vjob.toposched.io" denied the request' in body["message"]
    assert "spec.template.metadata.annotations: Invalid value: must not contain more than one topology annotation" \
        in body["message"]

    bad_level = "topology.k8s.aws/network-node-layer-9"
    out = _kubectl(local_cluster, _job("l9", namespace, 2, {REQ: bad_level}), "create")
    assert out.returncode != 0
    expected = (f'spec.template.metadata.annotations[{REQ}]: level "{bad_level}" is not in Topology '
                f'"{names["topology"]}" (levels: {L1}, {L2}, {L3}, {HOST}); use one of those levels')
    assert expected in out.stderr, out.stderr

    out = _kubectl(local_cluster, _job("big", namespace, 3, {REQ: L3}), "create")
    assert out.returncode != 0 and f"3 pod(s) can never fit in one {L3} domain" in out.stderr, out.stderr

    out = _kubectl(local_cluster, _job("nolq", namespace, 1, queue="missing"), "create")
    assert f'LocalQueue "missing" does not exist in namespace "{namespace}"; create it' in out.stderr, out.stderr


def test_kueue_object_warning_through_kubectl(local_cluster: Any, namespace: str, webhook: dict[str, Any]) -> None:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": f"rf-warn-{namespace}"},
              "spec": {"nodeLabels": {"a": "b"}, "topologyName": f"missing-{namespace}"}}
    out = _kubectl(local_cluster, flavor, "create")
    assert out.returncode == 0, out.stderr
    assert f'Warning: spec.topologyName: Topology "missing-{namespace}" does not exist yet' in out.stderr


def test_dead_webhook_does_not_wedge_the_cluster(local_cluster: Any, kube_api: client.ApiClient, namespace: str,
                                                 webhook: dict[str, Any]) -> None:
    """Runs last in this module: kills the webhook (SIGKILL, configurations left behind)."""
    processes.kill(webhook["proc"])
    batch = client.BatchV1Api(kube_api)
    started = time.monotonic()
    created = batch.create_namespaced_job(namespace, _job("still-works", namespace, 1, queue=None))
    assert created.metadata.uid and time.monotonic() - started < 10
    # A managed Job is refused rather than run unsuspended past the queue (failurePolicy Fail).
    with pytest.raises(client.ApiException) as err:
        batch.create_namespaced_job(namespace, _job("managed", namespace, 1))
    assert "failed calling webhook" in json.loads(err.value.body)["message"]
