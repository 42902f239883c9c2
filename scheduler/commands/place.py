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

from admission.validation import manifest_errors
from scheduler.adapter.files import load_nodes, load_pods, load_topology, load_workload
from scheduler.adapter.placement import build_tree, compute_placement, to_json
from scheduler.commands._kueue_config import add_kueue_config_argument, kueue_config
from scheduler.core.placement.planner import SOLVERS, Placement
from scheduler.core.topology import TopologyTree
from scheduler.errors import UserError

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).


def register(sub: Any) -> None:
    p = sub.add_parser("place", help="compute a topology-aware placement for a Job, JobSet, PyTorchJob, MPIJob, "
                       "LeaderWorkerSet or Workload")
    p.add_argument("--nodes", type=Path, help="Nodes (kubectl get nodes -o yaml); required without --server")
    p.add_argument("--workload", type=Path, required=True,
                   help="an object of any governed kind (docs/integrations.md: a LeaderWorkerSet is one group's "
                   "Workload, a Deployment one replica's, a pod of a pod group the group's; a TrainJob's runtime "
                   "in the same file) or a Kueue Workload")
    p.add_argument(
        "--topology", type=Path, help="a Kueue Topology (default: HyperPod network layers + hostname)"
    )
    p.add_argument("--pods", type=Path, help="bound pods using capacity (kubectl get pods -A -o yaml)")
    p.add_argument("--solver", choices=SOLVERS, default="auto")
    p.add_argument("--output", choices=("json", "text"), default="text")
    p.add_argument("--time-budget-ms", type=int, default=100, help="CP-SAT time budget (default 100)")
    p.add_argument("--flavor", help="with --server: the TAS ResourceFlavor whose live tree to place on")
    add_kueue_config_argument(p)  # its featureGates switch Kueue's TAS features (docs/placement.md)
    from scheduler.api.client import add_server_arguments

    add_server_arguments(p)
    p.set_defaults(func=run)


def to_text(tree: TopologyTree, placement: Placement) -> str:
    return render_text(to_json(tree, placement))


def render_text(doc: dict[str, Any]) -> str:
    """The text form of a :func:`to_json` document (also used for gRPC answers)."""
    if not doc["fits"]:
        return f"does not fit: {doc['reason']}"
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
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "server", None):
        if args.kueue_config is not None:
            raise UserError("--kueue-config is for offline placement (a server places with its own Configuration)")
        return run_remote(args)
    if args.nodes is None:
        raise UserError("--nodes FILE is required (or --server HOST:PORT to ask a running engine)")
    if args.flavor:
        raise UserError("--flavor needs --server (offline placement uses --topology)")
    nodes = load_nodes(args.nodes)
    pods = load_pods(args.pods) if args.pods else []
    config = kueue_config(args)
    workload = load_workload(args.workload, partial(manifest_errors, gates=config.feature_gates))
    topology = load_topology(args.topology) if args.topology else None
    tree = build_tree(nodes, pods, topology)
    placement = compute_placement(tree, workload, args.solver, args.time_budget_ms, config)
    return _print(args, to_json(tree, placement))


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

    load_workload(args.workload, manifest_errors)
    request = pb.PlaceRequest(
        workload=pb.WorkloadInput(manifest=args.workload.read_bytes()),
        solver=pb.Solver.Value(f"SOLVER_{args.solver.upper()}"), time_budget_ms=max(args.time_budget_ms, 0),
        flavor=args.flavor or "",
    )
    if args.nodes:
        load_nodes(args.nodes)
        request.nodes = args.nodes.read_bytes()
    if args.pods:
        if not args.nodes:
            raise UserError("--pods with --server needs --nodes too (the live snapshot has its own pods)")
        load_pods(args.pods)
        request.pods = args.pods.read_bytes()
    if args.topology:
        load_topology(args.topology)
        request.topology = args.topology.read_bytes()
    with api_client.connect_from_args(args) as conn:
        response = conn.call("Place", request)
    return _print(args, place_response_to_json(response))
