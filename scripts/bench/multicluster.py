#!/usr/bin/env python3
"""MultiKueue dispatchers compared in the simulator (issue 43 item 3): Kueue v0.17.0's
AllAtOnce and Incremental against toposched's topology-aware dispatcher, on the same job stream
over three workers of different shapes and local loads (``scheduler/sim/multicluster.py``).

A benchmark: run by hand, never by the test suite (docs/performance.md, docs/multicluster.md).

Workers (``--scale`` multiplies the node counts; p5 nodes, 8 GPUs each):

- ``w1-small-racks``: 32 nodes in racks (layer-3 domains) of 4, local load 0.2;
- ``w2-big-racks``:   32 nodes in racks of 16, local load 0.5 (busy);
- ``w3-mid-racks``:   16 nodes in racks of 8, local load 0.3.

The MultiKueueConfig lists them in that order. Each worker's local load is its own Poisson mix
(55 % single-pod jobs of 1/2/4/8 GPUs, 40 % jobs of 2/4/8 nodes, 5 % of 16 nodes; lognormal
durations, median 1 h, 5 min .. 12 h); the manager's stream is the same mix at
``--stream-load`` of the three workers' GPUs together. A multi-node job prefers one layer-3
domain (``podset-preferred-topology``). The manager's quota is not modelled.

Figures per dispatcher: share of the stream's multi-node jobs placed in one layer-3 domain;
time to admission p50/p99 (from the manager's arrival to the first admission on a worker);
remote copies per job (AllAtOnce makes one per worker); jobs admitted.

    python3 scripts/bench/multicluster.py                     # the figures in docs/performance.md
    python3 scripts/bench/multicluster.py --hours 2 --scale 1 --seeds 1
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.core.topology_request import TopologyRequest  # noqa: E402
from scheduler.core.workload import PodSetSpec, WorkloadSpec  # noqa: E402
from scheduler.sim.model import GPU, SimJob  # noqa: E402
from scheduler.sim.multicluster import (  # noqa: E402
    DISPATCHERS,
    MultiClusterSim,
    WorkerSpec,
    outcome,
    worker_queue_objects,
)
from scheduler.sim.scenario import world_from_objects  # noqa: E402

L3 = "topology.k8s.aws/network-node-layer-3"
# name, racks, nodes per rack, local load
WORKERS = (("w1-small-racks", 8, 4, 0.2), ("w2-big-racks", 2, 16, 0.5), ("w3-mid-racks", 2, 8, 0.3))


def queue_objects(gpus: int) -> list[dict[str, Any]]:
    return worker_queue_objects(gpus, ("local", "stream"))


def mix(rng: random.Random, namespace: str, gpus: int, hours: float, load: float, max_nodes: int) -> list[SimJob]:
    """Poisson arrivals of the mix until ``load`` of ``gpus`` over ``hours`` is offered."""
    def shape() -> tuple[int, int]:
        r = rng.random()
        if r < 0.55:
            return 1, rng.choice((1, 2, 4, 8))
        if r < 0.95:
            return rng.choices((2, 4, 8), (0.45, 0.35, 0.2))[0], 8
        return min(16, max_nodes), 8

    drawn: list[tuple[int, int, float]] = []
    horizon, offered = hours * 3600, 0.0
    while offered < load * gpus * horizon:
        n, per_pod = shape()
        duration = min(12 * 3600.0, max(300.0, rng.lognormvariate(math.log(3600), 1.0)))
        drawn.append((n, per_pod, round(duration, 1)))
        offered += n * per_pod * duration
    jobs, t = [], 0.0
    rate = len(drawn) / horizon if drawn else 1.0
    for i, (n, per_pod, duration) in enumerate(drawn):
        t += rng.expovariate(rate)
        topo = TopologyRequest(preferred=L3) if n > 1 else None
        spec = WorkloadSpec(namespace, f"job-{i:05d}", (PodSetSpec("main", n, {GPU: per_pod}, topo),),
                            uid=f"{namespace}-{i}", queue_name="q", created_at=round(t, 1))
        jobs.append(SimJob(spec, duration, round(t, 1)))
    return jobs


def workers(seed: int, hours: float, scale: int) -> list[WorkerSpec]:
    out = []
    for k, (name, racks, per_rack, load) in enumerate(WORKERS):
        desc = {"name": name, "instanceType": "ml.p5.48xlarge", "layers": [1, 1, racks * scale],
                "nodesPerDomain": per_rack}
        gpus = racks * scale * per_rack * 8
        world = world_from_objects(desc, queue_objects(gpus))
        local = mix(random.Random(seed * 100 + k), "local", gpus, hours, load, racks * scale * per_rack)
        out.append(WorkerSpec(name, world, local))
    return out


def run(seed: int, hours: float, scale: int, stream_load: float, round_timeout_s: float,
        pass_interval_s: float) -> dict[str, dict[str, float]]:
    total = sum(r * scale * p * 8 for _n, r, p, _l in WORKERS)
    smallest = min(r * scale * p for _n, r, p, _l in WORKERS)
    results: dict[str, dict[str, float]] = {}
    for dispatcher in DISPATCHERS:
        stream = mix(random.Random(seed), "stream", total, hours, stream_load, smallest)
        t0 = time.perf_counter()
        sim = MultiClusterSim(workers(seed, hours, scale), stream, dispatcher, round_timeout_s=round_timeout_s,
                              pass_interval_s=pass_interval_s, horizon_s=hours * 3600 * 3)
        results[dispatcher] = {**outcome(sim.run(), L3), "wall_s": round(time.perf_counter() - t0, 1)}
    return results


def spread(by_seed: list[dict[str, dict[str, float]]], d: str, k: str, fmt: str) -> str:
    """The mean over the seeds, with (min-max) when there are several."""
    values = [r[d][k] for r in by_seed]
    mean = format(sum(values) / len(values), fmt)
    return mean if len(values) == 1 else f"{mean} ({min(values):{fmt}}-{max(values):{fmt}})"


def table(by_seed: list[dict[str, dict[str, float]]]) -> str:
    rows = [("dispatcher", "jobs", "admitted", "multi-node", "one L3 domain", "wait p50 s", "wait p99 s",
             "copies/job")]  # means over the seeds, (min-max) beside them
    for d in DISPATCHERS:
        agg = {k: sum(r[d][k] for r in by_seed) / len(by_seed) for k in by_seed[0][d]}

        rows.append((d, f"{agg['jobs']:.0f}", f"{agg['admitted']:.0f}", f"{agg['multi_node']:.0f}",
                     spread(by_seed, d, "one_domain_share", ".1%"), spread(by_seed, d, "wait_p50_s", ".0f"),
                     spread(by_seed, d, "wait_p99_s", ".0f"),
                     f"{agg['copies_per_job']:.2f}"))
    return "\n".join("| " + " | ".join(r) + " |" for r in [rows[0], tuple("---" for _ in rows[0]), *rows[1:]])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hours", type=float, default=6.0, help="stream and local load duration (default 6)")
    p.add_argument("--scale", type=int, default=1, help="multiply every worker's racks (default 1: 80 nodes)")
    p.add_argument("--stream-load", type=float, default=0.35, help="manager's offered GPU load (default 0.35)")
    p.add_argument("--seeds", type=int, default=3, help="runs, mean shown (default 3)")
    p.add_argument("--round-timeout", type=float, default=300.0, help="Incremental's round and toposched's "
                                                                       "bound, s (default Kueue's 300)")
    p.add_argument("--pass-interval", type=float, default=10.0, help="dispatcher passes while a job waits, s")
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = p.parse_args(argv)
    by_seed = [run(s, args.hours, args.scale, args.stream_load, args.round_timeout, args.pass_interval)
               for s in range(1, args.seeds + 1)]
    print(table(by_seed))
    if args.out is not None:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "runs": by_seed}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
