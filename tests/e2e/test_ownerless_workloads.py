"""Workloads created directly, with no owner Job (issue 18), end to end: Kueue's perf runner
and external job frameworks create them. toposched admits them as Kueue does (QuotaReserved and
Admitted, nothing started), whoever finishes them sets ``Finished`` and their quota is free at
once, and nothing evicts them while their nodes are healthy."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.devcluster.apply import apply_objects
from scheduler.kube import status as st
from scheduler.kube.informer import PODS, WORKLOADS
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
    for name in ("first", "second", "third"):  # 8 GPUs each, 16 in the queue
        stack.api.create(WORKLOADS, workload(name), NS)
    stack.wait(lambda: all(st.condition_true(get(stack, n), st.ADMITTED) for n in ("first", "second")), 60,
               "the first two admitted")
    assert not st.has_reservation(get(stack, "third"))
    assert not stack.api.list(PODS, NS)["items"]  # nothing to start: no pods, no Job

    first = get(stack, "first")
    conditions = st.set_condition(st.conditions_of(first), st.FINISHED, "True", "ByTest", "By test runner",
                                  st.utcnow())
    stack.api.merge_patch(WORKLOADS, "first", {"status": {"conditions": conditions}}, NS, subresource="status")
    stack.wait(lambda: st.condition_true(get(stack, "third"), st.ADMITTED), 30, "the third admitted once one finished")
    for name in ("first", "second", "third"):
        assert not st.condition_true(get(stack, name), st.EVICTED), name
