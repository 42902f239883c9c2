"""The controller's health/metrics port under hostile clients (issue 30): 300 half-sent
requests held 302 threads and the port had no deadline at all. Now they hold no thread, the
probes are answered, and the half-sent requests are closed at the head deadline."""

from __future__ import annotations

import dataclasses
import http.client
import threading

from scheduler.http.probes import PROBE_LIMITS, serve_health, serve_http
from tests.unit.http.hostile import ATTACKER, closed_by_server, idle_sockets, wait_until

HALF_SENT = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"


def _readyz(port: int, timeout_s: float) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", "/readyz")
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_300_half_sent_requests_hold_no_thread_and_the_probe_is_answered() -> None:
    server = serve_health("127.0.0.1", 0, lambda: True)
    port = server.server_address[1]
    threads_before = threading.active_count()
    try:
        with idle_sockets(port, 300, first_bytes=HALF_SENT):
            assert _readyz(port, timeout_s=1.0) == (200, b"ok")
            assert threading.active_count() <= threads_before + 1
            # one address holds at most its share of the port's connections
            assert wait_until(lambda: server.connections_of(ATTACKER) == PROBE_LIMITS.max_per_client)
    finally:
        server.shutdown()
        server.server_close()


def test_half_sent_requests_are_closed_at_the_head_deadline() -> None:
    server = serve_http("127.0.0.1", 0, ready=lambda: True,
                        limits=dataclasses.replace(PROBE_LIMITS, header_timeout_s=0.3))
    try:
        with idle_sockets(server.server_address[1], PROBE_LIMITS.max_per_client, first_bytes=HALF_SENT) as socks:
            assert all(closed_by_server(sock, within_s=5) for sock in socks)
        assert server.open_connections == 0
    finally:
        server.shutdown()
        server.server_close()
