"""What answers on a local cluster, for ``toposched dev status``: never "running" because a pid
lives.

- every process the cluster started: alive (its pid still runs its executable) AND its health
  endpoint answers 200 (when it has one);
- the demo's webhook process: also its two webhook configurations registered, pointing at its
  port, with a caBundle (else the API server never calls it);
- every webhook configuration with ``failurePolicy: Fail`` webhooks (the demo's, the chart's):
  whether what it calls answers: a URL's server accepts TLS, a Service has ready endpoints
  (a configuration without a backend refuses every object it covers);
- the pods on the podman node (``dev up --bare``): phase (``Init:...`` while init containers
  have not completed) and ready containers, as kubectl says.
"""

from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiException

from scheduler.devcluster import processes
from scheduler.devcluster.controlplane import LocalCluster
from scheduler.devcluster.podnode import NODE_NAME
from scheduler.devcluster.stack import EXTENDER, scheduler_client_context
from scheduler.k8s.informer import PODS, KubeApi, Resource

MUTATING = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", namespaced=False)
VALIDATING = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", namespaced=False)
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices")
DEMO_WEBHOOK = "toposched-webhook"

_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE  # loopback health endpoints with self-signed certificates


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def answers(url: str, timeout_s: float = 2.0, context: ssl.SSLContext | None = None) -> tuple[bool, str]:
    """``context``: what to present and trust (the extender answers only kube-scheduler's client
    certificate); default: no certificate, any server certificate."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=context or _INSECURE) as resp:
            return resp.status == 200, f"{urllib.parse.urlsplit(url).path} answers {resp.status}"
    except urllib.error.HTTPError as exc:
        return False, f"{url} answers {exc.code}"
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"no answer at {url} ({reason})"


def process_checks(cluster: LocalCluster, api: KubeApi | None) -> list[Check]:
    checks = []
    for name, proc in cluster.state.processes.items():
        if not (processes.alive(proc.pid) and processes.is_ours(proc.pid, proc.executable)):
            checks.append(Check(name, False, f"stopped (pid {proc.pid} gone; log {proc.log})"))
            continue
        if not proc.health:
            checks.append(Check(name, True, f"pid {proc.pid} runs (no health endpoint)"))
            continue
        ok, detail = answers(proc.health, context=_client_context(cluster, name))
        if ok and name == DEMO_WEBHOOK and api is not None:
            port = urllib.parse.urlsplit(proc.health).port
            ok, detail = _registered(api, port, detail)
        checks.append(Check(name, ok, f"pid {proc.pid}, {detail}"))
    return checks


def _client_context(cluster: LocalCluster, name: str) -> ssl.SSLContext | None:
    tls_dir = cluster.dir / "extender-tls"
    return scheduler_client_context(tls_dir) if name == EXTENDER and tls_dir.is_dir() else None


def _registered(api: KubeApi, port: int | None, detail: str) -> tuple[bool, str]:
    """The demo webhook's configurations exist, point at its port and carry a caBundle."""
    problems = []
    for resource, kind in ((MUTATING, "MutatingWebhookConfiguration"), (VALIDATING, "ValidatingWebhookConfiguration")):
        try:
            config = api.get(resource, DEMO_WEBHOOK)
        except ApiException as exc:
            if exc.status != 404:
                raise
            problems.append(f"{kind} {DEMO_WEBHOOK} is missing")
            continue
        hooks = config.get("webhooks") or []
        urls = {(h.get("clientConfig") or {}).get("url", "") for h in hooks}
        if not any(urllib.parse.urlsplit(u).port == port for u in urls if u):
            problems.append(f"{kind} {DEMO_WEBHOOK} calls {sorted(urls)[0] if urls else 'nothing'}, not this port")
        elif not all((h.get("clientConfig") or {}).get("caBundle") for h in hooks):
            problems.append(f"{kind} {DEMO_WEBHOOK} has no caBundle")
    if problems:
        return False, f"{detail}, but {'; '.join(problems)}: the API server does not call it"
    return True, f"{detail}, registered"


def webhook_checks(api: KubeApi) -> list[Check]:
    """Each configuration with Fail webhooks: does what it calls answer?"""
    checks = []
    for resource, kind in ((MUTATING, "mutating"), (VALIDATING, "validating")):
        for config in api.list(resource).get("items") or []:
            hooks = [h for h in config.get("webhooks") or [] if h.get("failurePolicy", "Fail") == "Fail"]
            if not hooks:
                continue
            targets = {_target(h.get("clientConfig") or {}) for h in hooks}
            results = [_target_answers(api, target) for target in sorted(targets)]
            ok = all(r[0] for r in results)
            detail = "; ".join(r[1] for r in results)
            if not ok:
                detail += f": objects its {len(hooks)} failurePolicy=Fail webhooks match are refused"
            checks.append(Check(f"{config['metadata']['name']} ({kind})", ok, detail))
    return checks


