"""``toposched simulate`` honours partial admission: a Job manifest in the trace with
``kueue.x-k8s.io/job-min-parallelism`` is admitted with the pods that fit (the same cycle)."""

from __future__ import annotations

from typing import Any

from scheduler.sim.engine import simulate
from scheduler.sim.scenario import jobs_from_trace, world_from_objects
from scheduler.sim.trace import trace_from_data
from tests.unit.test_simulate import TWO_NODES, queues


def manifest(name: str, pods: int, minimum: int | None) -> dict[str, Any]:
    ann = {"kueue.x-k8s.io/job-min-parallelism": str(minimum)} if minimum else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team", "annotations": ann,
                         "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"parallelism": pods, "completions": pods, "template": {"spec": {"containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}}


def admitted_at(minimum: int | None) -> float | None:
    world = world_from_objects(TWO_NODES, queues(16))  # 16 GPUs of quota, 2 nodes of 8
    trace = {"jobs": [{"at": 0, "job": manifest("wide", 4, minimum), "duration": 100}]}
    jobs, failures = jobs_from_trace(trace_from_data(trace), world)
    result = simulate(world, jobs, failures, horizon_s=500)
    return {j.spec.name: j for j in result.jobs}["wide"].admitted_at


def test_min_parallelism_admits_the_pods_that_fit() -> None:
    assert admitted_at(1) == 0
    assert admitted_at(None) is None  # 32 GPUs never fit the 16 of the quota
