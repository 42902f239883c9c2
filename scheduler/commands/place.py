"""``toposched place``: where would this job go on these nodes?

Exit 0 when it fits, 1 when it does not, 2 on invalid input. Pod sets without a topology
annotation are placed as Kueue's implicit TAS does on a TAS-only ClusterQueue (unconstrained).

With ``--server HOST:PORT`` the same question goes to a running engine (gRPC ``Place``, see
docs/api.md): nodes come from its live snapshot unless ``--nodes`` is given, and the output is
the same. The placement library (``build_tree``, ``compute_placement``, ``to_json``) is
``scheduler.adapter.placement``, which the gRPC servicer calls too, so both doors give the
same answers and messages.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

from scheduler.adapter.files import (
    NODES_EXPECTED,
    PODS_EXPECTED,
    TOPOLOGY_EXPECTED,
    decode_text,
    load_nodes,
    load_pods,
    load_topology,
    load_workload,
    nodes_from_documents,
    parse_documents,
    pods_from_documents,
    read_bytes,
    topology_from_documents,
    workload_from_documents,
)
from scheduler.adapter.kinds.workloads import EXPECTED_KINDS
from scheduler.adapter.manifest.checks import manifest_errors
from scheduler.adapter.manifest.shape import object_errors
from scheduler.adapter.placement import (
    MAX_TIME_BUDGET_MS,
    build_tree,
    check_levels,
    check_time_budget_ms,
    compute_placement,
    to_json,
)
from scheduler.commands._kueue_config import add_kueue_config_argument, kueue_config
from scheduler.core.config import DEFAULT_KUEUE_RELEASE
from scheduler.core.placement.planner import SOLVERS, Placement
from scheduler.core.topology import TopologyTree
from scheduler.errors import UserError

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).


def register(sub: Any) -> None:
    p = sub.add_parser("place", help="compute a topology-aware placement for a Job, JobSet, PyTorchJob, MPIJob, "
                       "LeaderWorkerSet or Workload")
    p.add_argument("--nodes", type=Path, metavar="FILE",
                   help="Nodes (kubectl get nodes -o yaml) or a cluster description (examples/clusters/); "
                        "required without --server")
    p.add_argument("--cluster", type=Path, metavar="FILE",
                   help="a cluster description (examples/clusters/*.yaml), as `toposched topology --cluster`; "
                        "the same as --nodes FILE")
    p.add_argument("--workload", type=Path, required=True,
                   help="an object of any governed kind (docs/integrations.md: a LeaderWorkerSet is one group's "
                   "Workload, a Deployment one replica's, a pod of a pod group the group's; a TrainJob's runtime "
                   "in the same file) or a Kueue Workload")
    p.add_argument(
        "--topology", type=Path, help="a Kueue Topology (default: HyperPod network layers + hostname)"
    )
    p.add_argument("--pods", type=Path, metavar="FILE",
                   help="bound pods using capacity (kubectl get pods -A -o yaml), those of topology-admitted "
                        "jobs included; it cannot see capacity Kueue has admitted but whose pods are not bound "
                        "yet (ask a running engine with --server for that)")
    p.add_argument("--solver", choices=SOLVERS, default="auto")
    p.add_argument("--output", choices=("json", "text"), default="text")
    p.add_argument("--time-budget-ms", type=int, default=100,
                   help=f"CP-SAT time budget, 1 to {MAX_TIME_BUDGET_MS} (default 100)")
    p.add_argument("--flavor", help="with --server: the TAS ResourceFlavor whose live tree to place on")
    add_kueue_config_argument(p)  # its featureGates switch Kueue's TAS features (docs/placement.md)
    from scheduler.api.client import add_server_arguments

    add_server_arguments(p)
    p.set_defaults(func=run)


def to_text(tree: TopologyTree, placement: Placement) -> str:
    return render_text(to_json(tree, placement))


EMPTY_CLUSTER_NOTE = ("placed on an empty cluster: no running pods were given, so the capacity they use counts as "
                      "free; give them with --pods FILE (kubectl get pods -A -o yaml > pods.yaml), or ask the "
                      "running engine with --server HOST:PORT (its live nodes, pods and admitted Workloads)")


def with_occupancy(doc: dict[str, Any], empty: bool) -> dict[str, Any]:
    """``emptyCluster`` on the answer (and the note saying how to give the running pods): an
    offline placement without ``--pods`` sees every node free, which a busy cluster is not."""
    doc["emptyCluster"] = empty
    doc["note"] = EMPTY_CLUSTER_NOTE if empty else ""
    return doc


def render_text(doc: dict[str, Any]) -> str:
    """The text form of a :func:`to_json` document (also used for gRPC answers)."""
    note = f"\nnote: {doc['note']}" if doc.get("emptyCluster") and doc.get("note") else ""
    if not doc["fits"]:
        return f"does not fit: {doc['reason']}{note}"
    solver = doc["solver"]
    proof = "proven optimal" if doc["optimal"] else "not proven optimal" if solver == "cpsat" else ""
    lines = [f"fits (solver {solver}{', ' + proof if proof else ''})"]
    for ps in doc["podSets"]:
        rows = ps["assignments"]
        n_nodes = sum(len(row["nodes"]) for row in rows)
        lines.append(f"pod set {ps['name']}: {ps['count']} pod(s) in {len(rows)} leaf domain(s), {n_nodes} node(s)")
        for level, paths in ps["domains"].items():
            lines.append(f"  {level}: {len(paths)} domain(s): {', '.join(paths)}")
        for row in rows:
            lines.append(f"    {row['domain']}: {row['count']}  (nodes: {', '.join(row['nodes'])})")
    return "\n".join(lines) + note


def run(args: argparse.Namespace) -> int:
    check_time_budget_ms(args.time_budget_ms)
    if getattr(args, "server", None):
        if args.kueue_config is not None:
            raise UserError("--kueue-config is for offline placement (a server places with its own Configuration)")
        if args.kueue_version != DEFAULT_KUEUE_RELEASE:
            raise UserError("--kueue-version is for offline placement (a server places as its own Kueue release)")
        return run_remote(args)
    if args.nodes and args.cluster:
        raise UserError("give --nodes or --cluster, not both (both take a node list or a cluster description)")
    node_file = args.nodes or args.cluster
    if node_file is None:
        raise UserError("--nodes FILE (or --cluster FILE) is required (or --server HOST:PORT to ask a running engine)")
    if args.flavor:
        raise UserError("--flavor needs --server (offline placement uses --topology)")
    nodes = load_nodes(node_file, object_errors, "nodes file" if args.nodes else "cluster file")
    pods = load_pods(args.pods, object_errors) if args.pods else []
    config = kueue_config(args)
    workload = load_workload(args.workload, partial(manifest_errors, gates=config.feature_gates), config.release)
    topology = load_topology(args.topology) if args.topology else None
    tree = build_tree(nodes, pods, topology)
    check_levels(tree, workload, f"workload file {args.workload}")
    placement = compute_placement(tree, workload, args.solver, args.time_budget_ms, config)
    return _print(args, with_occupancy(to_json(tree, placement), empty=args.pods is None))


def _print(args: argparse.Namespace, doc: dict[str, Any]) -> int:
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        print(render_text(doc))
    sys.stdout.flush()
    return 0 if doc["fits"] else 1


def run_remote(args: argparse.Namespace) -> int:
    """``--server``: the files are checked here (same messages as offline), then sent as they are."""
    from scheduler.api import client as api_client
    from scheduler.api.convert import place_response_to_json
    from scheduler.api.gen.toposched.v1 import placement_pb2 as pb

    def checked(path: Path, what: str, expected: str, read: Any) -> bytes:
        data = read_bytes(path, what)  # once: a pipe (<(kubectl ...)) cannot be read twice
        read(parse_documents(decode_text(data, what, path), what, path, expected), what, path)
        return data

    manifest = checked(args.workload, "workload file", EXPECTED_KINDS,
                       partial(workload_from_documents, check=manifest_errors))
    request = pb.PlaceRequest(
        workload=pb.WorkloadInput(manifest=manifest),
        solver=pb.Solver.Value(f"SOLVER_{args.solver.upper()}"), time_budget_ms=args.time_budget_ms,
        flavor=args.flavor or "",
    )
    node_file = args.nodes or args.cluster
    if node_file:
        request.nodes = checked(node_file, "nodes file", NODES_EXPECTED,
                                partial(nodes_from_documents, check=object_errors))
    if args.pods:
        if not node_file:
            raise UserError("--pods with --server needs --nodes too (the live snapshot has its own pods)")
        request.pods = checked(args.pods, "pods file", PODS_EXPECTED, partial(pods_from_documents, check=object_errors))
    if args.topology:
        request.topology = checked(args.topology, "topology file", TOPOLOGY_EXPECTED, topology_from_documents)
    with api_client.connect_from_args(args) as conn:
        response = conn.call("Place", request)
    # --nodes without --pods: the engine places on those nodes with no pods (its live pods belong to its nodes)
    return _print(args, with_occupancy(place_response_to_json(response), empty=bool(node_file) and not args.pods))
