"""Leader election as client-go does it: bounded Lease calls, expiry judged by when this
process saw the record change (not the holder's clock), and a fence that closes on time.

Also the fakes the fencing tests share: an in-memory API server whose Lease calls can be made
to hang (an API server that stopped answering), seen through per-process views, and a
hand-driven monotonic clock."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import LEASES, Obj, Resource
from scheduler.k8s.leader import LeaseElector, LeaseTimings
from scheduler.kube.status import utcnow


class ManualClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ProcessView:
    """One controller process's connection to a shared :class:`FakeApi`: its Lease calls hang
    while ``hang_leases`` is set (until ``unblock`` at teardown); every write it sends is
    recorded with the monotonic time it reached the server."""

    def __init__(self, server: FakeApi) -> None:
        self.server = server
        self.hang_leases = threading.Event()
        self.unblock = threading.Event()
        self.writes: list[tuple[float, str, str]] = []  # (time.monotonic(), method, plural)

    def _lease_gate(self, resource: Resource) -> None:
        if resource == LEASES and self.hang_leases.is_set():
            self.unblock.wait()

    def _sent(self, method: str, resource: Resource) -> None:
        if resource != LEASES:
            self.writes.append((time.monotonic(), method, resource.plural))

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        self._lease_gate(resource)
        return self.server.get(resource, name, namespace)

    def list(self, resource: Resource, namespace: str | None = None, **query: Any) -> Obj:
        return self.server.list(resource, namespace, **query)

    def create(self, resource: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        self._lease_gate(resource)
        self._sent("create", resource)
        return self.server.create(resource, obj, namespace)

    def merge_patch(self, resource: Resource, name: str, patch: Mapping[str, Any], namespace: str | None = None,
                    subresource: str | None = None) -> Obj:
        self._sent("patch", resource)
        return self.server.merge_patch(resource, name, patch, namespace, subresource)

    def replace(self, resource: Resource, obj: Mapping[str, Any], subresource: str | None = None) -> Obj:
        self._lease_gate(resource)
        self._sent("replace", resource)
        return self.server.replace(resource, obj, subresource)

    def delete(self, resource: Resource, name: str, namespace: str | None = None, **query: Any) -> Any:
        self._sent("delete", resource)
        return self.server.delete(resource, name, namespace, **query)

    def watch(self, resource: Resource, resource_version: str, timeout_s: int = 240, **query: Any) -> Any:
        return self.server.watch(resource, resource_version, timeout_s, **query)


# ---------------------------------------------------------------------------- tests
LEASE_NAME, LEASE_NS = "toposched-controller", "toposched-system"
# Short real-time durations: lease 2 s, renew deadline 1 s (a 1 s fencing margin), retry 0.1 s.
TIMINGS = {"lease_duration_s": 2.0, "renew_deadline_s": 1.0, "retry_period_s": 0.1}


def elector(api: Any, identity: str, **overrides: Any) -> LeaseElector:
    return LeaseElector(api, LEASE_NAME, LEASE_NS, identity, **{**TIMINGS, **overrides})


def start(candidate: LeaseElector) -> threading.Thread:
    thread = threading.Thread(target=candidate.run, args=(lambda: None, lambda: None), daemon=True)
    thread.start()
    return thread


def wait_for(predicate: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


@pytest.fixture
def server() -> FakeApi:
    return FakeApi()


def test_a_leader_whose_lease_calls_hang_steps_down_within_the_renew_deadline(server: FakeApi) -> None:
    view = ProcessView(server)
    leader = elector(view, "a")
    start(leader)
    try:
        assert wait_for(leader.is_leader.is_set, 5)
        hung_at = time.monotonic()
        view.hang_leases.set()
        assert wait_for(lambda: not leader.is_leader.is_set(), 3), "still leading 3 s after the API server hung"
        assert time.monotonic() - hung_at <= TIMINGS["renew_deadline_s"] + 0.3
    finally:
        leader.stop()
        view.unblock.set()


def test_every_lease_call_ends_by_its_deadline(server: FakeApi) -> None:
    view = ProcessView(server)
    view.hang_leases.set()
    candidate = elector(view, "a")
    done = threading.Event()
    threading.Thread(target=lambda: (candidate.step(), done.set()), daemon=True).start()
    try:
        assert done.wait(TIMINGS["renew_deadline_s"] + 0.5), "an attempt outlived the renew deadline"
        assert not candidate.is_leader.is_set()
    finally:
        view.unblock.set()


def test_expiry_is_judged_by_local_observation_not_the_holders_clock(server: FakeApi) -> None:
    """The holder's wall clock is an hour behind: its renewTime always looks an hour old, but
    the record keeps changing, so the lease is alive and nobody else may take it."""
    behind = elector(ProcessView(server), "a", clock=lambda: utcnow() - dt.timedelta(hours=1))
    start(behind)
    assert wait_for(behind.is_leader.is_set, 5)
    other = elector(ProcessView(server), "b")
    start(other)
    try:
        time.sleep(1.5)
        assert not other.is_leader.is_set()
        assert behind.is_leader.is_set()
    finally:
        behind.stop()
        other.stop()


def test_a_dead_holder_with_a_clock_ahead_is_replaced_after_one_lease_duration(server: FakeApi) -> None:
    future = (utcnow() + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    server.create(LEASES, {"metadata": {"name": LEASE_NAME, "namespace": LEASE_NS},
                           "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 1,
                                    "acquireTime": future, "renewTime": future}}, LEASE_NS)
    candidate = elector(ProcessView(server), "b")
    started = time.monotonic()
    start(candidate)
    try:
        assert wait_for(candidate.is_leader.is_set, 3), "waited for the holder's clock, not our own observation"
        assert time.monotonic() - started >= 1.0  # but only after seeing the record unchanged for 1 s
    finally:
        candidate.stop()


def test_the_fence_closes_on_time_even_if_the_elector_never_runs_again() -> None:
    """No elector thread at all after the first renewal (a starved thread): the check reads
    the clock itself."""
    clock = ManualClock()
    leader = elector(FakeApi(), "a", monotonic=clock)
    assert leader.step()
    term = leader.current_term()
    clock.advance(TIMINGS["renew_deadline_s"] - 0.01)
    assert leader.holds_lease(term)
    clock.advance(0.02)
    assert not leader.holds_lease()
    assert leader.current_term() is None


def test_fence_is_measured_from_the_start_of_the_renewal() -> None:
    """A renewal that took 0.5 s to answer buys renew_deadline from when it was SENT."""
    clock = ManualClock()
    server = FakeApi()

    class SlowApi(ProcessView):
        def replace(self, resource: Resource, obj: Mapping[str, Any], subresource: str | None = None) -> Obj:
            clock.advance(0.5)
            return super().replace(resource, obj, subresource)

    leader = elector(SlowApi(server), "a", monotonic=clock)
    server.create(LEASES, {"metadata": {"name": LEASE_NAME, "namespace": LEASE_NS},
                           "spec": {"holderIdentity": "a", "leaseDurationSeconds": 2}}, LEASE_NS)
    sent = clock()
    assert leader.step()
    clock.now = sent + TIMINGS["renew_deadline_s"]
    assert not leader.holds_lease()


def test_seeing_another_holder_ends_the_term_at_once(server: FakeApi) -> None:
    clock = ManualClock()
    leader = elector(server, "a", monotonic=clock)
    assert leader.step()
    lease = server.get(LEASES, LEASE_NAME, LEASE_NS)
    lease["spec"]["holderIdentity"] = "b"
    server.replace(LEASES, lease)
    assert not leader.step()
    assert not leader.holds_lease()


def test_terms_count_acquisitions_and_a_released_lease_is_taken_at_once(server: FakeApi) -> None:
    clock = ManualClock()
    a, b = elector(server, "a", monotonic=clock), elector(server, "b", monotonic=clock)
    assert a.step() and a.term == 1
    assert not b.step()
    a.release()
    assert not a.holds_lease()
    assert b.step() and b.term == 1  # an empty holder needs no waiting
    assert server.get(LEASES, LEASE_NAME, LEASE_NS)["spec"]["leaseTransitions"] == 1


def test_timings_follow_client_gos_rules() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaseTimings(lease_duration_s=10, renew_deadline_s=10, retry_period_s=2)
    with pytest.raises(ValueError, match="retry period"):
        LeaseTimings(lease_duration_s=15, renew_deadline_s=2, retry_period_s=2)
    assert LeaseTimings().safety_margin_s == 5
