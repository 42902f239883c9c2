"""The gRPC server's connection and call bounds (issue 30): connections are counted per client
address and in total by the front (scheduler/api/front.py) before gRPC sees them, a silent one is
closed at the first-bytes deadline and a quiet one at the idle timeout, and one client address
cannot hold every worker thread with streams. The "attacker" binds 127.0.0.2 as its source
address (tests/unit/http/hostile.py); honest calls come from 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from admission.certs import CertManager
from scheduler.api.engine import StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc
from scheduler.api.limits import GrpcLimits, client_address
from scheduler.api.server import ApiServer, TlsConfig, serve
from tests.unit.http.hostile import ATTACKER, HONEST, closed_by_server, connect, idle_sockets, wait_until

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


@pytest.fixture
def bounded() -> Iterator[ApiServer]:
    """8 connections in all, 4 per client address."""
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0,
                limits=GrpcLimits(max_connections=8, max_connections_per_client=4))
    try:
        yield srv
    finally:
        srv.stop(0.5)


def _honest_call(port: int, timeout_s: float) -> int:
    """One GetTopology on a new channel from 127.0.0.1 (gRPC's first connection attempt
    included); raises grpc.RpcError past ``timeout_s``."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = placement_pb2_grpc.PlacementStub(channel)
        return len(stub.GetTopology(pb.GetTopologyRequest(), timeout=timeout_s).nodes)
    finally:
        channel.close()


def test_an_address_over_its_cap_of_idle_connections_cannot_stop_another_address(bounded: ApiServer) -> None:
    """gRPC alone counted connections only in total: 8 idle sockets took every one of them for
    the handshake deadline, and an honest call from another address was closed at once."""
    with idle_sockets(bounded.port, 12) as socks:
        assert wait_until(lambda: bounded.front.connections_of(ATTACKER) == 4)
        assert _honest_call(bounded.port, timeout_s=1.0) > 0
        assert all(closed_by_server(sock, within_s=2) for sock in socks[:8])  # the least recently active gave way
        assert bounded.front.connections_of(ATTACKER) == 4


@pytest.mark.parametrize("source", [ATTACKER, HONEST], ids=["another-address", "the-same-address"])
def test_1000_idle_sockets_do_not_delay_an_honest_call(source: str) -> None:
    """With the default limits: gRPC alone held 512 of them until the handshake deadline (5 s)."""
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0)
    try:
        with idle_sockets(srv.port, 1000, source):
            assert _honest_call(srv.port, timeout_s=1.0) > 0
            assert srv.front.connections_of(source) <= GrpcLimits().max_connections_per_client
    finally:
        srv.stop(0.5)


def test_the_total_cap_holds_and_the_address_holding_most_gives_way() -> None:
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0,
                limits=GrpcLimits(max_connections=4, max_connections_per_client=3))
    try:
        with idle_sockets(srv.port, 3, "127.0.0.3") as most, idle_sockets(srv.port, 1, "127.0.0.4") as one, \
                idle_sockets(srv.port, 2, "127.0.0.5") as late:
            assert wait_until(lambda: srv.front.open_connections == 4)
            # 127.0.0.5's two took the places of two of 127.0.0.3's three (the oldest first)
            assert closed_by_server(most[0], within_s=2) and closed_by_server(most[1], within_s=2)
            assert not closed_by_server(one[0], within_s=0.2)
            assert [srv.front.connections_of(a) for a in ("127.0.0.3", "127.0.0.4", "127.0.0.5")] == [1, 1, 2]
            assert _honest_call(srv.port, timeout_s=1.0) > 0
            assert srv.front.open_connections <= 4
            assert late
    finally:
        srv.stop(0.5)


def test_a_silent_socket_is_closed_at_the_first_bytes_deadline_without_reaching_grpc() -> None:
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0, limits=GrpcLimits(first_bytes_timeout_ms=300))
    try:
        silent = connect(srv.port)
        assert srv.front.client_of("ipv4:127.0.0.1:1") is None
        assert closed_by_server(silent, within_s=3)
        assert srv.front.counts["timed_out"] == 1 and srv.front.open_connections == 0
    finally:
        srv.stop(0.5)


