"""Hostile clients for the server tests: idle sockets, half-sent heads, trickled bodies, all on
loopback. A Linux host answers on the whole of 127.0.0.0/8, so an "attacker" binds 127.0.0.2 as
its source address and the honest client keeps 127.0.0.1: two client addresses on one machine."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from admission.certs import CertManager

ATTACKER = "127.0.0.2"
HONEST = "127.0.0.1"


def connect(port: int, source: str = ATTACKER) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


@contextmanager
def idle_sockets(port: int, count: int, source: str = ATTACKER,
                 first_bytes: bytes = b"") -> Iterator[list[socket.socket]]:
    """``count`` connections from ``source`` that send ``first_bytes`` (nothing: idle before any
    TLS byte) and then nothing more; closed on exit."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = connect(port, source)
            if first_bytes:
                try:
                    sock.sendall(first_bytes)
                except OSError:
                    pass  # already closed by the server to make room: the attack goes on
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    """True when the server closes ``sock`` (EOF or reset) within ``within_s``."""
    sock.settimeout(within_s)
    deadline = time.monotonic() + within_s
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


def wait_until(predicate: Any, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def serving_context(tmp: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context with a certificate for 127.0.0.1 and the CA file that verifies it."""
    certs = CertManager(tmp, ["localhost"], ["127.0.0.1"], ca_validity=dt.timedelta(days=2),
                        cert_validity=dt.timedelta(days=1))
    certs.ensure()
    return certs.server_context(), certs.ca_bundle_file


def review(uid: str) -> bytes:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "honest", "namespace": "team-a"},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                                          "restartPolicy": "Never"}}}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": uid, "operation": "CREATE", "object": job,
                                   "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                                   "namespace": "team-a", "userInfo": {"username": "alice"}}}).encode()


def post_review(port: int, ca_file: Path | None, uid: str, timeout_s: float,
                path: str = "/validate-batch-v1-job") -> tuple[int, dict[str, Any]]:
    """One review on a new connection, as the API server sends it; raises on a timeout."""
    if ca_file is not None:
        ctx = ssl.create_default_context(cafile=str(ca_file))
        conn: http.client.HTTPConnection = http.client.HTTPSConnection("127.0.0.1", port, context=ctx,
                                                                       timeout=timeout_s)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("POST", path, review(uid), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()
