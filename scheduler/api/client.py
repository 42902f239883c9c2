"""The CLI side of the gRPC API: ``--server HOST:PORT`` and its TLS/token flags.

Errors become :class:`UserError` lines: the server's INVALID_ARGUMENT / NOT_FOUND /
FAILED_PRECONDITION messages are shown as they are (exit 2), an unreachable or failing server
exits 1.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from scheduler.errors import UserError

# Imports inside functions: grpc loads only when a client is made, since every command module
# imports this one to register its --server flags (keeps `toposched --help` at about 0.1 s).

DEFAULT_TIMEOUT_S = 30.0
TOKEN_ENV = "TOPOSCHED_API_TOKEN"
SOLVER_ENUM = {"auto": 1, "greedy": 2, "cpsat": 3}  # toposched.v1.Solver (kept import-free for argparse)


def add_server_arguments(parser: Any) -> None:
    parser.add_argument("--server", metavar="HOST:PORT",
                        help="ask a running engine (toposched controller --grpc-port) instead of reading files")
    parser.add_argument("--server-ca", type=Path, metavar="FILE",
                        help="with --server: PEM CA bundle to verify the server's certificate (turns TLS on)")
    parser.add_argument("--client-cert", type=Path, metavar="FILE", help="with --server: client certificate (mTLS)")
    parser.add_argument("--client-key", type=Path, metavar="FILE", help="with --server: client key (mTLS)")
    parser.add_argument("--server-token-file", type=Path, metavar="FILE",
                        help=f"with --server: bearer token file (default: ${TOKEN_ENV} if set)")
    parser.add_argument("--server-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"with --server: call deadline (default {DEFAULT_TIMEOUT_S:g})")


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"{flag} {path}: cannot read ({exc.strerror or exc})") from exc


class Connection:
    """A channel plus the call options (token, deadline); use as a context manager."""

    def __init__(self, target: str, *, root_ca: bytes | None = None, client_cert: bytes | None = None,
                 client_key: bytes | None = None, token: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        import grpc

        from scheduler.api.gen.toposched.v1 import placement_pb2_grpc

        self.target = target
        if root_ca is not None or client_cert is not None:
            creds = grpc.ssl_channel_credentials(root_certificates=root_ca, private_key=client_key,
                                                 certificate_chain=client_cert)
            self.channel = grpc.secure_channel(target, creds)
        else:
            self.channel = grpc.insecure_channel(target)
        self.stub = placement_pb2_grpc.PlacementStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout_s = timeout_s

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def call(self, method: str, request: Any) -> Any:
        import grpc

        try:
            return getattr(self.stub, method)(request, timeout=self.timeout_s, metadata=self.metadata)
        except grpc.RpcError as err:
            raise rpc_user_error(err, self.target, method) from err


def rpc_user_error(err: Any, target: str, method: str) -> UserError:
    import grpc

    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else str(err)) or ""
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
        return UserError(details, exit_code=2)
    if code == grpc.StatusCode.UNAVAILABLE:
        return UserError(f"cannot reach the engine at {target}: {details} (is `toposched controller --grpc-port` "
                         "running there? TLS/--server-ca matching?)", exit_code=1)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return UserError(f"{target} refused the call: {details} (give --server-token-file or ${TOKEN_ENV})",
                         exit_code=1)
    return UserError(f"{method} at {target} failed: {code.name}: {details}", exit_code=1)


def connect_from_args(args: argparse.Namespace) -> Connection:
    if bool(args.client_cert) != bool(args.client_key):
        raise UserError("--client-cert and --client-key go together")
    token = None
    if args.server_token_file:
        token = _read(args.server_token_file, "--server-token-file").decode().strip()
        if not token:
            raise UserError(f"--server-token-file {args.server_token_file}: empty")
    elif os.environ.get(TOKEN_ENV):
        token = os.environ[TOKEN_ENV].strip()
    root_ca = _read(args.server_ca, "--server-ca") if args.server_ca else None
    cert = _read(args.client_cert, "--client-cert") if args.client_cert else None
    key = _read(args.client_key, "--client-key") if args.client_key else None
    if cert is not None and root_ca is None:
        raise UserError("--client-cert needs --server-ca (mTLS is TLS)")
    return Connection(args.server, root_ca=root_ca, client_cert=cert, client_key=key, token=token,
                      timeout_s=args.server_timeout)
