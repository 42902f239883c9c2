"""The gRPC front's relay (scheduler/api/front.py, relay.py) in front of a plain TCP echo server:
bytes arrive whole and in order both ways, a client's EOF reaches the server, a slow reader is
waited for without losing bytes, and gRPC's view of a relayed peer maps back to the client."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from scheduler.api.front import BoundedFront
from scheduler.http.loop import client_host
from tests.unit.http.hostile import ATTACKER, closed_by_server, connect, wait_until


class Echo:
    """Echoes each connection until EOF, then closes it; remembers each peer's port."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self.sock.getsockname()
        self.peer_ports: list[int] = []
        self.eofs = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            self.peer_ports.append(peer[1])
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(1 << 16):
                conn.sendall(data)
            self.eofs += 1


@pytest.fixture
def front() -> Iterator[tuple[BoundedFront, Echo]]:
    echo = Echo()
    front = BoundedFront(("127.0.0.1", 0), max_connections=8, max_per_client=4, first_bytes_timeout_s=5,
                         idle_timeout_s=30)
    front.upstream = echo.address
    front.start()
    try:
        yield front, echo
    finally:
        front.close()
        echo.sock.close()


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def test_megabytes_both_ways_arrive_whole_while_the_client_reads_slowly(front: tuple[BoundedFront, Echo]) -> None:
    """32 MiB sent before a byte is read back: every buffer on the way fills, the relay holds
    what the next socket does not take and stops reading until it is sent, and so the sender
    waits (nothing is dropped, nothing piles up in the relay)."""
    bound, _ = front
    data = os.urandom(32 << 20)
    sock = connect(bound.port)
    sender = threading.Thread(target=sock.sendall, args=(data,))
    sender.start()
    sender.join(0.5)
    assert sender.is_alive(), "the relay read on while nobody read its output"
    got = _read_exactly(sock, len(data))
    sender.join(10)
    assert got == data
    sock.close()


def test_the_clients_eof_reaches_the_server_and_the_slot_is_freed(front: tuple[BoundedFront, Echo]) -> None:
    bound, echo = front
    sock = connect(bound.port)
    sock.sendall(b"last words")
    sock.shutdown(socket.SHUT_WR)
    assert _read_exactly(sock, 10) == b"last words"
    assert closed_by_server(sock, within_s=5)  # the echo answered, closed, and the relay passed it on
    assert wait_until(lambda: echo.eofs == 1 and bound.open_connections == 0)


def test_grpcs_view_of_a_relayed_peer_names_the_client(front: tuple[BoundedFront, Echo]) -> None:
    bound, echo = front
    sock = connect(bound.port, ATTACKER)
    sock.sendall(b"x")
    assert _read_exactly(sock, 1) == b"x"
    port = echo.peer_ports[0]
    assert bound.client_of(f"ipv4:127.0.0.1:{port}") == ATTACKER
    assert bound.client_of(f"ipv4:127.0.0.1:{port + 1}") is None  # not a connection of the front
    assert bound.client_of(f"ipv4:10.0.0.5:{port}") is None
    sock.close()
    assert wait_until(lambda: bound.client_of(f"ipv4:127.0.0.1:{port}") is None)


def test_no_upstream_connection_before_the_first_bytes(front: tuple[BoundedFront, Echo]) -> None:
    bound, echo = front
    socks = [connect(bound.port) for _ in range(3)]
    assert wait_until(lambda: bound.open_connections == 3)
    assert echo.peer_ports == []
    for sock in socks:
        sock.close()
    assert wait_until(lambda: bound.open_connections == 0)


@pytest.mark.parametrize("host, counted", [("::ffff:10.1.2.3", "10.1.2.3"), ("::1", "::1"), ("10.1.2.3", "10.1.2.3")])
def test_an_ipv4_client_of_a_dual_stack_listener_is_counted_by_its_ipv4_address(host: str, counted: str) -> None:
    assert client_host(host) == counted
