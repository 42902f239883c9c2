"""toposched's external dispatcher against the real Kueue v0.17.0 manager (issue 43 item 2): the
manager's Configuration names ``toposched.io/multikueue-dispatcher-topology``; two toposched
workers of different shapes; a 4-node job that spans two layer-3 domains on the first worker
of the MultiKueueConfig and one on the second is nominated to the second, and the manager's
MultiKueue creates its remote copy there only.

Built from the two-plane fixture's helpers (tests/multicluster/conftest.py), with each worker's
gRPC port given so the manager's MultiKueueCluster can name it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.multicluster.conftest as fixture
from scheduler.adapter.mk_dispatch import ENDPOINT_ANNOTATION, dispatcher_refusal
from scheduler.api.dispatch_workers import make_worker
from scheduler.api.dispatcher import MULTIKUEUE_CLUSTERS, Dispatcher
from scheduler.core.kueue.mk_dispatch import TOPOSCHED
from scheduler.devcluster.apply import apply_objects, load_documents
from scheduler.devcluster.controlplane import LocalCluster, free_ports
from scheduler.devcluster.multikueue import MANAGER_OVERLAY, manager_identity, register_workers, with_admission_check
from scheduler.k8s.informer import JOBS, WORKLOADS
from tests.e2e.conftest import QUEUES, Stack

L3 = "topology.k8s.aws/network-node-layer-3"
NS = "hyperpod-ns-team-a"
# first in the MultiKueueConfig: racks of two nodes; second: one rack of four
SHAPES = {"narrow": {"name": "narrow", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 4], "nodesPerDomain": 2},
          "wide": {"name": "wide", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 4}}


Planes = tuple[Stack, dict[str, Stack]]


@pytest.fixture(scope="module")
def planes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planes]:
    overlay = {"multiKueue": {**MANAGER_OVERLAY["multiKueue"], "dispatcherName": TOPOSCHED}}
    assert dispatcher_refusal(overlay, "manager") is None
    base = Path(tmp_path_factory.mktemp("dispatch"))
    started: list[LocalCluster] = []
    # start_manager reads the fixture module's MANAGER_OVERLAY: Kueue's own dispatchers stand aside
    vars(fixture)["MANAGER_OVERLAY"] = overlay
    try:
        manager = fixture.start_manager(base / "manager", False)
        started.append(manager.cluster)
        ports = dict(zip(SHAPES, free_ports(len(SHAPES)), strict=True))
        workers: dict[str, Stack] = {}
        for name, desc in SHAPES.items():
            workers[name] = fixture.start_toposched_worker(base / name, desc, False, ("--grpc-port", str(ports[name])))
            started.append(workers[name].cluster)
        register_workers(manager.cluster, {n: manager_identity(s.cluster) for n, s in workers.items()})
        apply_objects(manager.kube, with_admission_check(load_documents(QUEUES)))
        for name, port in ports.items():
            manager.api.merge_patch(MULTIKUEUE_CLUSTERS, name, {"metadata": {"annotations": {
                ENDPOINT_ANNOTATION: f"127.0.0.1:{port}"}}})
        yield manager, workers
    finally:
        vars(fixture)["MANAGER_OVERLAY"] = MANAGER_OVERLAY
        for cluster in started:
            cluster.stop()


def _job(name: str, pods: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": f"{NS}-localqueue"}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": True,
                 "managedBy": "kueue.x-k8s.io/multikueue",
                 "template": {"metadata": {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": L3}},
                              "spec": {"restartPolicy": "Never", "containers": [{
                                  "name": "t", "image": "busybox", "resources": {
                                      "requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                                      "limits": {"nvidia.com/gpu": "8"}}}]}}}}


def _exists(stack: Stack, name: str) -> bool:
    return any(j["metadata"]["name"] == name for j in stack.api.list(JOBS, NS).get("items", []))


def test_the_manager_nominates_the_worker_where_the_job_is_one_rack(planes: Planes) -> None:
    manager, workers = planes
    api = manager.api
    conns: dict[str, Any] = {}
    dispatcher = Dispatcher(api, lambda ep: make_worker(api, "toposched-system", conns, ep), time.time)
    apply_objects(manager.kube, [_job("four", 4)])

    def nominated() -> list[str] | None:
        dispatcher.run_once()
        for wl in api.list(WORKLOADS, NS).get("items", []):
            status = wl.get("status") or {}
            got = status.get("nominatedClusterNames") or ([status["clusterName"]] if status.get("clusterName")
                                                           else None)
            if got:
                return list(got)
        return None

    try:
        # narrow comes first in the MultiKueueConfig but would span two racks
        assert manager.wait(nominated, timeout_s=180, what="a nomination") == ["wide"]
        # Kueue's MultiKueue copies the Job to the nominated worker only: one remote copy
        workers["wide"].wait(lambda: _exists(workers["wide"], "four"), timeout_s=120, what="the remote Job")
        assert not _exists(workers["narrow"], "four")
        # the worker admits it and Kueue records the winner: its apply clears the nominations
        # only because they were written as Kueue's dispatchers write them (kueue-admission)
        manager.wait(lambda: [(w.get("status") or {}).get("clusterName") for w in
                              api.list(WORKLOADS, NS).get("items", [])] == ["wide"],
                     timeout_s=180, what="the manager's clusterName")
    finally:
        for conn in conns.values():
            conn.close()
