"""Bounds on the work one gRPC call can make the engine do, on the connections and calls one
client may hold, and the refusal to serve unprotected.

The API shares its process (and its two or so cores) with the admission cycle: a call that
solves for a minute or simulates a million jobs delays every admission, and with 16 worker
threads a handful of such calls starve the controller. Each bound below is checked before any
work starts and refused with the limit named, so a client learns the rule from the first error.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from scheduler.http.limits import GRPC_CAPS, is_loopback
from scheduler.sim.trace import Trace

# Place/Explain: CP-SAT gives its best answer within the budget; past a few seconds it rarely
# improves a placement (docs/placement.md), while each second holds a worker thread and a core
# the admission cycle needs. 10 s is 100x the default budget.
MAX_TIME_BUDGET_MS = 10_000
# Simulate: the budget is spent per placement, once per admission attempt of every job, so it is
# bounded far tighter than a single Place.
MAX_SIMULATE_TIME_BUDGET_MS = 1_000
# Simulate sizes. The simulator's work grows with jobs x nodes per cycle; 5,000 jobs on 2,000
# nodes (a large HyperPod cluster's day) simulate in minutes here. Bigger studies belong to
# `toposched simulate` on a machine of their own, not to the controller's process.
MAX_SIMULATE_JOBS = 5_000
MAX_SIMULATE_FAILURES = 5_000
MAX_SIMULATE_NODES = 2_000
# Simulated time: 30 days covers any trace worth replaying through the API; a longer horizon or
# a job submitted/running later is almost always a unit mistake (milliseconds given as seconds).
MAX_SIMULATE_SECONDS = 30 * 24 * 3600.0


class LimitExceeded(Exception):
    """A request over one of the bounds; ``code`` is the gRPC status to answer with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def effective_budget_ms(requested_ms: float, default_ms: float, deadline_left_s: float | None,
                        reserve_s: float) -> int:
    """The budget a Place call runs with: the request's (or the default), shortened by the call
    deadline. Refused when the work would exceed MAX_TIME_BUDGET_MS: a budget above the cap is
    accepted only under a deadline that already keeps the work below it."""
    budget_ms = float(requested_ms or default_ms)
    if deadline_left_s is not None:
        budget_ms = min(budget_ms, max(0.0, deadline_left_s - reserve_s) * 1000)
    if budget_ms > MAX_TIME_BUDGET_MS:
        raise LimitExceeded(grpc.StatusCode.INVALID_ARGUMENT,
                            f"time_budget_ms: at most {MAX_TIME_BUDGET_MS} ({MAX_TIME_BUDGET_MS // 1000} s, the "
                            f"longest one call may hold a solver in the controller's process), got "
                            f"{int(requested_ms)}; ask for less or set a shorter call deadline")
    return int(budget_ms)


def explain_budget_s(engine_budget_s: float, deadline_left_s: float | None, reserve_s: float) -> float:
    """Explain has no budget field: the engine's (--time-budget-ms), capped like Place's."""
    budget_s = min(engine_budget_s, MAX_TIME_BUDGET_MS / 1000)
    if deadline_left_s is not None:
        budget_s = min(budget_s, max(0.0, deadline_left_s - reserve_s))
    return budget_s


def check_simulate_request(time_budget_ms: int, horizon_s: float) -> None:
    if time_budget_ms > MAX_SIMULATE_TIME_BUDGET_MS:
        raise LimitExceeded(grpc.StatusCode.INVALID_ARGUMENT,
                            f"time_budget_ms: at most {MAX_SIMULATE_TIME_BUDGET_MS} per placement in Simulate "
                            f"(it is spent once per admission attempt of every job), got {time_budget_ms}")
    if horizon_s > MAX_SIMULATE_SECONDS:
        raise LimitExceeded(grpc.StatusCode.INVALID_ARGUMENT,
                            f"horizon_s: at most {MAX_SIMULATE_SECONDS:.0f} simulated seconds (30 days), "
                            f"got {horizon_s:g}")


