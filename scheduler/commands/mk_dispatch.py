"""``toposched mk-dispatch``: toposched's topology-aware MultiKueue dispatcher, run against the
manager cluster (the one running Kueue with MultiKueue; docs/multicluster.md).

Off unless run, and it refuses to start unless the manager's Kueue Configuration
(``--kueue-configmap``, Kueue's ``kueue-system/kueue-manager-config``) names toposched's
dispatcher in ``multiKueue.dispatcherName``: with Kueue's AllAtOnce or Incremental active,
Kueue writes the nominations itself. Each worker with a toposched gRPC endpoint is named on its
MultiKueueCluster (``toposched.io/grpc-endpoint``, ``toposched.io/grpc-secret``); the others
are nominated as Kueue's Incremental nominates them.
Exit 0 (``--once`` done, or stopped), 1 (the manager cannot be read), 2 (bad input or refused).
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from scheduler.commands._leader_election import add_leader_election_arguments, make_elector
from scheduler.errors import UserError

# Imports inside functions: the Kubernetes client and grpc load only when the command runs, so
# `toposched --help` stays fast (scheduler.cli imports every command module to register it).

log = logging.getLogger(__name__)
CONFIG_KEY = "controller_manager_config.yaml"
# Its own Lease, beside the controller's: on a manager that also runs toposched's controller
# the two elections are independent.
LEASE_NAME = "toposched-mk-dispatcher"


def register(sub: Any) -> None:
    p = sub.add_parser("mk-dispatch", help="nominate MultiKueue workers by topology (the manager's external "
                                           "dispatcher; docs/multicluster.md)")
    p.add_argument("--kubeconfig", default=None, help="the manager's kubeconfig (default: $KUBECONFIG, "
                                                      "~/.kube/config, in-cluster)")
    p.add_argument("--namespace", default="toposched-system",
                   help="where the workers' credential Secrets and the leader-election Lease are (default "
                        "toposched-system)")
    add_leader_election_arguments(p, LEASE_NAME)
    p.add_argument("--kueue-configmap", default="kueue-system/kueue-manager-config", metavar="NS/NAME",
                   help=f"the manager's Kueue Configuration ConfigMap (key {CONFIG_KEY})")
    p.add_argument("--round-timeout", type=float, default=None, metavar="SECONDS",
                   help="how long a nomination may wait for admission before widening (default: Kueue's "
                        "Incremental round, 300)")
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS", help="between passes (default 2)")
    p.add_argument("--once", action="store_true", help="campaign once; one pass if this replica leads, then release "
                                                       "the lease and exit")
    p.set_defaults(func=run)


def check_configuration(api: Any, where: str) -> None:
    import yaml
    from kubernetes.client.exceptions import ApiException

    from scheduler.adapter.mk_dispatch import dispatcher_refusal
    from scheduler.k8s.informer import Resource

    namespace, _, name = where.partition("/")
    if not name:
        raise UserError(f"--kueue-configmap {where}: expected NAMESPACE/NAME")
    try:
        cm = api.get(Resource("", "v1", "configmaps"), name, namespace)
    except ApiException as exc:
        raise UserError(f"--kueue-configmap {where}: cannot read ({exc.status} {exc.reason}); the dispatcher needs "
                        "get on that ConfigMap to check that Kueue's own dispatcher stands aside", exit_code=1) from exc
    try:
        doc = yaml.safe_load((cm.get("data") or {}).get(CONFIG_KEY) or "") or {}
    except yaml.YAMLError as exc:
        raise UserError(f"--kueue-configmap {where}: {CONFIG_KEY} is not YAML ({exc})") from exc
    refusal = dispatcher_refusal(doc if isinstance(doc, dict) else {}, where)
    if refusal is not None:
        raise UserError(refusal)


def run(args: argparse.Namespace) -> int:
    """Leader-elected as the controller is (the same Lease protocol, flags and fence): replicas
    that do not hold the dispatcher's Lease ask no worker and write nothing."""
    import signal
    import threading
    from functools import partial

    from scheduler.api.dispatch_leading import LeadingDispatch
    from scheduler.api.dispatch_workers import make_worker
    from scheduler.api.dispatcher import Dispatcher
    from scheduler.core.kueue.mk_dispatch import ROUND_TIMEOUT_S
    from scheduler.k8s.client import api_client
    from scheduler.k8s.informer import Api
    from scheduler.k8s.leader import WriteFence

    if args.round_timeout is not None and args.round_timeout <= 0:
        raise UserError(f"--round-timeout: must be > 0, got {args.round_timeout}")
    api = Api(api_client(args.kubeconfig))
    check_configuration(api, args.kueue_configmap)
    elector = make_elector(api, args)
    fence = WriteFence(elector)
    conns: dict[str, Any] = {}
    dispatcher = Dispatcher(api, partial(make_worker, api, args.namespace, conns), time.time,
                            args.round_timeout if args.round_timeout is not None else ROUND_TIMEOUT_S,
                            may_write=fence)
    loop = LeadingDispatch(dispatcher, elector, fence, args.interval, _print_written)
    try:
        if args.once:
            if not elector.step():
                log.warning("lease %s/%s is held by another replica: nothing dispatched", args.namespace,
                            args.lease_name)
                return 0
            loop.run_pass()
            elector.release()
            return 0
        passes = threading.Thread(target=loop.run, name="dispatch", daemon=True)
        passes.start()

        def on_signal(_signo: int, _frame: object) -> None:
            loop.stop()
            elector.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        log.info("campaigning for lease %s/%s as %s", args.namespace, args.lease_name, args.identity)
        elector.run(lambda: None, lambda: None)  # the fence, not these callbacks, stops the writes
        passes.join(timeout=10)
        return 0
    finally:
        for conn in conns.values():
            conn.close()


def _print_written(written: dict[str, tuple[str, ...]]) -> None:
    for key, nominated in written.items():
        print(f"{key}: nominated {', '.join(nominated)}", flush=True)
