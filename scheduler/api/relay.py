"""One connection through the gRPC front (``scheduler/api/front.py``): the client's socket and,
once the client has sent its first bytes, a socket to the gRPC server's private endpoint; the
bytes each side has sent that the other has not taken yet; which side has finished sending.

The relay moves bytes, never looks at them: TLS and HTTP/2 stay end to end between the client
and gRPC. A read fills the loop's one large buffer (``recv_into``, no allocation) and is sent on
at once; only what the other socket does not take is copied, and then the relay stops reading
from that side until it is sent (the kernel's buffers push back on the sender). Touched by the
front's loop thread only."""

from __future__ import annotations

import enum
import errno
import selectors
import socket

READS_PER_EVENT = 4  # then the loop serves other connections; the rest waits in the kernel


class Phase(enum.Enum):
    FIRST_BYTES = "first-bytes"  # accepted; nothing received yet, no connection to gRPC
    RELAYING = "relaying"


class Side(enum.Enum):
    CLIENT = "client"
    SERVER = "server"


class Relay:
    def __init__(self, client_sock: socket.socket, peer: tuple[str, int], client: str, now: float,
                 deadline: float) -> None:
        self.socks: dict[Side, socket.socket] = {Side.CLIENT: client_sock}
        self.peer = peer
        self.client = client  # the address the slots count by
        self.phase = Phase.FIRST_BYTES
        self.deadline = deadline  # for the first bytes; then last_active + the idle timeout
        self.last_active = now
        self.pending: dict[Side, memoryview] = {Side.CLIENT: memoryview(b""), Side.SERVER: memoryview(b"")}
        self.finished: set[Side] = set()  # sides that sent EOF (their bytes are all read)
        self.events: dict[Side, int] = {Side.CLIENT: 0, Side.SERVER: 0}
        self.upstream_port = 0  # the local port of our connection to gRPC: how gRPC names this client
        self.closed = False

    def __repr__(self) -> str:
        return f"<relay from {self.peer[0]}:{self.peer[1]} {self.phase.value}>"

    @property
    def evictable(self) -> bool:
        """Any relayed connection may give way (least recently active first): its calls are out
        of sight, inside TLS, so "nobody is answering it" cannot be known; a silent one (no first
        bytes) is the least recently active of its address by construction."""
        return True

    def connect(self, upstream: tuple[str, int]) -> None:
        """Start connecting to the gRPC server (without blocking: the first bytes wait in
        ``pending`` until the socket is writable). Raises OSError."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            err = sock.connect_ex(upstream)
            if err not in (0, errno.EINPROGRESS):
                raise OSError(err, f"cannot connect to the gRPC server: {errno.errorcode.get(err, err)}")
            self.upstream_port = sock.getsockname()[1]
        except OSError:
            sock.close()
            raise
        self.socks[Side.SERVER] = sock
        self.phase = Phase.RELAYING

    def pump(self, source: Side, buf: bytearray) -> int:
        """Read what ``source`` has and send it on to the other side, without blocking; returns
        the number of bytes read. Raises OSError when either socket broke."""
        view = memoryview(buf)
        src = self.socks[source]
        dest = _other(source)
        moved = 0
        for _ in range(READS_PER_EVENT):
            try:
                n = src.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                self.finished.add(source)
                self._end_if_sent(dest)
                break
            moved += n
            if dest not in self.socks:  # the first bytes: gRPC is not connected yet
                self.pending[dest] = memoryview(bytes(view[:n]))
                break
            sent = _send(self.socks[dest], view[:n])
            if sent < n:
                self.pending[dest] = memoryview(bytes(view[sent:n]))
                break
        return moved

    def flush(self, dest: Side) -> bool:
        """Send what waits for ``dest``; True when all of it went. Raises OSError."""
        out = self.pending[dest]
        while out:
            sent = _send(self.socks[dest], out)
            if not sent:
                break
            out = out[sent:]
        self.pending[dest] = out
        if not out:
            self._end_if_sent(dest)
        return not out

    def wanted(self, side: Side) -> int:
        """The events the loop should wait for on ``side``'s socket: readable while what it sent
        has been passed on (and it has not finished), writable while bytes wait for it."""
        if side not in self.socks:
            return 0
        events = 0
        if side not in self.finished and not self.pending[_other(side)]:
            events |= selectors.EVENT_READ
        if self.pending[side]:
            events |= selectors.EVENT_WRITE
        return events

    @property
    def done(self) -> bool:
        """gRPC closed and everything it sent reached the client. (gRPC never half-closes: after
        its EOF nothing the client sends would be read. A client's EOF is passed on to gRPC,
        which then closes.)"""
        return Side.SERVER in self.finished and not self.pending[Side.CLIENT]

    def _end_if_sent(self, dest: Side) -> None:
        """The other side of ``dest`` finished and all its bytes reached ``dest``: pass the EOF on."""
        if _other(dest) in self.finished and not self.pending[dest] and dest in self.socks:
            try:
                self.socks[dest].shutdown(socket.SHUT_WR)
            except OSError:
                pass  # already gone: the loop sees it on the next read

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for sock in self.socks.values():
            try:
                sock.close()
            except OSError:
                pass


def _other(side: Side) -> Side:
    return Side.SERVER if side is Side.CLIENT else Side.CLIENT


def _send(sock: socket.socket, data: memoryview) -> int:
    try:
        return sock.send(data)
    except (BlockingIOError, InterruptedError):
        return 0
