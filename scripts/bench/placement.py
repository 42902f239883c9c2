#!/usr/bin/env python3
"""Placement benchmark: greedy (Kueue-equivalent) vs CP-SAT on generated HyperPod clusters.

Clusters: 3 network layers + hostname, 8 GPUs per node, fan-out 16 nodes per layer-3 domain,
8 layer-3 per layer-2, 16 layer-2 per layer-1. Occupancy is fragmented on purpose: bound
non-TAS pods take 0..8 GPUs per node (about 45% of nodes free, 25% full, 30% partly used,
with whole layer-3 domains busier than others). Workloads: 8..2,048 GPUs, pods of 8, 4 or 1
GPU(s); required (smallest level that can hold them) or preferred layer-3. Every workload is
decided against the same cluster state (decisions are not committed), so both solvers see
identical inputs.

    python scripts/bench/placement.py                      # 1k, 10k, 50k nodes; 200 workloads
    python scripts/bench/placement.py --sizes 1000 --workloads 50 --budget-ms 100

Prints figures only; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.core.nodes import HOSTNAME_LABEL, NodeCondition, NodeInfo, PodInfo  # noqa: E402
from scheduler.core.placement import cpsat, greedy  # noqa: E402
from scheduler.core.placement.planner import place_workload  # noqa: E402
from scheduler.core.topology import DEFAULT_HYPERPOD_LEVELS, TopologyTree  # noqa: E402
from scheduler.core.topology_request import TopologyRequest  # noqa: E402
from scheduler.core.workload import PodSetSpec  # noqa: E402
from scripts.bench.percentiles import percentile  # noqa: E402

GPU = "nvidia.com/gpu"
L1, L2, L3 = DEFAULT_HYPERPOD_LEVELS[:3]
READY = (NodeCondition("Ready", "True"),)
PER_L3, PER_L2, PER_L1 = 16, 8, 16


def make_cluster(n: int, rng: random.Random) -> tuple[list[NodeInfo], list[PodInfo]]:
    nodes, pods = [], []
    busy_l3: dict[str, float] = {}
    for i in range(n):
        l3i = i // PER_L3
        l2i = l3i // PER_L2
        l1i = l2i // PER_L1
        l3 = f"nn-{l1i}-{l2i}-{l3i}"
        name = f"ip-10-{l1i}-{l3i % 256}-{i % PER_L3}"
        nodes.append(
            NodeInfo(
                name,
                {L1: f"nn-{l1i}", L2: f"nn-{l1i}-{l2i}", L3: l3, HOSTNAME_LABEL: name},
                {"cpu": 192_000, "memory": 2048 * 2**30, GPU: 8, "pods": 110},
                conditions=READY,
            )
        )
        bias = busy_l3.setdefault(l3, rng.random())
        r = rng.random()
        if r < 0.25 + 0.2 * bias:
            used = 8
        elif r < 0.55 + 0.1 * bias:
            used = rng.randint(1, 7)
        else:
            used = 0
        if used:
            pods.append(
                PodInfo(
                    "other",
                    f"p{i}",
                    uid=f"u{i}",
                    node_name=name,
                    phase="Running",
                    requests={GPU: used, "cpu": 1000 * used},
                )
            )
    return nodes, pods


@dataclass
class Job:
    gpus: int
    spec: PodSetSpec


def make_workloads(k: int, rng: random.Random) -> list[Job]:
    jobs = []
    sizes = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    weights = [14, 14, 14, 14, 12, 10, 8, 8, 6]
    for _ in range(k):
        gpus = rng.choices(sizes, weights)[0]
        per_pod = rng.choices([8, 4, 1], [70, 15, 15])[0]
        count = gpus // per_pod
        if rng.random() < 0.4:
            level = L3 if gpus <= PER_L3 * 8 else L2 if gpus <= PER_L3 * PER_L2 * 8 else L1
            topo = TopologyRequest(required=level)
        else:
            topo = TopologyRequest(preferred=L3)
        spec = PodSetSpec("main", count, {GPU: per_pod, "cpu": 1000 * per_pod}, topo)
        jobs.append(Job(gpus, spec))
    return jobs


def spans(tree: TopologyTree, leaf_pods: dict[int, int], level: int) -> int:
    return len({tree.ancestor(leaf, level) for leaf in leaf_pods})


def run_size(n: int, n_workloads: int, budget_s: float, seed: int) -> None:
    rng = random.Random(seed)
    nodes, pods = make_cluster(n, rng)
    t0 = time.perf_counter()
    tree = TopologyTree.build("default", DEFAULT_HYPERPOD_LEVELS, nodes, pods)
    build_ms = (time.perf_counter() - t0) * 1000
    jobs = make_workloads(n_workloads, rng)
    # warm-up (imports, numpy/ortools first-call costs)
    place_workload(tree, [jobs[0].spec], solver="cpsat", time_budget_s=budget_s)

    g_lat: list[float] = []
    c_lat: list[float] = []
    g_l3: list[int] = []
    c_l3: list[int] = []
    g_l2: list[int] = []
    c_l2: list[int] = []
    pref_total = pref_g_one = pref_c_one = 0
    fits = optimal = improved = solved = 0
    gaps: list[float] = []
    for job in jobs:
        t = time.perf_counter()
        g = place_workload(tree, [job.spec], solver="greedy")
        g_lat.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        try:
            prob = greedy.prepare(tree, job.spec)
            g_pods = greedy.place_pod_set(prob)
            # Same accounting as place_workload: the budget covers the greedy seed too.
            res = cpsat.improve(prob, g_pods, time_budget_s=budget_s - (time.perf_counter() - t))
            greedy.to_pod_set_placement(tree, job.spec, res.leaf_pods)
            ok = True
        except greedy.PlacementError:
            ok = False
        c_lat.append((time.perf_counter() - t) * 1000)
        if not (g.fits and ok):
            continue
        fits += 1
        gl = g_pods
        cl = res.leaf_pods
        g_l3.append(spans(tree, gl, 2))
        c_l3.append(spans(tree, cl, 2))
        g_l2.append(spans(tree, gl, 1))
        c_l2.append(spans(tree, cl, 1))
        optimal += int(res.optimal)
        improved += int(res.objective < res.greedy_objective)
        if res.bound is not None and res.value and res.bound >= 0:
            gaps.append(max(0.0, (res.value - res.bound) / res.value))
        if res.bound is not None:
            solved += 1
        if job.spec.topology is not None and job.spec.topology.preferred:
            pref_total += 1
            pref_g_one += int(g_l3[-1] == 1)
            pref_c_one += int(c_l3[-1] == 1)

    def mean(xs: list[int]) -> float:
        return statistics.fmean(xs) if xs else float("nan")

    print(
        f"== {n} nodes ({tree.n_leaves} in tree, {len(pods)} bound pods), tree build {build_ms:.0f} ms, "
        f"{len(jobs)} workloads, {fits} fit, CP-SAT budget {budget_s * 1000:.0f} ms"
    )
    print(
        f"  latency ms   greedy p50 {percentile(g_lat, 0.5):7.2f}  p99 {percentile(g_lat, 0.99):7.2f}   "
        f"cpsat p50 {percentile(c_lat, 0.5):7.2f}  p99 {percentile(c_lat, 0.99):7.2f}"
    )
    print(
        f"  layer-3 spanned (mean)  greedy {mean(g_l3):6.2f}  cpsat {mean(c_l3):6.2f}  "
        f"ratio {mean(c_l3) / mean(g_l3) if g_l3 else float('nan'):.3f}"
    )
    print(
        f"  layer-2 spanned (mean)  greedy {mean(g_l2):6.2f}  cpsat {mean(c_l2):6.2f}  "
        f"ratio {mean(c_l2) / mean(g_l2) if g_l2 else float('nan'):.3f}"
    )
    if pref_total:
        print(
            f"  preferred inside one layer-3 domain  greedy {pref_g_one / pref_total:.2%}  "
            f"cpsat {pref_c_one / pref_total:.2%}  ({pref_total} preferred that fit)"
        )
    print(
        f"  cpsat strictly better on {improved}/{fits}; proven optimal {optimal}/{fits}; "
        f"CP-SAT bound: mean relative gap {statistics.fmean(gaps) if gaps else 0.0:.4f} over "
        f"{len(gaps)} of {solved} solved models with a non-negative bound"
    )
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,50000", help="comma-separated node counts")
    parser.add_argument("--workloads", type=int, default=200, help="workloads per cluster size")
    parser.add_argument("--budget-ms", type=float, default=100.0, help="CP-SAT time budget per decision")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",") if s):
        run_size(size, args.workloads, args.budget_ms / 1000.0, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
