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
import socket
import threading
import time
from pathlib import Path
from typing import Any

from scheduler.commands._connections import add_connection_arguments, connection_caps
from scheduler.commands._kueue_config import add_kueue_config_argument, kueue_config
from scheduler.commands._metrics import start_metrics
from scheduler.errors import UserError
from scheduler.http.limits import WEBHOOK_CAPS
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
    p.add_argument("--cert-source", choices=("self", "secret", "files"), default="self",
                   help="self: this process issues its own CA in --cert-dir and publishes it (one replica); "
                        "secret: replicas share a CA and certificate in the Secret --cert-secret, issued and "
                        "rotated by the holder of the Lease --lease-name (high availability); files: serve "
                        "tls.crt/tls.key mounted in --cert-dir (cert-manager), reloaded when they change, "
                        "and never touch caBundle (default: self)")
    p.add_argument("--cert-dir", type=Path, default=None,
                   help="self: where the CA and serving certificate live (default: a directory under the "
                        "toposched cache; /tmp/toposched-webhook-certs in a Pod); files: the mounted directory")
    p.add_argument("--cert-secret", default="toposched-webhook-certs",
                   help="secret mode: the Secret in --namespace holding the shared certificates")
    p.add_argument("--lease-name", default="toposched-webhook",
                   help="secret mode: the Lease in --namespace whose holder issues and rotates")
    p.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}",
                   help="secret mode: this replica's name in the Lease (default: host name and pid)")
    p.add_argument("--cert-reload-seconds", type=float, default=10.0,
                   help="files mode: how often the mounted files are checked for a new certificate")
    p.add_argument("--shutdown-delay-seconds", type=float, default=0.0,
                   help="on SIGTERM, report not ready and keep answering this long before stopping, so "
                        "the endpoint is removed before the listener closes (deploy/: 5)")
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
                        "job or write the annotations it owns on Workloads; its Workload writes skip the webhook "
                        "(repeatable; default system:serviceaccount:<--namespace>:toposched-controller)")
    p.add_argument("--no-watch-nodes", action="store_true",
                   help="skip the topology capacity check (no node informer)")
    p.add_argument("--metrics-port", type=int, default=0,
                   help="serve Prometheus /metrics (AdmissionReview latency, docs/metrics.md)"
                   " on this port (default 0: off)")
    p.add_argument("--metrics-bind", default="127.0.0.1", help="address of /metrics (0.0.0.0 in a Pod)")
    # its featureGates switch Kueue's gated checks (TASTopologySpreading); its integrations decide
    # which queued kinds the default deny refuses (frameworks, externalFrameworks)
    add_connection_arguments(p, WEBHOOK_CAPS, "each API server")
    add_kueue_config_argument(p)
    add_log_format_argument(p)
    p.set_defaults(func=run)


def _api(kubeconfig: Path | None) -> Any:
    from scheduler.k8s.client import api_client
    from scheduler.k8s.informer import Api

    return Api(api_client(kubeconfig))


def _cert_dir(args: argparse.Namespace, in_cluster: bool) -> Path:
    if args.cert_dir is not None:
        return Path(args.cert_dir)
    if in_cluster:
        return Path("/tmp/toposched-webhook-certs")
    from scheduler.devcluster import binaries

    return binaries.cache_root() / "webhook-certs" / f"{args.bind}-{args.port}"


def _desired_configs(args: argparse.Namespace, in_cluster: bool, port: int) -> list[dict[str, Any]]:
    """The configurations we register (none with --no-register or certificates from files)."""
    from admission import configs

    if args.no_register or args.cert_source == "files":
        return []
    if args.webhook_url:
        client_config = configs.url_client_config(args.webhook_url)
    elif in_cluster:
        client_config = configs.service_client_config(args.namespace, args.service_name)
    else:
        client_config = configs.url_client_config(f"https://127.0.0.1:{port}")
    return [configs.mutating_configuration(client_config, args.namespace, not args.no_default_queue,
                                           args.controller_user),
            configs.validating_configuration(client_config, args.namespace, args.controller_user)]


