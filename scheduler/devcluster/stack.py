"""toposched's own components on a local cluster, as separate processes (as in deploy/)."""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from scheduler.devcluster import certs, peers, processes
from scheduler.devcluster.controlplane import LocalCluster, default_scheduler_config, free_ports
from scheduler.errors import UserError
from scheduler.extender.config import (
    BINDERS,
    CA_FILE,
    CLIENT_CERT_FILE,
    CLIENT_KEY_FILE,
    DEFAULT_BINDER,
    extender_entry,
    toposched_profile,
)
from scheduler.extender.tls import SCHEDULER_CLIENT_NAME, issue_pod_certificates

EXTENDER = "toposched-extender"
COMPONENTS = (EXTENDER, "toposched-webhook", "toposched-controller")
BINDER_ENV = "TOPOSCHED_BINDER"  # who binds on the local stack, for a whole test or demo run


@dataclass(frozen=True)
class StackPorts:
    extender: int
    webhook: int
    controller_health: int
    grpc: int

    @classmethod
    def dynamic(cls) -> StackPorts:
        return cls(*free_ports(4))

    @classmethod
    def after(cls, base: int) -> StackPorts:
        return cls(base + 6, base + 7, base + 8, base + 9)


def start_toposched(cluster: LocalCluster, ports: StackPorts, *, controller_args: Iterable[str] = (),
                    components: Iterable[str] = COMPONENTS, timeout_s: float = 90,
                    kueue_config: Path | None = None, binder: str | None = None,
                    kueue_version: str | None = None) -> list[str]:
    """Start the components, wait until each answers, and give kube-scheduler the
    ``toposched`` profile with our extender. Returns the names started. ``kueue_config``: Kueue's
    Configuration file, given to the controller and the webhook (its gates switch checks);
    ``kueue_version``: the Kueue release both behave as (``--kueue-version``).
    ``binder``: who binds toposched's pods (``extender --binder``, docs/extender.md); default
    ``$TOPOSCHED_BINDER`` or the extender's default, so a whole test run can switch it."""
    binder = binder or os.environ.get(BINDER_ENV) or DEFAULT_BINDER
    if binder not in BINDERS:
        raise UserError(f"{BINDER_ENV}={binder!r}: the binder must be one of {', '.join(BINDERS)}")
    config_args: tuple[str, ...] = ("--kueue-config", str(kueue_config)) if kueue_config is not None else ()
    if kueue_version is not None:
        config_args = (*config_args, "--kueue-version", kueue_version)
    wanted = set(components)
    kubeconfig = str(cluster.kubeconfig)
    python = [sys.executable, "-m", "scheduler.cli"]
    started: list[tuple[processes.Started, str]] = []
    tls_dir = cluster.dir / "extender-tls"
    extender_ready: list[tuple[processes.Started, str]] = []
    if "toposched-extender" in wanted:
        # As deployed (deploy/scheduler/): a fresh set for this kube-scheduler and extender, and the
        # extender serves HTTPS to kube-scheduler's client certificate alone (on this host's
        # loopback, which every local process shares, that is what keeps the others out).
        issue_pod_certificates(tls_dir)
        url = f"https://127.0.0.1:{ports.extender}/readyz"
        proc = cluster.start_process("toposched-extender", [*python, "extender", "--kubeconfig", kubeconfig,
                                                            "--port", str(ports.extender), "--binder", binder,
                                                            "--tls-dir", str(tls_dir),
                                                            "--client-name", SCHEDULER_CLIENT_NAME],
                                     health=url)
        extender_ready.append((proc, url))
    if "toposched-webhook" in wanted:
        # The controller below runs as its own user (not the admin's kubectl): the webhooks skip
        # that user's writes and let only it unsuspend queued jobs.
        controller_user = certs.common_name(cluster.pki / "controller.crt")
        url = f"https://127.0.0.1:{ports.webhook}/readyz"
        proc = cluster.start_process("toposched-webhook", [*python, "webhook", "--kubeconfig", kubeconfig,
                                                           "--port", str(ports.webhook),
                                                           "--cert-dir", str(cluster.dir / "webhook-certs"),
                                                           "--controller-user", controller_user, *config_args],
                                     health=url)
        started.append((proc, url))
    if "toposched-controller" in wanted:
        url = f"http://127.0.0.1:{ports.controller_health}/readyz"
        proc = cluster.start_process("toposched-controller", [
            *python, "controller", "--kubeconfig", str(cluster.controller_kubeconfig),
            "--health-port", str(ports.controller_health), "--grpc-port", str(ports.grpc),
            *config_args, *controller_args], health=url)
        started.append((proc, url))
    for proc, url in started:
        peers.wait_http_ready(url, proc, timeout_s, verify_tls=False)
    for proc, url in extender_ready:
        peers.wait_http_ready(url, proc, timeout_s, context=scheduler_client_context(tls_dir))
    if "toposched-extender" in wanted:
        cluster.reconfigure_scheduler(default_scheduler_config(
            cluster.dir / "scheduler.kubeconfig", extra_profiles=[toposched_profile()],
            extenders=[extender_entry(ports.extender, binder=binder, tls_dir=str(tls_dir))]))
    return [p.name for p, _ in [*extender_ready, *started]]


def scheduler_client_context(tls_dir: Path) -> ssl.SSLContext:
    """What kube-scheduler presents to the extender (its tlsConfig), for a test or a tool that
    calls the local stack's extender: the CA and kube-scheduler's client certificate."""
    ctx = ssl.create_default_context(cafile=str(tls_dir / CA_FILE))
    ctx.load_cert_chain(str(tls_dir / CLIENT_CERT_FILE), str(tls_dir / CLIENT_KEY_FILE))
    return ctx


def stop_component(cluster: LocalCluster, name: str, kill: bool = False) -> None:
    proc = cluster.state.processes.get(name)
    if proc is None:
        return
    (processes.kill if kill else processes.stop)(proc)


def restart_component(cluster: LocalCluster, name: str) -> processes.Started:
    """Start a stopped component again with its recorded command line (crash-restart tests)."""
    proc = cluster.state.processes[name]
    if processes.alive(proc.pid) and processes.is_ours(proc.pid, proc.executable):
        raise UserError(f"{name} is still running (pid {proc.pid})")
    return cluster.start_process(name, list(proc.argv), health=proc.health)
