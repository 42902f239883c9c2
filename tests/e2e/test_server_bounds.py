"""Issue 30 item 3 on the real control plane: any pod could stop every queued submission by
holding the webhook's 64 connection slots with idle sockets. Here an attacker holds 1,000 idle
sockets to the webhook (and keeps reopening the ones it loses) while an honest labelled Job is
created: the real kube-apiserver's review is answered within the webhook's 5 s timeout
(failurePolicy Fail would refuse the Job otherwise), and the Job, admitted by the controller,
has its pods placed by the real kube-scheduler through the extender over mutual TLS, as
deployed. A caller without kube-scheduler's client certificate gets no answer from the extender."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.devcluster.stack import scheduler_client_context
from scheduler.k8s.informer import JOBS
from tests.e2e.conftest import Stack
from tests.e2e.test_hyperpod_flow import NS, running_pods, sample_job

CLUSTER = {"name": "e2e-bounds", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 4}
ATTACKER = "127.0.0.2"  # the attacking pod's address; the API server connects from 127.0.0.1


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def _port(stack: Stack, component: str) -> int:
    argv = stack.cluster.state.processes[component].argv
    return int(argv[argv.index("--port") + 1])


class IdleAttack:
    """``count`` idle TCP connections from ATTACKER, reopened as the server closes them."""

    def __init__(self, port: int, count: int) -> None:
        self.port, self.count = port, count
        self.socks: list[socket.socket] = []
        self.opened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> socket.socket:
        sock = socket.socket()
        sock.bind((ATTACKER, 0))
        sock.setblocking(True)
        sock.settimeout(5)
        sock.connect(("127.0.0.1", self.port))
        sock.setblocking(False)
        self.opened += 1
        return sock

    def _closed(self, sock: socket.socket) -> bool:
        try:
            return sock.recv(1) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _run(self) -> None:
        while not self._stop.is_set():
            for i, sock in enumerate(self.socks):
                if self._closed(sock):
                    sock.close()
                    self.socks[i] = self._open()
            time.sleep(0.05)

    def __enter__(self) -> IdleAttack:
        self.socks = [self._open() for _ in range(self.count)]
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.socks:
            sock.close()


@pytest.fixture
def attack(stack: Stack) -> Iterator[IdleAttack]:
    with IdleAttack(_port(stack, "toposched-webhook"), 1000) as running:
        time.sleep(1)  # the webhook has accepted them (and already closed what it would not hold)
        yield running


def _extender_stats(stack: Stack) -> dict[str, Any]:
    """GET /stats as kube-scheduler would call it: with its client certificate."""
    tls_dir = stack.cluster.dir / "extender-tls"
    conn = http.client.HTTPSConnection("127.0.0.1", _port(stack, "toposched-extender"),
                                       context=scheduler_client_context(tls_dir), timeout=5)
    try:
        conn.request("GET", "/stats")
        return dict(json.loads(conn.getresponse().read()))
    finally:
        conn.close()


def _filters(stack: Stack) -> int:
    return int((_extender_stats(stack)["requests"].get("filter") or {}).get("count", 0))


def test_idle_sockets_do_not_stop_honest_labelled_jobs(stack: Stack, attack: IdleAttack) -> None:
    """Four labelled Jobs created at once (so the API server opens new connections to the
    webhook, as in any burst), under the attack: each create is reviewed within the timeout."""
    filters_before = _filters(stack)
    names = [f"honest-{i}" for i in range(4)]
    created: dict[str, dict[str, Any]] = {}
    took: dict[str, float] = {}

    def create(name: str) -> None:
        started = time.monotonic()
        created[name] = stack.api.create(JOBS, sample_job(name, 1, 8, None), NS)
        took[name] = time.monotonic() - started

    threads = [threading.Thread(target=create, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert set(created) == set(names), f"creates refused under the attack: {set(names) - set(created)}"
    for job in created.values():  # the mutating webhook answered: suspended and routed to toposched
        assert job["spec"]["suspend"] is True and job["spec"]["template"]["spec"]["schedulerName"] == "toposched"
    assert max(took.values()) < 5, f"a create took {max(took.values()):.1f}s, past the webhook's timeoutSeconds"
    assert attack.opened > 1000, "the webhook held every idle socket: the per-client limit did not act"
    # Admitted and unsuspended by the controller (an update the webhook reviews too), placed by
    # kube-scheduler through the extender over mTLS.
    stack.wait(lambda: all(len(running_pods(stack, name)) == 1 for name in names), 120,
               "the honest Jobs' pods Running")
    assert _filters(stack) - filters_before >= len(names)
    for name in names:
        stack.api.delete(JOBS, name, NS, propagationPolicy="Background")


def test_the_extender_answers_kube_schedulers_certificate_only(stack: Stack) -> None:
    tls_dir = stack.cluster.dir / "extender-tls"
    anonymous = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
    conn = http.client.HTTPSConnection("127.0.0.1", _port(stack, "toposched-extender"), context=anonymous, timeout=5)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        conn.request("POST", "/bind", json.dumps({"PodName": "x", "PodNamespace": NS, "PodUID": "u",
                                                  "Node": "n"}).encode())
        conn.getresponse().read()
    conn.close()
    assert "requests" in _extender_stats(stack)  # while kube-scheduler's certificate is answered
