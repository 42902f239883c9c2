"""``toposched place``: where would this job go on these nodes?

Exit 0 when it fits, 1 when it does not, 2 on invalid input. Pod sets without a topology
annotation are placed as Kueue's implicit TAS does on a TAS-only ClusterQueue (unconstrained).

With ``--server HOST:PORT`` the same question goes to a running engine (gRPC ``Place``, see
docs/api.md): nodes come from its live snapshot unless ``--nodes`` is given, and the output is
the same. The gRPC servicer calls :func:`build_tree`, :func:`compute_placement` and
:func:`to_json` of this module, so both doors give the same answers and messages.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scheduler.commands._files import load_nodes, load_pods, load_topology, load_workload
from scheduler.core.nodes import NodeInfo, PodInfo
from scheduler.core.placement.planner import SOLVERS, Placement, PodSetPlacement, place_workload
from scheduler.core.topology import DEFAULT_TOPOLOGY_NAME, TopologyTree, default_levels_for
from scheduler.core.workload import WorkloadSpec
from scheduler.errors import UserError


def register(sub: Any) -> None:
    p = sub.add_parser("place", help="compute a topology-aware placement for a Job or Workload")
    p.add_argument("--nodes", type=Path, help="Nodes (kubectl get nodes -o yaml); required without --server")
    p.add_argument("--workload", type=Path, required=True, help="a batch/v1 Job or a Kueue Workload")
    p.add_argument(
        "--topology", type=Path, help="a Kueue Topology (default: HyperPod network layers + hostname)"
    )
    p.add_argument("--pods", type=Path, help="bound pods using capacity (kubectl get pods -A -o yaml)")
    p.add_argument("--solver", choices=SOLVERS, default="auto")
    p.add_argument("--output", choices=("json", "text"), default="text")
    p.add_argument("--time-budget-ms", type=int, default=100, help="CP-SAT time budget (default 100)")
    p.add_argument("--flavor", help="with --server: the TAS ResourceFlavor whose live tree to place on")
    from scheduler.api.client import add_server_arguments

    add_server_arguments(p)
    p.set_defaults(func=run)


def touched_domains(tree: TopologyTree, ps: PodSetPlacement) -> dict[str, list[str]]:
    """Distinct domain values touched at every topology level."""
    out: dict[str, set[str]] = {level: set() for level in tree.levels}
    for dom in ps.domains:
        leaf = tree.leaf_for_values(ps.levels, dom.values)
        if leaf is None:
            continue
        path = tree.paths[-1][leaf]
        for level, value in zip(tree.levels, path, strict=True):
            out[level].add(value)
    return {level: sorted(values) for level, values in out.items()}


def node_assignments(tree: TopologyTree, ps: PodSetPlacement) -> list[dict[str, Any]]:
    rows = []
    for dom in ps.domains:
        leaf = tree.leaf_for_values(ps.levels, dom.values)
        nodes = tree.leaf_nodes[leaf] if leaf is not None else ()
        # A leaf is one node when hostname is the lowest level; otherwise name the leaf domain.
        name = nodes[0] if len(nodes) == 1 else "/".join(dom.values)
        rows.append({"node": name, "count": dom.count})
    return rows


def to_json(tree: TopologyTree, placement: Placement) -> dict[str, Any]:
    return {
        "fits": placement.fits,
        "reason": placement.reason,
        "solver": placement.solver,
        "optimal": placement.optimal,
        "podSets": [
            {
                "name": ps.name,
                "count": ps.count,
                "assignments": node_assignments(tree, ps),
                "domains": touched_domains(tree, ps),
            }
            for ps in placement.pod_sets
        ],
    }


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
        lines.append(f"pod set {ps['name']}: {ps['count']} pod(s) on {len(rows)} node(s)")
        for level, values in ps["domains"].items():
            lines.append(f"  {level}: {len(values)} domain(s): {', '.join(values)}")
        for row in rows:
            lines.append(f"    {row['node']}: {row['count']}")
    return "\n".join(lines)


def build_tree(nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
               topology: tuple[str, tuple[str, ...]] | None) -> TopologyTree:
    """The tree ``toposched place`` places on: the Topology's levels, else the HyperPod default."""
    name, levels = topology if topology else (DEFAULT_TOPOLOGY_NAME, default_levels_for(nodes))
    return TopologyTree.build(name, levels, nodes, pods)


def compute_placement(tree: TopologyTree, workload: WorkloadSpec, solver: str, time_budget_ms: float) -> Placement:
    """``toposched place`` semantics: implicit TAS for pod sets without a topology request."""
    return place_workload(
        tree,
        workload.pod_sets,
        solver=solver,
        time_budget_s=max(time_budget_ms, 0) / 1000.0,
        implied_tas=True,
    )


def run(args: argparse.Namespace) -> int:
    if getattr(args, "server", None):
        return run_remote(args)
    if args.nodes is None:
        raise UserError("--nodes FILE is required (or --server HOST:PORT to ask a running engine)")
    if args.flavor:
        raise UserError("--flavor needs --server (offline placement uses --topology)")
    nodes = load_nodes(args.nodes)
    pods = load_pods(args.pods) if args.pods else []
    workload = load_workload(args.workload)
    topology = load_topology(args.topology) if args.topology else None
    tree = build_tree(nodes, pods, topology)
    placement = compute_placement(tree, workload, args.solver, args.time_budget_ms)
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

    load_workload(args.workload)
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
