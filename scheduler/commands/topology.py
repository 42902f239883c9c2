"""``toposched topology``: the cluster's network topology as Mermaid, HTML or JSON.

The same shell serves ``scripts/visualize_topology`` (the drop-in for AWS's
``visualize_topology.sh``): one node list read (live cluster via kubeconfig, ``--nodes FILE``
with ``kubectl get nodes -o json|yaml`` output, or ``--cluster`` with a fake-cluster
description), rendered by the pure engine in ``scheduler/topoview``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scheduler.errors import UserError

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).

FORMATS = ("mermaid", "html", "json", "svg")
HOSTNAME = "kubernetes.io/hostname"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# The instance types AWS's visualize_topology.sh (awsome-distributed-training,
# 1.architectures/7.sagemaker-hyperpod-eks/task-governance/) draws: the union of its versions'
# lists (those EC2 reports a network topology for), each with and without HyperPod's "ml."
# prefix. Its other nodes it refuses (first version) or skips with a line each (later ones);
# scripts/visualize_topology skips them with a line per type, and draws them when asked to
# (--include-instance-types).
AWS_SCRIPT_INSTANCE_TYPES = tuple(prefix + t for t in (
    "hpc6a.48xlarge", "hpc6id.32xlarge", "hpc7a.12xlarge", "hpc7a.24xlarge", "hpc7a.48xlarge", "hpc7a.96xlarge",
    "hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge", "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge",
    "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6e-gb200.36xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge",
    "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge") for prefix in ("", "ml."))


def add_arguments(parser: argparse.ArgumentParser, *, default_format: str = "mermaid",
                  with_server: bool = False, aws_instance_types: bool = False) -> None:
    src = parser.add_argument_group("input (default: the live cluster from kubeconfig)")
    src.add_argument("--nodes", type=Path, metavar="FILE",
                     help="node list: output of `kubectl get nodes -o json` (or -o yaml)")
    src.add_argument("--pods", type=Path, metavar="FILE",
                     help="pod list (`kubectl get pods -A -o json`) for GPU occupancy and workloads; "
                          "read live when --nodes is not given")
    src.add_argument("--cluster", type=Path, metavar="FILE",
                     help="fake-cluster description (examples/clusters/*.yaml) instead of a node list")
    src.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    src.add_argument("--context", help="kubeconfig context")
    src.add_argument("--no-pods", action="store_true", help="do not read pods (no GPU occupancy)")
    lv = parser.add_argument_group("levels")
    lv.add_argument("--levels", metavar="LABEL[,LABEL...]",
                    help="node label keys to use as layers, widest first "
                         "(default: every topology.k8s.aws/network-node-layer-N present)")
    lv.add_argument("--topology", type=Path, metavar="FILE",
                    help="take the levels from a Kueue Topology object (spec.levels[].nodeLabel)")
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=FORMATS, default=default_format,
                     help=f"what to print (default {default_format})")
    out.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the output here, not stdout")
    out.add_argument("--html", type=Path, metavar="FILE",
                     help="also write a self-contained HTML page (health colours, GPU occupancy, workloads)")
    out.add_argument("--collapse-at", type=int, metavar="N", default=None,
                     help="HTML/SVG: above N nodes show per-layer-3 domain summaries instead of nodes "
                          "(default: automatic above 400; 0 = never)")
    out.add_argument("--title", default="Cluster topology", help="HTML page title")
    if aws_instance_types:
        nodes_group = parser.add_argument_group("instance types (as AWS's visualize_topology.sh)")
        nodes_group.add_argument(
            "--include-instance-types", metavar="TYPE[,TYPE...]", default="",
            help="also draw nodes of these instance types (shell patterns: 'ml.g5.*'; '*' for every type); "
                 "by default only the types AWS's visualize_topology.sh draws (p4d/p4de/p5/p5e/p5en/p6, "
                 "trn1/trn2, hpc6/7, p3dn) are, and the others are skipped with a warning per type")
    pol = parser.add_argument_group("health policy")
    pol.add_argument("--unlabelled-unhealthy", action="store_true",
                     help="treat nodes without sagemaker.amazonaws.com/node-health-status as unhealthy")
    pol.add_argument("--require-deep-health", action="store_true",
                     help="require sagemaker.amazonaws.com/deep-health-check-status=Passed")
    if with_server:
        from scheduler.api.client import add_server_arguments

        srv = parser.add_argument_group("running engine (gRPC, docs/api.md)")
        srv.add_argument("--flavor", help="with --server: report the capacity of this TAS ResourceFlavor")
        add_server_arguments(srv)


def register(sub: Any) -> None:
    parser = sub.add_parser("topology", help="show the network topology (Mermaid like visualize_topology.sh, "
                                             "HTML, JSON)",
                            description=__doc__.split("\n\n")[0])
    add_arguments(parser, with_server=True)
    parser.set_defaults(func=run)


# ---------------------------------------------------------------------------- reading
# One reader for `place` and `topology` (scheduler.adapter.files): the same bounds, the same
# lines for the same mistakes, and a cluster description (examples/clusters/) works as --nodes
# or --cluster alike.


def load_node_file(path: Path, what: str = "nodes file") -> list[tuple[str, dict[str, Any]]]:
    from scheduler.adapter.files import load_node_objects
    from scheduler.adapter.manifest.shape import object_errors

    return load_node_objects(path, what, object_errors)


def load_pod_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    from scheduler.adapter.files import load_pod_objects
    from scheduler.adapter.manifest.shape import object_errors

    return load_pod_objects(path, "pods file", object_errors)


def load_levels(args: argparse.Namespace) -> list[str] | None:
    if args.levels and args.topology:
        raise UserError("give --levels or --topology, not both")
    if args.levels:
        levels = [x.strip() for x in args.levels.split(",") if x.strip()]
        if not levels:
            raise UserError("--levels: no label keys given")
        return [x for x in levels if x != HOSTNAME] or None
    if args.topology:
        from scheduler.adapter.files import load_topology

        _, topology_levels = load_topology(args.topology)
        return [x for x in topology_levels if x != HOSTNAME] or None
    return None


def read_live(args: argparse.Namespace, want_pods: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One paginated node list (and, if wanted, one pod list) from the cluster in kubeconfig."""
    try:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
    except ImportError as exc:  # pragma: no cover - the dependency is declared
        raise UserError("the kubernetes Python client is not installed (pip install kubernetes)") from exc
    try:
        api_client = config.new_client_from_config(
            config_file=str(args.kubeconfig) if args.kubeconfig else None, context=args.context)
    except (ConfigException, OSError, TypeError) as exc:
        try:
            config.load_incluster_config()
            api_client = client.ApiClient()
        except ConfigException:
            raise UserError(f"no cluster to read: {exc}; give --kubeconfig, or --nodes FILE") from exc
    from scheduler.k8s.proxy import apply_proxy, kubeconfig_proxy_url

    proxy_url = kubeconfig_proxy_url(str(args.kubeconfig) if args.kubeconfig else None, args.context)
    core = client.CoreV1Api(apply_proxy(api_client, proxy_url=proxy_url))

    def paged(fn: Callable[..., Any], **kw: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = None
        while True:
            resp = fn(limit=500, _continue=token, **kw) if token else fn(limit=500, **kw)
            items.extend(api_client.sanitize_for_serialization(resp.items))
            token = resp.metadata._continue
            if not token:
                return items

    try:
        nodes = paged(core.list_node)
        pods = paged(core.list_pod_for_all_namespaces, field_selector="spec.nodeName!=") if want_pods else []
    except client.exceptions.ApiException as exc:
        raise UserError(f"reading the cluster failed: {exc.status} {exc.reason}", exit_code=1) from exc
    except Exception as exc:  # urllib3 connection errors and friends
        raise UserError(f"cannot reach the cluster: {exc.__class__.__name__}: {exc}", exit_code=1) from exc
    return nodes, pods


# ---------------------------------------------------------------------------- running


def build(args: argparse.Namespace) -> tuple[Any, str]:
    """Read everything once and build the view; returns (view, source description)."""
    from scheduler.adapter.topology_view import named_objects, view_from_located
    from scheduler.core.health import HealthPolicy

    if args.nodes and args.cluster:
        raise UserError("give --nodes or --cluster, not both (both take a node list or a cluster description)")
    levels = load_levels(args)
    needs_pods = not args.no_pods and (args.html is not None or args.format in ("html", "json", "svg"))
    pods: list[tuple[str, Any]] = []
    if args.nodes or args.cluster:
        path = args.nodes or args.cluster
        nodes, source = load_node_file(path, "nodes file" if args.nodes else "cluster file"), str(path)
    else:
        nodes_raw, pods_raw = read_live(args, needs_pods and not args.pods)
        source = "live cluster"
        nodes, pods = named_objects(nodes_raw, "Node", source), named_objects(pods_raw, "Pod", source)
    if args.pods and not args.no_pods:
        pods = load_pod_file(args.pods)
    skipped: list[str] = []
    if getattr(args, "include_instance_types", None) is not None:
        nodes, skipped = aws_script_nodes(nodes, args.include_instance_types, source)
    policy = HealthPolicy(unlabelled_nodes_healthy=not args.unlabelled_unhealthy,
                          require_deep_health_passed=args.require_deep_health)
    view = view_from_located(nodes, pods, levels, policy, source)
    view.warnings[:0] = skipped
    return view, source


def aws_script_nodes(nodes: list[tuple[str, Any]], include: str,
                     source: str) -> tuple[list[tuple[str, Any]], list[str]]:
    """The nodes AWS's visualize_topology.sh would draw, plus those of the ``include`` patterns;
    and one warning per instance type left out. UserError (exit 1, as AWS's script) when none
    is left."""
    patterns = [p.strip() for p in include.split(",") if p.strip()]
    kept: list[tuple[str, Any]] = []
    left_out: dict[str, int] = {}
    for located in nodes:
        labels = (located[1].get("metadata") or {}).get("labels") or {}
        itype = str(labels.get(INSTANCE_TYPE_LABEL) or "")
        if itype in AWS_SCRIPT_INSTANCE_TYPES or any(fnmatch.fnmatchcase(itype, p) for p in patterns):
            kept.append(located)
        else:
            left_out[itype] = left_out.get(itype, 0) + 1
    def what(itype: str, count: int) -> str:
        return f"{count} node(s) of instance type {itype or '(none: no ' + INSTANCE_TYPE_LABEL + ' label)'}"

    if not kept:
        found = "; ".join(what(t, n) for t, n in sorted(left_out.items()))
        every = ",".join(t or "*" for t in sorted(left_out))
        raise UserError(f"no node in {source} is of an instance type AWS's visualize_topology.sh draws (found "
                        f"{found}); add --include-instance-types '{every}' to draw them", exit_code=1)
    return kept, [f"skipped {what(t, n)}: AWS's visualize_topology.sh does not draw this type; add "
                  f"--include-instance-types '{t or '*'}' to draw them" for t, n in sorted(left_out.items())]


def build_remote(args: argparse.Namespace) -> tuple[Any, str]:
    """``--server``: the engine's live snapshot via gRPC GetTopology, as the same view."""
    from scheduler.api import client as api_client
    from scheduler.api.convert import response_to_view
    from scheduler.api.gen.toposched.v1 import placement_pb2 as pb

    for flag in ("nodes", "pods", "cluster", "kubeconfig", "context"):
        if getattr(args, flag, None):
            raise UserError(f"give --server or --{flag}, not both (the engine reads its own cluster)")
    request = pb.GetTopologyRequest(levels=load_levels(args) or [], flavor=args.flavor or "",
                                    unlabelled_unhealthy=args.unlabelled_unhealthy,
                                    require_deep_health=args.require_deep_health)
    with api_client.connect_from_args(args) as conn:
        response = conn.call("GetTopology", request)
    return response_to_view(response), f"{response.source or 'engine'} at {args.server}"


def render(view: Any, fmt: str, args: argparse.Namespace, source: str) -> str:
    from scheduler.topoview import render_html, render_mermaid, render_svg, view_to_dict

    if fmt == "mermaid":
        return str(render_mermaid(view))
    if fmt == "html":
        return str(render_html(view, title=args.title, collapse_at=args.collapse_at, source=source))
    if fmt == "svg":
        return str(render_svg(view, collapse_at=args.collapse_at)) + "\n"
    return json.dumps(view_to_dict(view), indent=2) + "\n"


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc


def run(args: argparse.Namespace, out: Any = None, err: Any = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    view, source = build_remote(args) if getattr(args, "server", None) else build(args)
    for warning in view.warnings:
        print(f"warning: {warning}", file=err)
    text = render(view, args.format, args, source)
    if args.output:
        _write(args.output, text)
    else:
        out.write(text)
    if args.html:
        _write(args.html, render(view, "html", args, source))
        print(f"wrote {args.html} ({len(view.nodes)} nodes)", file=err)
    return 0


def script_main(argv: Sequence[str] | None = None, prog: str = "visualize_topology") -> int:
    """Entry point of scripts/visualize_topology."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Draw the cluster's EC2 network topology as a Mermaid flowchart "
        "(drop-in for visualize_topology.sh), optionally as a self-contained HTML page.")
    add_arguments(parser, aws_instance_types=True)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UserError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
