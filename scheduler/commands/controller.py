"""``toposched controller``: the leader-elected admission controller."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from scheduler.commands._connections import add_connection_arguments, connection_caps
from scheduler.commands._kueue_config import add_kueue_config_argument, kueue_config
from scheduler.commands._leader_election import add_leader_election_arguments, make_elector
from scheduler.commands.failure_policy import add_failure_policy_arguments, requeue_backoff, storm_policy
from scheduler.core.placement.options import POLICIES, POLICY_KUEUE, PlacementOptions
from scheduler.http.limits import GRPC_CAPS
from scheduler.kube.defaults import DEFAULT_CONCURRENT_WRITES, DEFAULT_CYCLE_BUDGET_MS, DEFAULT_CYCLES_PER_PASS
from scheduler.logsetup import add_log_format_argument

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).

log = logging.getLogger("toposched.controller")


def register(sub: Any) -> None:
    p = sub.add_parser("controller",
                       help="run the leader-elected admission controller (watches Jobs, admits Workloads)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--namespace", default="toposched-system", help="namespace of the leader-election Lease")
    add_leader_election_arguments(p, "toposched-controller")
    p.add_argument("--signing-secret", default="toposched-controller-signing-key",
                   help="Secret in --namespace holding the key the controller signs the annotations it owns with "
                        "(created when missing; docs/security.md)")
    p.add_argument("--solver", choices=("greedy", "cpsat", "auto"), default="auto")
    add_kueue_config_argument(p)
    p.add_argument("--time-budget-ms", type=float, default=100.0, help="CP-SAT time budget per placement")
    p.add_argument("--placement-policy", default=POLICY_KUEUE, metavar="POLICY[,POLICY]",
                   help=f"placement beyond Kueue (docs/beyond-kueue.md): {', '.join(POLICIES)} (default: kueue, "
                        "Kueue's placement exactly)")
    p.add_argument("--no-domain-preemption", dest="domain_preemption", action="store_false",
                   help="turn off domain-clearing preemption (docs/beyond-kueue.md): when Kueue's "
                        "classical preemption finds no victims, or frees capacity only spread over several "
                        "domains, toposched clears one whole domain of the requested level; off: Kueue's "
                        "classical preemption only")
    p.add_argument("--resync-seconds", type=float, default=5.0, help="reconcile at least this often")
    p.add_argument("--cycles-per-pass", type=int, default=DEFAULT_CYCLES_PER_PASS,
                   help="Kueue scheduling cycles run back to back in one reconcile pass, each seeing the "
                   f"admissions of the ones before: at least this many (default {DEFAULT_CYCLES_PER_PASS}; "
                   "with --cycle-budget-ms 0, exactly; 1 = one head per ClusterQueue per pass)")
    p.add_argument("--cycle-budget-ms", type=float, default=DEFAULT_CYCLE_BUDGET_MS,
                   help="while a backlog is admitted, run more cycles in a pass as long as the last pass's time "
                   f"per cycle says they fit in this many milliseconds (default {DEFAULT_CYCLE_BUDGET_MS:g}, "
                   "at most 256 cycles; 0: exactly --cycles-per-pass)")
    p.add_argument("--concurrent-writes", type=int, default=DEFAULT_CONCURRENT_WRITES,
                   help="API writes of one reconcile phase in flight at once (admissions, pending reasons, queue "
                   f"status, job start/stop; default {DEFAULT_CONCURRENT_WRITES}; 1 = one after the other)")
    p.add_argument("--node-failure-grace-seconds", type=float, default=3.0,
                   help="an assigned node with an explicit failure (HyperPod Unschedulable* health label, fault "
                   "label, HMA taint, NotReady) must stay so this long before its workload is hot-swapped or "
                   "evicted (debounces flapping health labels)")
    p.add_argument("--node-unreachable-grace-seconds", type=float, default=300.0,
                   help="the same for an unreachable node (Ready=Unknown): default 300, the toleration Kubernetes "
                   "gives pods on an unreachable node, since a partition often heals and its pods may still run")
    p.add_argument("--deleted-node-lease-absent-seconds", type=float, default=15.0,
                   help="delete the pods of admitted workloads left on a deleted node once the API server "
                   "confirms the Node is gone and its kubelet's Lease in kube-node-lease expired, or has been "
                   "gone this long (default 15: a running kubelet recreates it within 10 s), so the rank "
                   "restarts at once instead of after the pod GC's 40 s (docs/health.md); negative: never")
    add_failure_policy_arguments(p)
    p.add_argument("--health-bind", default="127.0.0.1")
    p.add_argument("--health-port", type=int, default=8080, help="/healthz and /readyz (0: off)")
    p.add_argument("--metrics-bind", default=None,
                   help="address of the Prometheus /metrics endpoint (default: --health-bind)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="port of /metrics, Kueue's metric names (docs/metrics.md); default: the health port, "
                   "served by the same server; 0: off")
    g = p.add_argument_group("gRPC API (toposched.v1.Placement, docs/api.md)")
    g.add_argument("--grpc-port", type=int, default=50051,
                   help="serve the gRPC API on this port (default 50051; 0: off)")
    g.add_argument("--grpc-bind", default="127.0.0.1", help="address to bind (default loopback only)")
    g.add_argument("--grpc-tls-cert", type=Path, metavar="FILE", help="server certificate (PEM); turns TLS on")
    g.add_argument("--grpc-tls-key", type=Path, metavar="FILE", help="server private key (PEM)")
    g.add_argument("--grpc-client-ca", type=Path, metavar="FILE",
                   help="CA bundle clients' certificates must chain to (mTLS; needs --grpc-tls-cert)")
    g.add_argument("--grpc-token-file", type=Path, metavar="FILE",
                   help="require metadata 'authorization: Bearer <token>' with the token in this file")
    g.add_argument("--grpc-reflection", action="store_true", help="enable gRPC server reflection")
    g.add_argument("--grpc-workers", type=int, default=16, help="gRPC worker threads (each open stream holds one)")
    g.add_argument("--grpc-calls-per-client", type=int, default=None, metavar="N",
                   help="calls (streams included) one client address may have running; more are refused with "
                        "RESOURCE_EXHAUSTED (default: a quarter of --grpc-workers, at least 2)")
    add_connection_arguments(g, GRPC_CAPS, "one client machine (or NAT address)", prefix="grpc-")
    p.add_argument("--kueue-lease", default="", metavar="NAMESPACE/NAME",
                   help="hold admission while this Lease (Kueue's leader Lease, e.g. "
                   "kueue-system/c1f6bfd2.kueue.x-k8s.io) keeps being renewed: a Kueue controller that comes back "
                   "after the switch never admits next to toposched (docs/install.md, Adopting toposched where "
                   "Kueue runs); needs get on that Lease")
    d = p.add_argument_group("defragmentation (opt-in; docs/beyond-kueue.md)")
    d.add_argument("--defrag", action="store_true",
                   help="move checkpointable workloads (HyperPod auto-resume, toposched.io/checkpointable) so that "
                   "whole domains open for pending multi-node jobs, as `toposched defrag` plans it")
    d.add_argument("--defrag-budget", type=int, default=4, metavar="N",
                   help="at most N defragmentation evictions per ClusterQueue in any hour (default 4)")
    d.add_argument("--defrag-interval-seconds", type=float, default=60.0, help="plan at most this often (default 60)")
    add_log_format_argument(p)
    p.set_defaults(func=run)


def placement_options(names: str) -> PlacementOptions:
    """``--placement-policy`` as core options (a UserError naming the flag when unknown)."""
    from scheduler.errors import UserError  # Imports inside functions: the CLI loads commands lazily (top)

    try:
        return PlacementOptions.from_names(names)
    except ValueError as exc:
        raise UserError(f"--placement-policy: {exc}") from exc


# Connections the controller's watches and its own background writers hold (16 informers, the
# lease, the Event writer, the Kueue guard), beside its writes in flight (--concurrent-writes).
WATCH_CONNECTIONS = 24


def check_grpc_args(args: argparse.Namespace) -> None:
    """Refuse a gRPC configuration that cannot work or would serve the engine unprotected,
    before anything connects to the cluster (exit code 2, one line naming the flags)."""
    if not args.grpc_port:
        return
    from scheduler.api.limits import unprotected_bind_error
    from scheduler.errors import UserError

    if bool(args.grpc_tls_cert) != bool(args.grpc_tls_key):
        raise UserError("--grpc-tls-cert and --grpc-tls-key go together")
    if args.grpc_client_ca and not args.grpc_tls_cert:
        raise UserError("--grpc-client-ca needs --grpc-tls-cert/--grpc-tls-key (mTLS is TLS)")
    refusal = unprotected_bind_error(args.grpc_bind, bool(args.grpc_tls_cert), bool(args.grpc_token_file))
    if refusal is not None:
        raise UserError(refusal)
    calls = getattr(args, "grpc_calls_per_client", None)
    if calls is not None and calls < 1:
        raise UserError(f"--grpc-calls-per-client must be at least 1, got {calls}")
    connection_caps(args, prefix="grpc-")


def start_api(args: argparse.Namespace, controller: Any) -> Any:
    """The gRPC door on the controller's engine, or None when --grpc-port is 0 or the port is
    taken (logged: admission goes on without the API)."""
    if not args.grpc_port:
        return None
    from scheduler.api.engine import ControllerEngine
    from scheduler.api.limits import GrpcLimits
    from scheduler.api.server import ApiServer, TlsConfig, load_token
    from scheduler.errors import UserError

    check_grpc_args(args)
    caps = connection_caps(args, prefix="grpc-")
    tls = TlsConfig(args.grpc_tls_cert, args.grpc_tls_key, args.grpc_client_ca) if args.grpc_tls_cert else None
    token = load_token(args.grpc_token_file) if args.grpc_token_file else None
    engine = ControllerEngine(controller)
    try:
        server = ApiServer(engine, bind=args.grpc_bind, port=args.grpc_port, tls=tls, token=token,
                           reflection=args.grpc_reflection, max_workers=args.grpc_workers,
                           limits=GrpcLimits(calls_per_client=args.grpc_calls_per_client,
                                             max_connections=caps.total, max_connections_per_client=caps.per_client))
    except UserError as err:
        if err.exit_code == 1:  # cannot listen
            log.error("%s; running without the gRPC API", err)
            engine.close()
            return None
        raise
    return server.start()


def start_http(args: argparse.Namespace, ready: Any, metrics: Any) -> None:
    """The probes and /metrics: one server when they share bind and port, else two."""
    from scheduler.errors import UserError
    from scheduler.http.probes import exposition, serve_health, serve_metrics

    metrics_port = args.health_port if args.metrics_port is None else args.metrics_port
    metrics_bind = args.metrics_bind or args.health_bind
    scrape = exposition(metrics.registry) if metrics_port else None
    shared = bool(metrics_port) and metrics_port == args.health_port
    if shared and metrics_bind != args.health_bind:
        raise UserError("--metrics-port equals --health-port: give both the same address (--metrics-bind, "
                        "--health-bind) or /metrics its own port")
    try:
        if args.health_port:
            serve_health(args.health_bind, args.health_port, ready, scrape if shared else None)
        if scrape is not None and not shared:
            serve_metrics(metrics_bind, metrics_port, scrape)
    except OSError as exc:
        raise UserError(f"cannot listen for probes/metrics ({exc.strerror}): choose another --health-port or "
                        "--metrics-port", exit_code=1) from exc


def controller_kueue_config(args: argparse.Namespace) -> Any:
    """The Configuration, with the frameworks it enables that toposched has no integration for
    reported among what is not honoured."""
    from scheduler.adapter.kinds.registry import unmanaged_frameworks

    return kueue_config(args, unmanaged_frameworks)


def run(args: argparse.Namespace) -> int:
    """Lost leadership does not end the process: writes stop at once (the writer's fence), the
    loop idles with warm caches and campaigns again; a new term writes only after its caches
    have caught up. (controller-runtime managers exit instead; here no state outlives a term —
    each pass rebuilds its snapshot from the caches — and the local dev stack has no
    Deployment to restart an exited controller.)"""
    from scheduler.errors import UserError
    from scheduler.k8s.client import api_client
    from scheduler.k8s.gcpolicy import GcPolicy, pause_log
    from scheduler.k8s.informer import Api
    from scheduler.k8s.leader import WriteFence
    from scheduler.kube.cache import ClusterCache
    from scheduler.kube.controller import Controller
    from scheduler.kube.kueueguard import KueueGuard, parse_lease_ref
    from scheduler.kube.leading import LeadingLoop
    from scheduler.kube.metrics import ControllerMetrics
    from scheduler.kube.settings import ControllerSettings, DefragSettings
    from scheduler.kube.signing import load_signer

    check_grpc_args(args)
    try:
        kueue_lease = parse_lease_ref(args.kueue_lease) if args.kueue_lease else None
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    config = controller_kueue_config(args)
    # The writes in flight, every informer's watch, the lease and the Event writer at once.
    api = Api(api_client(args.kubeconfig, connections=max(1, args.concurrent_writes) + WATCH_CONNECTIONS))
    elector = make_elector(api, args)
    fence = WriteFence(elector)
    signer = load_signer(api, args.namespace, args.signing_secret)
    cache = ClusterCache.create(api)
    if args.defrag and (args.defrag_budget < 1 or args.defrag_interval_seconds <= 0):
        raise UserError("--defrag-budget must be at least 1 and --defrag-interval-seconds positive")
    settings = ControllerSettings(
        solver=args.solver, time_budget_s=args.time_budget_ms / 1000, resync_s=args.resync_seconds,
        node_failure_grace_s=args.node_failure_grace_seconds,
        node_unreachable_grace_s=args.node_unreachable_grace_seconds,
        deleted_node_lease_absent_s=(args.deleted_node_lease_absent_seconds
                                     if args.deleted_node_lease_absent_seconds >= 0 else None),
        storm_policy=storm_policy(args), requeue_backoff=requeue_backoff(args), config=config,
        placement_options=placement_options(args.placement_policy), domain_preemption=args.domain_preemption,
        cycles_per_pass=max(1, args.cycles_per_pass), cycle_budget_s=max(0.0, args.cycle_budget_ms) / 1000,
        concurrent_writes=max(1, args.concurrent_writes),
        defrag=DefragSettings(args.defrag_budget, args.defrag_interval_seconds) if args.defrag else None)
    metrics = ControllerMetrics(config=config)  # the release's families (docs/metrics.md)
    # GcPolicy: this process holds the caches: freeze what survives a pass (k8s/gcpolicy.py).
    controller = Controller(api, cache, settings, is_leader=fence, signer=signer, metrics=metrics,
                            gc_policy=GcPolicy())
    controller.observers.append(metrics.observe)
    synced = threading.Event()
    start_http(args, synced.is_set, metrics)
    grpc_server = start_api(args, controller)
    with pause_log():
        cache.start(controller.wakeup)
        synced.set()
        if grpc_server is not None:
            grpc_server.set_serving(True)
        log.info("caches synced; campaigning for lease %s/%s as %s", args.namespace, args.lease_name, args.identity)
        guard = KueueGuard(api, *kueue_lease) if kueue_lease else None
        loop = LeadingLoop(api, cache, elector, fence, controller.reconcile, controller.wakeup.wait,
                           args.resync_seconds, hold=guard.holds if guard else None)
        reconciler = threading.Thread(target=loop.run, name="reconcile", daemon=True)
        reconciler.start()

        def started() -> None:
            controller.leading.set()
            controller.wakeup()

        def stopped() -> None:
            controller.leading.clear()
            metrics.clear_gauges()
            controller.wakeup()

        def on_signal(_signo: int, _frame: object) -> None:
            log.info("shutting down")
            loop.stop()
            controller.stop()
            elector.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        elector.run(started, stopped)
        reconciler.join(timeout=10)
        if grpc_server is not None:
            grpc_server.stop()
        cache.stop()
        return 0
