"""TASHandleOverlappingFlavors (new, beta on since Kueue v0.18; not in v0.17.0): a node that
several TAS flavors select is booked once for all of them. Restated from Kueue v0.19.2's
``pkg/cache/scheduler/snapshot_test.go`` (TestSnapshot, the three #10659 cases): "overlapping
flavors selecting disjoint nodes take only their own usage", "overlapping flavors differing only
in taints share the usage of their node (#10659)", "overlapping flavor that moved to other nodes
still counts on the node holding its usage"."""

from __future__ import annotations

from dataclasses import replace

from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates, kueue_defaults
from scheduler.core.kueue.admitted import AdmittedWorkload, TASUsage, charge_topology_usage
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit
from scheduler.core.kueue.quota import ClusterQueueSpec, FlavorQuotas, FlavorSpec, ResourceGroup, ResourceQuota
from scheduler.core.nodes import HOSTNAME_LABEL, NodeCondition, NodeInfo
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, WorkloadSpec

from ._admission import NS, lqs, pending, snapshot

ZONE = "zone"


def host(name: str, zone: str) -> NodeInfo:
    return NodeInfo(name=name, labels={HOSTNAME_LABEL: name, ZONE: zone}, allocatable={"cpu": 2000, "pods": 10},
                    conditions=(NodeCondition("Ready", "True"),))


NODES = [host("x1", "a"), host("x2", "b")]


def tree(zone: str) -> TopologyTree:
    return TopologyTree.build("topology", (HOSTNAME_LABEL,), NODES, flavor_node_labels={ZONE: zone})


def on(flavor: str, hostname: str) -> AdmittedWorkload:
    spec = WorkloadSpec("ns", f"wl-{flavor}", (PodSetSpec("main", 1, {"cpu": 1000}),))
    placement = PodSetPlacement("main", 1, (HOSTNAME_LABEL,), (DomainAssignment((hostname,), 1),))
    return AdmittedWorkload(spec, "cq", {(flavor, "cpu"): 1000}, tas=(TASUsage(flavor, placement, {"cpu": 1000}),))


def used(trees: dict[str, TopologyTree], flavor: str, hostname: str) -> dict[str, int]:
    t = trees[flavor]
    leaf = t.leaf_of_node(hostname)
    assert leaf is not None
    free = t.free_of_leaf(leaf)
    return {"cpu": 2000 - free["cpu"], "pods": 10 - free["pods"]}


def overlapping(release: str) -> bool:
    return FeatureGates(release=release).enabled("TASHandleOverlappingFlavors")


def test_the_gate_is_on_in_v019_only() -> None:
    assert overlapping(KUEUE_V019) and not overlapping(KUEUE_V017)


def test_flavors_selecting_disjoint_nodes_take_only_their_own_usage() -> None:
    trees = {"tas-zone-a": tree("a"), "tas-zone-b": tree("b")}
    charge_topology_usage(trees, [on("tas-zone-a", "x1"), on("tas-zone-b", "x2")], overlapping=True)
    assert used(trees, "tas-zone-a", "x1") == {"cpu": 1000, "pods": 1}
    assert used(trees, "tas-zone-b", "x2") == {"cpu": 1000, "pods": 1}


def test_flavors_sharing_a_node_share_its_usage() -> None:
    # "differing only in taints" / "moved to other nodes": both flavors select x1 and each holds
    # one pod there; each tree sees both (2000m, 2 pods) under the gate, its own alone without it.
    for gate, want in ((True, {"cpu": 2000, "pods": 2}), (False, {"cpu": 1000, "pods": 1})):
        trees = {"tas-shared": tree("a"), "tas-dedicated": tree("a")}
        charge_topology_usage(trees, [on("tas-shared", "x1"), on("tas-dedicated", "x1")], overlapping=gate)
        assert used(trees, "tas-shared", "x1") == want
        assert used(trees, "tas-dedicated", "x1") == want


def test_a_flavor_that_moved_away_accounts_nothing_on_its_new_nodes() -> None:
    trees = {"tas-stay": tree("a"), "tas-moved": tree("b")}  # tas-moved relabelled to zone b
    charge_topology_usage(trees, [on("tas-stay", "x1"), on("tas-moved", "x1")], overlapping=True)
    assert used(trees, "tas-stay", "x1") == {"cpu": 2000, "pods": 2}
    assert used(trees, "tas-moved", "x2") == {"cpu": 0, "pods": 0}


def test_a_flavor_whose_topology_does_not_end_at_the_hostname_keeps_its_own_usage() -> None:
    # snapshotTopologyDomainUsages returns early for such a flavor: neither shared nor shared into.
    block = TopologyTree.build("blocks", (ZONE,), NODES)
    trees = {"tas-shared": tree("a"), "blocks": block}
    charge_topology_usage(trees, [on("tas-shared", "x1")], overlapping=True)
    leaf = block.leaf_of_node("x1")
    assert leaf is not None and block.free_of_leaf(leaf)["cpu"] == 2000



def test_one_workloads_pod_sets_on_two_overlapping_flavors_see_each_other_under_v019() -> None:
    # clusterqueue_snapshot.go FindTopologyAssignmentsForWorkload: with the gate, the flavors of
    # one workload share an assumed usage, so its second flavor sees the first one's pods.
    groups = (ResourceGroup(("cpu",), (FlavorQuotas("f1", {"cpu": ResourceQuota(10000)}),)),
              ResourceGroup(("memory",), (FlavorQuotas("f2", {"memory": ResourceQuota(2 ** 40)}),)))
    cqs = {"a": ClusterQueueSpec("a", groups)}
    one_slot = [NodeInfo(name="x1", labels={HOSTNAME_LABEL: "x1"}, conditions=(NodeCondition("Ready", "True"),),
                         allocatable={"cpu": 4000, "memory": 2 ** 34, "pods": 1})]
    spec = WorkloadSpec(NS, "wl", (PodSetSpec("a", 1, {"cpu": 1000}, TopologyRequest(required=HOSTNAME_LABEL)),
                                   PodSetSpec("b", 1, {"memory": 2 ** 30}, TopologyRequest(required=HOSTNAME_LABEL))),
                        uid="u", queue_name="lq")
    for release, admitted in ((KUEUE_V017, True), (KUEUE_V019, False)):
        trees = {f: TopologyTree.build("t", (HOSTNAME_LABEL,), one_slot) for f in ("f1", "f2")}
        snap = snapshot(cluster_queues=cqs, local_queues=lqs(("lq", "a")), trees=trees, pending=[pending(spec)],
                        flavors={f: FlavorSpec(f, topology_name="t") for f in ("f1", "f2")})
        [decision] = run_cycle(replace(snap, config=kueue_defaults(release)))
        assert isinstance(decision, Admit) is admitted, (release, decision)
