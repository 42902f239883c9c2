"""The bounded HTTP server (scheduler/http/bounded.py) on loopback: keep-alive, pipelining,
100-continue, bodies over TLS, and the rules that keep slow or idle clients from starving the
others: who gives way at a connection cap, deadlines, answers a client does not read."""

from __future__ import annotations

import dataclasses
import http.client
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from scheduler.http.bounded import BoundedHTTPServer, BufferedHandler, serve_in_thread
from scheduler.http.limits import ConnectionLimits
from tests.unit.http.hostile import ATTACKER, HONEST, closed_by_server, connect, serving_context, wait_until

LIMITS = ConnectionLimits(max_connections=8, max_per_client=4, workers=2, max_body_bytes=8 * 1024 * 1024)


class Echo(BufferedHandler):
    """POST: the body's length; GET /big: 16 MiB; GET /block: waits for the test's event."""

    release = threading.Event()
    blocked = 0  # handlers waiting in GET /block (the test waits until its requests are being answered)
    _lock = threading.Lock()

    def log_message(self, *_args: object) -> None:
        return

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        self._reply(str(len(self.rfile.read(length))).encode())

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/boom":
            raise RuntimeError("a bug in a handler")
        if self.path == "/block":
            with Echo._lock:
                Echo.blocked += 1
            Echo.release.wait(10)
        self._reply(b"x" * (16 << 20) if self.path == "/big" else self.path.encode())


@contextmanager
def served(limits: ConnectionLimits = LIMITS, ctx: ssl.SSLContext | None = None) -> Iterator[BoundedHTTPServer]:
    Echo.release.clear()
    Echo.blocked = 0
    server = BoundedHTTPServer(("127.0.0.1", 0), Echo, limits=limits, ssl_context=ctx)
    serve_in_thread(server, 0.05)
    try:
        yield server
    finally:
        Echo.release.set()
        server.shutdown()
        server.server_close()


def get(port: int, path: str = "/hello", timeout_s: float = 5) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_keep_alive_serves_requests_one_after_another_on_one_connection() -> None:
    with served() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        for path in ("/a", "/b", "/c"):
            conn.request("GET", path)
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read() == path.encode()
        assert server.open_connections == 1
        conn.close()


