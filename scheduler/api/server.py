"""The gRPC server: ``toposched.v1.Placement`` + ``grpc.health.v1.Health`` (+ reflection).

Started by ``toposched controller --grpc-port N`` on the controller's engine (one engine,
several doors), or by tests/benchmarks on a :class:`~scheduler.api.engine.StaticEngine`.
Loopback only unless ``bind`` says otherwise; TLS with an optional client CA (mTLS) and/or a
bearer token checked by :class:`BearerTokenInterceptor`; connections and calls bounded by
:class:`~scheduler.api.limits.GrpcLimits`. The public port is our own accept loop
(:class:`~scheduler.api.front.BoundedFront`), which counts connections per client address and
relays them to gRPC on a private loopback port. See docs/api.md.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from scheduler.api.engine import Engine
from scheduler.api.front import BoundedFront
from scheduler.api.gen.toposched.v1 import placement_pb2, placement_pb2_grpc
from scheduler.api.limits import CallsPerClient, GrpcLimits, unprotected_bind_error
from scheduler.api.servicer import PlacementServicer
from scheduler.errors import UserError

log = logging.getLogger(__name__)

SERVICE_NAME = placement_pb2.DESCRIPTOR.services_by_name["Placement"].full_name  # toposched.v1.Placement
HEALTH_PREFIX = "/grpc.health.v1.Health/"
DEFAULT_PORT = 50051
DEFAULT_BIND = "127.0.0.1"
PRIVATE_HOST = "127.0.0.1"


@dataclass(frozen=True)
class TlsConfig:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None  # set: clients must present a certificate signed by it (mTLS)

    def credentials(self) -> grpc.ServerCredentials:
        def read(path: Path, flag: str) -> bytes:
            try:
                return Path(path).read_bytes()
            except OSError as exc:
                raise UserError(f"{flag} {path}: cannot read ({exc.strerror or exc})") from exc

        key, cert = read(self.key_file, "--grpc-tls-key"), read(self.cert_file, "--grpc-tls-cert")
        ca = read(self.client_ca_file, "--grpc-client-ca") if self.client_ca_file else None
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)


def load_token(path: Path | str) -> str:
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise UserError(f"--grpc-token-file {path}: cannot read ({exc.strerror or exc})") from exc
    if not token:
        raise UserError(f"--grpc-token-file {path}: empty; put the bearer token in it")
    return token


def _deny(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    def abort(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(abort)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(abort)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(abort, handler.request_deserializer,
                                                    handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(abort, handler.request_deserializer, handler.response_serializer)


class BearerTokenInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Every call except the health service needs metadata ``authorization: Bearer <token>``
    (health stays open so kubelet gRPC probes and load balancers can check it)."""

    def __init__(self, token: str, exempt_prefixes: Sequence[str] = (HEALTH_PREFIX,)) -> None:
        self._expected = f"Bearer {token}".encode()
        self._exempt = tuple(exempt_prefixes)

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
                          handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if method.startswith(self._exempt):
            return continuation(handler_call_details)
        got = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                got = value if isinstance(value, str) else value.decode(errors="replace")
                break
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        if hmac.compare_digest(got.encode(), self._expected):
            return handler
        reason = "missing authorization metadata" if not got else "wrong bearer token"
        log.info("rejected %s: %s", method, reason)
        return _deny(handler, f"{reason}: send metadata 'authorization: Bearer <token>'")


