"""Two `toposched webhook` processes in secret mode behind one webhook configuration; one is
SIGKILLed in the middle of a stream of Job creations and not one creation is refused.

The API server calls one URL. A Service with two endpoints cannot be used here: the local
control plane runs no kube-proxy (Service IPs route nowhere), its API server resolves a webhook
Service to the ClusterIP (no --enable-aggregator-routing) and Endpoints may not hold loopback
addresses. So the test puts a tiny TCP load balancer of its own in front of the two loopback
ports: a new connection goes to the next backend round-robin, and to the other one if that
refuses the connection. kube-proxy does not retry like that: it sends a new connection to an
endpoint that is still listed until the endpoint controller removes it (readiness probe fails,
Pod deleted), so on a real cluster a crashed replica can fail new connections for a few
seconds; and a request in flight on a connection to the replica that dies is lost in both
(the API server does not resend a POST whose connection breaks). The kill below therefore
falls between two creations of the stream (one client, sequential), the API server's open
connections to the killed replica break (the test waits until the balancer has relayed their
close, a few milliseconds), and every later call must reach the survivor.
"""

from __future__ import annotations

import errno
import json
import socket
import ssl
import sys
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.devcluster import processes
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import free_ports
from tests.e2e.test_webhook import L3, REQ, _job, _queues, _wait

JOBS = 100
KILL_AT = 40
NS = "toposched-system"


class RoundRobinProxy:
    """TCP load balancer on 127.0.0.1: one thread accepts, two threads relay each connection."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.connections = dict.fromkeys(backends, 0)
        self.refused = dict.fromkeys(backends, 0)
        self.answered_bytes = dict.fromkeys(backends, 0)  # relayed from each backend to the API server
        self.open = dict.fromkeys(backends, 0)  # relayed connections not yet closed
        self._next = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._route, args=(downstream,), daemon=True).start()

    def _route(self, downstream: socket.socket) -> None:
        with self._lock:
            start, self._next = self._next, self._next + 1
        for i in range(len(self.backends)):
            port = self.backends[(start + i) % len(self.backends)]
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError as exc:
                if exc.errno != errno.ECONNREFUSED:
                    raise
                self.refused[port] += 1
                continue  # the retry kube-proxy does not make
            upstream.settimeout(None)
            with self._lock:
                self.connections[port] += 1
                self.open[port] += 1
            answers = threading.Thread(target=_pipe, args=(upstream, downstream, port, self.answered_bytes),
                                       daemon=True)
            answers.start()
            _pipe(downstream, upstream)
            answers.join()
            with self._lock:
                self.open[port] -= 1
            return
        downstream.close()

    def close(self) -> None:
        self.listener.close()


def _pipe(source: socket.socket, sink: socket.socket, port: int = 0, counts: dict[int, int] | None = None) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
            if counts is not None:
                counts[port] += len(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):  # either side ending ends the relayed connection
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _ready(port: int) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        return bool(urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2).status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def replicas(local_cluster: Any) -> Iterator[dict[str, Any]]:
    kube = local_cluster.api_client()
    apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    ports = free_ports(2)
    proxy = RoundRobinProxy(ports)
    suffix = uuid.uuid4().hex[:6]
    procs = {}
    for name, port in zip(("a", "b"), ports, strict=True):
        procs[port] = local_cluster.start_process(f"toposched-webhook-ha-{name}-{suffix}", [
            sys.executable, "-m", "scheduler.cli", "webhook", "--kubeconfig", str(local_cluster.kubeconfig),
            "--port", str(port), "--namespace", NS, "--cert-source", "secret",
            "--cert-secret", f"webhook-ha-{suffix}", "--lease-name", f"webhook-ha-{suffix}",
            "--identity", f"replica-{name}", "--webhook-url", f"https://127.0.0.1:{proxy.port}"])
    adm = client.AdmissionregistrationV1Api(kube)
    try:
        # Ready = certificate loaded and its CA in every webhook's caBundle, on both replicas.
        _wait(lambda: all(_ready(p) for p in ports), 90)
        yield {"proxy": proxy, "procs": procs, "ports": ports}
    finally:
        for proc in procs.values():
            processes.stop(proc)
        proxy.close()
        for delete in (adm.delete_mutating_webhook_configuration, adm.delete_validating_webhook_configuration):
            try:
                delete("toposched-webhook")
            except client.ApiException:
                pass


def test_both_replicas_serve_the_certificate_of_the_shared_secret(replicas: dict[str, Any]) -> None:
    served = set()
    for port in replicas["ports"]:
        with socket.create_connection(("127.0.0.1", port)) as raw:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            with ctx.wrap_socket(raw) as tls:
                served.add(tls.getpeercert(binary_form=True))
    assert len(served) == 1, "one certificate for both replicas"


def test_killing_a_replica_mid_stream_refuses_no_creation(local_cluster: Any, kube_api: client.ApiClient,
                                                          namespace: str, replicas: dict[str, Any]) -> None:
    _queues(kube_api, namespace)
    proxy: RoundRobinProxy = replicas["proxy"]
    batch = client.BatchV1Api(kube_api)
    refused: list[str] = []
    created = []
    victim = None
    for i in range(JOBS):
        if i == KILL_AT:
            # The replica that has answered the API server most so far.
            victim = max(replicas["ports"], key=lambda p: proxy.answered_bytes[p])
            processes.kill(replicas["procs"][victim])
            before_kill = dict(proxy.answered_bytes)
            # The crash falls between two requests: its connections are closed (FIN relayed to the
            # API server) before the next creation. A request in flight at the crash is lost, as
            # behind kube-proxy (module docstring).
            _wait(lambda port=victim: proxy.open[port] == 0, 10, 0.01)
        try:
            created.append(batch.create_namespaced_job(namespace, _job(f"ha-{i}", namespace, 1, {REQ: L3})))
        except client.ApiException as exc:
            refused.append(f"ha-{i}: {exc.status} {json.loads(exc.body).get('message') if exc.body else exc}")
    assert not refused, refused
    assert len(created) == JOBS
    for job in created:
        assert job.spec.suspend is True, job.metadata.name
        assert job.spec.template.spec.scheduler_name == "toposched", job.metadata.name
    survivor = next(p for p in replicas["ports"] if p != victim)
    assert before_kill[victim] > 0, "the killed replica was answering the API server"
    assert proxy.answered_bytes[victim] == before_kill[victim]
    assert proxy.answered_bytes[survivor] > before_kill[survivor], "the survivor answered the rest"
    print(f"\n[webhook-ha] {JOBS} Jobs, replica on port {victim} SIGKILLed before Job {KILL_AT}; bytes answered "
          f"before the kill {before_kill}, at the end {proxy.answered_bytes}; connections {proxy.connections}, "
          f"refused connects retried on the other backend {proxy.refused}")


def test_logs_name_one_issuer(replicas: dict[str, Any]) -> None:
    logs = [Path(p.log).read_text() for p in replicas["procs"].values()]
    assert sum("wrote certificates to Secret" in text for text in logs) >= 1
    assert sum("became leader" in text for text in logs) >= 1
