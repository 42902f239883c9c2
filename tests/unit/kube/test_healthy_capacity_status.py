"""Quota that follows healthy capacity through the controller (in-memory API server): the
ClusterQueue that opts in shows its effective quota in the condition
``toposched.io/QuotaFollowsHealthyCapacity`` and admits against it; the quota comes back when
the node recovers, and the condition goes when the queue opts out."""

from __future__ import annotations

from scheduler.k8s.informer import CLUSTER_QUEUES, JOBS, NODES, WORKLOADS
from scheduler.kube import status as st

from .test_phases import HEALTH, NS, Harness, job

ANN = "toposched.io/quota-follows-healthy-capacity"
CONDITION = "toposched.io/QuotaFollowsHealthyCapacity"


def _pass(h: Harness) -> None:
    h.sync()
    h.controller.ensure_workloads()
    h.sync()
    h.controller.admit()
    h.sync()


def _condition(h: Harness) -> dict[str, str]:
    return dict(st.find_condition(h.api.get(CLUSTER_QUEUES, "cq"), CONDITION) or {})


def test_the_queue_admits_against_healthy_capacity_and_says_so() -> None:
    h = Harness()  # 4 nodes of 8 GPUs, quota 32
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"metadata": {"annotations": {ANN: "true"}}})
    h.api.merge_patch(NODES, "n3", {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}}})
    h.api.create(JOBS, job("wide", 2), NS)  # 16 GPUs, fits block b0
    _pass(h)
    assert (_condition(h).get("status"), _condition(h).get("reason")) == ("True", "HealthyCapacity")
    assert _condition(h)["message"] == ("effective nominal quota on healthy capacity: gpu nvidia.com/gpu: 24 of 32 "
                                        "(3 of 4 nodes healthy)")
    assert st.condition_true(h.workload(), st.QUOTA_RESERVED)
    h.api.create(JOBS, job("more", 2), NS)  # 16 more: 32 > 24 effective, though the nominal quota is 32
    _pass(h)
    assert not st.condition_true(_by_job(h)["more"], st.QUOTA_RESERVED)
    h.api.merge_patch(NODES, "n3", {"metadata": {"labels": {HEALTH: "Schedulable"}}})  # recovered
    _pass(h)
    assert st.condition_true(_by_job(h)["more"], st.QUOTA_RESERVED)
    assert _condition(h)["message"] == "nominal quota applies: every node of its flavors is healthy"


def _by_job(h: Harness) -> dict[str, dict[str, object]]:
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in h.api.objects(WORKLOADS, NS)}


def test_opting_out_removes_the_condition() -> None:
    h = Harness()
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"metadata": {"annotations": {ANN: "true"}}})
    _pass(h)
    assert _condition(h)["message"] == "nominal quota applies: every node of its flavors is healthy"
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"metadata": {"annotations": {ANN: None}}})
    _pass(h)
    assert _condition(h) == {}
