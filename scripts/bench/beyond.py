#!/usr/bin/env python3
"""Beyond Kueue, measured (issue 17 item 6): one HyperPod trace through the simulator
(``scheduler.sim``, the controller's own admission cycle in virtual time) under

- ``kueue``: greedy, Kueue-equivalent placement (the baseline; compact annotations ignored);
- ``+compact``: the bounded wait for a compact placement (the multi-node jobs' own
  ``toposched.io/compact-*`` annotations: one layer-3 domain, or one layer-2 domain for jobs
  larger than a layer-3 domain, waiting up to ``--compact-wait``);
- ``+reserve``: the compact wait with ``reserve-compact`` (a waiter holds the domain it waits
  for; later jobs it goes before are steered away from it);
- ``+fragmentation``: fragmentation-aware placement (hierarchical LeastFreeCapacity);
- ``+degraded``: degraded domains (an unhealthy or drained node) ranked last;
- ``all``: all of them (``--placement-policy all`` and the compact wait).

Cluster: ``--nodes`` p5 nodes (8 GPUs) under layers [2, 4, N/128] x 16 nodes per layer-3
domain (1,024 nodes: 64 layer-3 domains of 128 GPUs). Trace (``--seed``): ``--hours`` of
Poisson arrivals at ``--load`` offered GPU load from ``--teams`` teams (ClusterQueues in one
cohort, nominal = GPUs / teams, borrowing and reclaim allowed, LowerPriority preemption in a
queue); 55 % single-pod jobs of 1/2/4/8 GPUs (no annotation: implied TAS), 40 % multi-node
jobs of 2/4/8/16 nodes (preferred layer-3), 5 % of 32/64 nodes (preferred layer-2);
30 % preemptible (low priority); lognormal durations (median 1 h); ``--failures-per-day``
node failures, each recovering after 2 h.

Prints one table (share of multi-node jobs inside one layer-3 domain, GPU utilisation over
the arrival window, wait p50/p95, preemptions, GPU-hours lost to evictions, mean whole-free
layer-3 / layer-2 domains) and whether the goal is met: +15 points inside one layer-3 domain
at equal or better utilisation and p95 wait, no more GPU-hours lost. Writes ``--out``/report.html
(the ``toposched simulate`` report: all variants side by side, whole-free domains over time)
and summary.json.

    python3 scripts/bench/beyond.py                       # 1,024 nodes, 24 h (several minutes)
    python3 scripts/bench/beyond.py --hours 4 --nodes 256 # quick look
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.core.placement.options import PlacementOptions  # noqa: E402
from scheduler.core.topology_request import CompactWait, TopologyRequest  # noqa: E402
from scheduler.core.workload import PodSetSpec, WorkloadSpec  # noqa: E402
from scheduler.sim.engine import Simulator
from scheduler.sim.model import GPU, SimFailure, SimJob, SimResult, World
from scheduler.sim.report import render_report  # noqa: E402
from scheduler.sim.scenario import summarize, world_from_objects  # noqa: E402

KQ = "kueue.x-k8s.io/v1beta2"
L2 = "topology.k8s.aws/network-node-layer-2"
L3 = "topology.k8s.aws/network-node-layer-3"
NODES_PER_L3 = 16
PRIORITIES = {"production": 100, "preemptible": 10}


def cluster(nodes: int) -> dict[str, Any]:
    l3_per_l2 = max(1, nodes // (2 * 4 * NODES_PER_L3))
    return {"name": f"beyond-{nodes}", "instanceType": "ml.p5.48xlarge", "layers": [2, 4, l3_per_l2],
            "nodesPerDomain": NODES_PER_L3}


def queue_objects(teams: int, gpus: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": KQ, "kind": "Topology", "metadata": {"name": "hp"}, "spec": {"levels": [
            {"nodeLabel": f"topology.k8s.aws/network-node-layer-{i}"} for i in (1, 2, 3)]
            + [{"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "p5"}, "spec": {"topologyName": "hp"}},
    ]
    objs += [{"apiVersion": KQ, "kind": "WorkloadPriorityClass", "metadata": {"name": k}, "value": v}
             for k, v in PRIORITIES.items()]
    for t in range(teams):
        objs.append({"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": f"team-{t}"}, "spec": {
            "cohortName": "all", "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "preemption": {"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "p5", "resources": [
                {"name": GPU, "nominalQuota": str(gpus // teams)}]}]}]}})
        objs.append({"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": f"team-{t}"},
                     "spec": {"clusterQueue": f"team-{t}"}})
    return objs


def _shape(rng: random.Random) -> tuple[int, int]:
    """(pods, GPUs per pod)."""
    r = rng.random()
    if r < 0.55:
        return 1, rng.choice((1, 2, 4, 8))
    if r < 0.95:
        return rng.choices((2, 4, 8, 16), (0.4, 0.3, 0.2, 0.1))[0], 8
    return rng.choice((32, 64)), 8


def _spec(i: int, team: int, pods: int, gpus: int, at: float, prio: str, wait_s: float) -> WorkloadSpec:
    topo = compact = None
    if pods > 1:
        level = L3 if pods <= NODES_PER_L3 else L2
        topo = TopologyRequest(preferred=level)
        compact = CompactWait(level, 1, wait_s)  # the job's own toposched.io/compact-* annotations
    ps = PodSetSpec("main", pods, {GPU: gpus}, topo, compact=compact)
    return WorkloadSpec(f"team-{team}", f"job-{i:05d}", (ps,), uid=f"uid-{i}", queue_name="q",
                        priority_class=prio, created_at=at)


def trace(seed: int, *, hours: float, gpus: int, teams: int, load: float, wait_s: float) -> list[SimJob]:
    rng = random.Random(seed)
    drawn = []
    horizon = hours * 3600
    gpu_s = 0.0
    while gpu_s < load * gpus * horizon:
        pods, per_pod = _shape(rng)
        duration = min(12 * 3600.0, max(300.0, rng.lognormvariate(math.log(3600), 1.0)))
        drawn.append((pods, per_pod, round(duration, 1)))
        gpu_s += pods * per_pod * duration
    jobs, t = [], 0.0
    rate = len(drawn) / horizon
    for i, (pods, per_pod, duration) in enumerate(drawn):
        t += rng.expovariate(rate)
        team = rng.randrange(teams)
        prio = "preemptible" if rng.random() < 0.3 else "production"
        jobs.append(SimJob(_spec(i, team, pods, per_pod, round(t, 1), prio, wait_s), duration, round(t, 1), prio))
    return jobs


def failures(seed: int, world: World, hours: float, per_day: float) -> list[SimFailure]:
    rng = random.Random(seed + 1)
    names = sorted(n.name for n in world.nodes)
    out, t = [], 0.0
    while per_day > 0:
        t += rng.expovariate(per_day / 86400.0)
        if t > hours * 3600:
            break
        out.append(SimFailure(round(t, 1), names[rng.randrange(len(names))], 7200.0))
    return out


def without_compact(jobs: list[SimJob]) -> list[SimJob]:
    out = []
    for j in jobs:
        spec = dataclasses.replace(j.spec, pod_sets=tuple(dataclasses.replace(ps, compact=None)
                                                           for ps in j.spec.pod_sets))
        out.append(SimJob(spec, j.duration, j.submit_at, j.label))
    return out


VARIANTS = (  # label, compact wait on, placement options
    ("kueue", False, PlacementOptions()),
    ("+compact", True, PlacementOptions()),
    ("+reserve", True, PlacementOptions(reserve_compact=True)),
    ("+fragmentation", False, PlacementOptions(fragmentation_aware=True)),
    ("+degraded", False, PlacementOptions(degraded_last=True)),
    ("all", True, PlacementOptions.from_names("all")),
)


def utilisation_until(result: SimResult, end: float) -> float:
    """Time-average of GPUs in use / healthy GPUs over [0, end] (the arrival window)."""
    used = avail = 0.0
    samples = result.samples
    for (t, u, h, _p), nxt in zip(samples, samples[1:] + [(end, 0, 0, 0)], strict=True):
        t1 = min(nxt[0], end)
        if t1 > t:
            used += u * (t1 - t)
            avail += h * (t1 - t)
        if nxt[0] >= end:
            break
    return used / avail if avail else 0.0


def measure(result: SimResult, end: float) -> dict[str, Any]:
    s = summarize(result)
    free = result.free_domains
    s["gpu_utilization_window"] = round(utilisation_until(result, end), 4)
    for idx, name in ((2, "layer3"), (1, "layer2")):
        vals = [c[idx] for t, c in free if t <= end and len(c) > idx]
        s[f"free_{name}_mean"] = round(sum(vals) / len(vals), 2) if vals else 0.0
    fitting = [j for j in result.jobs if j.domains and 1 < sum(p.count for p in j.spec.pod_sets) <= NODES_PER_L3]
    s["fitting_in_one_layer3"] = round(sum(1 for j in fitting if j.domains.get(L3) == 1) / len(fitting), 4) \
        if fitting else 0.0
    return s


def verdict(base: dict[str, Any], best: dict[str, Any]) -> list[str]:
    gain = 100 * (best["multi_pod_in_one_domain"] - base["multi_pod_in_one_domain"])
    checks = [
        (gain >= 15, f"multi-node jobs inside one layer-3 domain: {gain:+.1f} points (goal >= +15)"),
        (best["gpu_utilization_window"] >= base["gpu_utilization_window"],
         f"GPU utilisation {best['gpu_utilization_window']:.1%} vs {base['gpu_utilization_window']:.1%} (goal >=)"),
        (best["wait_p95_s"] <= base["wait_p95_s"],
         f"wait p95 {best['wait_p95_s']:.0f} s vs {base['wait_p95_s']:.0f} s (goal <=)"),
        (best["gpu_hours_lost"] <= base["gpu_hours_lost"],
         f"GPU-hours lost {best['gpu_hours_lost']:.1f} vs {base['gpu_hours_lost']:.1f} (goal <=)"),
    ]
    return [("met    " if ok else "NOT met") + ": " + text for ok, text in checks]


ROWS = (("in one layer-3", "multi_pod_in_one_domain", "{:.1%}"),
        ("of those that fit one", "fitting_in_one_layer3", "{:.1%}"),
        ("GPU util (window)", "gpu_utilization_window", "{:.1%}"),
        ("wait p50 s", ("wait_s", "p50"), "{:.0f}"), ("wait p95 s", "wait_p95_s", "{:.0f}"),
        ("wait p99 s", ("wait_s", "p99"), "{:.0f}"),
        ("preemptions", "preemptions", "{}"), ("GPU-h lost", "gpu_hours_lost", "{:.1f}"),
        ("free layer-3 (mean)", "free_layer3_mean", "{:.1f}"), ("free layer-2 (mean)", "free_layer2_mean", "{:.1f}"),
        ("admitted", "admitted", "{}"), ("wall s", "wall_s", "{:.0f}"))


def table(runs: list[tuple[str, SimResult, dict[str, Any]]]) -> str:
    lines = [f"{'':24}" + "".join(f"{label:>16}" for label, _, _ in runs)]
    for name, key, fmt in ROWS:
        vals = [s[key[0]][key[1]] if isinstance(key, tuple) else s[key] for _, _, s in runs]
        lines.append(f"{name:24}" + "".join(f"{fmt.format(v):>16}" for v in vals))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--teams", type=int, default=4)
    ap.add_argument("--load", type=float, default=0.9, help="offered GPU load over the arrival window")
    ap.add_argument("--compact-wait", type=float, default=1800.0, metavar="SECONDS")
    ap.add_argument("--failures-per-day", type=float, default=24.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--preemption-budget", type=float, default=0.05, metavar="SECONDS",
                    help="CP-SAT budget per victim search (the controller's is 0.5 s; smaller keeps the run short)")
    ap.add_argument("--only", default="", help="comma list of variant labels to run (default all)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/toposched-beyond"))
    args = ap.parse_args()
    world = world_from_objects(cluster(args.nodes), queue_objects(args.teams, args.nodes * 8))
    jobs = trace(args.seed, hours=args.hours, gpus=args.nodes * 8, teams=args.teams, load=args.load,
                 wait_s=args.compact_wait)
    fails = failures(args.seed, world, args.hours, args.failures_per_day)
    print(f"{len(world.nodes)} nodes, {len(jobs)} jobs over {args.hours:g} h, {len(fails)} node failures", flush=True)
    wanted = {v for v in args.only.split(",") if v}
    runs = []
    for label, compact_on, options in VARIANTS:
        if wanted and label not in wanted:
            continue
        t0 = time.perf_counter()
        sim_jobs = [dataclasses.replace(j, spec=j.spec) for j in (jobs if compact_on else without_compact(jobs))]
        result = Simulator(dataclasses.replace(world, placement_options=options), sim_jobs, fails,
                           solver="greedy", preemption_budget_s=args.preemption_budget).run()
        runs.append((label, result, measure(result, args.hours * 3600)))
        print(f"  {label}: {time.perf_counter() - t0:.0f} s wall", flush=True)
    print(table(runs))
    verdicts = verdict(runs[0][2], runs[-1][2]) if len(runs) > 1 else []
    if verdicts:
        print(f"goal ({runs[-1][0]} vs {runs[0][0]}):")
        print("\n".join("  " + v for v in verdicts))
    args.out.mkdir(parents=True, exist_ok=True)
    meta = (f"{len(world.nodes)} nodes, {len(jobs)} jobs, {args.hours:g} h, seed {args.seed}, load {args.load}, "
            f"compact wait {args.compact_wait:g} s; " + "; ".join(verdicts))
    (args.out / "report.html").write_text(render_report(runs, title="toposched beyond Kueue", meta=meta))
    (args.out / "summary.json").write_text(json.dumps({label: s for label, _, s in runs}, indent=2, sort_keys=True))
    print(f"report: {args.out / 'report.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
