"""gRPC Place reports the worker's own backlog with a live snapshot (new optional fields, for
the MultiKueue dispatcher; issue 43) and leaves it unset offline."""

from __future__ import annotations

from typing import Any

from scheduler.api.engine import StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb

from .conftest import DATA, FLAVOR, TOPOLOGY, job, snapshot

QUEUES = [{"metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}]
CQS = [{"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [{"name": "gpu"}]}]}}]


def _queued(name: str, pods: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": pods,
                                                     "template": job()["spec"]["template"]}]}}


def test_place_reports_the_workers_queued_demand_live_only(engine: StaticEngine, stub: Any) -> None:
    engine.replace(snapshot(flavors=[FLAVOR], topologies=[TOPOLOGY], local_queues=QUEUES, cluster_queues=CQS,
                            workloads=[_queued("waiting", 2)]))
    manifest = pb.WorkloadInput(manifest=(DATA / "job-required-l3.yaml").read_bytes())
    live = stub.Place(pb.PlaceRequest(workload=manifest, solver=pb.SOLVER_GREEDY))
    per_pod = int(job()["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
    assert live.flavor == "gpu" and live.HasField("backlog_gpus")
    assert (live.backlog_gpus, live.backlog_pods) == (2 * per_pod, 2)
    offline = stub.Place(pb.PlaceRequest(workload=manifest, nodes=(DATA / "nodes.yaml").read_bytes(),
                                         solver=pb.SOLVER_GREEDY))
    assert not offline.HasField("backlog_gpus") and not offline.HasField("backlog_pods")
