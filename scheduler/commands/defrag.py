"""``toposched defrag``: which checkpointable workloads to move so that whole domains open for
the pending multi-node jobs (``scheduler.core.beyond.defrag.plan_defrag``), with the GPU time each move
loses since its last checkpoint. Dry run: it prints the plan and changes nothing (the controller
executes plans only with ``toposched controller --defrag``).

The cluster is read once through ``--kubeconfig`` (or $KUBECONFIG / in-cluster), as ``explain``
reads it, and turned into the controller's snapshot.

Exit 0 (answered, with or without plans), 1 (the cluster cannot be read), 2 (bad input).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Sequence
from typing import Any

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools) load
# only when it runs, so `toposched --help` and the other commands start fast.


def register(sub: Any) -> None:
    p = sub.add_parser("defrag", help="plan moves of checkpointable workloads that open whole domains (dry run)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text")
    p.add_argument("--max-plans", type=int, default=16, help="plan for at most this many pending jobs (default 16)")
    p.set_defaults(func=run)


def plans_to_dicts(plans: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"forWorkload": p.for_workload, "clusterQueue": p.cluster_queue, "flavor": p.flavor, "level": p.level,
             "domain": p.domain, "selector": dict(p.selector), "lostGPUSeconds": p.lost_gpu_s,
             "moves": [{"workload": m.workload, "clusterQueue": m.cluster_queue, "gpus": m.gpus,
                        "lostGPUSeconds": m.lost_gpu_s, "resumes": m.resumes} for m in p.moves]}
            for p in plans]


def to_text(plans: Sequence[dict[str, Any]]) -> str:
    if not plans:
        return "No pending multi-node job is blocked by fragmentation that checkpointable moves could open.\n"
    lines = []
    for p in plans:
        lines.append(f"{p['forWorkload']} (ClusterQueue {p['clusterQueue']}): open {p['level']} domain {p['domain']} "
                     f"on flavor {p['flavor']} by moving {len(p['moves'])} workload(s), "
                     f"{p['lostGPUSeconds'] / 3600:.2f} GPU-hours lost since their checkpoints:")
        for m in p["moves"]:
            lines.append(f"  move {m['workload']} ({m['gpus']} GPUs, {m['resumes']}): "
                         f"{m['lostGPUSeconds'] / 3600:.2f} GPU-hours since its last checkpoint")
    lines.append("Dry run: nothing was changed (toposched controller --defrag executes plans within a budget).")
    return "\n".join(lines) + "\n"


def run(args: Any) -> int:
    from scheduler.adapter.snapshot import build_snapshot
    from scheduler.commands.explain import read_cluster
    from scheduler.core.beyond.defrag import plan_defrag
    from scheduler.errors import UserError
    from scheduler.k8s.client import api_client
    from scheduler.k8s.informer import Api

    if args.max_plans < 1:
        raise UserError("--max-plans must be at least 1")
    snap = read_cluster(Api(api_client(args.kubeconfig)))
    core = build_snapshot(snap.objects, dt.datetime.now(dt.UTC), health_policy=snap.health_policy)
    plans = plans_to_dicts(plan_defrag(core, max_plans=args.max_plans))
    if args.output == "json":
        sys.stdout.write(json.dumps({"plans": plans}, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(to_text(plans))
    return 0