def _target(client_config: dict[str, Any]) -> tuple[str, str, str, int]:
    if "url" in client_config:  # one target per server, whatever the path
        parts = urllib.parse.urlsplit(client_config["url"])
        return ("url", f"{parts.scheme}://{parts.netloc}", "", 0)
    svc = client_config.get("service") or {}
    return ("service", svc.get("namespace", ""), svc.get("name", ""), int(svc.get("port", 443)))


def _target_answers(api: KubeApi, target: tuple[str, str, str, int]) -> tuple[bool, str]:
    if target[0] == "url":
        parts = urllib.parse.urlsplit(target[1])
        try:
            with socket.create_connection((parts.hostname or "", parts.port or 443), timeout=2) as sock:
                with _INSECURE.wrap_socket(sock, server_hostname=parts.hostname):
                    return True, f"calls {parts.scheme}://{parts.netloc}: answers TLS"
        except OSError as exc:
            return False, f"calls {parts.scheme}://{parts.netloc}: no answer ({exc})"
    _, namespace, name, _port = target
    slices = api.list(ENDPOINT_SLICES, namespace, labelSelector=f"kubernetes.io/service-name={name}").get("items") or []
    ready = sum(1 for s in slices for e in s.get("endpoints") or []
                if (e.get("conditions") or {}).get("ready", True))
    return ready > 0, f"calls service {namespace}/{name}: {ready} ready endpoint{'s' if ready != 1 else ''}"


def node_pod_checks(api: KubeApi, node: str = NODE_NAME) -> list[Check]:
    checks = []
    for pod in api.list(PODS, fieldSelector=f"spec.nodeName={node}").get("items") or []:
        meta, status = pod["metadata"], pod.get("status") or {}
        statuses = status.get("containerStatuses") or []
        ready = sum(1 for c in statuses if c.get("ready"))
        initializing = init_status(pod)
        waiting = [] if initializing else [c["state"]["waiting"].get("reason", "") for c in statuses
                                           if "waiting" in (c.get("state") or {})]
        phase = "Terminating" if meta.get("deletionTimestamp") else status.get("phase", "Pending")
        # a pod on its way out (a roll, an uninstall) is not a failure
        ok = phase == "Terminating" or (phase == "Running" and ready == len(pod["spec"]["containers"]))
        shown = initializing if initializing and phase != "Terminating" else phase
        detail = f"{shown}, {ready}/{len(pod['spec']['containers'])} ready" + (
            f" ({', '.join(waiting)})" if waiting else "") + (f", IP {status['podIP']}" if status.get("podIP") else "")
        checks.append(Check(f"{meta['namespace']}/{meta['name']}", ok, detail))
    return checks


def init_status(pod: dict[str, Any]) -> str:
    """What kubectl prints as a pod's STATUS while its init containers have not all completed
    (``Init:1/2``, ``Init:Error``, ``Init:CrashLoopBackOff``), else ""."""
    inits = (pod.get("spec") or {}).get("initContainers") or []
    for index, status in enumerate((pod.get("status") or {}).get("initContainerStatuses") or []):
        state = status.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting") or {}
        if terminated is not None and terminated.get("exitCode") == 0:
            continue
        if terminated is not None:
            if terminated.get("reason"):
                return f"Init:{terminated['reason']}"
            if terminated.get("signal"):
                return f"Init:Signal:{terminated['signal']}"
            return f"Init:ExitCode:{terminated.get('exitCode')}"
        if waiting.get("reason") and waiting["reason"] != "PodInitializing":
            return f"Init:{waiting['reason']}"
        return f"Init:{index}/{len(inits)}"
    return ""


def render(sections: Iterable[tuple[str, list[Check]]]) -> str:
    lines = []
    for title, checks in sections:
        if not checks:
            continue
        if title:
            lines.append(title)
        width = max(len(c.name) for c in checks)
        lines += [f"{'  ' if title else ''}{c.name:{width}}  {'ok  ' if c.ok else 'FAIL'}  {c.detail}"
                  for c in checks]
    return "\n".join(lines)
