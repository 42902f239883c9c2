"""Kueue pydantic models: v1beta1 and v1beta2, unknown fields kept, conversion to core data."""

from __future__ import annotations

import copy

import pytest

from scheduler.adapter.workloads import admitted_workload, pending_workload
from scheduler.models.convert import (
    cluster_queue_to_core,
    cohort_to_core,
    flavor_to_core,
    local_queue_to_core,
)
from scheduler.models.kueue import ClusterQueue, Cohort, LocalQueue, dump, parse

CQ_V1BETA2 = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "hyperpod-ns-team-a-clusterqueue", "resourceVersion": "7", "finalizers": ["x"]},
    "spec": {
        "cohortName": "shared",
        "queueingStrategy": "StrictFIFO",
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "ml.g5.8xlarge",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "64", "borrowingLimit": "32"},
                            {"name": "nvidia.com/gpu", "nominalQuota": 2, "lendingLimit": 1},
                        ],
                    }
                ],
            }
        ],
        "preemption": {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
        "futureField": {"keep": True},
    },
    "status": {
        "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads"}]
    },
}

WL_V1BETA1 = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "Workload",
    "metadata": {
        "name": "job-a-1b2c3",
        "namespace": "team",
        "uid": "u1",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"kueue.x-k8s.io/job-uid": "j1"},
    },
    "spec": {
        "queueName": "lq",
        "priority": 70,
        "priorityClassName": "training-priority",
        "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
        "podSets": [
            {
                "name": "main",
                "count": 2,
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}},
                "topologyRequest": {"required": "topology.k8s.aws/network-node-layer-3", "unknownNew": 1},
            }
        ],
    },
    "status": {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "m",
                "lastTransitionTime": "2026-01-01T00:01:00Z",
            }
        ],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"cpu": "f"},
                    "resourceUsage": {"cpu": "4"},
                    "count": 2,
                    "topologyAssignment": {
                        "levels": ["kubernetes.io/hostname"],
                        "domains": [{"values": ["node-1"], "count": 1}, {"values": ["node-2"], "count": 1}],
                    },
                }
            ],
        },
        "requeueState": {"count": 1, "requeueAt": "2026-01-01T00:05:00Z"},
        "unhealthyNodes": [{"name": "node-3"}],
    },
}


@pytest.mark.parametrize("obj", [CQ_V1BETA2])
def test_round_trip_keeps_unknown_fields(obj: dict) -> None:  # type: ignore[type-arg]
    assert dump(parse(copy.deepcopy(obj))) == obj


def test_cluster_queue_v1beta1_cohort_equals_v1beta2() -> None:
    old = copy.deepcopy(CQ_V1BETA2)
    old["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    old["spec"]["cohort"] = old["spec"].pop("cohortName")
    a = cluster_queue_to_core(ClusterQueue.model_validate(old))
    b = cluster_queue_to_core(ClusterQueue.model_validate(CQ_V1BETA2))
    assert a == b and a.cohort == "shared"
    migrated = dump(ClusterQueue.model_validate(old).to_v1beta2())
    assert migrated["spec"]["cohortName"] == "shared" and "cohort" not in migrated["spec"]
    assert migrated["spec"]["futureField"] == {"keep": True}


def test_cluster_queue_to_core_quantities_and_policy() -> None:
    core = cluster_queue_to_core(ClusterQueue.model_validate(CQ_V1BETA2))
    flavor = core.resource_groups[0].flavors[0]
    assert flavor.resources["cpu"].nominal == 64000 and flavor.resources["cpu"].borrowing_limit == 32000
    assert flavor.resources["nvidia.com/gpu"].lending_limit == 1
    assert core.preemption.borrow_within_cohort == "LowerPriority"
    assert core.preemption.max_priority_threshold == 100
    assert core.queueing_strategy == "StrictFIFO"
    assert core.namespace_selector.matches({"any": "ns"})
    nulled = copy.deepcopy(CQ_V1BETA2)
    del nulled["spec"]["namespaceSelector"]
    assert not cluster_queue_to_core(ClusterQueue.model_validate(nulled)).namespace_selector.matches({})


def test_workload_v1beta1_reads() -> None:
    adm = admitted_workload(copy.deepcopy(WL_V1BETA1), {"f"})
    assert adm.usage == {("f", "cpu"): 4000} and adm.cluster_queue == "cq"
    assert adm.tas[0].placement.domains[0].values == ("node-1",)
    assert adm.reserved_at > 0
    pend = pending_workload(copy.deepcopy(WL_V1BETA1))
    assert pend.priority == 70 and pend.requeue_at is not None


def test_other_kinds() -> None:
    co = cohort_to_core(
        Cohort.model_validate({"kind": "Cohort", "metadata": {"name": "child"}, "spec": {"parentName": "root"}})
    )
    assert co.parent == "root"
    lq = local_queue_to_core(
        LocalQueue.model_validate(
            {
                "kind": "LocalQueue",
                "metadata": {"name": "hyperpod-ns-a-localqueue", "namespace": "hyperpod-ns-a"},
                "spec": {"clusterQueue": "hyperpod-ns-a-clusterqueue", "stopPolicy": "Hold"},
            }
        )
    )
    assert (lq.key, lq.cluster_queue, lq.stop_policy) == (
        "hyperpod-ns-a/hyperpod-ns-a-localqueue",
        "hyperpod-ns-a-clusterqueue",
        "Hold",
    )
    rf = parse(
        {
            "kind": "ResourceFlavor",
            "metadata": {"name": "tas"},
            "spec": {
                "nodeLabels": {"pool": "gpu"},
                "topologyName": "hyperpod",
                "nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
            },
        }
    )
    core = flavor_to_core(rf)  # type: ignore[arg-type]
    assert core.topology_name == "hyperpod" and str(core.node_taints[0]) == "k=v:NoSchedule"
    wpc = parse({"kind": "WorkloadPriorityClass", "metadata": {"name": "inference-priority"}, "value": 90})
    assert wpc.value == 90  # type: ignore[attr-defined]
    topo = parse({"kind": "Topology", "metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": "a"}]}})
    assert topo.level_labels() == ("a",)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="kind: expected one of"):
        parse({"kind": "Pod"})
