"""The gRPC port's own accept loop: connections counted per client address and in total before
gRPC sees them (issue 30).

gRPC's C core can bound connections only in total, so one client could hold all of them. The
front listens on the public port instead; gRPC listens on a private loopback port only this
process connects to. One loop thread (selectors, non-blocking) accepts, admits a connection
within the per-address and total caps (``scheduler/http/slots.py``, the HTTP servers' rule: over
a cap, the least recently active connection of the same address gives way, at the total cap one
of the address holding the most), waits for its first bytes (the TLS ClientHello or the HTTP/2
preface) until a deadline, and only then connects it to gRPC and relays bytes both ways
(``scheduler/api/relay.py``) until either side closes or no byte moved for the idle timeout. A
silent socket so costs a file descriptor, never a gRPC connection.

The relay does not terminate TLS: client certificates and tokens are checked by gRPC as before.
gRPC sees every connection as coming from the loopback port the front connected from;
:meth:`BoundedFront.client_of` turns that back into the client's address for the per-client
call limit.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time

from scheduler.api.relay import Phase, Relay, Side
from scheduler.http.loop import Notices, Waker, accept_within, listening_socket
from scheduler.http.slots import Slots

log = logging.getLogger(__name__)

# One read. A TLS record is 16 KiB; a large answer moves in a few reads per turn. Also the most
# a connection keeps in memory per direction when its reader is slow (the rest stays in the kernel).
BUFFER_BYTES = 64 * 1024
SWEEP_EVERY_S = 0.1
_LISTENER, _WAKER = "listener", "waker"


class BoundedFront:
    """``serve_forever`` runs the loop (``start`` in a thread); ``close`` stops it and closes the
    listener and every connection. ``upstream`` is where gRPC listens (set before ``start``)."""

    def __init__(self, address: tuple[str, int], *, max_connections: int, max_per_client: int,
                 first_bytes_timeout_s: float, idle_timeout_s: float, name: str = "grpc-front") -> None:
        self.socket = listening_socket(address)
        self.port: int = self.socket.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.first_bytes_timeout_s = first_bytes_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.name = name
        self._slots: Slots[Relay] = Slots(max_connections, max_per_client)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.socket, selectors.EVENT_READ, _LISTENER)
        self._waker = Waker()
        self._selector.register(self._waker.reader, selectors.EVENT_READ, _WAKER)
        self._buf = bytearray(BUFFER_BYTES)
        self._clients: dict[int, str] = {}  # our local port towards gRPC -> the client's address
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._thread: threading.Thread | None = None
        self._notice = Notices(log, name)
        self.counts = {"evicted": 0, "refused": 0, "timed_out": 0}

    @property
    def open_connections(self) -> int:
        return self._slots.count

    def connections_of(self, client: str) -> int:
        return self._slots.held_by(client)

    def client_of(self, peer: str) -> str | None:
        """The client address behind gRPC's ``context.peer()`` (``ipv4:127.0.0.1:PORT``) of a
        connection the front relays, or None for any other peer. Called from gRPC's threads: a
        dict read, which the GIL keeps whole."""
        host, _, port = peer.rpartition(":")
        if host != "ipv4:127.0.0.1" or not port.isdigit():
            return None
        return self._clients.get(int(port))

    # ------------------------------------------------------------------ the loop
    def start(self) -> BoundedFront:
        assert self.upstream is not None, "set upstream (where gRPC listens) before start"
        self._stopped.clear()
        self._thread = threading.Thread(target=self.serve_forever, name=self.name, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        next_sweep = 0.0
        try:
            while not self._stop.is_set():
                for key, mask in self._selector.select(SWEEP_EVERY_S):
                    if key.data is _LISTENER:
                        self._accept()
                    elif key.data is _WAKER:
                        self._waker.drain()
                    else:
                        relay, side = key.data
                        self._step(relay, side, mask)
                now = time.monotonic()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + SWEEP_EVERY_S
        finally:
            self._stopped.set()

    def close(self) -> None:
        self._stop.set()
        self._waker.wake()
        if self._thread is not None:
            self._stopped.wait()
        for relay in self._slots.all():
            self._close(relay)
        self.socket.close()
        self._waker.close()
        self._selector.close()

    def _accept(self) -> None:
        for sock, peer, client in accept_within(self.socket, self._slots, self.counts, self._notice, self._close):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            now = time.monotonic()
            relay = Relay(sock, peer, client, now, now + self.first_bytes_timeout_s)
            self._slots.add(relay)
            self._watch(relay)

    def _step(self, relay: Relay, side: Side, mask: int) -> None:
        """``side``'s socket of ``relay`` is ready: send what waits for it, read what it has."""
        try:
            moved = 0
            if mask & selectors.EVENT_WRITE:
                relay.flush(side)
            if mask & selectors.EVENT_READ:
                moved = relay.pump(side, self._buf)
            if relay.phase is Phase.FIRST_BYTES:
                if Side.CLIENT in relay.finished:  # closed before saying anything
                    self._close(relay)
                    return
                if not moved:
                    return
                assert self.upstream is not None
                relay.connect(self.upstream)
                self._clients[relay.upstream_port] = relay.client
            if relay.done:
                self._close(relay)
                return
            if moved:
                relay.last_active = time.monotonic()
                self._slots.touch(relay)
            self._watch(relay)
        except OSError as exc:  # a reset, a refused connection to gRPC (stopping)
            log.debug("%r ended: %s", relay, exc)
            self._close(relay)

    def _sweep(self, now: float) -> None:
        for relay in self._slots.all():
            if relay.phase is Phase.FIRST_BYTES:
                if now >= relay.deadline:
                    self.counts["timed_out"] += 1
                    log.debug("%r: no first bytes within %.1f s, closed", relay, self.first_bytes_timeout_s)
                    self._close(relay)
            elif now - relay.last_active >= self.idle_timeout_s:
                self.counts["timed_out"] += 1
                log.debug("%r: no byte either way for %.0f s, closed", relay, self.idle_timeout_s)
                self._close(relay)

    # ------------------------------------------------------------------ plumbing
    def _watch(self, relay: Relay) -> None:
        for side, sock in relay.socks.items():
            events = relay.wanted(side)
            if events == relay.events[side]:
                continue
            if not events:
                self._selector.unregister(sock)
            elif relay.events[side]:
                self._selector.modify(sock, events, (relay, side))
            else:
                self._selector.register(sock, events, (relay, side))
            relay.events[side] = events

    def _close(self, relay: Relay) -> None:
        for side, sock in relay.socks.items():
            if relay.events[side]:
                try:
                    self._selector.unregister(sock)
                except (KeyError, ValueError):
                    pass
                relay.events[side] = 0
        self._clients.pop(relay.upstream_port, None)
        self._slots.remove(relay)
        relay.close()

