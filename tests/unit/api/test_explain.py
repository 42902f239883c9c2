"""Explain on the admission cycle: the cycle's own pending reason for the asked workload."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from scheduler.api.engine import StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb

from .conftest import TOPOLOGY, job, snapshot

GPU = "nvidia.com/gpu"
FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"},
          "spec": {"topologyName": "hyperpod"}}


def cq(gpus: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [
                {"name": "gpu", "resources": [{"name": "cpu", "nominalQuota": "1000"},
                                              {"name": GPU, "nominalQuota": str(gpus)}]}]}]}}


LQ = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "team-a"},
      "spec": {"clusterQueue": "cq"}}


def workload_of(j: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"job-{j['metadata']['name']}-abcde", "namespace": "team-a",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "controller": True,
                                              "name": j["metadata"]["name"], "uid": j["metadata"]["uid"]}]},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 3, "template": j["spec"]["template"]}]}}


def explain(engine: StaticEngine, stub: Any, gpus: int, local_queues: list[dict[str, Any]]) -> Any:
    j = job()
    engine.replace(snapshot(jobs=[j], workloads=[workload_of(j)], flavors=[FLAVOR], topologies=[TOPOLOGY],
                            cluster_queues=[cq(gpus)], local_queues=local_queues,
                            namespaces=[{"metadata": {"name": "team-a"}}]))
    return stub.Explain(pb.ExplainRequest(namespace="team-a", name="req-l3"), timeout=20)


def test_explain_quota_shortage(engine: StaticEngine, stub: Any) -> None:
    resp = explain(engine, stub, 8, [LQ])
    assert resp.workload == "job-req-l3-abcde" and not resp.admitted
    assert resp.reasons and resp.reasons[0].reason and "nvidia.com/gpu" in resp.reasons[0].message, resp


def test_explain_fits_now(engine: StaticEngine, stub: Any) -> None:
    resp = explain(engine, stub, 64, [LQ])
    assert resp.cluster_queue == "cq" and resp.reasons[0].reason == "Admissible", resp


def test_explain_missing_local_queue(engine: StaticEngine, stub: Any) -> None:
    resp = explain(engine, stub, 64, [])
    assert resp.reasons[0].reason == "Misconfigured" and "LocalQueue q doesn't exist" in resp.reasons[0].message


def test_explain_job_without_workload(stub: Any) -> None:
    resp = stub.Explain(pb.ExplainRequest(namespace="team-a", name="req-l3"))
    assert resp.workload == "" and resp.reasons[0].reason == "NoWorkload"


def test_explain_unknown_still_not_found(stub: Any) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stub.Explain(pb.ExplainRequest(namespace="team-a", name="nope"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
