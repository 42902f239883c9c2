"""Quota that follows healthy capacity (core/beyond/healthy_capacity.py): nominal quota scaled by the
healthy share of the flavor's capacity, for ClusterQueues that opt in."""

from __future__ import annotations

from dataclasses import replace

from scheduler.core.beyond.healthy_capacity import (
    EffectiveQuota,
    condition_message,
    flavor_capacities,
    follow_healthy_capacity,
)
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.quota import FlavorSpec

from ._admission import cq, lqs, pending, rq, snapshot, summary, wl
from ._helpers import node

GPU = "nvidia.com/gpu"
HEALTH = "sagemaker.amazonaws.com/node-health-status"
P5 = FlavorSpec("ml.p5.48xlarge", {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"})


def _p5(name: str, status: str = "Schedulable", instance: str = "ml.p5.48xlarge") -> object:
    return node(name, cpu=192, extra={GPU: 8},
                labels={"node.kubernetes.io/instance-type": instance, HEALTH: status})


NODES = [_p5("n1"), _p5("n2"), _p5("n3"), _p5("n4", "UnschedulablePendingReplacement"), _p5("g1", instance="ml.g5")]


def test_capacity_counts_only_the_flavors_nodes_and_their_health() -> None:
    cap = flavor_capacities({P5.name: P5}, NODES)[P5.name]  # type: ignore[arg-type]
    assert (cap.nodes, cap.healthy_nodes) == (4, 3)
    assert cap.total is not None and cap.healthy is not None
    assert (cap.total[GPU], cap.healthy[GPU]) == (32, 24)


def test_nominal_quota_is_scaled_by_the_healthy_share_rounded_down() -> None:
    queue = cq("team", {P5.name: {GPU: rq(30, borrow=8), "cpu": rq(100)}})
    caps = flavor_capacities({P5.name: P5}, NODES)  # type: ignore[arg-type]
    scaled, report = follow_healthy_capacity(queue, caps)
    quotas = scaled.resource_groups[0].flavors[0].resources
    assert quotas[GPU].nominal == 22 and quotas[GPU].borrowing_limit == 8  # 30 * 24 / 32, limits kept
    assert quotas["cpu"].nominal == 75_000  # millicores: 100 CPUs * 3/4
    assert EffectiveQuota(P5.name, GPU, 30, 22, 3, 4) in report
    assert condition_message(report) == ("effective nominal quota on healthy capacity: ml.p5.48xlarge cpu: 75 of 100 "
                                         "(3 of 4 nodes healthy); ml.p5.48xlarge nvidia.com/gpu: 22 of 30 "
                                         "(3 of 4 nodes healthy)")


def test_a_flavor_without_nodes_keeps_its_quota() -> None:
    queue = cq("team", {"reserved": {GPU: rq(16)}})
    reserved = {"reserved": FlavorSpec("reserved", {"pool": "x"})}
    scaled, report = follow_healthy_capacity(queue, flavor_capacities(reserved, NODES))  # type: ignore[arg-type]
    assert scaled == queue and report == ()
    assert condition_message(report) == "nominal quota applies: every node of its flavors is healthy"


def test_the_cycle_admits_against_the_effective_quota() -> None:
    queue = cq("team", {P5.name: {GPU: rq(32), "cpu": rq(1000)}})
    caps = flavor_capacities({P5.name: P5}, NODES)  # type: ignore[arg-type]
    scaled, _ = follow_healthy_capacity(queue, caps)
    job = wl("big", 1, 4, extra={GPU: 8})  # 32 GPUs
    plain = snapshot(cluster_queues={"team": queue}, local_queues=lqs(("lq", "team")), flavors={P5.name: P5},
                     pending=[pending(job)])
    assert summary(run_cycle(plain))[0][0] == "admit"
    following = replace(plain, cluster_queues={"team": scaled})
    assert summary(run_cycle(following)) == [("pending", "big", "ExceedsMaxQuota")]
