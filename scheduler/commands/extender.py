"""``toposched extender``: the kube-scheduler extender (HTTP on loopback, or HTTPS serving only
client certificates) for the ``toposched`` profile.

Serves ``POST /filter``, ``/prioritize``, ``/bind`` (k8s.io/kube-scheduler/extender/v1) and
``GET /healthz``, ``/readyz``, ``/stats``. ``--print-config`` prints the KubeSchedulerConfiguration
(profile + extender entry, or a whole config for a dedicated scheduler) and exits.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from scheduler.commands._connections import add_connection_arguments, connection_caps
from scheduler.commands._metrics import start_metrics
from scheduler.errors import UserError
from scheduler.extender.config import BINDERS, DEFAULT_BINDER
from scheduler.http.limits import EXTENDER_CAPS
from scheduler.logsetup import add_log_format_argument

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).

log = logging.getLogger("toposched.extender")

# The GIL switch interval (default 5 ms): a request thread whose socket read or write returns
# waits up to this long for the GIL while an informer thread decodes a watch event, and
# kube-scheduler waits for every filter answer (its scheduling cycle is serial).
SWITCH_INTERVAL_S = 0.001


def register(sub: Any) -> None:
    p = sub.add_parser("extender", help="serve the kube-scheduler extender (filter, prioritize, bind)")
    p.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="kubeconfig (default: in-cluster service account, else $KUBECONFIG / ~/.kube/config)",
    )
    p.add_argument("--port", type=int, default=8888, help="HTTP(S) port (default 8888; 0 = any free port)")
    p.add_argument("--bind", default="127.0.0.1",
                   help="listen address (default 127.0.0.1: a sidecar of kube-scheduler, reachable only inside its "
                        "Pod); any other address is refused without --tls-dir")
    p.add_argument("--tls-dir", type=Path, default=None, metavar="DIR",
                   help="serve HTTPS with DIR/tls.crt and DIR/tls.key, and only to clients presenting a certificate "
                        "signed by DIR/ca.crt (kube-scheduler's tlsConfig; docs/extender.md, 'Who may call it')")
    p.add_argument("--client-ca", type=Path, default=None, metavar="FILE",
                   help="with --tls-dir: the CA client certificates must chain to (default DIR/ca.crt)")
    p.add_argument("--client-name", action="append", default=None, metavar="NAME",
                   help="with --tls-dir: serve only client certificates with this common or DNS name (repeatable; "
                        "default: any the client CA signed)")
    p.add_argument("--issue-certs", type=Path, default=None, metavar="DIR",
                   help="write a fresh CA, the extender's certificate for 127.0.0.1 and kube-scheduler's client "
                        "certificate (ca.crt, tls.crt/key, client.crt/key) into DIR and exit (deploy/: the scheduler "
                        "Pod's init container)")
    p.add_argument(
        "--scheduler-name",
        default="toposched",
        help="schedulerName of the pods this extender places (default toposched)",
    )
    p.add_argument(
        "--binder",
        choices=BINDERS,
        default=DEFAULT_BINDER,
        help=f"who binds toposched's pods (default {DEFAULT_BINDER}). extender: filter offers every free "
        "assigned node, prioritize ranks them, bind takes the slot. kube-scheduler: filter passes the one most "
        "compact free node and takes its slot there (kube-scheduler's cycle is serial), kube-scheduler "
        "skips scoring and binds itself: one HTTP call per pod instead of three (docs/extender.md). "
        "--print-config follows it",
    )
    p.add_argument("--sync-timeout", type=float, default=120, help="seconds to wait for the informers")
    p.add_argument(
        "--print-config",
        choices=("entry", "dedicated"),
        default=None,
        help="print the KubeSchedulerConfiguration profile+extender entry (entry) or a whole "
        "config for a dedicated toposched kube-scheduler (dedicated) as YAML, and exit",
    )
    p.add_argument("--metrics-port", type=int, default=0,
                   help="serve Prometheus /metrics (filter/prioritize/bind latency, docs/metrics.md)"
                   " on this port (default 0: off)")
    p.add_argument("--metrics-bind", default="127.0.0.1", help="address of /metrics (0.0.0.0 in a Pod)")
    add_connection_arguments(p, EXTENDER_CAPS, "kube-scheduler")
    add_log_format_argument(p)
    p.set_defaults(func=run)


def _api(kubeconfig: Path | None) -> Any:
    from scheduler.k8s.client import api_client
    from scheduler.k8s.informer import Api

    return Api(api_client(kubeconfig))


def _print_config(args: argparse.Namespace) -> int:
    import yaml

    from scheduler.extender import config as cfg

    host = "127.0.0.1" if args.bind in ("0.0.0.0", "::") else args.bind
    port = args.port or cfg.DEFAULT_PORT
    tls_dir = str(args.tls_dir) if args.tls_dir else None
    doc = (
        cfg.toposched_scheduler_config(port, host, scheduler_name=args.scheduler_name, binder=args.binder,
                                       tls_dir=tls_dir)
        if args.print_config == "entry"
        else cfg.dedicated_scheduler_config(None, port, host, scheduler_name=args.scheduler_name,
                                            binder=args.binder, tls_dir=tls_dir)
    )
    print(yaml.safe_dump(doc, sort_keys=False), end="")
    return 0


def _tls(args: argparse.Namespace) -> Any:
    """The extender's TLS settings, or None (plain HTTP, loopback only); refusals exit 2."""
    from scheduler.extender.tls import ExtenderTLS, unauthenticated_bind_error

    if args.tls_dir is None:
        if args.client_ca or args.client_name:
            raise UserError("--client-ca and --client-name need --tls-dir (they narrow who HTTPS serves)")
        refusal = unauthenticated_bind_error(args.bind, tls=False)
        if refusal is not None:
            raise UserError(refusal)
        return None
    return ExtenderTLS.from_dir(args.tls_dir, args.client_ca, args.client_name or ())


