#!/usr/bin/env python3
"""Admission benchmark in the shape of Kueue's published TAS performance test, in-process.

Kueue's ``test/performance/scheduler/configs/tas`` (reference/kueue.md 5.1): 640 nodes =
1 block x 10 racks x 64 nodes (96 CPU, 256Gi each); 5 cohorts x 6 ClusterQueues (nominal 20
CPU, borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue LowerPriority); per CQ 350
small (2 pods x 500m, 200 ms, priority 50, one every 100 ms) + 100 medium (4 x 1250m, 500 ms,
priority 100, every 500 ms) + 50 large (8 x 2500m, 1 s, priority 200, every 1200 ms) = 15,000
workloads; each class split into rack-``required`` and rack-``preferred`` halves.

The simulator (``scheduler.sim.engine.Simulator``, the engine behind ``toposched simulate``)
drives ``run_cycle``: arrivals, completions ``duration`` after admission, preemptions requeue
the victim. Virtual time advances by the *measured* wall time of every cycle
(``cycle_cost="measured"``, so scheduling cost counts as it would in a live system) and jumps
to the next event when a cycle makes no progress. Printed: wall time, admissions/s, average time to
admission per class (virtual), ClusterQueue utilisation, and the ratio to Kueue's published
run (~401.5 s wall for the same 15,000 workloads, ~37 admissions/s).

    python scripts/bench/admission.py              # full run
    python scripts/bench/admission.py --scale 0.1  # 1,500 workloads
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass

from scheduler.core.kueue.queueing import LocalQueueSpec
from scheduler.core.kueue.quota import (
    ANY,
    LOWER_PRIORITY,
    ClusterQueueSpec,
    FlavorQuotas,
    FlavorSpec,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
)
from scheduler.core.nodes import NodeCondition, NodeInfo
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, WorkloadSpec
from scheduler.sim.engine import Simulator
from scheduler.sim.model import SimJob, World

BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
FLAVOR = "tas-flavor"
KUEUE_WALL_S = 401.5  # configs/tas rangespec mean
KUEUE_ADMISSIONS_PER_S = 15000 / KUEUE_WALL_S
KUEUE_AVG_TTA = {"large": 38.9, "medium": 106.6, "small": 243.6}  # means over required/preferred/balanced

# class -> (count per CQ, pods, cpu millis per pod, runtime s, priority, creation interval s)
CLASSES = {
    "small": (350, 2, 500, 0.2, 50, 0.1),
    "medium": (100, 4, 1250, 0.5, 100, 0.5),
    "large": (50, 8, 2500, 1.0, 200, 1.2),
}


@dataclass
class Job:
    spec: WorkloadSpec
    cls: str
    runtime: float
    created: float
    admitted_at: float | None = None


def build_nodes(racks: int, per_rack: int) -> list[NodeInfo]:
    ready = (NodeCondition("Ready", "True"),)
    return [NodeInfo(name=f"n-r{r}-{i}", labels={BLOCK: "b0", RACK: f"r{r}", HOST: f"n-r{r}-{i}",
                                                   "tas-node-group": "tas"},
                     allocatable={"cpu": 96000, "memory": 256 * 2**30, "pods": 110}, conditions=ready)
            for r in range(racks) for i in range(per_rack)]


def build_queues(cohorts: int, per_cohort: int) -> tuple[dict[str, ClusterQueueSpec], dict[str, LocalQueueSpec]]:
    cqs, lqs = {}, {}
    quota = ResourceQuota(20_000, 100_000)
    group = ResourceGroup(("cpu",), (FlavorQuotas(FLAVOR, {"cpu": quota}),))
    for c in range(cohorts):
        for q in range(per_cohort):
            name = f"cq-{c}-{q}"
            cqs[name] = ClusterQueueSpec(name, (group,), f"cohort-{c}",
                                         preemption=PreemptionPolicy(LOWER_PRIORITY, ANY))
            lqs[f"ns-{name}/lq"] = LocalQueueSpec(f"ns-{name}", "lq", name)
    return cqs, lqs


def build_arrivals(cqs: dict[str, ClusterQueueSpec], scale: float) -> list[tuple[float, str, Job]]:
    out = []
    for cq in sorted(cqs):
        for cls, (count, pods, cpu, runtime, prio, interval) in CLASSES.items():
            n = max(1, round(count * scale))
            for mode in ("required", "preferred"):
                share = n // 2 + (n % 2 if mode == "required" else 0)
                for i in range(share):
                    t = i * interval
                    name = f"{cls}-{mode}-{i}"
                    topo = TopologyRequest(required=RACK) if mode == "required" else TopologyRequest(preferred=RACK)
                    spec = WorkloadSpec(f"ns-{cq}", name, (PodSetSpec("main", pods, {"cpu": cpu}, topo),),
                                        uid=f"{cq}-{name}", queue_name="lq", priority=prio, created_at=t)
                    out.append((t, spec.key, Job(spec, cls, runtime, t)))
    out.sort(key=lambda e: (e[0], e[1]))
    return out


def run(scale: float, solver: str, racks: int, per_rack: int, cohorts: int, per_cohort: int) -> None:
    nodes = build_nodes(racks, per_rack)
    cqs, lqs = build_queues(cohorts, per_cohort)
    flavors = {FLAVOR: FlavorSpec(FLAVOR, {"tas-node-group": "tas"}, topology_name="default-topology")}
    world = World(nodes=tuple(nodes), cluster_queues=cqs, local_queues=lqs, flavors=flavors,
                  topologies={"default-topology": (BLOCK, RACK, HOST)})
    arrivals = build_arrivals(cqs, scale)
    total = len(arrivals)
    jobs = [SimJob(job.spec, job.runtime, t, label=job.cls) for t, _key, job in arrivals]
    result = Simulator(world, jobs, solver=solver, cycle_cost="measured").run()
    stuck = [j for j in result.jobs if j.finished_at is None]
    if stuck:
        raise SystemExit(f"stuck at t={result.makespan:.1f}s: {len(stuck)} of {total} workloads not finished")
    wall, makespan = result.wall_s, result.makespan
    tta: dict[str, list[float]] = defaultdict(list)
    for j in result.jobs:
        assert j.admitted_at is not None
        tta[j.label].append(j.admitted_at - j.submit_at)  # last admission (after preemptions), as before
    util = {name: result.cq_usage_integral.get(name, 0.0) / (makespan * 20_000) for name in cqs}
    print(f"workloads: {total} ({len(cqs)} ClusterQueues, {len(nodes)} nodes), solver={solver}, scale={scale}")
    print(f"cycles: {result.cycles}, preemptions: {result.preemptions}")
    print(f"wall time (compute): {wall:.1f} s; virtual makespan: {makespan:.1f} s")
    print(f"admissions/s: {total / makespan:.1f} over the makespan, {total / wall:.1f} per wall-clock second")
    for cls in ("large", "medium", "small"):
        vals = tta[cls]
        print(f"avg time to admission {cls:6s}: {sum(vals) / len(vals):7.2f} s (Kueue ~{KUEUE_AVG_TTA[cls]} s)")
    print(f"CQ utilisation (time-avg usage / nominal): min {min(util.values()):.1%}, "
          f"mean {sum(util.values()) / len(util):.1%} (Kueue min ~62.4%)")
    if scale == 1.0:
        print(f"vs Kueue ~{KUEUE_WALL_S} s / ~{KUEUE_ADMISSIONS_PER_S:.0f} admissions/s: makespan "
              f"{KUEUE_WALL_S / makespan:.1f}x shorter, {total / makespan / KUEUE_ADMISSIONS_PER_S:.1f}x the rate")
    else:
        print("(ratio to Kueue's published run is printed for --scale 1.0 only)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the 500 workloads per CQ (default 1.0)")
    ap.add_argument("--solver", default="greedy", choices=("auto", "greedy", "cpsat"))
    ap.add_argument("--racks", type=int, default=10)
    ap.add_argument("--nodes-per-rack", type=int, default=64)
    ap.add_argument("--cohorts", type=int, default=5)
    ap.add_argument("--queues-per-cohort", type=int, default=6)
    a = ap.parse_args()
    run(a.scale, a.solver, a.racks, a.nodes_per_rack, a.cohorts, a.queues_per_cohort)


if __name__ == "__main__":
    main()
