"""Two replicas of ``toposched mk-dispatch`` (issue 43): only the holder of the dispatcher's
Lease nominates, a replica that lost it mid-pass writes nothing more, and a new leader counts
the in-flight nominations from the Workloads it reads (nothing carried in memory between
replicas). The manager is the in-memory API; the workers answer from plain data."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.mk_dispatch import ENDPOINT_ANNOTATION, WorkerEndpoint
from scheduler.api.dispatch_leading import LeadingDispatch
from scheduler.api.dispatcher import (
    ADMISSION_CHECKS,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    Capacity,
    Dispatcher,
    PlaceAnswer,
    Worker,
)
from scheduler.commands.mk_dispatch import LEASE_NAME
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import WORKLOADS
from scheduler.k8s.leader import LeaseElector, WriteFence
from tests.unit.api.conftest import L3
from tests.unit.api.test_mk_dispatcher import _workload

RENEW_DEADLINE_S = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RackWorker(Worker):
    """A worker with one free rack of ``gpus`` GPUs: every job that fits fits in it."""

    def __init__(self, gpus: int, on_ask: Any = None) -> None:
        self.gpus = gpus
        self.on_ask = on_ask

    def place(self, manifest: bytes, whole_capacity: bool = False) -> PlaceAnswer | None:
        if self.on_ask is not None:
            self.on_ask()
        return PlaceAnswer(True, ({L3: ("rack-1",)},), (L3,))

    def capacity(self) -> Capacity | None:
        return Capacity(self.gpus, self.gpus // 8, self.gpus)


def _manager(order: tuple[str, ...]) -> FakeApi:
    api = FakeApi()
    api.create(ADMISSION_CHECKS, {"metadata": {"name": "mk"}, "spec": {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mkc"}}})
    api.create(MULTIKUEUE_CONFIGS, {"metadata": {"name": "mkc"}, "spec": {"clusters": list(order)}})
    for i, name in enumerate(order):
        api.create(MULTIKUEUE_CLUSTERS, {"metadata": {"name": name, "annotations": {
            ENDPOINT_ANNOTATION: f"127.0.0.1:{5000 + i}"}}, "spec": {}})
    return api


def _replica(api: FakeApi, identity: str, clock: Clock, workers: dict[str, Worker]) -> LeadingDispatch:
    elector = LeaseElector(api, LEASE_NAME, "toposched-system", identity, monotonic=clock, lease_duration_s=15.0,
                           renew_deadline_s=RENEW_DEADLINE_S, retry_period_s=2.0)
    fence = WriteFence(elector)

    def ask(ep: WorkerEndpoint) -> Worker | None:
        return workers.get(ep.cluster)

    dispatcher = Dispatcher(api, ask, lambda: clock.now, timeout_s=60.0, may_write=fence)
    return LeadingDispatch(dispatcher, elector, fence, interval_s=2.0)


def _nominated(api: FakeApi, name: str) -> list[str] | None:
    got: list[str] | None = api.get(WORKLOADS, name, "team-a")["status"].get("nominatedClusterNames")
    return got


def test_only_the_lease_holder_nominates() -> None:
    api = _manager(("east", "west"))
    api.create(WORKLOADS, _workload("one", 1))
    clock = Clock()
    workers: dict[str, Worker] = {"east": RackWorker(64), "west": RackWorker(64)}
    a, b = _replica(api, "a", clock, workers), _replica(api, "b", clock, workers)
    assert a.elector.step() and not b.elector.step()
    assert b.run_pass() is None  # the other replica asks nothing and writes nothing
    assert _nominated(api, "one") is None
    assert a.run_pass() == {"team-a/one": ("east",)}


def test_a_replica_that_lost_the_lease_during_a_pass_writes_nothing() -> None:
    api = _manager(("east",))
    api.create(WORKLOADS, _workload("one", 1))
    clock = Clock()

    def stall() -> None:  # the worker answers after the renew deadline: the fence has closed
        clock.now += RENEW_DEADLINE_S + 1

    a = _replica(api, "a", clock, {"east": RackWorker(64, on_ask=stall)})
    assert a.elector.step()
    assert a.run_pass() == {}
    assert _nominated(api, "one") is None


def test_a_new_leader_counts_in_flight_from_the_workloads() -> None:
    api = _manager(("east", "west"))
    api.create(WORKLOADS, _workload("first", 1))
    clock = Clock()
    workers: dict[str, Worker] = {"east": RackWorker(8), "west": RackWorker(8)}
    a, b = _replica(api, "a", clock, workers), _replica(api, "b", clock, workers)
    assert a.elector.step()
    assert a.run_pass() == {"team-a/first": ("east",)}
    a.elector.release()  # a steps down; b takes over at its next attempt
    assert b.elector.step()
    assert a.run_pass() is None
    api.create(WORKLOADS, _workload("second", 1))
    # east's 8 GPUs are promised to "first" (nominated by a, not yet admitted): b reads that
    # nomination and sends "second" to west although east comes first in the config
    written = b.run_pass()
    assert written is not None and written["team-a/second"] == ("west",)


def test_a_new_leader_keeps_the_nominations_it_finds_for_a_round() -> None:
    api = _manager(("east", "west"))
    api.create(WORKLOADS, _workload("first", 1))
    clock = Clock()
    workers: dict[str, Worker] = {"east": RackWorker(64), "west": RackWorker(64)}
    a, b = _replica(api, "a", clock, workers), _replica(api, "b", clock, workers)
    assert a.elector.step() and a.run_pass() == {"team-a/first": ("east",)}
    a.elector.release()
    assert b.elector.step()
    assert b.run_pass() == {}  # not widened at the takeover: one copy, not one per failover
    for _ in range(31):  # b renews every 2 s through its 60 s round
        clock.now += 2.0
        assert b.elector.step()
    assert b.run_pass() == {"team-a/first": ("east", "west")}
