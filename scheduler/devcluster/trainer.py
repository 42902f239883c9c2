"""The real Kubeflow Trainer v2 controller manager (TrainJob, TrainingRuntime,
ClusterTrainingRuntime) on a LocalCluster, for the TrainJob integration's end-to-end tests and
``toposched dev up --trainjob``.

- Version: v2.2.0, the release Kueue v0.17.0's go.mod requires (its ``trainer.kubeflow.org/trainjob``
  integration is built against that API); the module proxy serves it.
- Binary: ``go build github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager`` in the wrapper
  module ``scripts/trainer`` (no replace lines), into ``<cache>/trainer-v2.2.0/bin``; built once,
  reused (build time in docs/controlplane.md).
- A TrainJob runs as a JobSet: the trainer renders its runtime's JobSet template and creates a
  JobSet owned by the TrainJob, so the JobSet controller must run first (:func:`start_trainer`
  starts the repo's JobSet peer when it is not running yet). The trainer looks the JobSet kind up
  once at start-up and runs without its JobSet plugin when the CRD is missing. The Trainer is built
  against JobSet v0.11.1 (its manifests install v0.11.0) while the repo's JobSet peer is v0.10.1;
  the JobSets it creates here are accepted and run by v0.10.1 (tests/integration/
  test_job_peers_new.py), so one JobSet version serves both until the JobSet peer moves.
- CRDs: ``manifests/base/crds/`` from the module cache (TrainJob, TrainingRuntime,
  ClusterTrainingRuntime). Runtimes: the ``torch-distributed`` ClusterTrainingRuntime from
  ``manifests/base/runtimes/torch_distributed.yaml`` (the one the Kubeflow docs and Kueue's
  TrainJob examples use), applied after the trainer's validating webhook is registered so it is
  checked as in a real install. Images are never pulled: KWOK runs the pods.
- Webhooks: the trainer's server cannot be switched off and it defaults (mutating) and validates
  TrainJobs and runtimes; its built-in cert rotator is switched off (``certManagement.enable:
  false``) so the server reads ``$TMPDIR/k8s-webhook-server/serving-certs`` (controller-runtime's
  default; the config has no certDir): each cluster gets its own TMPDIR with a certificate from
  the cluster CA. All four webhooks are registered by URL on loopback under our own names.
- Configuration file (``config.trainer.kubeflow.org/v1alpha1``): webhook host/port, metrics off,
  health probe on a free loopback port, leader election off. Gang-scheduling plugins
  (coscheduling, Volcano) stay idle: their PodGroup CRDs are not installed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from scheduler.devcluster import binaries, certs, peers
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import LOOPBACK, LocalCluster, free_ports
from scheduler.devcluster.jobset import PROCESS_NAME as JOBSET_PROCESS
from scheduler.devcluster.jobset import start_jobset

TRAINER_VERSION = "v2.2.0"
TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
PROCESS_NAME = "trainer-controller-manager"
# The runtime TrainJobs name in examples and tests (runtimeRef.name).
TORCH_RUNTIME = "torch-distributed"


def trainer_binary_path() -> Path:
    return binaries.cache_root() / f"trainer-{TRAINER_VERSION}" / "bin" / "trainer-controller-manager"


def ensure_trainer() -> Path:
    """The Trainer controller-manager binary, built from the module proxy the first time."""
    binary = trainer_binary_path()
    if not binary.is_file():
        binaries.go_build(binaries.repo_root() / "scripts" / "trainer",
                          [f"{TRAINER_MODULE}/cmd/trainer-controller-manager"], binary.parent,
                          f"Kubeflow Trainer {TRAINER_VERSION} controller manager")
    return binary


def trainer_module_dir() -> Path:
    return binaries.go_module_dir(TRAINER_MODULE, TRAINER_VERSION)


def trainer_crd_files() -> list[Path]:
    base = trainer_module_dir() / "manifests" / "base" / "crds"
    return sorted(base.glob("trainer.kubeflow.org_*.yaml"))


def torch_runtime() -> dict[str, Any]:
    """The upstream ``torch-distributed`` ClusterTrainingRuntime, read from the module cache."""
    path = trainer_module_dir() / "manifests" / "base" / "runtimes" / "torch_distributed.yaml"
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def _configuration(webhook_port: int, health_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration",
        "webhook": {"port": webhook_port, "host": LOOPBACK},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"{LOOPBACK}:{health_port}",
                   "readinessEndpointName": "readyz", "livenessEndpointName": "healthz"},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "clientConnection": {"qps": 200, "burst": 400},
    }


def start_trainer(cluster: LocalCluster, *, timeout_s: float = 120, with_jobset: bool = True) -> peers.PeerHandle:
    """Install the Trainer CRDs, run the Trainer controller manager against ``cluster`` (a process
    of the cluster: ``LocalCluster.stop()`` stops it) and create the ``torch-distributed``
    ClusterTrainingRuntime. ``with_jobset``: start the JobSet peer first unless it runs."""
    if with_jobset and JOBSET_PROCESS not in cluster.state.processes:
        start_jobset(cluster, timeout_s=timeout_s)
    binary = ensure_trainer()
    kube = cluster.api_client()
    crds = [doc for path in trainer_crd_files() for doc in yaml.safe_load_all(path.read_text()) if doc]
    apply_objects(kube, crds)
    peers.wait_crds_established(kube, crds)
    webhook_port, health_port = free_ports(2)
    tdir = cluster.dir / "trainer"
    tmp = tdir / "tmp"
    cert_dir = tmp / "k8s-webhook-server" / "serving-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = certs.KeyPair(cluster.pki / "ca.crt", cluster.pki / "ca.key")
    certs.issue(ca, cert_dir, "tls", "trainer-webhook", server=True, dns_names=("localhost",), ips=(LOOPBACK,))
    config_path = tdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(_configuration(webhook_port, health_port), sort_keys=False))
    proc = cluster.start_process(PROCESS_NAME, [
        str(binary), f"--config={config_path}", f"--kubeconfig={cluster.kubeconfig}"],
        env=dict(os.environ, TMPDIR=str(tmp)))
    handle = peers.PeerHandle(cluster, proc)
    try:
        peers.wait_http_ready(f"http://{LOOPBACK}:{health_port}/readyz", proc, timeout_s)
        peers.wait_tls(webhook_port, ca.cert, "the Kubeflow Trainer", timeout_s)
        peers.register_webhooks(kube, peers.webhook_configurations(
            trainer_module_dir() / "manifests" / "base" / "webhook" / "manifests.yaml",
            f"https://{LOOPBACK}:{webhook_port}", ca.cert.read_text(), {"trainer.kubeflow.org"},
            "toposched-peer-trainer-"))
        apply_objects(kube, [torch_runtime()])
    except BaseException:
        handle.stop()
        raise
    return handle
