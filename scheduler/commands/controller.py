"""``toposched controller``: the leader-elected admission controller."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
from typing import Any

log = logging.getLogger("toposched.controller")


def register(sub: Any) -> None:
    p = sub.add_parser("controller",
                       help="run the leader-elected admission controller (watches Jobs, admits Workloads)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--namespace", default="toposched-system", help="namespace of the leader-election Lease")
    p.add_argument("--lease-name", default="toposched-controller")
    p.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}", help="leader-election identity")
    p.add_argument("--solver", choices=("greedy", "cpsat", "auto"), default="auto")
    p.add_argument("--time-budget-ms", type=float, default=100.0, help="CP-SAT time budget per placement")
    p.add_argument("--resync-seconds", type=float, default=5.0, help="reconcile at least this often")
    p.add_argument("--node-failure-grace-seconds", type=float, default=3.0,
                   help="an assigned node must stay unhealthy this long before its workload is hot-swapped "
                   "or evicted (debounces flapping health labels)")
    p.add_argument("--health-bind", default="127.0.0.1")
    p.add_argument("--health-port", type=int, default=8080, help="/healthz and /readyz (0: off)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from scheduler.kube.cache import ClusterCache
    from scheduler.kube.client import api_client
    from scheduler.kube.controller import Controller
    from scheduler.kube.health_server import serve_health
    from scheduler.kube.informer import Api
    from scheduler.kube.leader import LeaseElector

    api = Api(api_client(args.kubeconfig))
    cache = ClusterCache.create(api)
    controller = Controller(api, cache, solver=args.solver, time_budget_s=args.time_budget_ms / 1000,
                            resync_s=args.resync_seconds, node_failure_grace_s=args.node_failure_grace_seconds)
    synced = threading.Event()
    if args.health_port:
        serve_health(args.health_bind, args.health_port, synced.is_set)
    cache.start(controller.wakeup)
    synced.set()
    log.info("caches synced; campaigning for lease %s/%s as %s", args.namespace, args.lease_name, args.identity)
    elector = LeaseElector(api, args.lease_name, args.namespace, args.identity)
    loop: dict[str, threading.Thread] = {}

    def started() -> None:
        controller.leading.set()
        loop["t"] = threading.Thread(target=controller.run_leading, name="reconcile", daemon=True)
        loop["t"].start()

    def stopped() -> None:
        controller.leading.clear()
        controller.wakeup()

    def on_signal(_signo: int, _frame: object) -> None:
        log.info("shutting down")
        controller.stop()
        elector.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    elector.run(started, stopped)
    if "t" in loop:
        loop["t"].join(timeout=10)
    cache.stop()
    return 0
