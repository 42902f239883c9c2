"""An HTTP/1.1 server whose idle and slow clients cannot starve the others (issue 30).

One loop thread owns every connection that is not being answered: it accepts, runs the TLS
handshake without blocking, and reads until a whole request (head and body) has arrived. Only
then does a worker thread get it: the handler (a ``BaseHTTPRequestHandler``, see
:class:`BufferedHandler`) reads the request from memory and writes its answer to memory, the
worker sends what the socket takes at once and the loop sends the rest
(``scheduler/http/workers.py``, with its keep-alive fast path). So an idle socket, a
half-sent head, a trickled body or a client that does not read its answer costs a file
descriptor and a little memory, never a thread, and each phase has a deadline
(:class:`~scheduler.http.limits.ConnectionLimits`). Connections are counted per client address
and in total (:class:`~scheduler.http.slots.Slots`): over a limit, the least recently active
connection nobody is answering gives way (of the same address first), so a client holding many
idle connections loses them before an honest client is refused.

Used by the webhook (TLS), the extender (plain on loopback, or mTLS), and the health, metrics and
request-metrics ports.
"""

from __future__ import annotations

import io
import logging
import queue
import selectors
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler

from scheduler.http.connection import CONTINUE, Connection, Head, Phase, find_head, head_too_large
from scheduler.http.limits import ConnectionLimits
from scheduler.http.loop import Notices, Waker, accept_within, listening_socket
from scheduler.http.slots import Slots
from scheduler.http.workers import Workers

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 0.05
_LISTENER, _WAKER = "listener", "waker"
INTERNAL_ERROR = (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


class Exchange:
    """What a :class:`BufferedHandler` is constructed with: the connection's socket (for the
    peer certificate) and the bytes of one complete request."""

    def __init__(self, sock: socket.socket, data: bytes) -> None:
        self.sock = sock
        self.data = data


class BufferedHandler(BaseHTTPRequestHandler):
    """A request handler that reads one complete request from memory and writes its answer to
    memory; the server moves the bytes. ``close_connection`` says whether the connection ends
    after this answer."""

    protocol_version = "HTTP/1.1"
    server: BoundedHTTPServer  # type: ignore[assignment]  # not a socketserver: the bounded loop
    request: Exchange
    rfile: io.BytesIO
    wfile: io.BytesIO

    def setup(self) -> None:
        self.close_connection = True  # until the request line says otherwise
        self.connection = self.request.sock
        self.rfile = io.BytesIO(self.request.data)
        self.wfile = io.BytesIO()

    def handle(self) -> None:
        self.handle_one_request()

    def finish(self) -> None:
        pass

    def handle_expect_100(self) -> bool:
        return True  # the serving loop sent "100 Continue" before it read the body


class BoundedHTTPServer:
    """``serve_forever`` runs the loop; ``shutdown`` stops it (from another thread) and
    ``server_close`` closes the listener, every connection and the workers."""

    def __init__(self, address: tuple[str, int], handler: type[BufferedHandler], *, limits: ConnectionLimits,
                 ssl_context: ssl.SSLContext | None = None, name: str = "http") -> None:
        self.RequestHandlerClass = handler
        self.limits = limits
        self.ssl_context = ssl_context
        self.name = name
        self.socket = listening_socket(address)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self._slots: Slots[Connection] = Slots(limits.max_connections, limits.max_per_client)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.socket, selectors.EVENT_READ, _LISTENER)
        self._waker = Waker()
        self._selector.register(self._waker.reader, selectors.EVENT_READ, _WAKER)
        self._returned: queue.SimpleQueue[Connection] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._notice = Notices(log, name)
        self.counts = {"evicted": 0, "refused": 0, "timed_out": 0}
        self._workers = Workers(limits.workers, self.answer, self._give_back, self._stop, limits.max_body_bytes, name)

    @property
    def open_connections(self) -> int:
        return self._slots.count

    def connections_of(self, client: str) -> int:
        return self._slots.held_by(client)

    # ------------------------------------------------------------------ the loop
    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopped.clear()
        next_sweep = 0.0
        try:
            while not self._stop.is_set():
                for key, _mask in self._selector.select(min(poll_interval, SWEEP_EVERY_S)):
                    if key.data is _LISTENER:
                        self._accept()
                    elif key.data is _WAKER:
                        self._waker.drain()
                    else:
                        self._step(key.data)
                self._take_returned()
                now = time.monotonic()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + SWEEP_EVERY_S
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        self._stop.set()
        self._waker.wake()
        self._stopped.wait()

    def server_close(self) -> None:
        self._stop.set()
        self._stopped.wait()
        for conn in self._slots.all():
            self._close(conn)
        self._workers.stop()
        self.socket.close()
        self._waker.close()
        self._selector.close()

    def _accept(self) -> None:
        for sock, peer, _ in accept_within(self.socket, self._slots, self.counts, self._notice, self._close):
            self._admit(sock, peer)

    def _admit(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # the head and body of answers go at once
        now = time.monotonic()
        if self.ssl_context is not None:
            try:
                sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            except (OSError, ValueError) as exc:
                log.debug("TLS with %s failed to start: %s", peer, exc)
                sock.close()
                return
            deadline = now + self.limits.handshake_timeout_s
        else:
            deadline = now + self.limits.header_timeout_s
        conn = Connection(sock, peer, now, deadline)
        self._slots.add(conn)
        self._watch(conn, selectors.EVENT_READ)

    def _step(self, conn: Connection) -> None:
        """The socket of ``conn`` is ready: take the step its phase waits for."""
        try:
            if conn.phase is Phase.WRITING:
                if conn.send_pending():
                    self._answered(conn)
                else:
                    self._wait(conn)
                return
            if conn.phase is Phase.HANDSHAKE:
                if not conn.handshake():
                    self._wait(conn)
                    return
                if not self.accept_peer(conn):
                    self._close(conn)
                    return
                conn.phase = Phase.WAITING
                conn.deadline = time.monotonic() + self.limits.header_timeout_s
            if not conn.receive():
                self._close(conn)
                return
            self._slots.touch(conn)
            conn.last_active = time.monotonic()
            self._advance(conn)
        except (OSError, ValueError, AttributeError) as exc:  # a failed handshake, a reset connection
            log.debug("%r ended: %s", conn, exc)
            self._close(conn)

    def accept_peer(self, conn: Connection) -> bool:
        """After the TLS handshake: may this peer be served? (A subclass checks its certificate.)"""
        return True

    def _advance(self, conn: Connection) -> None:
        """Move ``conn`` on by what its buffer holds: a complete request goes to a worker."""
        now = time.monotonic()
        if conn.phase is Phase.WAITING:
            if not conn.buf:
                self._wait(conn)
                return
            conn.phase = Phase.HEAD
            conn.deadline = min(conn.deadline, now + self.limits.header_timeout_s)
        if conn.phase is Phase.HEAD:
            head = find_head(conn.buf[:self.limits.max_head_bytes + 4], self.limits.max_body_bytes)
            if head is None:
                if len(conn.buf) > self.limits.max_head_bytes:
                    self._reply_and_close(conn, head_too_large(self.limits.max_head_bytes))
                else:
                    self._wait(conn)
                return
            conn.head = head
            conn.phase = Phase.BODY
            conn.deadline = now + self.limits.body_timeout_s
            if head.expect_continue:  # before the final answer, even when the body came with the head
                conn.out = memoryview(CONTINUE)
                if not conn.send_pending():
                    self._close(conn)  # a 100 Continue the socket cannot take: give up on this client
                    return
        head = conn.head
        assert head is not None
        if len(conn.buf) < head.end + head.body:
            if len(conn.buf) > head.end + head.body + self.limits.max_head_bytes:
                self._close(conn)
            else:
                self._wait(conn)
            return
        self._dispatch(conn, head)

    def _dispatch(self, conn: Connection, head: Head) -> None:
        request = conn.take(head)
        conn.phase = Phase.BUSY
        conn.head = None
        self._unwatch(conn)
        self._workers.submit(conn, request, head.unframed)

    def _reply_and_close(self, conn: Connection, answer: bytes) -> None:
        conn.out = memoryview(answer)
        conn.close_after = True
        conn.phase = Phase.WRITING
        conn.deadline = time.monotonic() + self.limits.write_timeout_s
        self._step(conn)

    def _answered(self, conn: Connection) -> None:
        """The whole answer is sent: close, or wait for the next request (maybe already here)."""
        if conn.close_after:
            self._close(conn)
            return
        conn.phase = Phase.WAITING
        conn.deadline = time.monotonic() + self.limits.idle_timeout_s
        self._advance(conn)

    def _take_returned(self) -> None:
        while True:
            try:
                conn = self._returned.get_nowait()
            except queue.Empty:
                return
            if conn.closed:
                continue
            self._slots.touch(conn)
            if conn.broken:
                self._close(conn)
            elif conn.out:
                conn.phase = Phase.WRITING
                conn.deadline = time.monotonic() + self.limits.write_timeout_s
                self._wait(conn)
            else:
                self._answered(conn)

    def _sweep(self, now: float) -> None:
        for conn in self._slots.all():
            if conn.phase is not Phase.BUSY and now >= conn.deadline:
                if conn.phase is not Phase.WAITING or conn.buf:
                    self.counts["timed_out"] += 1
                log.debug("%r: past its deadline, closed", conn)
                self._close(conn)

    # ------------------------------------------------------------------ workers
    def _give_back(self, conn: Connection) -> None:
        """A worker is done with ``conn`` (called in the worker's thread)."""
        self._returned.put(conn)
        self._waker.wake()

    def answer(self, conn: Connection, request: bytes) -> tuple[bytes, bool]:
        """The handler's answer to one complete request, and whether to close after it."""
        try:
            handler = self.RequestHandlerClass(Exchange(conn.sock, request), conn.peer, self)  # type: ignore[arg-type]
        except Exception:  # a bug in a handler: answer 500 and close, never take the loop down
            log.exception("%s: the handler failed on a request from %s", self.name, conn.client)
            return INTERNAL_ERROR, True
        data = handler.wfile.getvalue()
        return (data or INTERNAL_ERROR), bool(handler.close_connection) or not data

    # ------------------------------------------------------------------ plumbing
    def _wait(self, conn: Connection) -> None:
        """Wait for what the connection's next step needs (TLS may need to write to read on)."""
        self._watch(conn, selectors.EVENT_WRITE if conn.want_write else selectors.EVENT_READ)

    def _watch(self, conn: Connection, events: int) -> None:
        if conn.closed or conn.events == events:
            return
        if conn.events:
            self._selector.modify(conn.sock, events, conn)
        else:
            self._selector.register(conn.sock, events, conn)
        conn.events = events

    def _unwatch(self, conn: Connection) -> None:
        if conn.events:
            self._selector.unregister(conn.sock)
            conn.events = 0

    def _close(self, conn: Connection) -> None:
        if conn.events:
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            conn.events = 0
        self._slots.remove(conn)
        conn.close()


def serve_in_thread(server: BoundedHTTPServer, poll_interval: float = 0.5,
                    name: str | None = None) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval},
                              name=name or server.name, daemon=True)
    thread.start()
    return thread

