"""The real KubeRay ray-operator (RayCluster, RayJob, RayService controllers) on a LocalCluster,
for the Ray integrations' end-to-end tests and ``toposched dev up --ray``.

- Version: v1.6.0, the release Kueue v0.17.0's go.mod requires (its ``ray.io/rayjob``,
  ``ray.io/raycluster`` and ``ray.io/rayservice`` integrations are built against that API); the
  module proxy serves it.
- Binary: ``go build github.com/ray-project/kuberay/ray-operator`` (the module root is the
  manager's main package) in the wrapper module ``scripts/kuberay`` (no replace lines), into
  ``<cache>/kuberay-v1.6.0/bin/ray-operator``; built once, reused (build time in
  docs/controlplane.md).
- CRDs: ``config/crd/bases/ray.io_{rayclusters,rayjobs,rayservices}.yaml`` from the module cache
  (RayCronJob, an alpha kind behind a gate that is off, is left out).
- No webhook: the operator serves its one (RayCluster validating) webhook only with
  ``ENABLE_WEBHOOKS=true``, which stays unset, as in KubeRay's default Helm install.
- Flags: leader election off, metrics off, health probe on a free loopback port.
- What runs under KWOK: the operator creates the head and worker pods (and the Services) of a
  RayCluster and KWOK runs them. There is no Ray process behind them, so what the operator asks
  Ray itself over HTTP (a RayJob's job status from the dashboard, a RayService's serve
  applications) never answers: a RayJob reaches ``Initializing``/``Running`` of its cluster but
  never its job's end, and a RayService never becomes ready to serve. Admission, suspension and
  pod placement (what Kueue and toposched govern) are all exercised.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler.devcluster import binaries, peers
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import LOOPBACK, LocalCluster, free_ports

KUBERAY_VERSION = "v1.6.0"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"
PROCESS_NAME = "ray-operator"
CRD_KINDS = ("rayclusters", "rayjobs", "rayservices")


def kuberay_binary_path() -> Path:
    return binaries.cache_root() / f"kuberay-{KUBERAY_VERSION}" / "bin" / "ray-operator"


def ensure_kuberay() -> Path:
    """The ray-operator binary, built from the module proxy the first time."""
    binary = kuberay_binary_path()
    if not binary.is_file():
        binaries.go_build(binaries.repo_root() / "scripts" / "kuberay", [KUBERAY_MODULE], binary.parent,
                          f"KubeRay ray-operator {KUBERAY_VERSION}")
    return binary


def kuberay_module_dir() -> Path:
    return binaries.go_module_dir(KUBERAY_MODULE, KUBERAY_VERSION)


def kuberay_crd_files() -> list[Path]:
    base = kuberay_module_dir() / "config" / "crd" / "bases"
    return [base / f"ray.io_{kind}.yaml" for kind in CRD_KINDS]


def start_kuberay(cluster: LocalCluster, *, timeout_s: float = 120) -> peers.PeerHandle:
    """Install the Ray CRDs and run the ray-operator against ``cluster`` (a process of the
    cluster: ``LocalCluster.stop()`` stops it)."""
    binary = ensure_kuberay()
    kube = cluster.api_client()
    crds = [doc for path in kuberay_crd_files() for doc in yaml.safe_load_all(path.read_text()) if doc]
    apply_objects(kube, crds)
    peers.wait_crds_established(kube, crds)
    (health_port,) = free_ports(1)
    proc = cluster.start_process(PROCESS_NAME, [
        str(binary), f"--kubeconfig={cluster.kubeconfig}", "--enable-leader-election=false",
        "--metrics-addr=0", f"--health-probe-bind-address={LOOPBACK}:{health_port}",
        "--qps=200", "--burst=400", "--reconcile-concurrency=4",
        "--log-stdout-encoder=console"])
    handle = peers.PeerHandle(cluster, proc)
    try:
        peers.wait_http_ready(f"http://{LOOPBACK}:{health_port}/readyz", proc, timeout_s)
    except BaseException:
        handle.stop()
        raise
    return handle
