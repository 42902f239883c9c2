"""The real LeaderWorkerSet controller (sigs.k8s.io/lws) on a LocalCluster, for the LWS
integration's end-to-end tests and ``toposched dev up --lws``.

- Version: v0.8.0, the release Kueue v0.17.0's go.mod requires (its LWS integration is built
  against that API); the module proxy serves it.
- Binary: ``go build sigs.k8s.io/lws/cmd`` in the wrapper module ``scripts/lws`` (requires
  ``sigs.k8s.io/lws v0.8.0``, no replace lines), into ``<cache>/lws-v0.8.0/bin/cmd``; built once
  (about 1.5 min), reused.
- CRD: ``config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml`` from the module cache.
- Webhooks: LWS's webhook server cannot be switched off and its controllers need it: the LWS
  webhooks default and validate the LWS, and its pod webhook writes the labels the controllers
  read (group and worker index, group key). Served on loopback with a cert from the cluster
  CA (internal cert management off, as for the JobSet peer); all four registered by URL, the two
  pod webhooks with the objectSelector of LWS's own kustomize patch (only pods carrying
  ``leaderworkerset.sigs.k8s.io/name``), so no other pod ever waits for it.
- Configuration file (``config.lws.x-k8s.io/v1alpha1``): webhook host/port/certDir, metrics off,
  health probe on a free loopback port; ``--leader-elect=false``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scheduler.devcluster import binaries, certs, peers
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import LOOPBACK, LocalCluster, free_ports

LWS_VERSION = "v0.8.0"
LWS_MODULE = "sigs.k8s.io/lws"
PROCESS_NAME = "lws-controller"
POD_SELECTOR = {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}


def lws_binary_path() -> Path:
    return binaries.cache_root() / f"lws-{LWS_VERSION}" / "bin" / "cmd"


def ensure_lws() -> Path:
    """The LWS controller binary, built from the module proxy the first time."""
    binary = lws_binary_path()
    if not binary.is_file():
        binaries.go_build(binaries.repo_root() / "scripts" / "lws", [f"{LWS_MODULE}/cmd"], binary.parent,
                          f"LeaderWorkerSet {LWS_VERSION} controller",
                          ldflags=f"-s -w -X {LWS_MODULE}/pkg/version.GitVersion={LWS_VERSION}")
    return binary


def lws_module_dir() -> Path:
    return binaries.go_module_dir(LWS_MODULE, LWS_VERSION)


def lws_crd_file() -> Path:
    return lws_module_dir() / "config" / "crd" / "bases" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"


def _webhooks(base_url: str, ca_pem: str) -> list[dict[str, Any]]:
    docs = peers.webhook_configurations(lws_module_dir() / "config" / "webhook" / "manifests.yaml", base_url, ca_pem,
                                        {"leaderworkerset.x-k8s.io", ""}, "toposched-peer-lws-")
    for doc in docs:
        for hook in doc["webhooks"]:
            if any("pods" in rule.get("resources", ()) for rule in hook.get("rules", ())):
                hook["objectSelector"] = POD_SELECTOR
    return docs


def start_lws(cluster: LocalCluster, *, timeout_s: float = 120) -> peers.PeerHandle:
    """Install the LeaderWorkerSet CRD and run the LWS controller against ``cluster`` (a process
    of the cluster: ``LocalCluster.stop()`` stops it)."""
    binary = ensure_lws()
    kube = cluster.api_client()
    crds = list(yaml.safe_load_all(lws_crd_file().read_text()))
    apply_objects(kube, crds)
    peers.wait_crds_established(kube, crds)
    webhook_port, health_port = free_ports(2)
    ldir = cluster.dir / "lws"
    cert_dir = ldir / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = certs.KeyPair(cluster.pki / "ca.crt", cluster.pki / "ca.key")
    certs.issue(ca, cert_dir, "tls", "lws-webhook", server=True, dns_names=("localhost",), ips=(LOOPBACK,))
    config_path = ldir / "config.yaml"
    config_path.write_text(yaml.safe_dump({
        "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
        "webhook": {"port": webhook_port, "host": LOOPBACK, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"{LOOPBACK}:{health_port}"},
        "internalCertManagement": {"enable": False},
    }, sort_keys=False))
    proc = cluster.start_process(PROCESS_NAME, [
        str(binary), f"--config={config_path}", f"--kubeconfig={cluster.kubeconfig}", "--leader-elect=false",
        "--kube-api-qps=200", "--kube-api-burst=400"], health=f"http://{LOOPBACK}:{health_port}/readyz")
    handle = peers.PeerHandle(cluster, proc)
    try:
        peers.wait_http_ready(f"http://{LOOPBACK}:{health_port}/readyz", proc, timeout_s)
        peers.wait_tls(webhook_port, ca.cert, "LeaderWorkerSet", timeout_s)
        peers.register_webhooks(kube, _webhooks(f"https://{LOOPBACK}:{webhook_port}", ca.cert.read_text()))
    except BaseException:
        handle.stop()
        raise
    return handle
