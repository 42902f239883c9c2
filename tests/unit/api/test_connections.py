"""The gRPC server's connection and call bounds (issue 30): a silent connection is dropped at
the handshake deadline, connections past the total are closed at once, and one client address
cannot hold every worker thread with streams."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from scheduler.api.engine import StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc
from scheduler.api.limits import GrpcLimits, client_address
from scheduler.api.server import ApiServer, serve
from tests.unit.http.hostile import closed_by_server, wait_until

from .conftest import snapshot

TOKEN = [("authorization", "Bearer t0ken")]


@pytest.fixture
def dual_stack() -> Iterator[ApiServer]:
    """Listening on every address (so 127.0.0.1 and ::1 are two clients), hence with a token,
    4 workers and 2 calls per client."""
    srv = serve(StaticEngine(snapshot()), bind="::", port=0, max_workers=4, token="t0ken",
                limits=GrpcLimits(calls_per_client=2))
    try:
        yield srv
    finally:
        srv.stop(0.5)


def _stub(target: str) -> Any:
    return placement_pb2_grpc.PlacementStub(grpc.insecure_channel(target))


def test_one_client_cannot_hold_every_worker_with_streams(dual_stack: ApiServer) -> None:
    """Four WatchDecisions streams used to hold all four workers, and everyone's Place waited."""
    greedy = _stub(f"127.0.0.1:{dual_stack.port}")
    streams = [greedy.WatchDecisions(pb.WatchDecisionsRequest(), metadata=TOKEN, timeout=10) for _ in range(4)]
    try:
        assert wait_until(lambda: sum(s.done() for s in streams) == 2)  # two were refused, whichever came last
        refused = [s for s in streams if s.done()]
        assert all(s.code() == grpc.StatusCode.RESOURCE_EXHAUSTED for s in refused)
        assert "per-client limit" in refused[0].details()
        assert dual_stack.calls.running("127.0.0.1") == 2
        honest = _stub(f"[::1]:{dual_stack.port}")
        answer = honest.GetTopology(pb.GetTopologyRequest(), metadata=TOKEN, timeout=5)
        assert len(answer.nodes) > 0
    finally:
        for stream in streams:
            stream.cancel()
    assert wait_until(lambda: dual_stack.calls.running("127.0.0.1") == 0), "a cancelled stream stayed counted"


def test_a_connection_that_never_speaks_is_dropped_at_the_handshake_deadline() -> None:
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0, limits=GrpcLimits(handshake_timeout_ms=300))
    try:
        silent = socket.create_connection(("127.0.0.1", srv.port))
        started = time.monotonic()
        assert closed_by_server(silent, within_s=10) and time.monotonic() - started < 5
    finally:
        srv.stop(0.5)


def test_connections_past_the_total_are_closed_at_once() -> None:
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0, limits=GrpcLimits(max_connections=3))
    try:
        held = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(3)]
        extra = socket.create_connection(("127.0.0.1", srv.port))
        assert closed_by_server(extra, within_s=5)
        for sock in held:
            sock.close()
    finally:
        srv.stop(0.5)


@pytest.mark.parametrize("peer, address", [("ipv4:10.0.0.5:41234", "10.0.0.5"), ("ipv6:[::1]:5000", "::1"),
                                           ("ipv6:[fe80::1%eth0]:80", "fe80::1%eth0"), ("unix:/tmp/s", "unix:/tmp/s")])
def test_client_address_of_a_peer(peer: str, address: str) -> None:
    assert client_address(peer) == address
