"""``toposched dev status`` tells what answers (scheduler/devcluster/health.py): a live pid is not
enough. A process whose health endpoint does not answer, the demo's webhook whose
configurations are gone (``helm uninstall`` after deleting the demo's webhooks), a chart webhook
configuration whose Service has no ready endpoint, a pod of the podman node that is not ready:
each is a failure, named."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from scheduler.devcluster import health
from scheduler.devcluster.controlplane import LocalCluster, free_port
from scheduler.devcluster.processes import Started
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import PODS


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_args: object) -> None:
        return


@pytest.fixture
def healthy_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def me(name: str, health_url: str) -> Started:
    """This very process, recorded as a cluster component (alive, and ours)."""
    return Started(name, os.getpid(), sys.executable, "/dev/null", (), health_url)


def configuration(kind: str, client_config: dict[str, Any], policy: str = "Fail") -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "toposched-webhook"},
            "webhooks": [{"name": "mjob.toposched.io", "failurePolicy": policy, "clientConfig": client_config}]}


def test_a_live_pid_is_not_enough(tmp_path: Path, healthy_port: int) -> None:
    cluster = LocalCluster(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    cluster.state.processes = {
        "etcd": Started("etcd", gone.pid, sys.executable, "/dev/null"),
        "kube-scheduler": me("kube-scheduler", f"http://127.0.0.1:{free_port()}/healthz"),
        "kwok": me("kwok", f"http://127.0.0.1:{healthy_port}/healthz"),
        "mpi-operator": me("mpi-operator", ""),
    }
    checks = {c.name: c for c in health.process_checks(cluster, None)}
    assert not checks["etcd"].ok and "stopped" in checks["etcd"].detail
    assert not checks["kube-scheduler"].ok and "no answer at" in checks["kube-scheduler"].detail
    assert checks["kwok"].ok and "/healthz answers 200" in checks["kwok"].detail
    assert checks["mpi-operator"].ok and "no health endpoint" in checks["mpi-operator"].detail


def test_the_demo_webhook_without_its_configurations_is_not_running(tmp_path: Path, healthy_port: int) -> None:
    cluster = LocalCluster(tmp_path)
    cluster.state.processes = {"toposched-webhook": me("toposched-webhook", f"http://127.0.0.1:{healthy_port}/readyz")}
    api = FakeApi()
    (check,) = health.process_checks(cluster, api)
    assert not check.ok
    assert "MutatingWebhookConfiguration toposched-webhook is missing" in check.detail
    assert "the API server does not call it" in check.detail
    url = {"url": f"https://127.0.0.1:{healthy_port}/mutate-batch-v1-job", "caBundle": "Q0E="}
    api.create(health.MUTATING, configuration("MutatingWebhookConfiguration", url))
    api.create(health.VALIDATING, configuration("ValidatingWebhookConfiguration", {**url, "caBundle": ""}))
    (check,) = health.process_checks(cluster, api)
    assert not check.ok and "ValidatingWebhookConfiguration toposched-webhook has no caBundle" in check.detail
    api.merge_patch(health.VALIDATING, "toposched-webhook", {"webhooks": [
        {"name": "vjob.toposched.io", "failurePolicy": "Fail", "clientConfig": url}]})
    (check,) = health.process_checks(cluster, api)
    assert check.ok and check.detail.endswith("registered")


def endpoint_slice(ready: list[bool]) -> dict[str, Any]:
    return {"metadata": {"name": "toposched-webhook-x", "namespace": "toposched-system",
                         "labels": {"kubernetes.io/service-name": "toposched-webhook"}},
            "endpoints": [{"addresses": [f"10.88.0.{i}"], "conditions": {"ready": r}} for i, r in enumerate(ready)]}


def test_a_chart_webhook_without_ready_endpoints_refuses() -> None:
    api = FakeApi()
    service = {"service": {"namespace": "toposched-system", "name": "toposched-webhook", "port": 443},
               "caBundle": "Q0E="}
    api.create(health.MUTATING, configuration("MutatingWebhookConfiguration", service))
    api.create(health.VALIDATING, {**configuration("ValidatingWebhookConfiguration", service, "Ignore")})
    api.create(health.ENDPOINT_SLICES, endpoint_slice([False, False]), "toposched-system")
    (check,) = health.webhook_checks(api)  # the Ignore-only configuration refuses nothing: not listed
    assert check.name == "toposched-webhook (mutating)" and not check.ok
    assert "0 ready endpoints" in check.detail and "are refused" in check.detail
    api.merge_patch(health.ENDPOINT_SLICES, "toposched-webhook-x", endpoint_slice([False, True]), "toposched-system")
    (check,) = health.webhook_checks(api)
    assert check.ok and "calls service toposched-system/toposched-webhook: 1 ready endpoint" in check.detail


def test_a_webhook_url_nobody_serves_refuses() -> None:
    api = FakeApi()
    port = free_port()
    config = configuration("MutatingWebhookConfiguration", {"url": f"https://127.0.0.1:{port}/mutate-a"})
    config["webhooks"].append({"name": "b.toposched.io", "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate-b"}})
    api.create(health.MUTATING, config)
    (check,) = health.webhook_checks(api)
    assert not check.ok and "no answer" in check.detail
    assert check.detail.count("calls ") == 1, "one server, asked once"


def test_podman_node_pods_ready_or_named_why_not() -> None:
    api = FakeApi()
    for name, phase, statuses in (
            ("toposched-webhook-a", "Running", [{"name": "webhook", "ready": True, "state": {"running": {}}}]),
            ("toposched-scheduler-b", "Pending", [
                {"name": "kube-scheduler", "ready": False, "state": {"waiting": {"reason": "ErrImageNeverPull"}}},
                {"name": "extender", "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}])):
        api.create(PODS, {"metadata": {"name": name, "namespace": "toposched-system"},
                          "spec": {"nodeName": "podman-0", "containers": [{"name": s["name"]} for s in statuses]},
                          "status": {"phase": phase, "containerStatuses": statuses}}, "toposched-system")
    checks = {c.name: c for c in health.node_pod_checks(api)}
    assert checks["toposched-system/toposched-webhook-a"].ok
    waiting = checks["toposched-system/toposched-scheduler-b"]
    assert not waiting.ok and waiting.detail == "Pending, 0/2 ready (ErrImageNeverPull, ContainerCreating)"
    rendered = health.render([("pods on podman-0 (podman):", list(checks.values()))])
    assert "FAIL  Pending, 0/2 ready" in rendered and rendered.startswith("pods on podman-0")
