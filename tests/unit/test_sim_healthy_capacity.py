"""The simulator scales an opted-in ClusterQueue's quota to healthy capacity as the controller's
snapshot does (core/beyond/healthy_capacity.py ``quotas_following_health``, one function for both),
and refuses PreemptionConfig / PreemptionLimit objects with a line naming the gap instead of
simulating without them."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.beyond.healthy_capacity import ANN_FOLLOW_HEALTHY
from scheduler.core.fakecluster import generate_nodes
from scheduler.sim.engine import simulate
from scheduler.sim.scenario import jobs_from_trace, world_from_objects
from scheduler.sim.trace import trace_from_data
from tests.unit.test_simulate import TWO_NODES, job, queues


def _queues(follow: bool) -> list[dict[str, Any]]:
    objs = queues(16)
    flavor = next(o for o in objs if o["kind"] == "ResourceFlavor")
    flavor["spec"] = {}  # quota only: no topology, so only the quota keeps work off a failed node
    objs = [o for o in objs if o["kind"] != "Topology"]
    if follow:
        cq = next(o for o in objs if o["kind"] == "ClusterQueue")
        cq["metadata"]["annotations"] = {ANN_FOLLOW_HEALTHY: "true"}
    return objs


def _run(follow: bool) -> dict[str, Any]:
    node = generate_nodes(TWO_NODES)[0]["metadata"]["name"]
    world = world_from_objects(TWO_NODES, _queues(follow))
    # One of the two 8-GPU nodes fails at 0 and recovers at 50; two 8-GPU jobs arrive at 1.
    trace = {"jobs": [job("a", 1, 1, 100), job("b", 1, 1, 100)],
             "failures": [{"at": 0, "node": node, "recoverAfter": 50}]}
    jobs, failures = jobs_from_trace(trace_from_data(trace), world)
    result = simulate(world, jobs, failures)
    return {j.spec.name: j for j in result.jobs}


def test_quota_following_health_holds_the_second_job_until_the_node_recovers() -> None:
    jobs = _run(follow=True)
    assert jobs["a"].first_admitted == 1  # 8 of 16 GPUs on healthy nodes: room for one job
    assert jobs["b"].first_admitted == 50  # the node is back: the quota is 16 again


def test_without_the_annotation_quota_is_kueues() -> None:
    jobs = _run(follow=False)
    assert jobs["a"].first_admitted == 1 and jobs["b"].first_admitted == 1


@pytest.mark.parametrize("kind", ["PreemptionConfig", "PreemptionLimit"])
def test_preemption_objects_are_refused_not_ignored(kind: str) -> None:
    objs = [*queues(16), {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": kind, "metadata": {"name": "x"},
                          "spec": {}}]
    with pytest.raises(ValueError, match=f"{kind} is not simulated"):
        world_from_objects(TWO_NODES, objs)