def test_pipelined_requests_are_answered_in_order() -> None:
    with served() as server:
        sock = connect(server.server_address[1], HONEST)
        sock.sendall(b"GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        assert data.index(b"/one") < data.index(b"/two") and data.count(b"HTTP/1.1 200") == 2


def test_expect_100_continue_is_answered_before_the_body_is_sent() -> None:
    with served() as server:
        sock = connect(server.server_address[1], HONEST)
        sock.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(b"hello")
        assert sock.recv(65536).endswith(b"\r\n\r\n5")


def test_an_8_mib_body_over_tls_arrives_whole(tmp_path: Path) -> None:
    ctx, ca = serving_context(tmp_path)
    with served(ctx=ctx) as server:
        client = ssl.create_default_context(cafile=str(ca))
        conn = http.client.HTTPSConnection("127.0.0.1", server.server_address[1], context=client, timeout=10)
        conn.request("POST", "/", b"y" * (8 << 20))
        assert conn.getresponse().read() == str(8 << 20).encode()
        conn.close()


def test_a_head_over_the_limit_gets_431_and_the_connection_closes() -> None:
    with served(dataclasses.replace(LIMITS, max_head_bytes=1024)) as server:
        sock = connect(server.server_address[1], HONEST)
        sock.sendall(b"GET / HTTP/1.1\r\nX-Big: " + b"v" * 2000)
        assert sock.recv(65536).startswith(b"HTTP/1.1 431")
        assert closed_by_server(sock, within_s=5)


def test_a_chunked_body_reaches_the_handler_as_a_head_and_the_connection_closes() -> None:
    with served() as server:
        sock = connect(server.server_address[1], HONEST)
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        assert sock.recv(65536).endswith(b"\r\n\r\n0")  # the handler read no body
        assert closed_by_server(sock, within_s=5)


def test_a_failing_handler_gets_500_and_the_server_goes_on() -> None:
    with served() as server:
        assert get(server.server_address[1], "/boom")[0] == 500
        assert get(server.server_address[1], "/after") == (200, b"/after")


def test_an_address_at_its_limit_loses_its_least_recently_active_idle_connection() -> None:
    with served() as server:
        port = server.server_address[1]
        first, *others = [connect(port) for _ in range(LIMITS.max_per_client)]
        assert wait_until(lambda: server.connections_of(ATTACKER) == LIMITS.max_per_client)
        others[0].sendall(b"GET /")  # active: a half-sent head, but more recent than `first`
        newest = connect(port)
        assert closed_by_server(first, within_s=5)
        assert not closed_by_server(others[0], within_s=0.2)
        assert server.connections_of(ATTACKER) == LIMITS.max_per_client
        for sock in (newest, *others):
            sock.close()


def test_at_the_total_limit_the_address_holding_most_gives_way() -> None:
    limits = dataclasses.replace(LIMITS, max_connections=4, max_per_client=3)
    with served(limits) as server:
        port = server.server_address[1]
        crowd = [connect(port, ATTACKER) for _ in range(3)]
        honest = connect(port, HONEST)
        assert wait_until(lambda: server.open_connections == 4)
        third = connect(port, "127.0.0.3")
        assert closed_by_server(crowd[0], within_s=5)
        assert not closed_by_server(honest, within_s=0.2)
        honest.sendall(b"GET /still-here HTTP/1.1\r\nHost: x\r\n\r\n")
        assert honest.recv(65536).endswith(b"/still-here")
        for sock in (*crowd, honest, third):
            sock.close()


def test_connections_being_answered_never_give_way_and_a_new_one_is_refused() -> None:
    limits = dataclasses.replace(LIMITS, max_per_client=2)
    with served(limits) as server:
        port = server.server_address[1]
        busy = [connect(port) for _ in range(2)]
        for sock in busy:
            sock.sendall(b"GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
        # both requests are inside a handler (not merely connected: an idle one may give way)
        assert wait_until(lambda: Echo.blocked == 2 and server.connections_of(ATTACKER) == 2)
        assert server.counts["refused"] == 0
        refused = connect(port)
        assert closed_by_server(refused, within_s=5)
        assert server.counts["refused"] >= 1
        Echo.release.set()
        assert all(sock.recv(65536).endswith(b"/block") for sock in busy)


def test_an_answer_the_client_does_not_read_holds_no_worker_and_ends_at_the_write_deadline() -> None:
    limits = dataclasses.replace(LIMITS, workers=1, write_timeout_s=0.5)
    with served(limits) as server:
        port = server.server_address[1]
        reader = connect(port)
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")  # 16 MiB, never read
        assert get(port, "/other", timeout_s=2) == (200, b"/other")  # the one worker is free
        assert wait_until(lambda: server.open_connections == 0, within_s=5)
        reader.close()


@pytest.mark.parametrize("phase, first", [("waiting", b""), ("head", b"GET / HTTP/1.1\r\n"),
                                          ("body", b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nab")])
def test_each_phase_ends_at_its_deadline(phase: str, first: bytes) -> None:
    limits = dataclasses.replace(LIMITS, header_timeout_s=0.3, body_timeout_s=0.3)
    with served(limits) as server:
        sock = connect(server.server_address[1])
        if first:
            sock.sendall(first)
        assert closed_by_server(sock, within_s=5)
        assert server.counts["timed_out"] == (0 if phase == "waiting" else 1)


def test_a_keep_alive_connection_waits_its_idle_timeout_then_closes() -> None:
    with served(dataclasses.replace(LIMITS, idle_timeout_s=0.3)) as server:
        sock = connect(server.server_address[1], HONEST)
        sock.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).endswith(b"/a")
        assert closed_by_server(sock, within_s=5)


def test_a_half_sent_next_request_on_a_kept_connection_holds_no_worker_and_meets_the_head_deadline() -> None:
    """A worker may wait on a kept connection for its next request (the keep-alive fast path);
    a request that arrives in part goes back to the loop, whose head deadline ends it."""
    limits = dataclasses.replace(LIMITS, workers=2, header_timeout_s=0.3)
    with served(limits) as server:
        port = server.server_address[1]
        kept = connect(port, HONEST)
        kept.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
        assert kept.recv(65536).endswith(b"/first")
        kept.sendall(b"GET /second HTTP/1.1\r\n")  # and nothing more
        others = [get(port, f"/o{i}", timeout_s=2) for i in range(4)]
        assert others == [(200, f"/o{i}".encode()) for i in range(4)]
        assert closed_by_server(kept, within_s=5)
        assert server.counts["timed_out"] == 1
