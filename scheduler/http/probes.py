"""/healthz and /readyz (liveness and readiness probes) and /metrics on small HTTP ports.

One port may carry both (the default: ``--metrics-port`` is the health port), or /metrics has
its own; a path the port does not carry answers 404. Served by the bounded server
(``scheduler.http.bounded``, caps ``PROBE_CAPS``): half-sent requests and idle connections hold
no thread and are closed at their deadline, so they cannot stop the probes.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from scheduler.http.bounded import BoundedHTTPServer, BufferedHandler, serve_in_thread
from scheduler.http.limits import PROBE_CAPS, ConnectionLimits

Exposition = Callable[[], bytes]

# Probes and scrapes are GETs without a body; two workers answer them (a scrape renders the
# registry, a few ms), the loop holds everything else.
PROBE_LIMITS = ConnectionLimits(max_connections=PROBE_CAPS.total, max_per_client=PROBE_CAPS.per_client,
                                workers=2, max_body_bytes=64 * 1024)


def exposition(registry: CollectorRegistry) -> Exposition:
    """The Prometheus text format of ``registry``, rendered at each scrape."""
    return lambda: generate_latest(registry)


def _answer(path: str, ready: Callable[[], bool] | None, metrics: Exposition | None) -> tuple[int, bytes, str]:
    if ready is not None and path == "/healthz":
        return 200, b"ok", "text/plain"
    if ready is not None and path == "/readyz":
        return (200, b"ok", "text/plain") if ready() else (503, b"not ready", "text/plain")
    if metrics is not None and path.split("?", 1)[0] == "/metrics":
        return 200, metrics(), CONTENT_TYPE_LATEST
    return 404, b"not found", "text/plain"


def serve_http(bind: str, port: int, *, ready: Callable[[], bool] | None = None,
               metrics: Exposition | None = None, name: str = "health",
               limits: ConnectionLimits = PROBE_LIMITS) -> BoundedHTTPServer:
    """Serve the probes (when ``ready`` is given) and/or /metrics on a daemon thread."""
    class Handler(BufferedHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            code, body, content_type = _answer(self.path, ready, metrics)
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return

    server = BoundedHTTPServer((bind, port), Handler, limits=limits, name=name)
    serve_in_thread(server)
    return server


def serve_health(bind: str, port: int, ready: Callable[[], bool],
                 metrics: Exposition | None = None) -> BoundedHTTPServer:
    return serve_http(bind, port, ready=ready, metrics=metrics)


def serve_metrics(bind: str, port: int, metrics: Exposition) -> BoundedHTTPServer:
    return serve_http(bind, port, metrics=metrics, name="metrics")