def check_simulate_sizes(node_count: int, trace: Trace) -> None:
    for field, count, limit in (("cluster", node_count, MAX_SIMULATE_NODES), ("trace.jobs", len(trace.jobs),
                                                                           MAX_SIMULATE_JOBS),
                                ("trace.failures", len(trace.failures), MAX_SIMULATE_FAILURES)):
        if count > limit:
            noun = "nodes" if field == "cluster" else "entries"
            raise LimitExceeded(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"{field}: at most {limit} {noun} per Simulate call, got {count}; run larger "
                                "studies with `toposched simulate` outside the controller")
    times = [(f"jobs[{i}].{name}", value) for i, job in enumerate(trace.jobs)
             for name, value in (("at", job.at), ("duration", job.duration))]
    times += [(f"failures[{i}].at", failure.at) for i, failure in enumerate(trace.failures)]
    for field, seconds in times:
        if seconds > MAX_SIMULATE_SECONDS:
            raise LimitExceeded(grpc.StatusCode.INVALID_ARGUMENT,
                                f"trace.{field}: at most {MAX_SIMULATE_SECONDS:.0f} simulated seconds (30 days), "
                                f"got {seconds:g}")


def unprotected_bind_error(bind: str, tls: bool, token: bool) -> str | None:
    """The one line refusing to serve the engine on a non-loopback address in the clear and
    without a token (anyone who reaches it could read every workload and load the solver), or None."""
    if is_loopback(bind) or tls or token:
        return None
    return (f"refusing to serve the gRPC API on {bind} without TLS or a token: add --grpc-tls-cert FILE "
            "--grpc-tls-key FILE (and --grpc-client-ca FILE for mTLS) and/or --grpc-token-file FILE, or bind "
            "loopback with --grpc-bind 127.0.0.1 (--grpc-port 0 turns the API off)")


# ---------------------------------------------------------------------------- connections, calls

@dataclass(frozen=True)
class GrpcLimits:
    """What the gRPC server allows its clients (issue 30). Connections are admitted by our own
    accept loop in front of gRPC (``scheduler/api/front.py``), per client address and in total,
    and must send their first bytes within ``first_bytes_timeout_ms``; a relayed connection
    that moves no byte for ``idle_timeout_ms`` is closed. gRPC's C core then bounds the handshake
    and keeps live connections talking (keepalive pings on connections with calls, GOAWAY to a
    connection without one), so the idle timeout never cuts a healthy connection. A call holds
    a worker thread while it runs (a WatchDecisions stream for as long as it is open), so calls
    are bounded per client address too."""

    max_connections: int = GRPC_CAPS.total  # in all; over it, the busiest address's least active one gives way
    max_connections_per_client: int = GRPC_CAPS.per_client  # per address; over it, its least active one
    first_bytes_timeout_ms: int = 5_000    # from the accept to the first byte (the TLS ClientHello, HTTP/2 preface)
    idle_timeout_ms: int = 90_000          # no byte either way for this long: closed by the front
    handshake_timeout_ms: int = 5_000      # the TLS handshake and HTTP/2 settings (gRPC's default: 120 s)
    max_connection_idle_ms: int = 60_000   # a connection without a call for 1 min gets GOAWAY
    max_concurrent_streams: int = 16       # calls at once on one connection
    keepalive_time_ms: int = 60_000        # ping a peer that holds calls, to find dead ones...
    keepalive_timeout_ms: int = 20_000     # ...and drop it when the ping goes unanswered this long
    min_ping_interval_ms: int = 30_000     # a client pinging more often than this...
    max_ping_strikes: int = 2              # ...this many times is disconnected (ping flood)
    max_receive_bytes: int = 4 * 1024 * 1024  # gRPC's default, made explicit: a request's documents
    max_send_bytes: int = 64 * 1024 * 1024    # a GetTopology of every node of a large cluster fits
    calls_per_client: int | None = None    # None: a quarter of the workers, at least 2

    def __post_init__(self) -> None:
        if not 1 <= self.max_connections_per_client <= self.max_connections:
            raise ValueError(f"max_connections_per_client must be between 1 and max_connections "
                             f"({self.max_connections}), got {self.max_connections_per_client}")
        quiet = max(self.keepalive_time_ms + self.keepalive_timeout_ms, self.max_connection_idle_ms)
        if self.idle_timeout_ms <= quiet:
            raise ValueError(f"idle_timeout_ms ({self.idle_timeout_ms}) must exceed the longest a healthy "
                             f"connection stays quiet ({quiet} ms: keepalive, or the GOAWAY of an idle one)")

    def options(self) -> list[tuple[str, int]]:
        return [
            # Only the front connects to gRPC's private port; twice the front's cap leaves room for
            # connections the front closed that gRPC has not noticed yet.
            ("grpc.max_allowed_incoming_connections", 2 * self.max_connections),
            ("grpc.so_reuseport", 0),  # nobody else may bind the private port next to gRPC
            ("grpc.server_handshake_timeout_ms", self.handshake_timeout_ms),
            ("grpc.max_connection_idle_ms", self.max_connection_idle_ms),
            ("grpc.max_concurrent_streams", self.max_concurrent_streams),
            ("grpc.keepalive_time_ms", self.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", self.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.http2.min_ping_interval_without_data_ms", self.min_ping_interval_ms),
            ("grpc.http2.max_ping_strikes", self.max_ping_strikes),
            ("grpc.max_receive_message_length", self.max_receive_bytes),
            ("grpc.max_send_message_length", self.max_send_bytes),
        ]

    def per_client(self, workers: int) -> int:
        return self.calls_per_client if self.calls_per_client is not None else max(2, workers // 4)


_PEER_HOST = re.compile(r"^(?:ipv4:|ipv6:)?\[?(?P<host>[^\]]*?)\]?(?::\d+)?$")


def client_address(peer: str) -> str:
    """``ipv4:10.0.0.5:41234`` -> ``10.0.0.5``; ``ipv6:[::1]:5000`` -> ``::1``; other forms whole."""
    if peer.startswith(("ipv4:", "ipv6:")):
        match = _PEER_HOST.match(peer)
        if match:
            return match.group("host")
    return peer


class CallsPerClient(grpc.ServerInterceptor):  # type: ignore[misc]
    """At most ``limit`` calls running per client address; one more is RESOURCE_EXHAUSTED at
    once, naming the limit, so one client cannot hold every worker thread (e.g. with
    WatchDecisions streams). The health service is exempt (probes). ``relayed_client`` names
    the client behind a connection the front relays (gRPC sees the front's loopback port)."""

    def __init__(self, limit: int, exempt_prefixes: tuple[str, ...] = ("/grpc.health.v1.Health/",),
                 relayed_client: Callable[[str], str | None] = lambda _peer: None) -> None:
        self.limit = limit
        self._exempt = exempt_prefixes
        self._relayed_client = relayed_client
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}

    def running(self, client: str) -> int:
        with self._lock:
            return self._running.get(client, 0)

    def _enter(self, client: str) -> bool:
        with self._lock:
            if self._running.get(client, 0) >= self.limit:
                return False
            self._running[client] = self._running.get(client, 0) + 1
            return True

    def _leave(self, client: str) -> None:
        with self._lock:
            left = self._running.get(client, 0) - 1
            if left > 0:
                self._running[client] = left
            else:
                self._running.pop(client, None)

    def _admit(self, context: grpc.ServicerContext) -> Callable[[], None]:
        """Count the call in (or abort it); the returned function counts it out, once."""
        peer = context.peer()
        client = self._relayed_client(peer) or client_address(peer)
        if not self._enter(client):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"{self.limit} calls from {client} are running (the per-client limit); retry when one "
                          "ends")
        done = threading.Event()

        def leave() -> None:
            if not done.is_set():
                done.set()
                self._leave(client)

        if not context.add_callback(leave):  # the call already ended
            leave()
        return leave

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
                          handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(self._exempt):
            return handler
        if handler.response_streaming:
            inner_stream = handler.stream_stream if handler.request_streaming else handler.unary_stream

            def stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                leave = self._admit(context)
                try:
                    yield from inner_stream(request, context)
                finally:
                    leave()

            factory = (grpc.stream_stream_rpc_method_handler if handler.request_streaming
                       else grpc.unary_stream_rpc_method_handler)
            return factory(stream, handler.request_deserializer, handler.response_serializer)
        inner_unary = handler.stream_unary if handler.request_streaming else handler.unary_unary

        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            leave = self._admit(context)
            try:
                return inner_unary(request, context)
            finally:
                leave()

        factory = (grpc.stream_unary_rpc_method_handler if handler.request_streaming
                   else grpc.unary_unary_rpc_method_handler)
        return factory(unary, handler.request_deserializer, handler.response_serializer)
