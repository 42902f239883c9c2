"""TopologyTree: which nodes count, capacity, incremental usage, clone."""

from __future__ import annotations

import numpy as np

from scheduler.core.nodes import NodeInfo, PodInfo
from scheduler.core.placement.planner import place_workload
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.core.topology import DEFAULT_HYPERPOD_LEVELS, TopologyTree, default_levels_for
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec
from tests.unit.core._helpers import BLOCK, HOST, LEVELS3, RACK, node, tree_of


def fit_of(tree: TopologyTree, cpu: int = 1) -> list[int]:
    return tree.leaf_fit({"cpu": cpu * 1000, "pods": 1}).counts.tolist()


def test_domains_identified_by_full_path() -> None:
    tree = tree_of([node("a", "b1", "rack-1"), node("b", "b2", "rack-1"), node("c", "b1", "rack-1")])
    assert tree.paths[1] == [("b1", "rack-1"), ("b2", "rack-1")]
    assert tree.paths[0] == [("b1",), ("b2",)]
    assert [tree.ancestor(leaf, 1) for leaf in range(3)] == [0, 0, 1]
    assert tree.child_start[1].tolist() == [0, 2] and tree.child_end[1].tolist() == [2, 3]


def test_node_membership_rules() -> None:
    nodes = [
        node("ok", labels={"pool": "gpu"}),
        node("other-pool", labels={"pool": "cpu"}),
        node("not-ready", ready=False, labels={"pool": "gpu"}),
        node("cordoned", unschedulable=True, labels={"pool": "gpu"}),
        NodeInfo("no-rack", {BLOCK: "b1", HOST: "no-rack", "pool": "gpu"}, {"cpu": 1000, "pods": 5}),
    ]
    tree = TopologyTree.build("default", LEVELS3, nodes, flavor_node_labels={"pool": "gpu"})
    assert tree.leaf_nodes == [("ok",)]
    assert tree.build_exclusions["flavor nodeLabels"] == 1
    assert tree.build_exclusions[f"missing label {RACK}"] == 1
    assert sum(v for k, v in tree.build_exclusions.items() if k.startswith("unhealthy")) == 2


def test_capacity_subtracts_bound_non_tas_pods_with_a_pod_slot() -> None:
    pods = [
        PodInfo("ns", "run", uid="1", node_name="n1", phase="Running", requests={"cpu": 1000}),
        PodInfo("ns", "pending-bound", uid="2", node_name="n1", phase="Pending", requests={"cpu": 1000}),
        PodInfo("ns", "terminating", uid="3", node_name="n1", phase="Running", requests={}, deleting=True),
        PodInfo("ns", "failed", uid="4", node_name="n1", phase="Failed", requests={"cpu": 1000}),
        PodInfo("ns", "unknown-node", uid="5", node_name="gone", phase="Running", requests={"cpu": 1000}),
    ]
    tree = tree_of([node("n1", cpu=4, pods=4)], pods=pods)
    assert tree.free_of_leaf(0) == {"cpu": 2000, "pods": 1}
    assert fit_of(tree) == [1]


def test_add_remove_pod_incremental_and_idempotent() -> None:
    tree = tree_of([node("n1", cpu=4)])
    pod = PodInfo("ns", "p", uid="u", node_name="n1", phase="Running", requests={"cpu": 3000})
    tree.add_pod(pod)
    tree.add_pod(pod)  # an update event: not counted twice
    assert fit_of(tree) == [1]
    finished = PodInfo("ns", "p", uid="u", node_name="n1", phase="Succeeded", requests={"cpu": 3000})
    tree.add_pod(finished)  # update to a terminal phase releases the capacity
    assert fit_of(tree) == [4]
    tree.add_pod(pod)
    tree.remove_pod(pod)
    assert fit_of(tree) == [4]


def test_add_remove_usage_and_clone_are_independent() -> None:
    tree = tree_of([node("n1", cpu=4), node("n2", cpu=4)])
    usage = PodSetPlacement("main", 3, (HOST,), (DomainAssignment(("n1",), 2), DomainAssignment(("n2",), 1)))
    copy = tree.clone()
    tree.add_usage(usage, {"cpu": 1000})
    assert fit_of(tree) == [2, 3]
    assert fit_of(copy) == [4, 4]
    assert tree.free_of_leaf(0)["pods"] == 108
    tree.remove_usage(usage, {"cpu": 1000})
    assert (tree.free == copy.free).all()
    # Usage on a leaf that no longer exists is skipped.
    tree.add_usage(PodSetPlacement("main", 1, (HOST,), (DomainAssignment(("gone",), 1),)), {"cpu": 1000})
    assert (tree.free == copy.free).all()


def test_committed_placement_blocks_the_next_one() -> None:
    tree = tree_of([node("n1", cpu=2), node("n2", cpu=2)])
    spec = PodSetSpec("main", 4, {"cpu": 1000}, TopologyRequest(required=RACK))
    first = place_workload(tree, [spec], solver="greedy")
    assert first.fits
    tree.add_usage(first.pod_sets[0], spec.requests)
    second = place_workload(tree, [spec], solver="greedy")
    assert second.reason.startswith('topology "default" doesn\'t allow to fit any of 4 pod(s)')


def test_resource_missing_from_nodes_fits_zero() -> None:
    tree = tree_of([node("n1", cpu=8)])
    fit = tree.leaf_fit({"cpu": 1000, "pods": 1, "nvidia.com/gpu": 1})
    assert fit.counts.tolist() == [0]
    assert fit.exclusions == {'resource "nvidia.com/gpu"': 1}


def test_limiting_resource_ties_broken_by_name() -> None:
    tree = tree_of([node("n1", cpu=0, extra={"memory": 0})])
    fit = tree.leaf_fit({"cpu": 1000, "memory": 1, "pods": 1})
    assert fit.exclusions == {'resource "cpu"': 1}


def test_negative_free_clamped() -> None:
    tree = tree_of(
        [node("n1", cpu=1)], pods=[PodInfo("a", "b", node_name="n1", phase="Running", requests={"cpu": 5000})]
    )
    assert fit_of(tree) == [0]
    assert tree.free_of_leaf(0)["cpu"] == -4000


def test_default_levels_and_layer4() -> None:
    three = [node("n", labels={"topology.k8s.aws/network-node-layer-3": "x"})]
    assert default_levels_for(three) == DEFAULT_HYPERPOD_LEVELS
    four = [
        node(
            "n",
            labels={
                "topology.k8s.aws/network-node-layer-3": "x",
                "topology.k8s.aws/network-node-layer-4": "y",
            },
        )
    ]
    assert default_levels_for(four)[3] == "topology.k8s.aws/network-node-layer-4"
    assert default_levels_for(four)[-1] == HOST


def test_subtree_sums() -> None:
    tree = tree_of([node("a", "b1", "r1", 2), node("b", "b1", "r2", 3), node("c", "b2", "r3", 1)])
    sums = tree.subtree_sums(np.array(fit_of(tree), dtype=np.int64))
    assert [s.tolist() for s in sums] == [[5, 1], [2, 3, 1], [2, 3, 1]]