def test_a_handshake_that_stalls_after_its_first_bytes_is_closed_by_grpc() -> None:
    """Behind the front, gRPC's own handshake deadline still applies."""
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0, limits=GrpcLimits(handshake_timeout_ms=300))
    try:
        stalled = connect(srv.port)
        stalled.sendall(b"PRI * HTTP/2.0\r\n")  # half the HTTP/2 preface
        assert closed_by_server(stalled, within_s=3)
        assert wait_until(lambda: srv.front.open_connections == 0)
    finally:
        srv.stop(0.5)


@pytest.fixture
def tls(tmp_path: Path) -> tuple[TlsConfig, bytes]:
    """A serving certificate for 127.0.0.1 and the CA that verifies it."""
    certs = CertManager(tmp_path, ["localhost"], ["127.0.0.1"], ca_validity=dt.timedelta(days=2),
                        cert_validity=dt.timedelta(days=1))
    certs.ensure()
    return TlsConfig(certs.cert_file, certs.key_file), certs.ca_bundle_file.read_bytes()


def test_a_relayed_connection_quiet_past_the_idle_timeout_is_closed(tls: tuple[TlsConfig, bytes]) -> None:
    """A TLS record header promising a ClientHello that never comes: gRPC would wait for its
    handshake deadline (a minute here); the front closes it when nothing moved for 0.4 s."""
    quick = GrpcLimits(idle_timeout_ms=400, keepalive_time_ms=100, keepalive_timeout_ms=100,
                       max_connection_idle_ms=100, handshake_timeout_ms=60_000)
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0, tls=tls[0], limits=quick)
    try:
        quiet = connect(srv.port)
        quiet.sendall(b"\x16\x03\x01\x02\x00")
        assert closed_by_server(quiet, within_s=5)
        assert srv.front.counts["timed_out"] == 1 and srv.front.open_connections == 0
    finally:
        srv.stop(0.5)


def test_tls_and_a_token_work_through_the_front(tls: tuple[TlsConfig, bytes]) -> None:
    """TLS ends in gRPC, not in the front: the client verifies gRPC's certificate, and gRPC
    checks the token, behind the per-address caps."""
    srv = serve(StaticEngine(snapshot()), bind="127.0.0.1", port=0, tls=tls[0], token="t0ken")
    try:
        channel = grpc.secure_channel(f"127.0.0.1:{srv.port}", grpc.ssl_channel_credentials(root_certificates=tls[1]))
        stub = placement_pb2_grpc.PlacementStub(channel)
        assert len(stub.GetTopology(pb.GetTopologyRequest(), metadata=TOKEN, timeout=5).nodes) > 0
        assert srv.front.connections_of(HONEST) == 1
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetTopology(pb.GetTopologyRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        channel.close()
    finally:
        srv.stop(0.5)


def test_a_stream_outlives_the_idle_timeout_on_keepalive_pings() -> None:
    """gRPC pings a connection with a call at keepalive_time, so a WatchDecisions stream with
    nothing to say is never cut by the front's idle timeout."""
    quick = GrpcLimits(idle_timeout_ms=600, keepalive_time_ms=200, keepalive_timeout_ms=200,
                       max_connection_idle_ms=200, min_ping_interval_ms=50)
    engine = StaticEngine(snapshot())
    srv = serve(engine, bind="127.0.0.1", port=0, limits=quick)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{srv.port}")
        stream = placement_pb2_grpc.PlacementStub(channel).WatchDecisions(pb.WatchDecisionsRequest(), timeout=10)
        assert wait_until(lambda: engine.hub.subscriber_count() == 1)
        time.sleep(2.0)  # over three idle timeouts without a decision
        engine.hub.publish("admitted", {"metadata": {"namespace": "team-a", "name": "w"},
                                        "status": {"admission": {"clusterQueue": "cq"}}}, {})
        assert next(stream).workload == "w"
        assert srv.front.counts["timed_out"] == 0
        stream.cancel()
        channel.close()
    finally:
        srv.stop(0.5)


@pytest.mark.parametrize("peer, address", [("ipv4:10.0.0.5:41234", "10.0.0.5"), ("ipv6:[::1]:5000", "::1"),
                                           ("ipv6:[fe80::1%eth0]:80", "fe80::1%eth0"), ("unix:/tmp/s", "unix:/tmp/s")])
def test_client_address_of_a_peer(peer: str, address: str) -> None:
    assert client_address(peer) == address
