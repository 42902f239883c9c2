"""The real Kueue controller as a side-by-side peer on a LocalCluster.

- Binary: ``go build sigs.k8s.io/kueue/cmd/kueue`` in the wrapper module ``scripts/kueue``
  (requires ``sigs.k8s.io/kueue v0.17.0``; Kueue's own go.mod has no replace lines, so the
  wrapper needs none), into ``<cache>/kueue-v0.17.0/bin/kueue``; built once, reused.
- Harness: ``start_kueue(cluster)`` writes a Configuration (config.kueue.x-k8s.io/v1beta2:
  batch/job integration, manageJobsWithoutQueueName false, leader election off, metrics and
  health on 127.0.0.1 dynamic ports, internal cert management off), issues a serving cert
  for 127.0.0.1 from the cluster CA, runs Kueue as a process of the cluster (so
  ``LocalCluster.stop()`` stops it), registers Kueue's mutating/validating webhooks BY URL
  (``https://127.0.0.1:<port>/<path>``, same paths as Kueue's own manifests read from the
  module cache). Kueue runs with the cluster's admin kubeconfig (system:masters), so no RBAC
  objects are created. ``KueueCluster`` is a LocalCluster whose kube-apiserver reports its
  real version (Kueue exits on the module-proxy build's ``v0.0.0-master`` placeholder).

Webhook decision: served by Kueue itself. Kueue's Job webhook is what suspends a queued Job
at creation and defaults/validates the TAS annotations; without it every test job would
have to be created suspended by hand and Kueue's validation messages would be missing from
the comparison. Registering it by URL on loopback is exactly how toposched's own webhook
runs here, so both engines see the same API server behaviour.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler.devcluster import binaries, certs, peers
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import LOOPBACK, LocalCluster, free_ports
from scheduler.errors import UserError

KUEUE_VERSION = binaries.KUEUE_VERSION
KUEUE_MODULE = "sigs.k8s.io/kueue"
PROCESS_NAME = "kueue"
log = logging.getLogger(__name__)


def kueue_binary_path() -> Path:
    return binaries.cache_root() / f"kueue-{KUEUE_VERSION}" / "bin" / "kueue"


def ensure_kueue() -> Path:
    """Return the Kueue controller binary, building it from the module proxy the first time."""
    binary = kueue_binary_path()
    if not binary.is_file():
        binaries.go_build(binaries.repo_root() / "scripts" / "kueue", [f"{KUEUE_MODULE}/cmd/kueue"], binary.parent,
                          f"Kueue {KUEUE_VERSION} controller")
    return binary


class KueueCluster(LocalCluster):
    """A LocalCluster for the Kueue peer (its API server reports its real version, which
    Kueue requires: every control-plane build is version-stamped, see binaries.py)."""

    def start(self, timeout_s: float = 120) -> KueueCluster:
        super().start(timeout_s)
        return self


def kueue_module_dir() -> Path:
    return binaries.go_module_dir(KUEUE_MODULE, KUEUE_VERSION)


@dataclass(frozen=True)
class KueuePorts:
    webhook: int
    metrics: int
    health: int

    @classmethod
    def dynamic(cls) -> KueuePorts:
        return cls(*free_ports(3))


def kueue_configuration(ports: KueuePorts, cert_dir: Path, *, integrations: tuple[str, ...] = ("batch/job",),
                        overlay: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Kueue's Configuration for the local control plane (defaults everywhere else).
    ``overlay``: scheduling settings merged on top (``fairSharing``, ``waitForPodsReady``,
    ``featureGates``, ...) — the same dict toposched gets as ``--kueue-config``. The feature
    gates go in the file, not on the command line: Kueue refuses both at once."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"{LOOPBACK}:{ports.health}"},
        "metrics": {"bindAddress": f"{LOOPBACK}:{ports.metrics}", "enableClusterQueueResources": False},
        "webhook": {"port": ports.webhook, "host": LOOPBACK, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 500, "burst": 1000},
        "integrations": {"frameworks": list(integrations)},
        "featureGates": dict(HARNESS_FEATURE_GATES),
    }
    return merge_config(config, overlay or {})


def merge_config(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` on top of ``base``, objects merged key by key (lists and scalars replaced)."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_config(out[key], value)
        else:
            out[key] = value
    return out


# Kueue v0.17 hard-codes where it reads the metrics serving certificate when internal cert
# management is off (the mount path of the Secret in its Deployment); it exits at start-up if
# the files are missing. The harness writes a loopback certificate there once (metrics only).
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
# The on-demand visibility API server (pending-workload listing; not part of scheduling)
# reads its certificate from the hard-coded /visibility and binds every interface; it is the
# one feature gate the harness turns off.
HARNESS_FEATURE_GATES: dict[str, bool] = {"VisibilityOnDemand": False}


def ensure_metrics_cert() -> None:
    if (METRICS_CERT_DIR / "tls.crt").is_file() and (METRICS_CERT_DIR / "tls.key").is_file():
        return
    try:
        METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
        ca = certs.create_ca(METRICS_CERT_DIR, "toposched-kueue-metrics-ca")
        certs.issue(ca, METRICS_CERT_DIR, "tls", "kueue-metrics", server=True, dns_names=("localhost",),
                    ips=(LOOPBACK,))
    except OSError as exc:
        raise UserError(
            f"Kueue {KUEUE_VERSION} reads its metrics certificate from {METRICS_CERT_DIR} (hard-coded when "
            f"internal cert management is off) and cannot start without it; creating it failed ({exc}): "
            f"create the directory writable for this user, or run as root") from exc


@dataclass
class KueueHandle(peers.PeerHandle):
    ports: KueuePorts = field(default_factory=lambda: KueuePorts(0, 0, 0))
    config_path: Path = Path()


# Kueue's pod-level integrations have no group in their name: pods (core) and apps/v1 objects.
POD_LEVEL_GROUPS = {"pod": "", "deployment": "apps", "statefulset": "apps"}


def start_kueue(cluster: LocalCluster, ports: KueuePorts | None = None, *, timeout_s: float = 120,
                extra_args: tuple[str, ...] = (), integrations: tuple[str, ...] = ("batch/job",),
                config_overlay: Mapping[str, Any] | None = None) -> KueueHandle:
    """Run the real Kueue controller against ``cluster`` (CRDs are installed by the cluster).
    ``integrations``: Kueue's ``integrations.frameworks``; for one beyond batch/job the kind's
    CRD must be installed first (e.g. ``jobset.x-k8s.io/jobset`` after the JobSet CRD), and
    Kueue's webhooks for that API group are registered too. ``config_overlay``: see
    :func:`kueue_configuration`."""

    binary = ensure_kueue()
    ensure_metrics_cert()
    ports = ports or KueuePorts.dynamic()
    kdir = cluster.dir / "kueue"
    cert_dir = kdir / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = certs.KeyPair(cluster.pki / "ca.crt", cluster.pki / "ca.key")
    # controller-runtime's webhook server reads tls.crt / tls.key from certDir.
    pair = certs.issue(ca, cert_dir, "tls", "kueue-webhook", server=True, dns_names=("localhost",), ips=(LOOPBACK,))
    assert pair.cert.name == "tls.crt"
    config = kueue_configuration(ports, cert_dir, integrations=integrations, overlay=config_overlay)
    config_path = kdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    kube = cluster.api_client()
    apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}])
    argv = [str(binary), f"--config={config_path}", f"--kubeconfig={cluster.kubeconfig}", "--zap-log-level=2"]
    argv += list(extra_args)
    proc = cluster.start_process(PROCESS_NAME, argv, health=f"http://{LOOPBACK}:{ports.health}/readyz")
    handle = KueueHandle(cluster, proc, ports, config_path)
    try:
        peers.wait_http_ready(f"http://{LOOPBACK}:{ports.health}/readyz", proc, timeout_s)
        peers.wait_tls(ports.webhook, ca.cert, "Kueue", timeout_s)
        # Kueue's webhooks for the objects the harness uses (Workload, queues, flavors,
        # Topology, priority classes, batch Jobs and the integrations' kinds); the CRDs of the
        # other kinds (MPIJob, Ray, ...) are absent.
        groups = {"kueue.x-k8s.io", "batch"} | {POD_LEVEL_GROUPS.get(f, f.partition("/")[0]) for f in integrations}
        peers.register_webhooks(kube, peers.webhook_configurations(
            kueue_module_dir() / "config" / "components" / "webhook" / "manifests.yaml",
            f"https://{LOOPBACK}:{ports.webhook}", ca.cert.read_text(), groups, "toposched-peer-"))
    except BaseException:
        handle.stop()
        raise
    return handle
