"""/healthz and /readyz on a small HTTP port (liveness and readiness probes)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve_health(bind: str, port: int, ready: Callable[[], bool]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            if self.path == "/healthz":
                code, body = 200, b"ok"
            elif self.path == "/readyz":
                ok = ready()
                code, body = (200, b"ok") if ok else (503, b"not ready")
            else:
                code, body = 404, b"not found"
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return

    server = ThreadingHTTPServer((bind, port), Handler)
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server
