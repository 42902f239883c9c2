"""The real Kubeflow training-operator (PyTorchJob controller) on a LocalCluster, for the
PyTorchJob integration's end-to-end tests and ``toposched dev up --pytorchjob``.

- Binary: ``go build github.com/kubeflow/training-operator/cmd/training-operator.v1`` in the
  wrapper module ``scripts/kubeflow`` (requires v1.9.3, no replace lines), into
  ``<cache>/training-operator-v1.9.3/bin``; built once (about 1.5 min), reused.
- CRD: ``manifests/base/crds/kubeflow.org_pytorchjobs.yaml`` from the module cache; the operator
  runs with ``--enable-scheme=pytorchjob`` so no other Kubeflow CRD is needed. Gang scheduling
  stays off (toposched admits the whole job at once already).
- Its webhook server cannot be switched off and its built-in cert rotator gates the
  controllers: it needs the Secret ``training-operator-webhook-cert`` in ``$MY_POD_NAMESPACE``
  (an empty one is enough; the rotator fills it) and only checks that the hard-coded
  ``/tmp/k8s-webhook-server/serving-certs/tls.crt`` exists (a Secret mount in a real install;
  an empty placeholder here). The server itself reads ``$TMPDIR/k8s-webhook-server/serving-certs``,
  so each cluster gets its own TMPDIR with a certificate from the cluster CA. The server binds
  every interface (no host flag); on this machine that is loopback-only traffic anyway.
- Its one (validating) PyTorchJob webhook is registered by URL under our own name (the rotator
  rewrites the caBundle of its default-named configuration), so invalid specs fail at creation
  as in a real install. The controller defaults PyTorchJobs itself, no mutating webhook needed.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from scheduler.devcluster import binaries, certs, peers
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import LOOPBACK, LocalCluster, free_ports
from scheduler.errors import UserError

TRAINING_OPERATOR_VERSION = "v1.9.3"
TRAINING_OPERATOR_MODULE = "github.com/kubeflow/training-operator"
PROCESS_NAME = "training-operator"
NAMESPACE = "kubeflow"
# Checked for existence only by the operator's cert rotator (constant in its pkg/cert).
ROTATOR_PLACEHOLDER = Path("/tmp/k8s-webhook-server/serving-certs/tls.crt")


def operator_binary_path() -> Path:
    return binaries.cache_root() / f"training-operator-{TRAINING_OPERATOR_VERSION}" / "bin" / "training-operator.v1"


def ensure_training_operator() -> Path:
    binary = operator_binary_path()
    if not binary.is_file():
        binaries.go_build(binaries.repo_root() / "scripts" / "kubeflow",
                          [f"{TRAINING_OPERATOR_MODULE}/cmd/training-operator.v1"], binary.parent,
                          f"Kubeflow training-operator {TRAINING_OPERATOR_VERSION}")
    return binary


def module_dir() -> Path:
    return binaries.go_module_dir(TRAINING_OPERATOR_MODULE, TRAINING_OPERATOR_VERSION)


def start_training_operator(cluster: LocalCluster, *, timeout_s: float = 120) -> peers.PeerHandle:
    """Install the PyTorchJob CRD and run the training-operator against ``cluster`` (a process
    of the cluster: ``LocalCluster.stop()`` stops it)."""
    binary = ensure_training_operator()
    mod = module_dir()
    kube = cluster.api_client()
    crd = mod / "manifests" / "base" / "crds" / "kubeflow.org_pytorchjobs.yaml"
    crds = list(yaml.safe_load_all(crd.read_text()))
    apply_objects(kube, crds)
    peers.wait_crds_established(kube, crds)
    apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                         {"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": "training-operator-webhook-cert", "namespace": NAMESPACE}}])
    tmp = cluster.dir / "training-operator" / "tmp"
    cert_dir = tmp / "k8s-webhook-server" / "serving-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = certs.KeyPair(cluster.pki / "ca.crt", cluster.pki / "ca.key")
    certs.issue(ca, cert_dir, "tls", "training-operator-webhook", server=True, dns_names=("localhost",),
                ips=(LOOPBACK,))
    try:
        ROTATOR_PLACEHOLDER.parent.mkdir(parents=True, exist_ok=True)
        ROTATOR_PLACEHOLDER.touch()
    except OSError as exc:
        raise UserError(f"the training-operator's cert rotator needs {ROTATOR_PLACEHOLDER} to exist (a hard-coded "
                        f"path); creating it failed ({exc})") from exc
    webhook_port, metrics_port, health_port = free_ports(3)
    proc = cluster.start_process(PROCESS_NAME, [
        str(binary), f"--kubeconfig={cluster.kubeconfig}",
        f"--metrics-bind-address={LOOPBACK}:{metrics_port}", f"--health-probe-bind-address={LOOPBACK}:{health_port}",
        "--leader-elect=false", "--enable-scheme=pytorchjob", f"--webhook-server-port={webhook_port}",
        "--kube-api-qps=200", "--kube-api-burst=400",
    ], env=dict(os.environ, TMPDIR=str(tmp), MY_POD_NAMESPACE=NAMESPACE),
        health=f"http://{LOOPBACK}:{health_port}/readyz")
    handle = peers.PeerHandle(cluster, proc)
    try:
        peers.wait_http_ready(f"http://{LOOPBACK}:{health_port}/readyz", proc, timeout_s)
        peers.wait_tls(webhook_port, ca.cert, "the training-operator", timeout_s)
        # only the PyTorchJob webhook: the other Kubeflow kinds' CRDs are not installed
        peers.register_webhooks(kube, peers.webhook_configurations(
            mod / "manifests" / "base" / "webhook" / "manifests.yaml", f"https://{LOOPBACK}:{webhook_port}",
            ca.cert.read_text(), {"kubeflow.org"}, "toposched-peer-kubeflow-", keep_resources={"pytorchjobs"}))
    except BaseException:
        handle.stop()
        raise
    return handle
