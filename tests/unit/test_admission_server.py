"""The webhook's HTTP shell under hostile clients: every request is answered with an
AdmissionReview, and idle connections cannot grow the thread count without bound."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from admission import server
from admission.server import WebhookApp, WebhookHTTPServer


@pytest.fixture
def webhook(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookHTTPServer]:
    monkeypatch.setattr(server, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(server, "REFUSERS", 1)
    httpd = WebhookHTTPServer(("127.0.0.1", 0), WebhookApp(None), None)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
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


def test_connections_over_the_limit_get_a_503_review(webhook: WebhookHTTPServer) -> None:
    idle = [socket.create_connection(("127.0.0.1", webhook.server_address[1])) for _ in range(4)]
    try:
        deadline = threading.Event()
        for _ in range(50):  # the accept loop hands the idle sockets their slots
            if webhook._slots._value == 0:  # noqa: SLF001 - observing the bound is the point
                break
            deadline.wait(0.05)
        before = threading.active_count()
        code, out = post(webhook, b"{}")
        assert code == 503 and out["kind"] == "AdmissionReview"
        assert "limit of 4 connections" in out["response"]["status"]["message"]
        assert threading.active_count() <= before + 1
    finally:
        for sock in idle:
            sock.close()


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
