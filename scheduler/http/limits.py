"""What one HTTP server allows its clients: connections in total and per client address, worker
threads, and how long each phase of a request may take (``scheduler.http.bounded``)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})

# The stdlib's limits on a request head (http.client: 64 KiB a line, 100 headers): a head is
# at most this long, request line and blank line included.
MAX_HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Caps:
    """A server's default connection caps (its flags --max-connections and
    --max-connections-per-client), next to why; docs/security.md lists them."""

    total: int
    per_client: int


# The webhook's only client is the API server: client-go keeps up to 25 idle keep-alive
# connections per host and opens one more per concurrent review in a burst, from one address per
# API server instance. 256 per address leaves a burst room; 1,024 leaves room for several.
WEBHOOK_CAPS = Caps(total=1024, per_client=256)
# The extender's only client is kube-scheduler: filter calls come one at a time (its cycle is
# serial); with --binder extender, binds come in parallel goroutines.
EXTENDER_CAPS = Caps(total=256, per_client=128)
# Health, metrics and request-metrics ports: kubelet probes and Prometheus scrapes, a connection
# or two each.
PROBE_CAPS = Caps(total=64, per_client=16)
# The controller's gRPC port (scheduler/api/front.py): the CLI and tools, one connection per
# channel; a team behind one NAT address may run a few dozen.
GRPC_CAPS = Caps(total=512, per_client=64)


@dataclass(frozen=True)
class ConnectionLimits:
    """Bounds of one server. Idle and half-sent connections hold no thread (the serving loop
    holds them), so the connection caps bound file descriptors and memory, and the per-client
    cap keeps one address from crowding out the others: a new connection over a cap closes the
    least recently active connection that is not being answered (of that address; at the total
    cap, of the address holding the most) or, when every one is being answered, is closed itself.

    Deadlines: a TLS handshake must finish within ``handshake_timeout_s`` of the accept; a
    request head within ``header_timeout_s`` of its first byte (of the handshake's end, for a
    new connection); its body within ``body_timeout_s`` of the head; an answer must be taken by
    the client within ``write_timeout_s``; a keep-alive connection may wait ``idle_timeout_s``
    for its next request."""

    max_connections: int
    max_per_client: int
    workers: int
    max_body_bytes: int
    handshake_timeout_s: float = 5.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    write_timeout_s: float = 10.0
    idle_timeout_s: float = 90.0
    max_head_bytes: int = MAX_HEAD_BYTES

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_per_client", "workers", "max_body_bytes", "max_head_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("handshake_timeout_s", "header_timeout_s", "body_timeout_s", "write_timeout_s",
                     "idle_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_per_client > self.max_connections:
            raise ValueError(f"the per-client connection limit ({self.max_per_client}) is above the total "
                             f"({self.max_connections})")


def is_loopback(bind: str) -> bool:
    """True for an address only this host (this Pod's network namespace) can reach."""
    host = bind.strip("[]")
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything
