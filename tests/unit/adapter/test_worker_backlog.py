"""A worker's own backlog, as its gRPC Place reports it to the MultiKueue dispatcher (issue 43):
its queued Workloads' demand, per flavor; never a manager's copies, admitted, finished or
deactivated Workloads, nor one that cannot be decoded."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.backlog import ORIGIN_LABEL, Backlog, backlog

GPU = "nvidia.com/gpu"


def _wl(name: str, pods: int, gpus: int, queue: str = "q", **extra: Any) -> dict[str, Any]:
    wl: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                          "metadata": {"name": name, "namespace": "team-a", "labels": extra.pop("labels", {})},
                          "spec": {"queueName": queue, "podSets": [{"name": "main", "count": pods, "template": {
                              "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                                  "requests": {GPU: str(gpus)}}}]}}}]}, "status": {}}
    wl["spec"].update(extra.pop("spec", {}))
    wl["status"].update(extra.pop("status", {}))
    return wl


QUEUES = [{"metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": "cq-gpu"}},
          {"metadata": {"name": "cpu", "namespace": "team-a"}, "spec": {"clusterQueue": "cq-cpu"}}]
CQS = [{"metadata": {"name": "cq-gpu"}, "spec": {"resourceGroups": [{"flavors": [{"name": "p5"}]}]}},
       {"metadata": {"name": "cq-cpu"}, "spec": {"resourceGroups": [{"flavors": [{"name": "m5"}]}]}}]
RESERVED = {"conditions": [{"type": "QuotaReserved", "status": "True"}], "admission": {"clusterQueue": "cq-gpu"}}


def test_only_the_workers_own_queued_workloads_count() -> None:
    workloads = [
        _wl("queued", 2, 8),
        _wl("admitted", 4, 8, status=RESERVED),
        _wl("finished", 4, 8, status={"conditions": [{"type": "Finished", "status": "True"}]}),
        _wl("inactive", 4, 8, spec={"active": False}),
        _wl("managers-copy", 4, 8, labels={ORIGIN_LABEL: "multikueue"}),
        {"kind": "Workload", "metadata": {"name": "broken", "namespace": "team-a"}, "spec": {"podSets": "x"}},
    ]
    assert backlog(workloads, QUEUES, CQS) == Backlog(gpus=16, pods=2)


def test_a_flavor_counts_only_the_cluster_queues_that_use_it() -> None:
    workloads = [_wl("gpu-job", 2, 8), _wl("cpu-job", 3, 0, queue="cpu"), _wl("no-queue", 1, 8, queue="absent")]
    assert backlog(workloads, QUEUES, CQS, "p5") == Backlog(gpus=16, pods=2)
    assert backlog(workloads, QUEUES, CQS, "m5") == Backlog(gpus=0, pods=3)
    assert backlog(workloads, QUEUES, CQS) == Backlog(gpus=24, pods=6)
