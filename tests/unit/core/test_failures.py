"""Node-failure detection (debounce) and hot-swap replacement, on plain data."""

from __future__ import annotations

import pytest

from scheduler.core.kueue.failures import FailureTracker, find_replacement, no_replacement_message, pods_per_node
from scheduler.core.nodes import HOSTNAME_LABEL, NodeCondition, NodeInfo
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.core.topology import DEFAULT_HYPERPOD_LEVELS, TopologyTree

L1, L2, L3 = DEFAULT_HYPERPOD_LEVELS[:3]
READY = (NodeCondition("Ready", "True"),)


def node(name: str, l2: str, l3: str, gpus: int = 8) -> NodeInfo:
    return NodeInfo(name=name, labels={L1: "a", L2: l2, L3: l3, HOSTNAME_LABEL: name},
                    allocatable={"nvidia.com/gpu": gpus, "pods": 110, "cpu": 192000}, conditions=READY)


NODES = [node("n1", "b1", "r1"), node("n2", "b1", "r1"), node("n3", "b1", "r1"),
         node("n4", "b1", "r2"), node("n5", "b1", "r2"), node("n6", "b2", "r3")]
PER_POD = {"nvidia.com/gpu": 8}


def placement(counts: dict[str, int]) -> PodSetPlacement:
    return PodSetPlacement("main", sum(counts.values()), (HOSTNAME_LABEL,),
                           tuple(DomainAssignment((h,), c) for h, c in sorted(counts.items())))


def tree_with(usage: PodSetPlacement, failed: set[str], extra_used: dict[str, int] | None = None) -> TopologyTree:
    nodes = [n for n in NODES if n.name not in failed]
    tree = TopologyTree.build("default", DEFAULT_HYPERPOD_LEVELS, nodes)
    tree.add_usage(usage, PER_POD)
    if extra_used:
        tree.add_usage(placement(extra_used), PER_POD)
    return tree


@pytest.mark.parametrize(
    ("required", "extra_used", "expected"),
    [
        # the spare node of the same rack takes the failed node's pod
        (L3, None, {"n1": 1, "n3": 1}),
        # rack r1 has no spare node: required layer-3 cannot hold -> no replacement
        (L3, {"n3": 1}, None),
        # preferred: r1 full, climb to layer-2 b1 where r2 has room
        (None, {"n3": 1}, {"n1": 1, "n4": 1}),
        # required at layer-2: any node of b1
        (L2, {"n3": 1}, {"n1": 1, "n4": 1}),
    ],
)
def test_single_node_replacement(required: str | None, extra_used: dict[str, int] | None,
                                 expected: dict[str, int] | None) -> None:
    current = placement({"n1": 1, "n2": 1})
    tree = tree_with(current, failed={"n2"}, extra_used=extra_used)
    got = find_replacement(tree, current, PER_POD, "n2", required)
    assert (pods_per_node(got) if got else None) == expected
    if got:
        assert got.count == current.count and "n2" not in pods_per_node(got)


def test_replacement_never_overfills_a_node() -> None:
    current = placement({"n1": 1, "n2": 1})
    tree = tree_with(current, failed={"n2"}, extra_used={"n3": 1, "n4": 1, "n5": 1})
    assert find_replacement(tree, current, PER_POD, "n2", L2) is None


def test_flapping_node_never_counts_as_failed() -> None:
    tracker = FailureTracker(grace_s=3.0)
    t = 0.0
    while t < 30.0:  # healthy/unhealthy four times a second for 30 s
        tracker.observe("n1", healthy=int(t * 4) % 2 == 0, now=t)
        assert not tracker.failed("n1", t)
        t += 0.125
    tracker.observe("n1", healthy=True, now=30.0)
    tracker.observe("n1", healthy=False, now=30.5)  # now it stays down
    assert not tracker.failed("n1", 33.4)
    assert tracker.failed("n1", 33.5)
    tracker.observe("n1", healthy=True, now=34.0)
    assert not tracker.failed("n1", 40.0)


def test_deleted_node_fails_at_once() -> None:
    tracker = FailureTracker(grace_s=3.0)
    tracker.observe_deleted("n9")
    assert tracker.failed_among(["n1", "n9"], now=0.0) == ["n9"]


