"""A PodSet group's member that requests nothing (an LWS leader) takes its group's TAS flavors
(Kueue v0.19.1, #13859; v0.17.0 leaves it without a flavor). Restated from Kueue v0.19.2's
``pkg/scheduler/flavorassigner/flavorassigner_test.go`` TestAssignFlavors_LeaderWorkerSetTASFlavor
(its wantPodSetFlavors): "leader without a managed request infers the group's TAS flavor",
"leader without a group is rejected (ClusterQueue-wide fallback is not supported)", "peers in the
same group resolving to different TAS flavors are rejected", "multiple groups: leaders infer
flavors from their own groups", "leader in group where peer resolves to non-TAS flavor is
rejected". (Kueue's rejections of the last three, "more than one TAS flavor assigned" and no TAS
information, are not restated: toposched places the first flavor's group, or none.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.core.config import KUEUE_V017, KUEUE_V019, kueue_defaults
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit
from scheduler.core.kueue.flavorassigner import assign_flavors
from scheduler.core.kueue.quota import (
    ClusterQueueSpec,
    FlavorQuotas,
    FlavorSpec,
    QuotaState,
    ResourceGroup,
    ResourceQuota,
)
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, WorkloadSpec

from ._admission import NS, lqs, pending, rq, snapshot
from ._admission import cq as queue
from ._helpers import RACK, node, tree_of

HOST = "kubernetes.io/hostname"
GPU_A, GPU_B, MEMORY = "example.com/gpu-a", "example.com/gpu-b", "memory"
FLAVORS = {"tas-a": FlavorSpec("tas-a", topology_name="tas-topo-a"),
           "tas-b": FlavorSpec("tas-b", topology_name="tas-topo-b"), "non-tas": FlavorSpec("non-tas")}
LEVELS = {"tas-a": (HOST,), "tas-b": (HOST,)}


def cq(*groups: tuple[str, str]) -> ClusterQueueSpec:
    """One resource group per (flavor, resource)."""
    return ClusterQueueSpec("test-clusterqueue", tuple(
        ResourceGroup((res,), (FlavorQuotas(flavor, {res: ResourceQuota(4 * 2 ** 30 if res == MEMORY else 4)}),))
        for flavor, res in groups))


def ps(name: str, group: str | None, request: str | None = None, topology: bool = True) -> PodSetSpec:
    return PodSetSpec(name, 1, {request: 1} if request else {},
                      TopologyRequest(required=HOST if topology else None, group_name=group))


CASES = [
    ("leader without a managed request infers the group's TAS flavor",
     [ps("leader", "group1"), ps("worker", "group1", GPU_A)], cq(("tas-a", GPU_A), ("tas-b", MEMORY)),
     {"leader": {GPU_A: "tas-a"}, "worker": {GPU_A: "tas-a"}}),
    ("leader without a group is rejected (ClusterQueue-wide fallback is not supported)",
     [ps("leader", None), ps("worker", None, GPU_A)], cq(("tas-a", GPU_A)),
     {"leader": {}, "worker": {GPU_A: "tas-a"}}),
    ("peers in the same group resolving to different TAS flavors are rejected",
     [ps("leader", "group1"), ps("worker-a", "group1", GPU_A), ps("worker-b", "group1", GPU_B)],
     cq(("tas-a", GPU_A), ("tas-b", GPU_B)),
     {"leader": {GPU_A: "tas-a", GPU_B: "tas-b"}, "worker-a": {GPU_A: "tas-a"}, "worker-b": {GPU_B: "tas-b"}}),
    ("multiple groups: leaders infer flavors from their own groups",
     [ps("leader1", "group1"), ps("worker1", "group1", GPU_A), ps("leader2", "group2"), ps("worker2", "group2", GPU_B)],
     cq(("tas-a", GPU_A), ("tas-b", GPU_B)),
     {"leader1": {GPU_A: "tas-a"}, "worker1": {GPU_A: "tas-a"}, "leader2": {GPU_B: "tas-b"},
      "worker2": {GPU_B: "tas-b"}}),
    ("leader in group where peer resolves to non-TAS flavor is rejected",
     [ps("leader", "group1"), ps("worker", "group1", GPU_A, topology=False)], cq(("non-tas", GPU_A)),
     {"leader": {}, "worker": {GPU_A: "non-tas"}}),
]


@pytest.mark.parametrize(("pod_sets", "queue", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_leader_takes_its_groups_tas_flavor_under_v019(pod_sets: list[PodSetSpec], queue: ClusterQueueSpec,
                                                        want: dict[str, dict[str, str]]) -> None:
    workload = WorkloadSpec("ns", "wl", tuple(pod_sets))
    got = assign_flavors(workload, queue, QuotaState([queue]), FLAVORS, LEVELS, group_tas_flavors=True)
    assert {p.name: dict(p.flavors) for p in got.pod_sets} == want
    before = assign_flavors(workload, queue, QuotaState([queue]), FLAVORS, LEVELS)  # Kueue v0.17.0: no flavor
    assert all(not p.flavors for p in before.pod_sets if p.name.startswith("leader"))


def test_the_cycle_places_the_leader_with_its_workers_under_v019() -> None:
    # the whole route: flavor assignment (nominate.py) -> grouped placement -> Admit
    nodes = [node(f"r1-n{i}", rack="r1", cpu=4) for i in range(2)]
    leader = PodSetSpec("leader", 1, {}, TopologyRequest(required=RACK, group_name="g"))
    workers = PodSetSpec("workers", 2, {"cpu": 1000}, TopologyRequest(required=RACK, group_name="g"))
    spec = WorkloadSpec(NS, "lws", (leader, workers), uid="u", queue_name="lq")
    for release, placed in ((KUEUE_V019, True), (KUEUE_V017, False)):
        snap = snapshot(cluster_queues={"a": queue("a", {"tas": {"cpu": rq(100)}})}, local_queues=lqs(("lq", "a")),
                        flavors={"tas": FlavorSpec("tas", topology_name="default")}, trees={"tas": tree_of(nodes)},
                        pending=[pending(spec)])
        [decision] = run_cycle(replace(snap, config=kueue_defaults(release)))
        assert isinstance(decision, Admit), decision
        by_name = {p.name: p for p in decision.pod_sets}
        assert (by_name["leader"].topology is not None) is placed, release
        assert by_name["leader"].flavors == ({"cpu": "tas"} if placed else {})
