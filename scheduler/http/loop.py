"""What a one-thread serving loop needs besides its connections: a listening socket that takes a
burst of connects, a way for other threads to wake it, and warnings that cannot flood the log.
Shared by the bounded HTTP server (``scheduler/http/bounded.py``) and the gRPC front
(``scheduler/api/front.py``)."""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from scheduler.http.slots import C, Slots

ACCEPTS_PER_TURN = 64
LISTEN_BACKLOG = 1024  # a burst of connects must not overflow the queue (a lost SYN waits 1 s)
NOTICE_EVERY_S = 10.0  # at most one warning per kind of refusal in this many seconds


def listening_socket(address: tuple[str, int]) -> socket.socket:
    """A non-blocking TCP listener on ``address`` (an IPv6 address, ``::`` included, listens
    dual-stack as Linux does by default). Raises OSError when the address cannot be bound."""
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class Waker:
    """Wakes the serving loop from another thread (a worker handing a connection back, shutdown)."""

    def __init__(self) -> None:
        self.reader, self._writer = socket.socketpair()
        self.reader.setblocking(False)
        self._writer.setblocking(False)

    def wake(self) -> None:
        try:
            self._writer.send(b"\0")
        except OSError:
            pass  # a wake-up is already pending (or the server is closed)

    def drain(self) -> None:
        try:
            while self.reader.recv(4096):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self.reader.close()
        self._writer.close()


class Notices:
    """Warnings at most every NOTICE_EVERY_S per kind; the rest at debug level (an attacker's
    ten thousand refused connections are one line every ten seconds)."""

    def __init__(self, log: logging.Logger, name: str) -> None:
        self._log = log
        self._name = name
        self._last: dict[str, float] = {}

    def __call__(self, kind: str, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last.get(kind, -NOTICE_EVERY_S) >= NOTICE_EVERY_S:
            self._last[kind] = now
            self._log.warning("%s: " + message, self._name, *args)
        else:
            self._log.debug("%s: " + message, self._name, *args)


def client_host(host: str) -> str:
    """The client address as counted: an IPv4 client of a dual-stack listener (``::ffff:a.b.c.d``)
    is ``a.b.c.d``, as gRPC names it (so one client is one address on either stack)."""
    if host.startswith("::ffff:"):
        try:
            mapped = ipaddress.IPv6Address(host).ipv4_mapped
        except ValueError:
            return host
        if mapped is not None:
            return str(mapped)
    return host


def accept_within(listener: socket.socket, slots: Slots[C], counts: dict[str, int], notice: Notices,
                  close: Callable[[C], None]) -> Iterator[tuple[socket.socket, tuple[str, int], str]]:
    """Up to ACCEPTS_PER_TURN waiting connections, each admitted within ``slots``: one over a cap is
    closed at once ("refused"), or the connection that gives way for it is closed with ``close``
    ("evicted"); yields the admitted socket (still blocking), its peer and its client address, for
    the caller to set up and add to ``slots``."""
    for _ in range(ACCEPTS_PER_TURN):
        try:
            sock, peer = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # out of file descriptors, ...: the loop goes on
            notice("accept", "cannot accept a connection: %s", exc)
            return
        client = client_host(peer[0])
        decision = slots.admission(client)
        if not decision.admit:
            counts["refused"] += 1
            notice("refused", "closed a new connection from %s: %s", client, decision.reason)
            sock.close()
            continue
        if decision.evict is not None:
            counts["evicted"] += 1
            notice(f"evicted:{decision.reason}", "closed the least recently active connection from %s "
                   "to make room (%s)", decision.evict.client, decision.reason)
            close(decision.evict)
        yield sock, peer, client
