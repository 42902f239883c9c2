"""The request-latency ``/metrics`` endpoint the webhook and the extender commands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from scheduler.errors import UserError

# Imports inside functions: prometheus_client loads only when a command serves metrics (keeps
# `toposched --help` at about 0.1 s).


def start_metrics(args: argparse.Namespace, kind: str, attach: Callable[[Any], None]) -> Any:
    """Serve ``kind``'s latency histogram (``"webhook"`` or ``"extender"``) on --metrics-port;
    None when the port is 0. ``attach`` hooks the metrics object to the server's observers."""
    if not args.metrics_port:
        return None
    from scheduler.http.request_metrics import ExtenderMetrics, WebhookMetrics, serve

    metrics = WebhookMetrics() if kind == "webhook" else ExtenderMetrics()
    attach(metrics)
    try:
        return serve(metrics.registry, args.metrics_bind, args.metrics_port)
    except OSError as exc:
        raise UserError(f"cannot listen on {args.metrics_bind}:{args.metrics_port} for /metrics ({exc.strerror}); "
                        "choose another --metrics-port", exit_code=1) from exc
