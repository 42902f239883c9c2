"""Workloads created directly, with no owner Job (issue 18), end to end: Kueue's perf runner
and external job frameworks create them. toposched admits them as Kueue does (QuotaReserved and
Admitted, nothing started), whoever finishes them sets ``Finished`` and their quota is free at
once, and nothing evicts them while their nodes are healthy."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.devcluster.apply import apply_objects
from scheduler.k8s.informer import PODS, WORKLOADS
from scheduler.kube import status as st
from tests.e2e.conftest import Stack
from tests.e2e.test_quota_flows import FLAVOR, KUEUE, cluster_queue, local_queue, namespace

CLUSTER = {"name": "e2e-ownerless", "instanceType": FLAVOR, "layers": [1, 1, 2], "nodesPerDomain": 2}
NS = "ownerless"
LAYER3 = "topology.k8s.aws/network-node-layer-3"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def workload(name: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": NS},
            "spec": {"queueName": "lq", "podSets": [{
                "name": "main", "count": 1, "topologyRequest": {"required": LAYER3},
                "template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "c", "image": "busybox",
                    "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}]}}


def get(stack: Stack, name: str) -> dict[str, Any]:
    return stack.api.get(WORKLOADS, name, NS)


def test_ownerless_workloads_are_admitted_finished_by_others_and_release_quota(stack: Stack) -> None:
    apply_objects(stack.kube, [namespace(NS), cluster_queue("ownerless-cq", 16), local_queue(NS, "lq", "ownerless-cq")])
    names = ("first", "second", "third")
    for name in names:  # 8 GPUs each, 16 in the queue
        stack.api.create(WORKLOADS, workload(name), NS)

    # All three share a priority and (usually) a creation second, so which two go first is
    # Kueue's tie-break by UID: the test asserts the split, not the names.
    def admitted() -> list[str]:
        return [n for n in names if st.condition_true(get(stack, n), st.ADMITTED)]

    stack.wait(lambda: len(admitted()) == 2, 60, "two of the three admitted")
    done, running = admitted()
    (waiting,) = (n for n in names if n not in (done, running))
    assert not st.has_reservation(get(stack, waiting))
    assert not stack.api.list(PODS, NS)["items"]  # nothing to start: no pods, no Job

    finished = get(stack, done)
    conditions = st.set_condition(st.conditions_of(finished), st.FINISHED, "True", "ByTest", "By test runner",
                                  st.utcnow())
    stack.api.merge_patch(WORKLOADS, done, {"status": {"conditions": conditions}}, NS, subresource="status")
    stack.wait(lambda: st.condition_true(get(stack, waiting), st.ADMITTED), 30,
               f"{waiting} admitted once {done} finished")
    assert st.condition_true(get(stack, running), st.ADMITTED)
    for name in ("first", "second", "third"):
        assert not st.condition_true(get(stack, name), st.EVICTED), name