def test_message_is_kueues() -> None:
    assert no_replacement_message(["b", "a"]) == (
        "Workload was evicted as there was no replacement for unhealthy node(s): a,b")


def test_single_pod_on_a_deleted_node_is_replaced_in_any_domain_that_fits() -> None:
    # The workload's only pod sat on n2, which is gone (deleted): nothing anchors the domain,
    # and one pod alone satisfies "all pods in one layer-3 domain" anywhere.
    current = placement({"n2": 1})
    tree = tree_with(current, failed={"n2"}, extra_used={"n1": 1, "n3": 1})
    got = find_replacement(tree, current, PER_POD, "n2", L3, failed_node_labels=None)
    assert got is not None and sum(pods_per_node(got).values()) == 1 and "n2" not in pods_per_node(got)


# Slices of 2 pods, each slice inside one rack (layer-3), the pod set inside one layer-2 block:
# slice A on n1+n2 (rack r1), slice B on n4+n5 (rack r2); n3 (r1) is the only free node.
SLICED = {"n1": 1, "n2": 1, "n4": 1, "n5": 1}


def labels_of(name: str) -> dict[str, str]:
    return next(n.labels for n in NODES if n.name == name)


def test_slice_pod_moves_only_inside_its_own_slice_domain() -> None:
    current = placement(SLICED)
    tree = tree_with(current, failed={"n2"})
    got = find_replacement(tree, current, PER_POD, "n2", L2, labels_of("n2"), slice_levels=(L3,))
    assert got is not None and pods_per_node(got) == {"n1": 1, "n3": 1, "n4": 1, "n5": 1}


def test_slice_is_not_broken_to_keep_the_outer_domain() -> None:
    # n4 fails; the free n3 is in the same block (required layer-2 would hold) but in rack r1,
    # which would split slice B over two racks: no replacement, the workload is evicted.
    current = placement(SLICED)
    tree = tree_with(current, failed={"n4"})
    assert find_replacement(tree, current, PER_POD, "n4", L2, labels_of("n4"), slice_levels=(L3,)) is None
    # without the slice constraint the same failure is hot-swapped onto n3
    got = find_replacement(tree, current, PER_POD, "n4", L2, labels_of("n4"))
    assert got is not None and "n3" in pods_per_node(got)


def test_slice_replacement_needs_the_failed_nodes_labels() -> None:
    current = placement(SLICED)
    tree = tree_with(current, failed={"n2"})
    assert find_replacement(tree, current, PER_POD, "n2", L2, None, slice_levels=(L3,)) is None


def test_two_nodes_failing_together_move_to_distinct_spares_or_not_at_all() -> None:
    from scheduler.core.kueue.failures import replace_failed_nodes

    # A 3-pod workload on n1, n2, n4 (required layer-2 b1); n2 and n4 fail together.
    current = placement({"n1": 1, "n2": 1, "n4": 1})
    tree = tree_with(current, failed={"n2", "n4"})
    got = replace_failed_nodes(tree, current, PER_POD, ["n4", "n2"], L2)
    # b1's healthy spares are n3 and n5: one pod each, never both on one node (8 GPUs each)
    assert got is not None and pods_per_node(got) == {"n1": 1, "n3": 1, "n5": 1}
    assert got.count == 3
    # the scratch reservation did not leak into the caller's tree
    assert tree.free[tree.leaf_of_node("n3")].tolist() == tree_with(current, failed={"n2", "n4"}).free[
        tree.leaf_of_node("n3")].tolist()
    # only one spare left in b1 (n5 busy): the first move fits, the second cannot -> None, not half
    busy = tree_with(current, failed={"n2", "n4"}, extra_used={"n5": 1})
    assert replace_failed_nodes(busy, current, PER_POD, ["n2", "n4"], L2) is None
    # a failed node the pod set does not use is ignored
    assert pods_per_node(replace_failed_nodes(tree, current, PER_POD, ["n2", "n6"], L2) or current) == {
        "n1": 1, "n3": 1, "n4": 1}
