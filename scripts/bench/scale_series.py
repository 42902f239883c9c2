#!/usr/bin/env python3
"""In-process scale of the decision path (issue 18, item 4): cycle time per admission decision
and resident memory at 1k / 10k / 50k pending Workloads on 1k / 10k nodes, printed as a series.

Cluster: HyperPod-shaped (3 network layers plus hostname, ``scheduler.core.fakecluster``),
p5.48xlarge nodes (8 GPUs), one TAS flavor, 10 ClusterQueues in one cohort sharing every GPU.
Pending: a deterministic mix (``--seed``) of 1/2/4/8/16-pod Workloads of 8 GPUs per pod, half
``required`` layer-3, half ``preferred`` layer-3, priorities 0..3, created one second apart.
Objects are the dicts the API server returns, so the measured path is the controller's own:

- ``snapshot``: ``scheduler.adapter.build_snapshot`` (objects -> core values). The controller
  rebuilds it every cycle from its informer caches; what it keeps between cycles is the
  informer caches (raw dicts), the BestEffortFIFO parking (``QueueState``: parked workloads are
  skipped until capacity changes) and nothing else (no incremental tree).
- ``cycle``: ``scheduler.core.kueue.cycle.run_cycle`` on it (heads per ClusterQueue, quota, placement,
  preemption). "Per decision" = cycle time / decisions of the cycle (Admit, Preempt, Pending).
- garbage collection: ``scheduler.k8s.gcpolicy.GcPolicy.after_pass`` after every pass, as the
  controller command installs it; its first call (after the cold pass) collects and freezes
  what survived, reported alone as ``freeze`` (between passes, so in no pass's figure).
- ``cpu50`` / ``cpu99``: the process's CPU time of a warm pass (snapshot + cycle), which the
  machine's load does not inflate as it does the wall-clock figures.

Each point runs in its own process (``--point``) so its peak RSS (``ru_maxrss``) is its own;
``--cycles`` cycles per point: the first is reported alone (``cold``: every object converted,
as on a controller's first pass), p50 / p99 are over the others (unchanged objects reuse their
conversions, as on the controller's later passes).

    python scripts/bench/scale_series.py                       # 1k/10k nodes x 1k/10k/50k pending
    python scripts/bench/scale_series.py --nodes 1000 --pending 1000,10000 --cycles 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.adapter.caches import SnapshotCaches  # noqa: E402
from scheduler.adapter.objects import ClusterObjects  # noqa: E402
from scheduler.adapter.snapshot import build_snapshot  # noqa: E402
from scheduler.core.fakecluster import generate_nodes  # noqa: E402
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit
from scheduler.k8s.gcpolicy import GcPolicy  # noqa: E402
from scripts.bench.percentiles import percentile  # noqa: E402

FLAVOR = "ml.p5.48xlarge"
LAYER3 = "topology.k8s.aws/network-node-layer-3"
GPU = "nvidia.com/gpu"
QUEUES = 10
NAMESPACE = "scale"
KUEUE = "kueue.x-k8s.io/v1beta2"
# nodes -> (layer fan-out, nodes per layer-3 domain)
SHAPES = {1000: ([2, 5, 10], 10), 10000: ([4, 10, 25], 10), 100: ([1, 2, 5], 10)}


def cluster_objects(nodes: int, pending: int, seed: int) -> ClusterObjects:
    layers, per_domain = SHAPES[nodes]
    node_objs = generate_nodes({"name": f"scale-{nodes}", "instanceType": FLAVOR, "layers": layers,
                                "nodesPerDomain": per_domain})
    for i, node in enumerate(node_objs):  # as the informer cache holds them
        node["metadata"]["resourceVersion"] = str(i + 1)
    gpus = len(node_objs) * 8
    topology = {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": "hyperpod"},
                "spec": {"levels": [{"nodeLabel": f"topology.k8s.aws/network-node-layer-{i}"} for i in (1, 2, 3)]
                         + [{"nodeLabel": "kubernetes.io/hostname"}]}}
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
              "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": FLAVOR}, "topologyName": "hyperpod"}}
    cqs = [{"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq-{q}", "generation": 1},
            "spec": {"cohortName": "all", "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                     "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                     "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [
                         {"name": GPU, "nominalQuota": str(gpus // QUEUES)}]}]}]}} for q in range(QUEUES)]
    lqs = [{"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": f"lq-{q}", "namespace": NAMESPACE},
            "spec": {"clusterQueue": f"cq-{q}"}} for q in range(QUEUES)]
    return ClusterObjects(nodes=node_objs, workloads=pending_workloads(pending, seed), cluster_queues=cqs,
                          local_queues=lqs, flavors=[flavor], topologies=[topology],
                          namespaces=[{"metadata": {"name": NAMESPACE}}])


def pending_workloads(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    out = []
    for i in range(count):
        pods = rng.choice([1, 2, 4, 8, 16])
        mode = "required" if rng.random() < 0.5 else "preferred"
        created = (start + dt.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append({"apiVersion": KUEUE, "kind": "Workload",
                    "metadata": {"name": f"wl-{i:06d}", "namespace": NAMESPACE, "uid": f"uid-{i}",
                                 "creationTimestamp": created, "resourceVersion": str(i + 1)},
                    "spec": {"queueName": f"lq-{i % QUEUES}", "priority": rng.randrange(4), "active": True,
                             "podSets": [{"name": "main", "count": pods, "topologyRequest": {mode: LAYER3},
                                          "template": {"spec": {"containers": [{
                                              "name": "c", "resources": {"requests": {GPU: "8"}}}]}}}]}})
    return out


def measure_point(nodes: int, pending: int, cycles: int, seed: int) -> dict[str, Any]:
    objects = cluster_objects(nodes, pending, seed)
    now = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    builds, runs, per_decision, cpu, admits, decided = [], [], [], [], 0, 0
    gc_policy, gc_ms = GcPolicy(), 0.0  # as the controller command installs it (Controller.reconcile)
    caches = SnapshotCaches()  # kept from pass to pass, as the controller keeps its own
    for _ in range(cycles):
        c0, t0 = time.process_time(), time.perf_counter()
        snapshot = build_snapshot(objects, now, solver="greedy", caches=caches)
        t1 = time.perf_counter()
        decisions = run_cycle(snapshot)
        t2, c2 = time.perf_counter(), time.process_time()
        cpu.append((c2 - c0) * 1000)  # this process's CPU time: the machine's load does not count
        builds.append((t1 - t0) * 1000)
        runs.append((t2 - t1) * 1000)
        decided = len(decisions)
        admits = sum(isinstance(d, Admit) for d in decisions)
        per_decision.append((t2 - t0) * 1000 / max(decided, 1))
        if gc_policy.after_pass():  # between passes, as the controller does; only after the first here
            gc_ms += (time.perf_counter() - t2) * 1000
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # The first pass converts every object (a controller's first pass after start-up); the
    # others reuse the conversions of unchanged objects, as the controller's later passes do.
    cold = builds[0] + runs[0]
    builds, runs, per_decision = builds[1:] or builds, runs[1:] or runs, per_decision[1:] or per_decision
    cpu = cpu[1:] or cpu
    return {"nodes": nodes, "pending": pending, "cycles": cycles, "decisions": decided, "admits": admits,
            "cold_ms": cold, "freeze_ms": gc_ms, "snapshot_ms_p50": statistics.median(builds),
            "cycle_ms_p50": statistics.median(runs),
            "cycle_ms_p99": percentile(runs, 0.99), "total_ms_p99": percentile(
                [b + r for b, r in zip(builds, runs, strict=True)], 0.99),
            "per_decision_ms_p50": statistics.median(per_decision),
            "per_decision_ms_p99": percentile(per_decision, 0.99), "cpu_ms_p50": statistics.median(cpu),
            "cpu_ms_p99": percentile(cpu, 0.99), "rss_mib": rss_mib}


def print_row(row: dict[str, Any]) -> None:
    print(f"{row['nodes']:>6} {row['pending']:>7} {row['decisions']:>9} {row['admits']:>6} {row['cold_ms']:>7.0f} "
          f"{row['freeze_ms']:>7.0f} {row['snapshot_ms_p50']:>11.0f} {row['cycle_ms_p50']:>9.0f} "
          f"{row['cycle_ms_p99']:>9.0f} "
          f"{row['total_ms_p99']:>9.0f} {row['per_decision_ms_p50']:>8.1f} {row['per_decision_ms_p99']:>8.1f} "
          f"{row['cpu_ms_p50']:>7.0f} {row['cpu_ms_p99']:>7.0f} {row['rss_mib']:>7.0f}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", default="1000,10000", help=f"comma-separated, from {sorted(SHAPES)}")
    p.add_argument("--pending", default="1000,10000,50000", help="comma-separated pending Workload counts")
    p.add_argument("--cycles", type=int, default=5)
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--point", nargs=2, type=int, metavar=("NODES", "PENDING"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.point:
        print(json.dumps(measure_point(*args.point, args.cycles, args.seed)))
        return 0
    node_counts = [int(n) for n in args.nodes.split(",")]
    if any(n not in SHAPES for n in node_counts):
        p.error(f"--nodes: choose from {sorted(SHAPES)}")
    print(f"load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}; {args.cycles} cycles per point")
    print(f"{'nodes':>6} {'pending':>7} {'decisions':>9} {'admits':>6} {'cold':>7} {'freeze':>7} {'snapshot50':>11} "
          f"{'cycle50':>9} "
          f"{'cycle99':>9} {'total99':>9} {'perdec50':>8} {'perdec99':>8} {'cpu50':>7} {'cpu99':>7} "
          f"{'rssMiB':>7}   (ms)")
    for nodes in node_counts:
        for pending in (int(n) for n in args.pending.split(",")):
            proc = subprocess.run([sys.executable, __file__, "--point", str(nodes), str(pending),
                                   "--cycles", str(args.cycles), "--seed", str(args.seed)],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(f"{nodes:>6} {pending:>7} failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            print_row(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
