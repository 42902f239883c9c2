"""A ThreadingHTTPServer with a bounded number of connection threads.

One thread serves one keep-alive connection, so without a bound, idle or slow clients grow the
thread count without limit. At most ``max_connections`` connections are served; one over the
limit is answered by one of a few short-lived refuser threads (HTTP 503 with a body that says
why, then closed), and when those are busy too it is closed at once. Used by the extender
(plain HTTP on loopback) and the webhook (TLS: it overrides :meth:`BoundedHTTPServer.wrap`, so
the handshake runs in the connection's own thread, inside its slot).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

REFUSE_TIMEOUT_S = 5


class Refuser(BaseHTTPRequestHandler):
    """Answers one request on a connection over the limit: 503 with :meth:`body` (the protocol's
    own error answer, saying why), then closes. Subclasses say what the body is."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("refused %s " + format, self.address_string(), *args)

    def body(self) -> bytes:
        raise NotImplementedError

    def _refuse(self) -> None:
        body = self.body()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    do_GET = do_POST = _refuse  # noqa: N815


class BoundedHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 refuser: type[BaseHTTPRequestHandler], *, max_connections: int, refusers: int = 4,
                 idle_timeout_s: float = 90) -> None:
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self._refuser = refuser
        self._slots = threading.BoundedSemaphore(max_connections)
        self._refusers = threading.BoundedSemaphore(refusers)
        self._open = 0
        self._open_lock = threading.Lock()
        super().__init__(address, handler)

    @property
    def open_connections(self) -> int:
        return self._open

    def crowded(self) -> bool:
        """More than half the slots taken: handlers close keep-alive connections after answering."""
        return self._open > self.max_connections // 2

    def process_request(self, request: Any, client_address: Any) -> None:
        if self._slots.acquire(blocking=False):
            with self._open_lock:
                self._open += 1
            self._spawn(self._serve, request, client_address)
        elif self._refusers.acquire(blocking=False):
            self._spawn(self._refuse, request, client_address)
        else:
            log.warning("connection from %s closed: %d connections open and every refuser busy",
                        client_address, self.max_connections)
            self.shutdown_request(request)

    @staticmethod
    def _spawn(target: Callable[[Any, Any], None], request: Any, client_address: Any) -> None:
        threading.Thread(target=target, args=(request, client_address), daemon=True).start()

    def wrap(self, request: Any, client_address: Any) -> Any | None:
        """The socket to speak HTTP on (a subclass does the TLS handshake here); None = give up."""
        return request

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(self.idle_timeout_s)
            self.process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open -= 1
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        sock = self.wrap(request, client_address)
        if sock is None:
            return
        try:
            super().finish_request(sock, client_address)
        finally:
            if sock is not request:
                _close(sock)

    def _refuse(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(REFUSE_TIMEOUT_S)
            sock = self.wrap(request, client_address)
            if sock is not None:
                try:
                    self._refuser(sock, client_address, self)
                except OSError:
                    pass
                finally:
                    if sock is not request:
                        _close(sock)
        finally:
            self.shutdown_request(request)
            self._refusers.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


def _close(sock: Any) -> None:
    try:
        sock.close()
    except OSError:
        pass