def run(args: argparse.Namespace) -> int:
    if args.issue_certs is not None:
        from scheduler.extender.tls import issue_pod_certificates

        try:
            issue_pod_certificates(args.issue_certs)
        except OSError as exc:
            raise UserError(f"--issue-certs {args.issue_certs}: cannot write ({exc.strerror or exc})") from exc
        print(f"toposched extender: certificates written to {args.issue_certs}", flush=True)
        return 0
    if args.print_config:
        return _print_config(args)
    caps = connection_caps(args)
    tls = _tls(args)

    from scheduler.extender.book import SlotBook
    from scheduler.extender.server import ExtenderHTTPServer, ExtenderService, extender_limits
    from scheduler.k8s.gcpolicy import GcPolicy, pause_log, start_freezing

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    api = _api(args.kubeconfig)
    book = SlotBook(scheduler_name=args.scheduler_name, choose_node=args.binder == "kube-scheduler")
    service = ExtenderService(api, book)
    try:
        server = ExtenderHTTPServer(service.extender, args.bind, args.port,
                                    limits=extender_limits(caps.total, caps.per_client), tls=tls)
    except OSError as exc:
        raise UserError(
            f"cannot listen on {args.bind}:{args.port} ({exc.strerror}); choose another --port"
        ) from exc
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    # Serve at once (pass-through pods need no cache; ours get a retryable Error until synced).
    metrics_server = start_metrics(args, "extender", lambda metrics: server.stats.observers.append(metrics.observe))
    with pause_log():
        server.start()
        scheme = "https" if tls is not None else "http"
        print(f"toposched extender: serving {scheme}://{args.bind}:{server.port}"
              f"{' (client certificates required)' if tls is not None else ''}", flush=True)
        try:
            service.start(args.sync_timeout)
        except TimeoutError as exc:
            server.stop()
            raise UserError(f"{exc}: is the API server reachable and are Kueue's CRDs installed?") from exc
        log.info("toposched extender ready on %s://%s:%d (scheduler %s)", scheme, args.bind, server.port,
                 args.scheduler_name)
        print("toposched extender: caches synced", flush=True)
        # This process holds watch caches: a full collection would pause the answers (k8s/gcpolicy.py).
        start_freezing(GcPolicy(), stop=done)
        done.wait()
        server.stop()
        service.stop()
        if metrics_server is not None:
            metrics_server.shutdown()
        return 0
