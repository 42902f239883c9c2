"""The real Kubeflow mpi-operator (MPIJob v2beta1 controller) on a LocalCluster, for the MPIJob
integration's end-to-end tests and ``toposched dev up --mpijob``.

- Version: v0.8.0, the release Kueue v0.17.0's go.mod requires (its mpijob integration is built
  against that API); the module proxy serves it.
- Binary: ``go build github.com/kubeflow/mpi-operator/cmd/mpi-operator`` in the wrapper module
  ``scripts/mpioperator`` (no replace lines), into ``<cache>/mpi-operator-v0.8.0/bin``; built
  once (about 1.5 min), reused.
- CRD: ``manifests/base/kubeflow.org_mpijobs.yaml`` from the module cache. The operator has no
  webhook (the CRD's schema validates).
- It always runs leader election (a Lease ``mpi-operator`` in ``--lock-namespace``, created
  here): it is ready once it holds the Lease. Its health server binds the hard-coded port 8080
  on every interface (no flag): one mpi-operator per machine at a time.
- It creates the launcher as a batch/v1 Job owned by the MPIJob (suspended with it, its pod
  template synced from the MPIJob when resumed) and the workers as bare pods.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from kubernetes import client

from scheduler.devcluster import binaries, peers, processes
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import LocalCluster
from scheduler.errors import UserError

MPI_OPERATOR_VERSION = "v0.8.0"
MPI_OPERATOR_MODULE = "github.com/kubeflow/mpi-operator"
PROCESS_NAME = "mpi-operator"
LOCK_NAMESPACE = "mpi-operator"


def operator_binary_path() -> Path:
    return binaries.cache_root() / f"mpi-operator-{MPI_OPERATOR_VERSION}" / "bin" / "mpi-operator"


def ensure_mpi_operator() -> Path:
    binary = operator_binary_path()
    if not binary.is_file():
        binaries.go_build(binaries.repo_root() / "scripts" / "mpioperator",
                          [f"{MPI_OPERATOR_MODULE}/cmd/mpi-operator"], binary.parent,
                          f"Kubeflow mpi-operator {MPI_OPERATOR_VERSION}")
    return binary


def module_dir() -> Path:
    return binaries.go_module_dir(MPI_OPERATOR_MODULE, MPI_OPERATOR_VERSION)


def mpijob_crd_file() -> Path:
    return module_dir() / "manifests" / "base" / "kubeflow.org_mpijobs.yaml"


def _wait_leader(cluster: LocalCluster, proc: processes.Started, timeout_s: float) -> None:
    coordination = client.CoordinationV1Api(cluster.api_client())
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not processes.alive(proc.pid):
            raise UserError(f"{proc.name} exited during start-up: see {proc.log}")
        try:
            lease = coordination.read_namespaced_lease(PROCESS_NAME, LOCK_NAMESPACE)
            if lease.spec and lease.spec.holder_identity:
                return
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        time.sleep(0.25)
    raise UserError(f"{proc.name} did not take its Lease within {timeout_s:.0f}s: see {proc.log}")


def start_mpi_operator(cluster: LocalCluster, *, timeout_s: float = 120) -> peers.PeerHandle:
    """Install the MPIJob CRD and run the mpi-operator against ``cluster`` (a process of the
    cluster: ``LocalCluster.stop()`` stops it)."""
    binary = ensure_mpi_operator()
    kube = cluster.api_client()
    crds = list(yaml.safe_load_all(mpijob_crd_file().read_text()))
    apply_objects(kube, crds)
    peers.wait_crds_established(kube, crds)
    apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LOCK_NAMESPACE}}])
    proc = cluster.start_process(PROCESS_NAME, [
        str(binary), f"--kubeConfig={cluster.kubeconfig}", f"--lock-namespace={LOCK_NAMESPACE}",
        "--kube-api-qps=200", "--kube-api-burst=400", "--threadiness=2"])
    handle = peers.PeerHandle(cluster, proc)
    try:
        _wait_leader(cluster, proc, timeout_s)
    except BaseException:
        handle.stop()
        raise
    return handle
