"""``toposched place``: where would this job go on these nodes?

Exit 0 when it fits, 1 when it does not, 2 on invalid input. Pod sets without a topology
annotation are placed as Kueue's implicit TAS does on a TAS-only ClusterQueue (unconstrained).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from scheduler.commands._files import load_nodes, load_pods, load_topology, load_workload
from scheduler.core.placement.planner import SOLVERS, Placement, PodSetPlacement, place_workload
from scheduler.core.topology import DEFAULT_TOPOLOGY_NAME, TopologyTree, default_levels_for


def register(sub: Any) -> None:
    p = sub.add_parser("place", help="compute a topology-aware placement for a Job or Workload")
    p.add_argument("--nodes", type=Path, required=True, help="Nodes (kubectl get nodes -o yaml)")
    p.add_argument("--workload", type=Path, required=True, help="a batch/v1 Job or a Kueue Workload")
    p.add_argument(
        "--topology", type=Path, help="a Kueue Topology (default: HyperPod network layers + hostname)"
    )
    p.add_argument("--pods", type=Path, help="bound pods using capacity (kubectl get pods -A -o yaml)")
    p.add_argument("--solver", choices=SOLVERS, default="auto")
    p.add_argument("--output", choices=("json", "text"), default="text")
    p.add_argument("--time-budget-ms", type=int, default=100, help="CP-SAT time budget (default 100)")
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
    if not placement.fits:
        return f"does not fit: {placement.reason}"
    proof = (
        "proven optimal" if placement.optimal else "not proven optimal" if placement.solver == "cpsat" else ""
    )
    lines = [f"fits (solver {placement.solver}{', ' + proof if proof else ''})"]
    for ps in placement.pod_sets:
        rows = node_assignments(tree, ps)
        lines.append(f"pod set {ps.name}: {ps.count} pod(s) on {len(rows)} node(s)")
        for level, values in touched_domains(tree, ps).items():
            lines.append(f"  {level}: {len(values)} domain(s): {', '.join(values)}")
        for row in rows:
            lines.append(f"    {row['node']}: {row['count']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    nodes = load_nodes(args.nodes)
    pods = load_pods(args.pods) if args.pods else []
    workload = load_workload(args.workload)
    if args.topology:
        name, levels = load_topology(args.topology)
    else:
        name, levels = DEFAULT_TOPOLOGY_NAME, default_levels_for(nodes)
    tree = TopologyTree.build(name, levels, nodes, pods)
    placement = place_workload(
        tree,
        workload.pod_sets,
        solver=args.solver,
        time_budget_s=max(args.time_budget_ms, 0) / 1000.0,
        implied_tas=True,
    )
    if args.output == "json":
        print(json.dumps(to_json(tree, placement), indent=2))
    else:
        print(to_text(tree, placement))
    sys.stdout.flush()
    return 0 if placement.fits else 1
