"""The webhook's decider: answers the HTTPS front (``webfront/``, Go) over a Unix socket.

The front terminates TLS, keeps the connection caps and deadlines, and forwards each request as
one frame (path, body); the decider answers (status, flags, body). Frames (big-endian):

    request: id u32 | path length u16 | body length u32 | path | body
    answer:  id u32 | status u16 | flags u8 | body length u32 | body

One thread per front connection (the front keeps one) reads frames and answers each in line on
the watch caches: a decision is CPU under the GIL, so more threads would only take turns. Only a
denial, decided again on a fresh read of the cluster (``admission/fresh.py``, which waits on the
API server), goes to a small pool, so a burst of denials never holds up the allowed requests
behind it; answers carry their id and may come out of order. Besides reviews, the front asks
``/healthz``, ``/readyz`` (this process's readiness) and ``tls`` (the serving certificate and key,
as PEM, from the certificate source; a path no HTTP request can have, as those start with "/").

The socket lives in a directory only this user can enter, made mode 0700 here.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)

REQUEST_HEAD = struct.Struct(">IHI")
ANSWER_HEAD = struct.Struct(">IHBI")
FLAG_CLOSE = 1  # the front closes the client's connection after this answer (draining)
FLAG_TEXT = 2  # a probe's text/plain answer
CERT_PATH = "tls"
CONFIRM_THREADS = 4  # fresh reads are single-flight (admission/fresh.py): a few threads suffice
MAX_FRAME_BODY = 16 * 1024 * 1024  # above the front's body cap (8 MiB): a bigger frame is a bug

Decide = Callable[[str, bytes], tuple[int, dict[str, Any]]]


class DeciderApp:
    """What the decider asks of the webhook (``admission.server.WebhookApp`` plus the server's
    readiness, draining flag and certificate source)."""

    def __init__(self, decide_cached: Decide, needs_confirming: Callable[[int, dict[str, Any]], bool],
                 confirm: Callable[[str, bytes, float, int, dict[str, Any]], tuple[int, dict[str, Any]]],
                 readiness: Callable[[], tuple[bool, str]], draining: threading.Event,
                 serving_pem: Callable[[], bytes],
                 observers: list[Callable[[bool, float], None]]) -> None:
        self.decide_cached = decide_cached
        self.needs_confirming = needs_confirming
        self.confirm = confirm
        self.readiness = readiness
        self.draining = draining
        self.serving_pem = serving_pem
        self.observers = observers


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        data = sock.recv(min(size - len(chunks), 1 << 20))
        if not data:
            return None
        chunks += data
    return bytes(chunks)


class Decider:
    def __init__(self, path: Path, app: DeciderApp) -> None:
        self.path = Path(path)
        self.app = app
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        if self.path.exists():
            self.path.unlink()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._listener.listen(8)
        self._pool = ThreadPoolExecutor(CONFIRM_THREADS, thread_name_prefix="webhook-confirm")
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._accept, name="webhook-decider-accept", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="webhook-decider", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        send_lock = threading.Lock()

        def send(ident: int, status: int, flags: int, body: bytes) -> None:
            with send_lock:
                conn.sendall(ANSWER_HEAD.pack(ident, status, flags, len(body)) + body)

        try:
            while True:
                head = _read_exact(conn, REQUEST_HEAD.size)
                if head is None:
                    return
                ident, path_len, body_len = REQUEST_HEAD.unpack(head)
                if body_len > MAX_FRAME_BODY:
                    log.error("the front sent a frame of %d bytes; closing its connection", body_len)
                    return
                rest = _read_exact(conn, path_len + body_len)
                if rest is None:
                    return
                self._one(ident, rest[:path_len].decode("latin-1"), rest[path_len:], send)
        except OSError as exc:
            log.debug("the front's connection ended: %s", exc)
        finally:
            conn.close()

    def _one(self, ident: int, path: str, raw: bytes, send: Callable[[int, int, int, bytes], None]) -> None:
        if path == "/healthz":
            send(ident, 200, FLAG_TEXT, b"ok")
            return
        if path == "/readyz":
            ready, why = self.app.readiness()
            send(ident, 200 if ready else 503, FLAG_TEXT, why.encode())
            return
        if path == CERT_PATH:
            pem = self.app.serving_pem()
            send(ident, 200 if pem else 503, FLAG_TEXT, pem)
            return
        path = path.split("?", 1)[0]
        arrived = time.monotonic()
        started = time.perf_counter()
        status, body = self.app.decide_cached(path, raw)
        if not self.app.needs_confirming(status, body):
            self._answer(ident, status, body, started, send)
            return

        def confirm() -> None:
            try:
                code, answer = self.app.confirm(path, raw, arrived, status, body)
                self._answer(ident, code, answer, started, send)
            except Exception:  # never leave the front waiting: the cached denial stands
                log.exception("confirming a denial failed; answering from the watch cache")
                self._answer(ident, status, body, started, send)

        self._pool.submit(confirm)

    def _answer(self, ident: int, status: int, body: dict[str, Any], started: float,
                send: Callable[[int, int, int, bytes], None]) -> None:
        allowed = bool((body.get("response") or {}).get("allowed"))
        for observe in self.app.observers:  # (allowed, seconds): the latency metric
            observe(allowed, time.perf_counter() - started)
        flags = FLAG_CLOSE if self.app.draining.is_set() else 0
        try:
            send(ident, status, flags, orjson.dumps(body))
        except OSError as exc:
            log.debug("the front's connection ended before an answer: %s", exc)
