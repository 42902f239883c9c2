"""The conformance comparison's rules on plain outcome dicts (no cluster): exact domains in
``same`` mode, and the downgrade to compactness when Kueue's run was disturbed by a spurious
NodeFailures eviction in a scenario where no node fails."""

from __future__ import annotations

from typing import Any

from tests.conformance.compare import compare
from tests.conformance.harness import LAYER

# Two layer-2 domains (x: n0-n3, y: n4-n7), each of two layer-3 domains of two nodes.
NODE_LABELS = {
    f"n{i}": {f"{LAYER}1": "root", f"{LAYER}2": "x" if i < 4 else "y", f"{LAYER}3": f"l3-{i // 2}"}
    for i in range(8)
}
SCENARIO: dict[str, Any] = {"name": "s", "mode": "same", "steps": [{"job": {"name": "b"}}, {"job": {"name": "a"}}]}


def outcome(hosts: dict[str, int], evictions: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"admitted": True, "hosts": hosts}
    if evictions:
        out["evictions"] = evictions
    return out


def test_same_mode_requires_the_same_domains() -> None:
    kueue = {"b": outcome({"n0": 1, "n1": 1}), "a": outcome({"n4": 1, "n5": 1})}
    topo = {"b": outcome({"n4": 1, "n5": 1}), "a": outcome({"n0": 1, "n1": 1})}
    diffs = compare(SCENARIO, kueue, topo, NODE_LABELS)
    assert len(diffs) == 2 and all("layer-3 domains differ" in d for d in diffs)


def test_spurious_kueue_node_failure_compares_compactness_only() -> None:
    # Kueue evicted b with NodeFailures although no node failed, and re-admitted it elsewhere.
    kueue = {"b": outcome({"n0": 1, "n1": 1}, ["NodeFailures"]), "a": outcome({"n4": 1, "n5": 1})}
    swapped = {"b": outcome({"n4": 1, "n5": 1}), "a": outcome({"n0": 1, "n1": 1})}
    assert compare(SCENARIO, kueue, swapped, NODE_LABELS) == []
    spread = {"b": outcome({"n4": 1, "n6": 1}), "a": outcome({"n0": 1, "n1": 1})}  # 2 layer-3 domains
    diffs = compare(SCENARIO, kueue, spread, NODE_LABELS)
    assert diffs == ["b: toposched spans (layer-2, layer-3) = (1, 2) domains, worse than Kueue's (1, 1)"]


def test_toposched_node_failure_eviction_is_never_excused() -> None:
    kueue = {"b": outcome({"n0": 1, "n1": 1}), "a": outcome({"n4": 1, "n5": 1})}
    topo = {"b": outcome({"n0": 1, "n1": 1}, ["NodeFailures"]), "a": outcome({"n4": 1, "n5": 1})}
    diffs = compare(SCENARIO, kueue, topo, NODE_LABELS)
    assert diffs == ["b: evictions differ: kueue [] vs toposched ['NodeFailures']"]


def test_a_scenario_that_fails_a_node_keeps_exact_domains() -> None:
    scenario = {**SCENARIO, "steps": [*SCENARIO["steps"], {"fail_node_of": "a"}]}
    kueue = {"b": outcome({"n0": 1, "n1": 1}, ["NodeFailures"]), "a": outcome({"n4": 1, "n5": 1})}
    topo = {"b": outcome({"n4": 1, "n5": 1}, ["NodeFailures"]), "a": outcome({"n0": 1, "n1": 1})}
    assert any("layer-3 domains differ" in d for d in compare(scenario, kueue, topo, NODE_LABELS))


def test_queue_status_must_match_field_by_field_when_decisions_match() -> None:
    from tests.conformance.compare import queue_status_diffs

    usage = [{"name": "ml.p5.48xlarge", "resources": [{"name": "nvidia.com/gpu", "total": "16", "borrowed": "0"}]}]
    kueue_q = {"cq-a": {"active": ["True", "Ready"], "pendingWorkloads": 1, "admittedWorkloads": 1,
                        "reservingWorkloads": 1, "flavorsUsage": usage}}
    same = {"cq-a": dict(kueue_q["cq-a"])}
    assert queue_status_diffs(kueue_q, same) == []
    off = {"cq-a": {**kueue_q["cq-a"], "pendingWorkloads": 0, "flavorsUsage": None}}
    assert queue_status_diffs(kueue_q, off) == [
        "ClusterQueue cq-a status.flavorsUsage: kueue " + repr(usage) + " vs toposched None",
        "ClusterQueue cq-a status.pendingWorkloads: kueue 1 vs toposched 0"]
    # a job toposched's webhook denied is pending only under Kueue: pending counts are not compared
    assert queue_status_diffs(kueue_q, {"cq-a": {**kueue_q["cq-a"], "pendingWorkloads": 0}},
                              count_pending=False) == []
    assert queue_status_diffs(None, same) == []  # an older recording without queue status
    scenario = {**SCENARIO}
    k = {"b": outcome({"n0": 1, "n1": 1}), "a": outcome({"n4": 1, "n5": 1}), "_queues": kueue_q}
    t = {"b": outcome({"n0": 1, "n1": 1}), "a": outcome({"n4": 1, "n5": 1}), "_queues": off}
    assert len(compare(scenario, k, t, NODE_LABELS)) == 2


def test_the_workloads_pod_sets_are_compared_when_recorded() -> None:
    """The new kinds' outcomes carry the Workload's pod sets: a RayJob without its submitter, or a
    pod group split into other roles, is a difference even when the placement is the same."""
    kueue = {"b": {**outcome({"n0": 1, "n1": 1}), "pod_sets": [["head", 1], ["workers", 1]]},
             "a": outcome({"n4": 1, "n5": 1})}
    same = {"b": {**outcome({"n0": 1, "n1": 1}), "pod_sets": [["head", 1], ["workers", 1]]},
            "a": outcome({"n4": 1, "n5": 1})}
    assert compare(SCENARIO, kueue, same, NODE_LABELS) == []
    other = {"b": {**outcome({"n0": 1, "n1": 1}), "pod_sets": [["main", 2]]}, "a": outcome({"n4": 1, "n5": 1})}
    assert compare(SCENARIO, kueue, other, NODE_LABELS) == [
        "b: Workload pod sets differ: kueue [['head', 1], ['workers', 1]] vs toposched [['main', 2]]"]