def _cert_source(args: argparse.Namespace, api: Any, in_cluster: bool, desired: list[dict[str, Any]]) -> Any:
    import datetime as dt
    import ipaddress

    from admission.certs import CertManager
    from admission.certset import Policy
    from admission.sharedcerts import SecretSource
    from admission.sources import MountedFilesSource, SelfSignedSource

    cert_dir = _cert_dir(args, in_cluster)
    if args.cert_source == "files":
        if args.cert_dir is None:
            raise UserError("--cert-source files needs --cert-dir: the directory the certificate is mounted in")
        return MountedFilesSource(cert_dir, poll_s=args.cert_reload_seconds)
    svc = f"{args.service_name}.{args.namespace}.svc"
    dns = [svc, f"{svc}.cluster.local", "localhost"]
    ips = ["127.0.0.1"] + ([args.bind] if args.bind not in ("0.0.0.0", "127.0.0.1", "::") else [])
    ca_validity = dt.timedelta(hours=args.ca_validity_hours)
    cert_validity = dt.timedelta(hours=args.cert_validity_hours)
    if args.cert_source == "secret":
        policy = Policy(tuple(dns), tuple(ipaddress.ip_address(ip) for ip in ips), ca_validity, cert_validity)
        return SecretSource(api, args.namespace, policy, desired, identity=args.identity,
                            secret_name=args.cert_secret, lease_name=args.lease_name,
                            create_configs=not args.no_create_configs,
                            resync_s=min(300.0, args.rotation_check_seconds))
    certs = CertManager(cert_dir, dns, ips, ca_validity=ca_validity, cert_validity=cert_validity)
    return SelfSignedSource(certs, api, desired, create_configs=not args.no_create_configs,
                            rotation_check_s=args.rotation_check_seconds)


def run(args: argparse.Namespace) -> int:
    from admission.server import WebhookApp, WebhookServer, webhook_limits
    from admission.suspension import controller_username
    from scheduler.k8s.gcpolicy import GcPolicy, pause_log, start_freezing

    caps = connection_caps(args)
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and args.kubeconfig is None
    api = _api(args.kubeconfig)
    from scheduler.adapter.kinds.governance import Governance
    from scheduler.adapter.kinds.registry import unmanaged_frameworks

    config = kueue_config(args, unmanaged_frameworks)
    app = WebhookApp(api, scheduler_name=args.scheduler_name, default_queue=not args.no_default_queue,
                     watch_nodes=not args.no_watch_nodes,
                     controller_users=args.controller_user or [controller_username(args.namespace)],
                     gates=config.feature_gates, governance=Governance.from_config(config))
    port = args.port
    if port == 0 and not args.webhook_url and not args.no_register:
        from scheduler.devcluster.controlplane import free_port

        port = free_port()  # the registered URL names the port: choose it before the configurations
    source = _cert_source(args, api, in_cluster, _desired_configs(args, in_cluster, port))
    from admission.front import FrontUnavailable

    try:
        server = WebhookServer(app, source, args.bind, port, webhook_limits(caps.total, caps.per_client))
    except FrontUnavailable as exc:
        raise UserError(f"the HTTPS front did not start on {args.bind}:{port}: {exc}") from exc
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    metrics_server = start_metrics(args, "webhook", lambda metrics: app.answer_observers.append(metrics.observe))
    with pause_log():
        server.start()
        # This process holds watch caches: a full collection would pause the answers (k8s/gcpolicy.py).
        start_freezing(GcPolicy(), stop=done)
        log.info("toposched webhook serving https://%s:%d (certificates: %s)", args.bind, server.port, args.cert_source)
        print(f"toposched webhook: serving https://{args.bind}:{server.port}", flush=True)
        while not done.wait(1.0):
            if not server.front.alive():  # TLS is the front's: without it this process serves nothing
                log.error("the HTTPS front exited; stopping (the kubelet restarts the container)")
                server.stop()
                return 1
        if args.shutdown_delay_seconds > 0:
            server.drain()
            log.info("draining for %.0fs before stopping", args.shutdown_delay_seconds)
            time.sleep(args.shutdown_delay_seconds)
        server.stop()
        if metrics_server is not None:
            metrics_server.shutdown()
        return 0
