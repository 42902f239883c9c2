"""One client connection of a :class:`~scheduler.http.bounded.BoundedHTTPServer`: its phase,
deadline and buffers, non-blocking TLS handshake, reads and writes, and the framing of the
request being received (where its head ends, how long its body is).

A connection is touched by one thread at a time: the serving loop, or the worker it was handed
to with a complete request (``BUSY``)."""

from __future__ import annotations

import enum
import re
import socket
import ssl
from dataclasses import dataclass

from scheduler.http.loop import client_host

# Reads per readiness event (a TLS read returns one record, at most 16 KiB): a large body
# arrives over several loop turns, so one client sending megabytes does not hold up the others.
READ_CHUNK = 256 * 1024
READS_PER_EVENT = 16

_HEAD_END = re.compile(rb"\r?\n\r?\n")
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def head_too_large(limit: int) -> bytes:
    body = f"the request head is longer than {limit} bytes\n".encode()
    return (b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


class Phase(enum.Enum):
    HANDSHAKE = "handshake"  # TLS handshake under way
    WAITING = "waiting"      # no byte of the next request yet (a new or a keep-alive connection)
    HEAD = "head"            # part of a request head received
    BODY = "body"            # head received, body not complete
    BUSY = "busy"            # the request is with a worker
    WRITING = "writing"      # the answer is partly sent; the rest waits for the client to read


# A connection in these phases may be closed to make room: nobody is answering it.
EVICTABLE = frozenset({Phase.HANDSHAKE, Phase.WAITING, Phase.HEAD, Phase.BODY})


@dataclass(frozen=True)
class Head:
    """Where a request's head ends and how many body bytes follow it. ``unframed``: the body's
    length cannot be known (chunked, a bad or conflicting Content-Length, over the body limit),
    so the handler gets the head alone, answers, and the connection is closed."""

    end: int
    body: int
    unframed: bool
    expect_continue: bool


def find_head(buf: bytes | bytearray, max_body: int) -> Head | None:
    """The framing of the request at the start of ``buf``, or None while its head is incomplete."""
    match = _HEAD_END.search(buf)
    if match is None:
        return None
    end = match.end()
    lengths: set[bytes] = set()
    chunked = expect = False
    for line in bytes(buf[:match.start()]).split(b"\n")[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        key = name.strip().lower()
        if key == b"content-length":
            lengths.add(value.strip())
        elif key == b"transfer-encoding":
            chunked = True
        elif key == b"expect":
            expect = value.strip().lower() == b"100-continue"
    if chunked or len(lengths) > 1:
        return Head(end, 0, True, False)
    if not lengths:
        return Head(end, 0, False, False)
    value = lengths.pop()
    if not value.isdigit() or int(value) > max_body:
        return Head(end, 0, True, False)
    return Head(end, int(value), False, expect and int(value) > 0)


class Connection:
    def __init__(self, sock: socket.socket, peer: tuple[str, int], now: float, deadline: float) -> None:
        self.sock = sock
        self.peer = peer
        self.client = client_host(peer[0])  # as the slots counted it at the accept
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.phase = Phase.HANDSHAKE if self.tls else Phase.WAITING
        self.deadline = deadline
        self.last_active = now
        self.buf = bytearray()
        self.head: Head | None = None
        self.out = memoryview(b"")
        self.close_after = False
        self.broken = False
        self.closed = False
        self.want_write = False  # the socket must become writable before the pending step can go on
        self.events = 0  # what the loop's selector waits for on this socket (0: not registered)

    def __repr__(self) -> str:
        return f"<connection from {self.peer[0]}:{self.peer[1]} {self.phase.value}>"

    @property
    def evictable(self) -> bool:
        return self.phase in EVICTABLE

    def handshake(self) -> bool:
        """One step of the server-side TLS handshake: True when done (raises when it failed)."""
        assert isinstance(self.sock, ssl.SSLSocket)
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            self.want_write = False
            return False
        except ssl.SSLWantWriteError:
            self.want_write = True
            return False
        self.want_write = False
        return True

    def receive(self) -> bool:
        """Append what the socket has to ``buf``; False when the client closed (or broke) it."""
        for _ in range(READS_PER_EVENT):
            try:
                data = self.sock.recv(READ_CHUNK)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                self.want_write = False
                return True
            except ssl.SSLWantWriteError:
                self.want_write = True
                return True
            except OSError:
                return False
            if not data:
                return False
            self.buf += data
        # Not all read: the rest is in the kernel's buffer (a TLS read takes whole records, so
        # OpenSSL holds none back), where the selector sees it.
        return True

    def send_pending(self) -> bool:
        """Send what ``out`` holds without blocking: True when all of it is sent. A partial TLS
        write is retried with the same bytes, as OpenSSL requires. Raises OSError."""
        while self.out:
            try:
                sent = self.sock.send(self.out)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
                self.want_write = True
                return False
            except ssl.SSLWantReadError:
                self.want_write = False
                return False
            self.out = self.out[sent:]
        self.want_write = False
        return True

    def take(self, head: Head) -> bytes:
        """The complete request ``head`` frames, out of ``buf`` (what follows stays: pipelined)."""
        size = head.end + head.body
        request = bytes(self.buf[:size])
        if head.unframed:
            self.buf.clear()  # what follows a head without a known body length cannot be a request
        else:
            del self.buf[:size]
        return request

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
