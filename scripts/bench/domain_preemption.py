"""Domain-clearing preemption on a small scripted scenario: the simulator (the controller's own
cycle, ``scheduler.sim.engine``) with ``domain_preemption`` on and off (off = Kueue's classical
preemption, toposched's CP-SAT victim search kept).

Cluster: ``--racks`` racks of 4 nodes (8 GPUs each), one ClusterQueue (withinClusterQueue
LowerPriority) with quota for every GPU. A stream of low-priority 1-node jobs (random durations,
seeded) keeps the cluster full, so free nodes appear scattered over racks; every 30 min a
high-priority 4-node job arrives that prefers one rack. Reported: high-priority jobs placed in
one rack, preemptions, GPU-hours lost to preemption (the victims' GPUs x their time run, since a
requeued job restarts), and the high jobs' mean wait.

    python scripts/bench/domain_preemption.py [--racks 8] [--hours 6] [--seed 1]
"""

from __future__ import annotations

import argparse
import random

from scheduler.core.kueue.queueing import LocalQueueSpec
from scheduler.core.kueue.quota import (
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
FLAVOR, GPU = "gpu", "nvidia.com/gpu"


def world(racks: int) -> World:
    ready = (NodeCondition("Ready", "True"),)
    nodes = tuple(NodeInfo(name=f"r{r}-n{i}", labels={BLOCK: "b0", RACK: f"r{r}", HOST: f"r{r}-n{i}"},
                           allocatable={GPU: 8, "pods": 110}, conditions=ready)
                  for r in range(racks) for i in range(4))
    group = ResourceGroup((GPU,), (FlavorQuotas(FLAVOR, {GPU: ResourceQuota(8 * len(nodes))}),))
    cq = ClusterQueueSpec("cq", (group,), preemption=PreemptionPolicy(LOWER_PRIORITY))
    return World(nodes=nodes, cluster_queues={"cq": cq}, local_queues={"ns/lq": LocalQueueSpec("ns", "lq", "cq")},
                 flavors={FLAVOR: FlavorSpec(FLAVOR, topology_name="t")}, topologies={"t": (BLOCK, RACK, HOST)})


def jobs(racks: int, hours: float, seed: int) -> list[SimJob]:
    rng = random.Random(seed)
    out: list[SimJob] = []
    horizon = hours * 3600
    t, i = 0.0, 0
    while t < horizon:  # low-priority 1-node jobs, about one per free node
        spec = WorkloadSpec("ns", f"low-{i}", (PodSetSpec("main", 1, {GPU: 8}, TopologyRequest(required=RACK)),),
                            uid=f"low-{i}", queue_name="lq", priority=0, created_at=t)
        out.append(SimJob(spec, rng.uniform(600, 3600), t, label="low"))
        t += rng.uniform(0, 2 * 2100 / (6 * racks))  # 1.5x the cluster: a queue builds
        i += 1
    for k in range(int(horizon // 1800)):
        at = 900 + k * 1800.0
        spec = WorkloadSpec("ns", f"high-{k}", (PodSetSpec("main", 4, {GPU: 8}, TopologyRequest(preferred=RACK)),),
                            uid=f"high-{k}", queue_name="lq", priority=100, created_at=at)
        out.append(SimJob(spec, 2700.0, at, label="high"))  # overlaps the next one
    return out


def run(racks: int, hours: float, seed: int, on: bool) -> dict[str, float]:
    result = Simulator(world(racks), jobs(racks, hours, seed), domain_preemption=on, horizon_s=hours * 3600).run()
    high = [j for j in result.jobs if j.label == "high" and j.first_admitted is not None]
    lost = sum(float(e.get("gpu_s_lost", 0.0)) for e in result.events if e.get("kind") == "preemption")
    return {"high admitted": len(high), "high in one rack": sum(1 for j in high if j.domains.get(RACK) == 1),
            "preemptions": result.preemptions, "GPU-hours lost": lost / 3600,
            "high mean wait s": sum(j.first_admitted - j.submit_at for j in high) / max(1, len(high))}  # type: ignore[operator]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", type=int, default=8)
    ap.add_argument("--hours", type=float, default=6.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    off = run(args.racks, args.hours, args.seed, on=False)
    on = run(args.racks, args.hours, args.seed, on=True)
    print(f"{args.racks} racks x 4 nodes, {args.hours:g} h, seed {args.seed}")
    print(f"{'':22s} {'off':>12s} {'on':>12s}")
    for key in off:
        print(f"{key:22s} {off[key]:12.1f} {on[key]:12.1f}")


if __name__ == "__main__":
    main()