class ApiServer:
    """Owns the grpc.Server, the health servicer and the engine's streams."""

    def __init__(self, engine: Engine, *, bind: str = DEFAULT_BIND, port: int = DEFAULT_PORT,
                 tls: TlsConfig | None = None, token: str | None = None, reflection: bool = False,
                 max_workers: int = 16, limits: GrpcLimits | None = None) -> None:
        from grpc_health.v1 import health_pb2

        refusal = unprotected_bind_error(bind, tls is not None, bool(token))
        if refusal is not None:  # before binding anything: nothing is ever served in the clear
            raise UserError(refusal)
        self.engine = engine
        self._health_pb2 = health_pb2
        limits = limits or GrpcLimits()
        host = f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind
        try:
            self.front = BoundedFront((bind.strip("[]"), port), max_connections=limits.max_connections,
                                      max_per_client=limits.max_connections_per_client,
                                      first_bytes_timeout_s=limits.first_bytes_timeout_ms / 1000,
                                      idle_timeout_s=limits.idle_timeout_ms / 1000)
        except OSError as exc:
            raise UserError(f"gRPC: cannot listen on {host}:{port} ({exc.strerror or exc}); is the port in use?",
                            exit_code=1) from exc
        try:
            self._build(engine, tls, token, reflection, max_workers, limits)
        except BaseException:
            self.front.close()
            raise
        self.port = self.front.port
        self.address = f"{host}:{self.port}"
        self.tls = tls is not None
        self.token_required = bool(token)

    def _build(self, engine: Engine, tls: TlsConfig | None, token: str | None, reflection: bool, max_workers: int,
               limits: GrpcLimits) -> None:
        """The gRPC server behind the front, listening on its private port."""
        from grpc_health.v1 import health, health_pb2_grpc

        self.calls = CallsPerClient(limits.per_client(max_workers), relayed_client=self.front.client_of)
        interceptors: list[grpc.ServerInterceptor] = [BearerTokenInterceptor(token)] if token else []
        interceptors.append(self.calls)
        # Calls past four times the workers are refused at once (RESOURCE_EXHAUSTED) rather than queued
        # behind streams that may never end.
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="grpc"),
                                  interceptors=interceptors, options=limits.options(),
                                  maximum_concurrent_rpcs=4 * max_workers)
        self.servicer = PlacementServicer(engine)
        placement_pb2_grpc.add_PlacementServicer_to_server(self.servicer, self.server)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.set_serving(False)
        if reflection:
            try:
                from grpc_reflection.v1alpha import reflection as refl
            except ImportError as exc:
                raise UserError("--grpc-reflection needs grpcio-reflection (pip install grpcio-reflection)") from exc
            refl.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, refl.SERVICE_NAME), self.server)
        private = PRIVATE_HOST + ":0"  # only the front connects here (see scheduler/api/front.py)
        try:
            if tls is not None:
                private_port = self.server.add_secure_port(private, tls.credentials())
            else:
                private_port = self.server.add_insecure_port(private)
        except RuntimeError as exc:
            raise UserError(f"gRPC: cannot listen on {private} (the front's private endpoint): {exc}",
                            exit_code=1) from exc
        if not private_port:
            raise UserError(f"gRPC: cannot listen on {private} (the front's private endpoint)", exit_code=1)
        self.front.upstream = (PRIVATE_HOST, private_port)

    def start(self) -> ApiServer:
        self.server.start()
        self.front.start()
        log.info("gRPC API on %s (%s%s)", self.address, "TLS" if self.tls else "plaintext",
                 ", bearer token" if self.token_required else "")
        return self

    def set_serving(self, serving: bool) -> None:
        status = (self._health_pb2.HealthCheckResponse.SERVING if serving
                  else self._health_pb2.HealthCheckResponse.NOT_SERVING)
        for service in ("", SERVICE_NAME):
            self.health.set(service, status)

    def stop(self, grace_s: float = 2.0) -> None:
        self.health.enter_graceful_shutdown()
        self.engine.close()  # ends WatchDecisions streams
        self.server.stop(grace_s).wait(grace_s + 1)  # the front still relays the calls' last bytes
        self.front.close()


def serve(engine: Engine, **kwargs: Any) -> ApiServer:
    """Build and start a server; ``port=0`` picks a free port (``server.port``)."""
    server = ApiServer(engine, **kwargs).start()
    server.set_serving(True)
    return server
