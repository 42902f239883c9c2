"""The webhook's HTTPS shell under hostile clients (issue 30 item 3): every request is answered
with an AdmissionReview, and idle or slow clients cannot keep an honest review from being
answered. The real server (TLS, the webhook's limits) on loopback."""

from __future__ import annotations

import dataclasses
import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from admission import server
from admission.server import WebhookApp, WebhookHTTPServer, webhook_limits
from scheduler.http.limits import WEBHOOK_CAPS, ConnectionLimits
from tests.unit.http.hostile import (
    ATTACKER,
    HONEST,
    closed_by_server,
    idle_sockets,
    post_review,
    serving_context,
    wait_until,
)


def _serve(limits: ConnectionLimits | None, tls_dir: Path | None) -> tuple[WebhookHTTPServer, Path | None]:
    ctx, ca = serving_context(tls_dir) if tls_dir is not None else (None, None)
    httpd = WebhookHTTPServer(("127.0.0.1", 0), WebhookApp(None), ctx, limits)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd, ca


@pytest.fixture
def webhook() -> Iterator[WebhookHTTPServer]:
    httpd, _ = _serve(None, None)
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def tls_webhook(tmp_path: Path) -> Iterator[tuple[WebhookHTTPServer, Path]]:
    """The webhook as deployed: HTTPS with its default limits."""
    httpd, ca = _serve(None, tmp_path)
    assert ca is not None
    yield httpd, ca
    httpd.shutdown()
    httpd.server_close()


def post(httpd: WebhookHTTPServer, body: bytes, path: str = "/validate-batch-v1-job") -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", httpd.server_address[1], timeout=10)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_a_50000_deep_body_is_answered_not_dropped(webhook: WebhookHTTPServer) -> None:
    code, out = post(webhook, b"[" * 50_000 + b"]" * 50_000)
    assert code == 400 and out["kind"] == "AdmissionReview"
    assert "nests deeper than 100 levels" in out["response"]["status"]["message"]


def test_an_unknown_path_is_answered_with_the_paths_served(webhook: WebhookHTTPServer) -> None:
    review = {"kind": "AdmissionReview", "request": {"uid": "u1", "operation": "CREATE", "object": {}}}
    code, out = post(webhook, json.dumps(review).encode(), "/nope")
    assert code == 400 and out["response"]["uid"] == "u1" and "unknown path" in out["response"]["status"]["message"]


def test_an_oversized_body_is_refused_with_413(webhook: WebhookHTTPServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", webhook.server_address[1], timeout=10)
    try:
        conn.putrequest("POST", "/validate-batch-v1-job")
        conn.putheader("Content-Length", str(server.MAX_BODY + 1))
        conn.endheaders()
        resp = conn.getresponse()
        out = json.loads(resp.read())
    finally:
        conn.close()
    assert resp.status == 413 and "limit is" in out["response"]["status"]["message"]


@pytest.mark.parametrize("attacker", [ATTACKER, HONEST], ids=["another-address", "the-same-address"])
def test_1000_idle_sockets_do_not_delay_an_honest_review(tls_webhook: tuple[WebhookHTTPServer, Path],
                                                         attacker: str) -> None:
    """Issue 30: idle TCP connections (no TLS byte) took all 64 slots and the API server's reviews
    got 503s or closed connections. Now they hold no thread, and an address over its limit loses
    its own least recently active connections: the honest review is answered within 1 s."""
    httpd, ca = tls_webhook
    with idle_sockets(httpd.server_address[1], 1000, attacker):
        assert wait_until(lambda: httpd.open_connections >= min(1000, WEBHOOK_CAPS.per_client))
        code, out = post_review(httpd.server_address[1], ca, "honest-1", timeout_s=1.0)
        assert code == 200 and out["response"]["uid"] == "honest-1" and out["response"]["allowed"] is True
        # the per-client cap holds the attacker to 256 connections, well below the 1,024 in all
        assert httpd.connections_of(attacker) <= WEBHOOK_CAPS.per_client


def test_a_socket_silent_before_tls_is_closed_at_the_handshake_deadline(tmp_path: Path) -> None:
    limits = dataclasses.replace(webhook_limits(), handshake_timeout_s=0.3)
    httpd, ca = _serve(limits, tmp_path)
    try:
        with idle_sockets(httpd.server_address[1], 20) as socks:
            assert all(closed_by_server(sock, within_s=5) for sock in socks)
        code, _ = post_review(httpd.server_address[1], ca, "after", timeout_s=5)
        assert code == 200
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_half_sent_heads_and_a_trickled_body_hold_no_worker_and_are_cut_at_their_deadline(tmp_path: Path) -> None:
    """Slow loris: 300 heads that never end and a body sent a byte at a time. The workers stay
    free for the honest review, and the slow ones are closed at the head and body deadlines."""
    limits = dataclasses.replace(webhook_limits(), header_timeout_s=0.5, body_timeout_s=0.5)
    httpd, _ = _serve(limits, None)
    port = httpd.server_address[1]
    threads_before = threading.active_count()
    try:
        head = b"POST /validate-batch-v1-job HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        with idle_sockets(port, 300, first_bytes=head) as half_sent, \
                idle_sockets(port, 1, first_bytes=head + b"Content-Length: 1000\r\n\r\n{") as (trickle,):
            trickle.sendall(b'"')
            code, out = post_review(port, None, "honest-2", timeout_s=1.0)
            assert code == 200 and out["response"]["uid"] == "honest-2"
            assert threading.active_count() <= threads_before + 2
            assert closed_by_server(trickle, within_s=5)
            assert all(closed_by_server(sock, within_s=5) for sock in half_sent)
    finally:
        httpd.shutdown()
        httpd.server_close()
