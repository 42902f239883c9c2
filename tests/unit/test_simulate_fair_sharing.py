"""toposched simulate honours fair sharing from the Kueue Configuration (--kueue-config)."""

from __future__ import annotations

import dataclasses
from typing import Any

from scheduler.core.config import FairSharing, KueueConfig
from scheduler.sim.engine import simulate
from scheduler.sim.scenario import jobs_from_trace, world_from_objects
from scheduler.sim.trace import trace_from_data

GPU = "nvidia.com/gpu"
KQ = "kueue.x-k8s.io/v1beta2"
# One layer-3 domain of three 8-GPU nodes.
THREE_NODES = {"name": "sim-3", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 3}


def queues(weights: dict[str, str]) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": KQ, "kind": "Topology", "metadata": {"name": "hp"}, "spec": {"levels": [
            {"nodeLabel": f"topology.k8s.aws/network-node-layer-{i}"} for i in (1, 2, 3)]
            + [{"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "p5"}, "spec": {"topologyName": "hp"}}]
    for team in ("a", "b", "c"):
        flavors = [{"name": "p5", "resources": [{"name": GPU, "nominalQuota": "8"}]}]
        spec: dict[str, Any] = {"namespaceSelector": {}, "cohortName": "pool",
                                "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}]}
        if team in weights:
            spec["fairSharing"] = {"weight": weights[team]}
        objs += [{"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": f"cq-{team}"}, "spec": spec},
                 {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": f"team-{team}"},
                  "spec": {"clusterQueue": f"cq-{team}"}}]
    return objs


def started(config: KueueConfig, weights: dict[str, str]) -> dict[str, float | None]:
    # Each team runs one node; c's ends at t=10 and a2 / b2 (same arrival) both want that node.
    rows = [("a", "a1", 0, 100), ("b", "b1", 0, 100), ("c", "c1", 0, 10), ("a", "a2", 1, 100), ("b", "b2", 1, 100)]
    trace = {"jobs": [{"at": at, "namespace": f"team-{t}", "queue": "q", "name": n, "pods": 1, "gpusPerPod": 8,
                       "duration": d} for t, n, at, d in rows]}
    world = dataclasses.replace(world_from_objects(THREE_NODES, queues(weights)), config=config)
    jobs, failures = jobs_from_trace(trace_from_data(trace), world)
    result = simulate(world, jobs, failures)
    return {j.spec.name: j.first_admitted for j in result.jobs}


def test_weight_decides_who_borrows_the_freed_node() -> None:
    fair = KueueConfig(fair_sharing=FairSharing(enabled=True))
    # Classical order: both borrow, same priority, same arrival: a2 (key order) first.
    assert started(KueueConfig(), {"b": "2"})["a2"] == 10
    # Fair sharing with b weighing 2: b's share after admission is half of a's, so b2 first.
    assert started(fair, {"b": "2"})["b2"] == 10
    assert started(fair, {"b": "2"})["a2"] == 100
