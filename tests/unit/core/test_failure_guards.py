"""The node-failure guards (issue 13, reproduction 4): unreachable nodes get a longer grace than
an explicit HyperPod verdict, and an eviction storm holds evictions as the node lifecycle
controller does in an unhealthy zone."""

from __future__ import annotations

from scheduler.core.kueue.failures import (
    EXPLICIT,
    UNREACHABLE,
    FailureTracker,
    StormPolicy,
    failure_kind,
    held_nodes,
    storms,
)
from scheduler.core.nodes import NodeCondition, NodeInfo, Taint

HEALTH = "sagemaker.amazonaws.com/node-health-status"


def node(ready: str | None = "True", health: str = "Schedulable", taints: tuple[Taint, ...] = ()) -> NodeInfo:
    conditions = () if ready is None else (NodeCondition("Ready", ready),)
    return NodeInfo("n", labels={HEALTH: health}, conditions=conditions, taints=taints)


def test_failure_kinds() -> None:
    assert failure_kind(node("Unknown")) == UNREACHABLE
    assert failure_kind(node(None)) == UNREACHABLE
    assert failure_kind(node("True", taints=(Taint("node.kubernetes.io/unreachable", "", "NoExecute"),))) == UNREACHABLE
    assert failure_kind(node("Unknown", "UnschedulablePendingReplacement")) == EXPLICIT  # the verdict wins
    assert failure_kind(node("False")) == EXPLICIT
    assert failure_kind(node("True", "Unschedulable")) == EXPLICIT


def test_unreachable_nodes_get_the_longer_grace() -> None:
    tracker = FailureTracker(grace_s=3, unreachable_grace_s=300)
    tracker.observe("bad", False, 0, EXPLICIT)
    tracker.observe("dark", False, 0, UNREACHABLE)
    assert tracker.failed_among(["bad", "dark"], 10) == ["bad"]
    assert tracker.failed_among(["bad", "dark"], 300) == ["bad", "dark"]
    tracker.observe("dark", False, 301, EXPLICIT)  # HyperPod's verdict arrives: the short grace applies
    assert tracker.grace_for("dark") == 3
    assert FailureTracker(grace_s=3).grace_for("dark") == 3  # no separate grace: the same for both


def tracker_with(unhealthy: dict[str, float]) -> FailureTracker:
    tracker = FailureTracker()
    for name, since in unhealthy.items():
        tracker.observe(name, False, since)
    return tracker


GROUPS = {"all nodes": [f"n{i}" for i in range(10)]}


def test_a_storm_needs_more_than_the_share_within_the_window() -> None:
    policy = StormPolicy(threshold=0.55, window_s=120, min_failed=3)
    assert storms(GROUPS, tracker_with({f"n{i}": 0 for i in range(5)}), 10, policy) == {}  # 50%
    storm = storms(GROUPS, tracker_with({f"n{i}": 0 for i in range(6)}), 10, policy)["all nodes"]
    assert storm.total == 10 and len(storm.unhealthy) == 6
    assert "6 of 10 nodes of all nodes are unhealthy" in storm.message
    # The same six failures spread out over hours are no storm ...
    assert storms(GROUPS, tracker_with({f"n{i}": i * 1000 for i in range(6)}), 5001, policy) == {}
    # ... but a hold already on lasts while the share is high, however long ago they failed.
    assert set(storms(GROUPS, tracker_with({f"n{i}": 0 for i in range(6)}), 5000, policy, {"all nodes"})) \
        == {"all nodes"}
    assert storms(GROUPS, tracker_with({f"n{i}": 0 for i in range(5)}), 5000, policy, {"all nodes"}) == {}


def test_small_groups_need_the_minimum_count() -> None:
    policy = StormPolicy(min_failed=3)
    assert storms({"flavor a": ["a", "b"]}, tracker_with({"a": 0, "b": 0}), 1, policy) == {}
    held = held_nodes(storms({"flavor a": ["a", "b", "c"]}, tracker_with({"a": 0, "b": 0, "c": 0}), 1, policy))
    assert set(held) == {"a", "b", "c"}
