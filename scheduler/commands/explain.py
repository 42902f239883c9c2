"""``toposched explain <namespace>/<job>``: why is this job pending?

Quota (which resource/flavor is short and by how much, borrowing in the ClusterQueue and its
cohort), topology (the largest domain at the requested level and how many pods it takes now
and on an empty cluster), health (nodes excluded and why), queue position, and the condition
the controller last wrote — in words (``--output text``) or as JSON. The answer comes from
``scheduler.explain.explain``, the code behind the gRPC ``Explain`` as well.

With ``--kubeconfig`` (or $KUBECONFIG / in-cluster) the cluster is read once (one list call
per resource) and turned into the controller's snapshot with ``kube.snapshot.build_snapshot``;
with ``--server HOST:PORT`` a running engine answers from its live caches.

Exit 0 (answered), 1 (no such Job/Workload, or the engine is unreachable), 2 (bad input).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from scheduler.commands._kueue_config import add_kueue_config_argument, kueue_config
from scheduler.core.config import KUEUE_DEFAULTS
from scheduler.errors import UserError

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def register(sub: Any) -> None:
    p = sub.add_parser("explain", help="why is a job pending (quota, topology, health, queue position)")
    p.add_argument("target", metavar="NAMESPACE/JOB", help="the Job (or its Kueue Workload), e.g. team-a/train-1")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    p.add_argument("--solver", choices=("auto", "greedy", "cpsat"), default="auto",
                   help="placement solver for the what-if cycle (default auto, as the controller)")
    from scheduler.api.client import add_server_arguments

    add_server_arguments(p)
    add_kueue_config_argument(p)
    p.set_defaults(func=run)


def parse_target(target: str) -> tuple[str, str]:
    ns, sep, name = target.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise UserError(f"expected NAMESPACE/JOB, got {target!r}")
    for what, value in (("namespace", ns), ("name", name)):
        if len(value) > 253 or not NAME_RE.match(value):
            raise UserError(f"{what} {value!r} is not a valid Kubernetes name (lowercase letters, digits, '-', '.')")
    return ns, name


def read_cluster(api: Any) -> Any:
    """One list call per resource -> an ``EngineSnapshot`` (what the informers would hold)."""
    from scheduler.adapter.kinds.registry import KINDS, with_kind
    from scheduler.api.engine import EngineSnapshot
    from scheduler.k8s import informer as inf
    from scheduler.kube.jobs import resource_of

    def items(resource: Any, **query: Any) -> list[dict[str, Any]]:
        try:
            return list((api.list(resource, **query) or {}).get("items") or [])
        except Exception as exc:  # the API client's errors: one line, exit 1
            status = getattr(exc, "status", None)
            if status == 404:
                return []  # CRD not installed (e.g. no Cohort type): nothing of that kind
            raise UserError(f"cannot list {resource.plural}: {getattr(exc, 'reason', None) or exc}", exit_code=1) \
                from exc

    jobs = [with_kind(kind, j) for kind in KINDS
            for j in items(resource_of(kind), labelSelector="kueue.x-k8s.io/queue-name")]
    return EngineSnapshot(
        nodes=items(inf.NODES), pods=items(inf.PODS), flavors=items(inf.RESOURCE_FLAVORS),
        topologies=items(inf.TOPOLOGIES), workloads=items(inf.WORKLOADS), jobs=jobs,
        cluster_queues=items(inf.CLUSTER_QUEUES), local_queues=items(inf.LOCAL_QUEUES), cohorts=items(inf.COHORTS),
        namespaces=items(inf.NAMESPACES), workload_priority_classes=items(inf.WORKLOAD_PRIORITY_CLASSES),
        priority_classes=items(inf.PRIORITY_CLASSES), source="kubeconfig")


def explain_local(kubeconfig: str | None, namespace: str, name: str, solver: str,
                  config: Any = KUEUE_DEFAULTS) -> dict[str, Any]:
    from scheduler.explain import NotFound, explain
    from scheduler.k8s.client import api_client
    from scheduler.k8s.informer import Api

    snap = read_cluster(Api(api_client(kubeconfig)))
    try:
        return explain(snap, namespace, name, solver=solver, config=config)
    except NotFound as exc:
        raise UserError(str(exc), exit_code=1) from exc


def explain_remote(args: Any, namespace: str, name: str) -> dict[str, Any]:
    import grpc

    from scheduler.api.client import connect_from_args, rpc_user_error
    from scheduler.api.convert import explain_response_to_dict
    from scheduler.api.gen.toposched.v1 import placement_pb2 as pb

    with connect_from_args(args) as conn:
        try:
            resp = conn.stub.Explain(pb.ExplainRequest(namespace=namespace, name=name), timeout=conn.timeout_s,
                                     metadata=conn.metadata)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.NOT_FOUND:
                raise UserError(err.details() or "not found", exit_code=1) from err
            raise rpc_user_error(err, conn.target, "Explain") from err
    return explain_response_to_dict(resp)


def run(args: Any) -> int:
    namespace, name = parse_target(args.target)
    if args.server and args.kubeconfig:
        raise UserError("--server and --kubeconfig are alternatives: give one")
    if args.server and args.kueue_config:
        raise UserError("--kueue-config applies to a local answer; with --server the engine uses its own")
    result = explain_remote(args, namespace, name) if args.server else explain_local(
        args.kubeconfig, namespace, name, args.solver, kueue_config(args))
    if args.output == "json":
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    else:
        from scheduler.explain import to_text

        sys.stdout.write(to_text(result))
    return 0
