"""The webhook's decider (admission/decider.py): the frames the Go front sends it, answered in
one thread, with a denial's fresh re-read on a pool (issue 42)."""

from __future__ import annotations

import json
import socket
import stat
import threading
from pathlib import Path
from typing import Any

import orjson

from admission.decider import ANSWER_HEAD, FLAG_CLOSE, FLAG_TEXT, REQUEST_HEAD, Decider, DeciderApp


def _app(confirm_gate: threading.Event, draining: threading.Event) -> DeciderApp:
    def decide_cached(path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        return 200, {"response": {"uid": json.loads(raw)["uid"], "allowed": path != "/deny"}}

    def confirm(path: str, raw: bytes, arrived: float, status: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        confirm_gate.wait(10)  # the fresh list of the cluster, waiting on the API server
        return status, body

    return DeciderApp(decide_cached, lambda status, body: not body["response"]["allowed"], confirm,
                      lambda: (True, "ok"), draining, lambda: b"PEM", [])


def _ask(sock: socket.socket, ident: int, path: str, body: bytes = b"") -> None:
    sock.sendall(REQUEST_HEAD.pack(ident, len(path), len(body)) + path.encode() + body)


def _answer(sock: socket.socket) -> tuple[int, int, int, bytes]:
    head = b""
    while len(head) < ANSWER_HEAD.size:
        head += sock.recv(ANSWER_HEAD.size - len(head))
    ident, status, flags, size = ANSWER_HEAD.unpack(head)
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    return ident, status, flags, body


def _start(tmp_path: Path, gate: threading.Event, draining: threading.Event) -> tuple[Decider, socket.socket]:
    decider = Decider(tmp_path / "d" / "decider.sock", _app(gate, draining))
    decider.start()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(decider.path))
    return decider, sock


def test_the_socket_is_private_to_the_user(tmp_path: Path) -> None:
    decider = Decider(tmp_path / "d" / "decider.sock", _app(threading.Event(), threading.Event()))
    try:
        assert stat.S_IMODE(decider.path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(decider.path.stat().st_mode) == 0o600
    finally:
        decider.stop()


def test_a_denial_being_confirmed_does_not_hold_up_the_next_review(tmp_path: Path) -> None:
    gate = threading.Event()
    decider, sock = _start(tmp_path, gate, threading.Event())
    try:
        _ask(sock, 1, "/deny", b'{"uid":"a"}')
        _ask(sock, 2, "/validate", b'{"uid":"b"}')
        ident, status, flags, body = _answer(sock)  # the allowed one first: the denial still waits
        assert (ident, status, flags) == (2, 200, 0) and orjson.loads(body)["response"]["uid"] == "b"
        gate.set()
        ident, status, _, body = _answer(sock)
        assert ident == 1 and orjson.loads(body)["response"] == {"uid": "a", "allowed": False}
    finally:
        gate.set()
        sock.close()
        decider.stop()


def test_probes_certificate_and_draining(tmp_path: Path) -> None:
    draining = threading.Event()
    decider, sock = _start(tmp_path, threading.Event(), draining)
    try:
        _ask(sock, 7, "/readyz")
        assert _answer(sock) == (7, 200, FLAG_TEXT, b"ok")
        _ask(sock, 8, "tls")
        assert _answer(sock) == (8, 200, FLAG_TEXT, b"PEM")
        draining.set()
        _ask(sock, 9, "/validate", b'{"uid":"c"}')
        assert _answer(sock)[:3] == (9, 200, FLAG_CLOSE)  # the front closes that connection after it
    finally:
        sock.close()
        decider.stop()
