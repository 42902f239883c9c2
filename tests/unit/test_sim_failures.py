"""The simulator applies the controller's NodeFailures requeue backoff and eviction-storm guard
(core.failures: RequeueBackoff, StormPolicy, storms over storm_groups), so `toposched simulate`
cannot drift from the controller (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from scheduler import cli
from scheduler.core.fakecluster import generate_nodes
from scheduler.core.kueue.failures import ALL_NODES, RequeueBackoff, StormPolicy, storm_groups
from scheduler.sim.engine import simulate
from scheduler.sim.scenario import jobs_from_trace, world_from_objects
from scheduler.sim.trace import trace_from_data
from tests.unit.test_simulate import L3, TWO_NODES, job, queues

FOUR_NODES = {**TWO_NODES, "name": "sim-4", "nodesPerDomain": 4}


def run(trace: dict[str, Any], cluster: dict[str, Any], gpus: int, **kw: Any) -> tuple[Any, Any]:
    world = world_from_objects(cluster, queues(gpus))
    jobs, failures = jobs_from_trace(trace_from_data(trace), world)
    result = simulate(world, jobs, failures, **kw)
    return result, {j.spec.name: j for j in result.jobs}["a"]


def events(result: Any) -> list[tuple[str, float]]:
    return [(e["kind"], e["t"]) for e in result.events]


def test_the_first_node_failures_requeue_is_immediate_as_kueues() -> None:
    node = generate_nodes(TWO_NODES)[0]["metadata"]["name"]
    trace = {"jobs": [job("a", 0, 2, 100, topology={"required": L3})],
             "failures": [{"at": 30, "node": node, "recoverAfter": 20}]}
    result, a = run(trace, TWO_NODES, 16)
    # Requeued at once (Kueue v0.17); the job fits again when the node is back at 50.
    assert a.evictions == 1 and a.admitted_at == 50 and a.finished_at == 150
    eviction = next(e for e in result.events if e["kind"] == "eviction")
    assert "requeue_at" not in eviction and eviction["detail"] == f"NodeFailures: {node}"


def test_backoff_doubles_with_each_further_requeue_up_to_the_cap() -> None:
    node = generate_nodes(TWO_NODES)[0]["metadata"]["name"]
    trace = {"jobs": [job("a", 0, 2, 100, topology={"required": L3})],
             "failures": [{"at": 10, "node": node, "recoverAfter": 1},
                          {"at": 30, "node": node, "recoverAfter": 1},
                          {"at": 70, "node": node, "recoverAfter": 1},
                          {"at": 100, "node": node, "recoverAfter": 1}]}
    result, a = run(trace, TWO_NODES, 16, requeue_backoff=RequeueBackoff(base_s=10, max_s=30))
    requeues = [e.get("requeue_at", e["t"]) - e["t"] for e in result.events if e["kind"] == "eviction"]
    assert requeues == [0, 10, 20, 30]  # at once, base, 2 * base, then the cap
    assert a.evictions == 4 and a.admitted_at == 130 and a.finished_at == 230


def test_a_storm_holds_node_failures_until_the_share_drops() -> None:
    names = [n["metadata"]["name"] for n in generate_nodes(FOUR_NODES)]
    # One job on all four nodes; three of them fail at once (75% > 55%, at least 3): held.
    trace = {"jobs": [job("a", 0, 4, 100, topology={"required": L3})],
             "failures": [{"at": 30, "node": names[0], "recoverAfter": 20},
                          *({"at": 30, "node": n} for n in names[1:3])]}
    result, a = run(trace, FOUR_NODES, 32, requeue_backoff=RequeueBackoff(0, 0))
    kinds = events(result)
    assert ("storm", 30) in kinds and ("held", 30) in kinds
    assert ("eviction", 30) not in kinds
    # At 50 one node is back: 2 of 4 unhealthy (50%) ends the storm and the held workload is
    # decided: two of its nodes are still failed and there is no spare, so it is evicted.
    assert ("storm-over", 50) in kinds and ("eviction", 50) in kinds
    assert a.evictions == 1
    held = next(e for e in result.events if e["kind"] == "held")
    assert "node-failure evictions and replacements are held: 3 of 4 nodes" in held["detail"]


def test_without_the_guard_the_same_failures_evict_at_once() -> None:
    names = [n["metadata"]["name"] for n in generate_nodes(FOUR_NODES)]
    trace = {"jobs": [job("a", 0, 4, 100, topology={"required": L3})],
             "failures": [{"at": 30, "node": n} for n in names[:3]]}
    result, a = run(trace, FOUR_NODES, 32, storm_guard=False)
    assert ("eviction", 30) in events(result) and not any(k == "held" for k, _ in events(result))
    assert a.evictions == 1


def test_storm_policy_threshold_is_the_one_passed() -> None:
    names = [n["metadata"]["name"] for n in generate_nodes(FOUR_NODES)]
    trace = {"jobs": [job("a", 0, 4, 100, topology={"required": L3})],
             "failures": [{"at": 30, "node": n} for n in names[:3]]}
    result, _a = run(trace, FOUR_NODES, 32, storm_policy=StormPolicy(threshold=0.8))
    assert ("eviction", 30) in events(result)  # 75% is below an 80% threshold


def test_storm_groups_are_all_nodes_and_each_flavors_nodes() -> None:
    labels = {"n1": {"type": "p5"}, "n2": {"type": "p4"}, "n3": {"type": "p5"}}
    groups = storm_groups(labels, {"p5": {"type": "p5"}, "any": {}})
    assert groups == {ALL_NODES: ["n1", "n2", "n3"], "flavor p5": ["n1", "n3"]}


def test_simulate_cli_takes_the_controllers_flags(tmp_path: Path) -> None:
    node = generate_nodes(TWO_NODES)[0]["metadata"]["name"]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(TWO_NODES))
    (tmp_path / "queues.yaml").write_text(yaml.safe_dump_all(queues(16)))
    (tmp_path / "trace.yaml").write_text(yaml.safe_dump({
        "jobs": [job("a", 0, 2, 100, topology={"required": L3})],
        "failures": [{"at": 30, "node": node, "recoverAfter": 20}, {"at": 60, "node": node, "recoverAfter": 1}]}))
    out = tmp_path / "out"
    assert cli.main(["simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--queues",
                     str(tmp_path / "queues.yaml"), "--trace", str(tmp_path / "trace.yaml"),
                     "--node-failure-requeue-base-seconds", "5", "--eviction-storm-threshold", "0.9",
                     "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requeue_backoff_s"] == {"base": 5.0, "max": 3600.0}
    assert summary["eviction_storm_guard"]["threshold"] == 0.9
    first, second = [e for events in summary["events"].values() for e in events if e["kind"] == "eviction"]
    assert "requeue_at" not in first and second["requeue_at"] == 65  # at once, then the 5 s base
