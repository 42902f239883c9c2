"""toposched's MultiKueue dispatcher end to end in process (issue 43 item 2): the manager's
objects in the in-memory API, two real toposched gRPC workers of different shapes on loopback,
one Kueue worker without an endpoint; the dispatcher writes ``status.nominatedClusterNames``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.adapter.mk_dispatch import ENDPOINT_ANNOTATION, SECRET_ANNOTATION, dispatcher_refusal
from scheduler.api.dispatch_workers import make_worker
from scheduler.api.dispatcher import (
    ADMISSION_CHECKS,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    Dispatcher,
)
from scheduler.api.engine import EngineSnapshot, StaticEngine
from scheduler.api.server import ApiServer, serve
from scheduler.core.kueue.mk_dispatch import TOPOSCHED
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import WORKLOADS
from tests.unit.api.conftest import HOST, L1, L2, L3

L3_REQ = {"preferred": L3}


def _nodes(racks: dict[str, int]) -> list[dict[str, Any]]:
    out = []
    for rack, count in racks.items():
        for i in range(count):
            name = f"{rack}-{i}"
            out.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
                L1: "nn-1", L2: "sp-1", L3: rack, HOST: name}},
                "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "nvidia.com/gpu": "8", "pods": "110"},
                           "conditions": [{"type": "Ready", "status": "True"}]}})
    return out


@pytest.fixture
def workers() -> Iterator[dict[str, ApiServer]]:
    shapes = {"small-racks": {"ra": 2, "rb": 2}, "big-rack": {"rc": 4}}
    servers = {name: serve(StaticEngine(EngineSnapshot(nodes=_nodes(racks))), bind="127.0.0.1", port=0,
                           max_workers=4) for name, racks in shapes.items()}
    try:
        yield servers
    finally:
        for srv in servers.values():
            srv.stop(0.5)


def _workload(name: str, pods: int, request: dict[str, str] | None = L3_REQ, state: str = "Pending",
              cluster: str | None = None) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": pods, "template": {"spec": {"containers": [
        {"name": "t", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}
    if request is not None:
        pod_set["topologyRequest"] = request
    status: dict[str, Any] = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": pods}]},
        "admissionChecks": [{"name": "mk", "state": state, "message": "",
                             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    if cluster is not None:
        status["clusterName"] = cluster
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "team-a"}, "spec": {"queueName": "q", "podSets": [pod_set]},
            "status": status}


def _manager(workers: dict[str, ApiServer], order: tuple[str, ...]) -> FakeApi:
    api = FakeApi()
    api.create(ADMISSION_CHECKS, {"metadata": {"name": "mk"}, "spec": {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mkc"}}})
    api.create(MULTIKUEUE_CONFIGS, {"metadata": {"name": "mkc"}, "spec": {"clusters": list(order)}})
    for name in order:
        ann = ({ENDPOINT_ANNOTATION: f"127.0.0.1:{workers[name].port}"} if name in workers else {})
        api.create(MULTIKUEUE_CLUSTERS, {"metadata": {"name": name, "annotations": ann}, "spec": {}})
    return api


def _dispatcher(api: FakeApi, now: list[float]) -> Dispatcher:
    conns: dict[str, Any] = {}
    return Dispatcher(api, lambda ep: make_worker(api, "toposched-system", conns, ep), lambda: now[0],
                      timeout_s=60.0)


def _nominated(api: FakeApi, name: str) -> list[str] | None:
    got: list[str] | None = api.get(WORKLOADS, name, "team-a")["status"].get("nominatedClusterNames")
    return got


def test_nominates_the_worker_where_the_job_is_most_compact(workers: dict[str, ApiServer]) -> None:
    api = _manager(workers, ("small-racks", "big-rack", "kueue-w"))
    api.create(WORKLOADS, _workload("three", 3))
    written = _dispatcher(api, [0.0]).run_once()
    # small-racks comes first in the config but spans two racks; big-rack holds it in one
    assert written == {"team-a/three": ("big-rack",)}
    assert _nominated(api, "three") == ["big-rack"]


def test_never_nominates_a_worker_that_cannot_fit_and_widens_to_kueue_workers(
        workers: dict[str, ApiServer]) -> None:
    api = _manager(workers, ("small-racks", "big-rack", "kueue-w"))
    api.create(WORKLOADS, _workload("huge", 6))  # 48 GPUs: neither toposched worker has them
    now = [0.0]
    dispatcher = _dispatcher(api, now)
    assert dispatcher.run_once() == {"team-a/huge": ("kueue-w",)}
    now[0] = 61.0
    assert dispatcher.run_once() == {}  # nothing left that may fit: Kueue's ErrNoMoreWorkers
    assert _nominated(api, "huge") == ["kueue-w"]


def test_round_in_progress_keeps_and_then_widens(workers: dict[str, ApiServer]) -> None:
    api = _manager(workers, ("small-racks", "big-rack"))
    api.create(WORKLOADS, _workload("three", 3))
    now = [0.0]
    dispatcher = _dispatcher(api, now)
    dispatcher.run_once()
    now[0] = 30.0
    assert dispatcher.run_once() == {}
    now[0] = 61.0
    assert dispatcher.run_once() == {"team-a/three": ("big-rack", "small-racks")}


def test_a_burst_is_spread_over_the_workers(workers: dict[str, ApiServer]) -> None:
    api = _manager(workers, ("small-racks", "big-rack"))
    for i in range(2):
        api.create(WORKLOADS, _workload(f"pair-{i}", 4, request={"preferred": L2}))
    written = _dispatcher(api, [0.0]).run_once()
    # each worker has 32 GPUs: the second 32-GPU job goes where the first is not in flight
    assert sorted(written.values()) == [("big-rack",), ("small-racks",)]


@pytest.mark.parametrize(("case", "change"), [
    ("check ready", {"state": "Ready"}),
    ("already assigned", {"cluster": "big-rack"}),
])
def test_leaves_workloads_kueue_would_leave(workers: dict[str, ApiServer], case: str,
                                            change: dict[str, Any]) -> None:
    api = _manager(workers, ("small-racks", "big-rack"))
    api.create(WORKLOADS, _workload("w", 3, **change))
    assert _dispatcher(api, [0.0]).run_once() == {}, case


def test_an_endpoint_off_loopback_without_a_ca_is_not_called(workers: dict[str, ApiServer]) -> None:
    api = _manager(workers, ("big-rack", "kueue-w"))
    mkc = api.get(MULTIKUEUE_CLUSTERS, "big-rack")
    api.merge_patch(MULTIKUEUE_CLUSTERS, "big-rack", {"metadata": {"annotations": {
        ENDPOINT_ANNOTATION: "worker.example.com:9443", SECRET_ANNOTATION: "absent"}}})
    assert mkc
    api.create(WORKLOADS, _workload("three", 3))
    # the Secret is unreadable: big-rack cannot be asked and is nominated as Incremental would
    assert _dispatcher(api, [0.0]).run_once() == {"team-a/three": ("big-rack", "kueue-w")}


def test_a_malformed_endpoint_annotation_is_refused_with_the_field(workers: dict[str, ApiServer]) -> None:
    api = _manager(workers, ("big-rack",))
    api.merge_patch(MULTIKUEUE_CLUSTERS, "big-rack", {"metadata": {"annotations": {
        ENDPOINT_ANNOTATION: "http://x/y"}}})
    dispatcher = _dispatcher(api, [0.0])
    dispatcher.run_once()
    assert dispatcher.refused_endpoints["big-rack"].startswith(f"metadata.annotations[{ENDPOINT_ANNOTATION}]")


def test_refuses_a_manager_whose_configuration_names_another_dispatcher() -> None:
    assert dispatcher_refusal({"multiKueue": {"dispatcherName": TOPOSCHED}}, "kueue-system/c") is None
    msg = dispatcher_refusal({}, "kueue-system/c")
    assert msg is not None and msg.startswith("multiKueue.dispatcherName: ")
    assert "'kueue.x-k8s.io/multikueue-dispatcher-all-at-once'" in msg and TOPOSCHED in msg


def _busy_pod(node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"busy-{node}", "namespace": "other"},
            "spec": {"nodeName": node, "containers": [{"name": "t", "image": "busybox", "resources": {
                "requests": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running"}}


def test_a_job_that_fits_nowhere_now_waits_where_it_would_be_most_compact() -> None:
    # issue 43 item 3: both workers are full now; on main the job was nominated nowhere
    shapes = {"small-racks": {"ra": 2, "rb": 2}, "big-rack": {"rc": 4}}
    busy = {name: serve(StaticEngine(EngineSnapshot(nodes=_nodes(racks), pods=[
        _busy_pod(n["metadata"]["name"]) for n in _nodes(racks)])), bind="127.0.0.1", port=0, max_workers=4)
        for name, racks in shapes.items()}
    try:
        api = _manager(busy, ("small-racks", "big-rack"))
        api.create(WORKLOADS, _workload("three", 3))
        api.create(WORKLOADS, _workload("huge", 6))  # 48 GPUs: could never fit on either
        assert _dispatcher(api, [0.0]).run_once() == {"team-a/three": ("big-rack",)}
        assert _nominated(api, "huge") is None
    finally:
        for srv in busy.values():
            srv.stop(0.5)
