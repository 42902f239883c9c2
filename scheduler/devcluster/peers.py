"""What running a controller-runtime peer (Kueue, JobSet) on a LocalCluster takes: wait for its
health endpoint and its webhook server, and register its own webhook manifests (read from the
Go module cache) by URL on loopback instead of through a Service."""

from __future__ import annotations

import base64
import socket
import ssl
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scheduler.devcluster import processes
from scheduler.devcluster.controlplane import LOOPBACK, LocalCluster
from scheduler.errors import UserError


@dataclass
class PeerHandle:
    """A peer controller running as a process of ``cluster``."""

    cluster: LocalCluster
    process: processes.Started

    @property
    def log(self) -> Path:
        return Path(self.process.log)

    def stop(self) -> None:
        processes.stop(self.process)
        self.cluster.state.processes.pop(self.process.name, None)
        self.cluster.state.save(self.cluster.state_file)


def wait_http_ready(url: str, proc: processes.Started, timeout_s: float, verify_tls: bool = True,
                    context: ssl.SSLContext | None = None) -> None:
    """Until ``url`` answers 200; fails fast (naming the log) if the process exits first.
    ``context``: the TLS client settings (a client certificate, a CA) for an HTTPS ``url``."""
    ctx = context
    if ctx is None and not verify_tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not processes.alive(proc.pid):
            raise UserError(f"{proc.name} exited during start-up: see {proc.log}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise UserError(f"{proc.name} not ready within {timeout_s:.0f}s: see {proc.log}")


def wait_tls(port: int, ca: Path, what: str, timeout_s: float) -> None:
    """Until a TLS server on loopback ``port`` presents a certificate ``ca`` signed."""
    ctx = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=2) as sock:
                with ctx.wrap_socket(sock, server_hostname=LOOPBACK):
                    return
        except OSError:
            time.sleep(0.25)
    raise UserError(f"{what}'s webhook server on {LOOPBACK}:{port} did not answer within {timeout_s:.0f}s")


def webhook_configurations(manifest: Path, base_url: str, ca_pem: str, keep_groups: set[str],
                           name_prefix: str, keep_resources: set[str] | None = None) -> list[dict[str, Any]]:
    """A peer's own webhook manifests pointed at ``base_url`` instead of a Service, keeping only
    the webhooks whose rules are all in ``keep_groups`` (and ``keep_resources`` when given): the
    others target CRDs that are not installed, or every pod."""
    docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    out = []
    for doc in docs:
        hooks = []
        for hook in doc.get("webhooks", []):
            groups = {g for rule in hook.get("rules", []) for g in rule.get("apiGroups", [])}
            resources = {r for rule in hook.get("rules", []) for r in rule.get("resources", [])}
            if not groups or not groups <= keep_groups:
                continue
            if keep_resources is not None and not resources <= keep_resources:
                continue
            hook["clientConfig"] = {"url": base_url + hook["clientConfig"]["service"]["path"],
                                    "caBundle": base64.b64encode(ca_pem.encode()).decode()}
            hooks.append(hook)
        if hooks:
            doc["webhooks"] = hooks
            doc["metadata"] = {"name": name_prefix + doc["metadata"]["name"]}
            out.append(doc)
    if not out:
        raise UserError(f"no webhooks for {sorted(keep_groups)} in {manifest}")
    return out


def wait_crds_established(kube: Any, docs: list[dict[str, Any]], timeout_s: float = 60) -> None:
    """Until every CustomResourceDefinition in ``docs`` is Established: a controller-runtime
    manager started before that does not find the kind (its webhook answers 404 for a while)."""
    from kubernetes import client

    ext = client.ApiextensionsV1Api(kube)
    names = [d["metadata"]["name"] for d in docs if d.get("kind") == "CustomResourceDefinition"]
    deadline = time.monotonic() + timeout_s
    for name in names:
        while True:
            conds = {c.type: c.status for c in (ext.read_custom_resource_definition(name).status.conditions or ())}
            if conds.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                raise UserError(f"CustomResourceDefinition {name} not Established within {timeout_s:.0f}s")
            time.sleep(0.2)


def register_webhooks(kube: Any, docs: list[dict[str, Any]]) -> None:
    """Create each configuration, replacing one left by an earlier run."""
    from kubernetes import client

    adm = client.AdmissionregistrationV1Api(kube)
    for doc in docs:
        mutating = doc["kind"] == "MutatingWebhookConfiguration"
        create = adm.create_mutating_webhook_configuration if mutating else adm.create_validating_webhook_configuration
        delete = adm.delete_mutating_webhook_configuration if mutating else adm.delete_validating_webhook_configuration
        try:
            create(doc)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            delete(doc["metadata"]["name"])
            create(doc)
