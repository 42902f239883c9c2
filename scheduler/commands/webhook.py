"""``toposched webhook``: the mutating + validating admission webhook over HTTPS.

Outside a cluster (no KUBERNETES_SERVICE_HOST) the webhook configurations point at
``https://127.0.0.1:<port>`` (the local control plane's API server calls it on loopback);
inside, at the Service ``toposched-webhook`` in ``--namespace``. ``--webhook-url`` overrides both.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

from scheduler.errors import UserError
from scheduler.logsetup import add_log_format_argument

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).

log = logging.getLogger("toposched.webhook")


def register(sub: Any) -> None:
    p = sub.add_parser("webhook", help="serve the admission webhook (mutate + validate Jobs and Kueue objects)")
    p.add_argument("--kubeconfig", type=Path, default=None,
                   help="kubeconfig (default: in-cluster service account, else $KUBECONFIG / ~/.kube/config)")
    p.add_argument("--port", type=int, default=9443, help="HTTPS port (default 9443; 0 = any free port)")
    p.add_argument("--bind", default="127.0.0.1", help="listen address (default 127.0.0.1; 0.0.0.0 in a Pod)")
    p.add_argument("--cert-dir", type=Path, default=None,
                   help="where the CA and serving certificate live (default: a directory under the "
                        "toposched cache; /tmp/toposched-webhook-certs in a Pod)")
    p.add_argument("--webhook-url", default=None,
                   help="base URL the API server calls, e.g. https://127.0.0.1:9443 (default: that on a "
                        "local cluster, the Service toposched-webhook in a cluster)")
    p.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", "toposched-system"),
                   help="toposched's namespace: exempt from the webhook, and the Service's namespace")
    p.add_argument("--service-name", default="toposched-webhook", help="Service name in --namespace")
    p.add_argument("--scheduler-name", default="toposched", help="schedulerName set on managed Jobs' pods")
    p.add_argument("--no-default-queue", action="store_true",
                   help="disable LocalQueue defaulting (unlabelled Jobs then never reach the webhook)")
    p.add_argument("--no-register", action="store_true",
                   help="do not create/patch the webhook configurations (serve only)")
    p.add_argument("--no-create-configs", action="store_true",
                   help="only patch existing configurations (deploy/ ships them; RBAC has no create)")
    p.add_argument("--cert-validity-hours", type=float, default=90 * 24, help="serving cert validity (default 90 d)")
    p.add_argument("--ca-validity-hours", type=float, default=365 * 24, help="CA validity (default 1 year)")
    p.add_argument("--rotation-check-seconds", type=float, default=3600,
                   help="longest sleep between rotation checks (rotation happens at 2/3 of validity)")
    p.add_argument("--controller-user", action="append", default=None, metavar="USERNAME",
                   help="the API username of toposched's controller, the only one that may unsuspend a queued "
                        "job (repeatable; default system:serviceaccount:<--namespace>:toposched-controller)")
    p.add_argument("--no-watch-nodes", action="store_true",
                   help="skip the topology capacity check (no node informer)")
    p.add_argument("--metrics-port", type=int, default=0,
                   help="serve Prometheus /metrics (AdmissionReview latency, docs/metrics.md)"
                   " on this port (default 0: off)")
    p.add_argument("--metrics-bind", default="127.0.0.1", help="address of /metrics (0.0.0.0 in a Pod)")
    add_log_format_argument(p)
    p.set_defaults(func=run)


def _api(kubeconfig: Path | None) -> Any:
    from scheduler.kube.client import api_client
    from scheduler.kube.informer import Api

    return Api(api_client(kubeconfig))


def start_metrics(args: argparse.Namespace, attach: Any) -> Any:
    """The latency histogram on its own /metrics port, or None when --metrics-port is 0."""
    if not args.metrics_port:
        return None
    from scheduler.kube.request_metrics import WebhookMetrics, serve

    metrics = WebhookMetrics()
    attach(metrics)
    try:
        return serve(metrics.registry, args.metrics_bind, args.metrics_port)
    except OSError as exc:
        raise UserError(f"cannot listen on {args.metrics_bind}:{args.metrics_port} for /metrics ({exc.strerror}); "
                        "choose another --metrics-port", exit_code=1) from exc


def run(args: argparse.Namespace) -> int:
    import datetime as dt

    from admission import configs
    from admission.certs import CertManager
    from admission.server import WebhookApp, WebhookServer
    from admission.suspension import controller_username

    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and args.kubeconfig is None
    cert_dir = args.cert_dir
    if cert_dir is None:
        if in_cluster:
            cert_dir = Path("/tmp/toposched-webhook-certs")
        else:
            from scheduler.devcluster import binaries

            cert_dir = binaries.cache_root() / "webhook-certs" / f"{args.bind}-{args.port}"
    svc = f"{args.service_name}.{args.namespace}.svc"
    ips = ["127.0.0.1"] + ([args.bind] if args.bind not in ("0.0.0.0", "127.0.0.1", "::") else [])
    certs = CertManager(cert_dir, [svc, f"{svc}.cluster.local", "localhost"], ips,
                        ca_validity=dt.timedelta(hours=args.ca_validity_hours),
                        cert_validity=dt.timedelta(hours=args.cert_validity_hours))
    api = _api(args.kubeconfig)
    app = WebhookApp(api, scheduler_name=args.scheduler_name, default_queue=not args.no_default_queue,
                     watch_nodes=not args.no_watch_nodes,
                     controller_users=args.controller_user or [controller_username(args.namespace)])
    try:
        server = WebhookServer(app, certs, args.bind, args.port, create_configs=not args.no_create_configs)
    except OSError as exc:
        raise UserError(f"cannot listen on {args.bind}:{args.port} ({exc.strerror}); choose another --port") from exc
    if not args.no_register:
        if args.webhook_url:
            client_config = configs.url_client_config(args.webhook_url)
        elif in_cluster:
            client_config = configs.service_client_config(args.namespace, args.service_name)
        else:
            client_config = configs.url_client_config(f"https://127.0.0.1:{server.port}")
        server.desired = [configs.mutating_configuration(client_config, args.namespace, not args.no_default_queue),
                          configs.validating_configuration(client_config, args.namespace)]
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    metrics_server = start_metrics(args, lambda metrics: app.answer_observers.append(metrics.observe))
    server.start(rotation_check_s=args.rotation_check_seconds)
    log.info("toposched webhook serving https://%s:%d (certs in %s)", args.bind, server.port, cert_dir)
    print(f"toposched webhook: serving https://{args.bind}:{server.port}", flush=True)
    done.wait()
    server.stop()
    if metrics_server is not None:
        metrics_server.shutdown()
    return 0
