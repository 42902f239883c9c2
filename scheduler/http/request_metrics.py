"""Request latency histograms of the webhook and the extender, on their own /metrics ports.

Each process has its own registry and (when ``--metrics-port`` is set) its own small HTTP
server: the webhook's HTTPS port answers only the API server (NetworkPolicy) and the extender
listens on loopback inside the scheduler pod, so neither port is one Prometheus can scrape.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics

from scheduler.http.bounded import BoundedHTTPServer
from scheduler.http.probes import exposition, serve_metrics

# Sub-millisecond to seconds: both answer in milliseconds, and their callers time out at
# 5 s (extender httpTimeout) and 10 s (webhook timeoutSeconds).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
EXTENDER_VERBS = ("filter", "prioritize", "bind")


class ExtenderMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry()
        self.latency = Histogram("toposched_extender_request_duration_seconds", "Time the extender took to "
                                 "answer kube-scheduler, per verb (filter, prioritize, bind)", ("verb",),
                                 buckets=LATENCY_BUCKETS, registry=self.registry)

    def observe(self, verb: str, seconds: float) -> None:
        """A ``Stats`` observer of the extender's HTTP server."""
        if verb in EXTENDER_VERBS:  # a bounded label: other paths are 404s
            self.latency.labels(verb).observe(seconds)


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry()
        self.latency = Histogram("toposched_webhook_request_duration_seconds", "Time the webhook took to answer "
                                 "an AdmissionReview, by whether it was allowed", ("allowed",),
                                 buckets=LATENCY_BUCKETS, registry=self.registry)

    def observe(self, allowed: bool, seconds: float) -> None:
        """A ``WebhookApp`` answer observer."""
        self.latency.labels("true" if allowed else "false").observe(seconds)


def serve(registry: CollectorRegistry, bind: str, port: int) -> BoundedHTTPServer:
    """/metrics on its own bounded server (``PROBE_CAPS``: Prometheus is its one client)."""
    return serve_metrics(bind, port, exposition(registry))
