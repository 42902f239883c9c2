"""The real JobSet controller (sigs.k8s.io/jobset) on a LocalCluster, for the JobSet
integration's end-to-end tests and for users who run JobSets on the dev cluster.

- Binary: ``go build sigs.k8s.io/jobset`` (the module root is the manager's main package) in
  the wrapper module ``scripts/jobset`` (requires ``sigs.k8s.io/jobset v0.10.1``, no replace
  lines), into ``<cache>/jobset-v0.10.1/bin/jobset``; built once (about 1.5 min), reused.
- CRD: ``config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml`` from the module cache.
- Webhooks: JobSet's own mutating webhook is required, not optional: it defaults ``network``,
  ``successPolicy``, ``startupPolicy`` and ``completionMode``, and the v0.10.1 controller
  dereferences them (a JobSet created without it panics the reconciler and gets no Jobs).
  There is no flag to switch the webhook server off, so it is served on loopback with a cert
  from the cluster CA (internal cert management off, as for the Kueue peer) and its two JobSet
  webhooks are registered by URL; its pod webhooks (exclusive placement only, failurePolicy
  Fail on every pod) are left out.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler.devcluster import binaries, certs, peers
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import LOOPBACK, LocalCluster, free_ports

JOBSET_VERSION = "v0.10.1"
JOBSET_MODULE = "sigs.k8s.io/jobset"
PROCESS_NAME = "jobset-controller"


def jobset_binary_path() -> Path:
    return binaries.cache_root() / f"jobset-{JOBSET_VERSION}" / "bin" / "jobset"


def ensure_jobset() -> Path:
    """The JobSet controller binary, built from the module proxy the first time."""
    binary = jobset_binary_path()
    if not binary.is_file():
        binaries.go_build(binaries.repo_root() / "scripts" / "jobset", [JOBSET_MODULE], binary.parent,
                          f"JobSet {JOBSET_VERSION} controller",
                          ldflags=f"-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion={JOBSET_VERSION}")
    return binary


def jobset_module_dir() -> Path:
    return binaries.go_module_dir(JOBSET_MODULE, JOBSET_VERSION)


def jobset_crd_file() -> Path:
    return jobset_module_dir() / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"


def start_jobset(cluster: LocalCluster, *, timeout_s: float = 120) -> peers.PeerHandle:
    """Install the JobSet CRD and run the JobSet controller against ``cluster`` (a process of
    the cluster: ``LocalCluster.stop()`` stops it)."""
    binary = ensure_jobset()
    kube = cluster.api_client()
    crds = list(yaml.safe_load_all(jobset_crd_file().read_text()))
    apply_objects(kube, crds)
    peers.wait_crds_established(kube, crds)
    webhook_port, health_port = free_ports(2)
    jdir = cluster.dir / "jobset"
    cert_dir = jdir / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = certs.KeyPair(cluster.pki / "ca.crt", cluster.pki / "ca.key")
    certs.issue(ca, cert_dir, "tls", "jobset-webhook", server=True, dns_names=("localhost",), ips=(LOOPBACK,))
    config_path = jdir / "config.yaml"
    config_path.write_text(yaml.safe_dump({
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "webhook": {"port": webhook_port, "host": LOOPBACK, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
    }, sort_keys=False))
    proc = cluster.start_process(PROCESS_NAME, [
        str(binary), f"--config={config_path}", f"--kubeconfig={cluster.kubeconfig}", "--leader-elect=false",
        "--metrics-bind-address=0", f"--health-probe-bind-address={LOOPBACK}:{health_port}",
        "--kube-api-qps=200", "--kube-api-burst=400"], health=f"http://{LOOPBACK}:{health_port}/readyz")
    handle = peers.PeerHandle(cluster, proc)
    try:
        peers.wait_http_ready(f"http://{LOOPBACK}:{health_port}/readyz", proc, timeout_s)
        peers.wait_tls(webhook_port, ca.cert, "JobSet", timeout_s)
        peers.register_webhooks(kube, peers.webhook_configurations(
            jobset_module_dir() / "config" / "components" / "webhook" / "manifests.yaml",
            f"https://{LOOPBACK}:{webhook_port}", ca.cert.read_text(), {"jobset.x-k8s.io"},
            "toposched-peer-jobset-"))  # kubebuilder's default names: other peers use them too
    except BaseException:
        handle.stop()
        raise
    return handle
