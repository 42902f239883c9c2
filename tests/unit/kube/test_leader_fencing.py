"""Fencing: a leader that lost contact stops writing before anyone else can acquire, and a
pass that loses leadership half-way sends nothing more (issue 13: "after losing leadership
mid-pass it still issued 8 writes")."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Mapping
from typing import Any

from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import JOBS, NAMESPACES, WORKLOADS, Obj, Resource
from scheduler.k8s.leader import LeaseElector, WriteFence
from scheduler.kube.cache import ClusterCache
from scheduler.kube.controller import Controller
from scheduler.kube.events import EVENTS, EventRecorder
from scheduler.kube.leading import LeadingLoop, workloads_caught_up
from scheduler.kube.settings import ControllerSettings
from scheduler.kube.writer import Writer
from tests.unit.kube.test_leader import TIMINGS, ManualClock, ProcessView, elector, wait_for
from tests.unit.kube.test_phases import NS, job

CONFIGMAPS = Resource("", "v1", "configmaps")


def test_a_leader_that_lost_contact_stops_writing_before_another_can_acquire() -> None:
    """Two processes on one API server; A's Lease calls hang (its writes still go through).
    A's last write must come before B leads, and within the renew deadline of the hang."""
    server = FakeApi()
    view_a, view_b = ProcessView(server), ProcessView(server)
    a, b = elector(view_a, "a"), elector(view_b, "b")
    leading_b_at: list[float] = []
    run_a = threading.Thread(target=a.run, args=(lambda: None, lambda: None), daemon=True)
    run_a.start()
    assert wait_for(a.is_leader.is_set, 5)
    run_b = threading.Thread(target=b.run, args=(lambda: leading_b_at.append(time.monotonic()), lambda: None),
                             daemon=True)
    run_b.start()
    writer = Writer(view_a, ClusterCache.create(view_a), is_leader=a.is_leader.is_set, events=EventRecorder(view_a))
    stop = threading.Event()

    def write_forever() -> None:  # a long pass: one write every 10 ms
        i = 0
        while not stop.is_set():
            writer.create(CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}}, NS, writer.cache.workloads)
            i += 1
            time.sleep(0.01)

    threading.Thread(target=write_forever, daemon=True).start()
    time.sleep(0.3)
    hung_at = time.monotonic()
    view_a.hang_leases.set()
    try:
        assert wait_for(lambda: bool(leading_b_at), 5), "B never took over"
        time.sleep(0.5)
    finally:
        stop.set()
        a.stop()
        b.stop()
        view_a.unblock.set()
        for thread in (run_a, run_b):  # each releases its Lease (and logs it) before the test ends
            thread.join(timeout=5)
    last_write = max(t for t, _method, _plural in view_a.writes)
    assert last_write < leading_b_at[0], f"A wrote {last_write - leading_b_at[0]:.2f}s after B led"
    assert last_write - hung_at <= TIMINGS["renew_deadline_s"] + 0.2


class _Seeded:
    """A fake API server with a namespace and ``jobs`` suspended Jobs (no queues needed:
    creating Workloads is the first phase and enough writes to lose leadership in)."""

    def __init__(self, jobs: int) -> None:
        self.api = FakeApi()
        self.api.create(NAMESPACES, {"metadata": {"name": NS}})
        for i in range(jobs):
            self.api.create(JOBS, job(f"j{i}", 1), NS)
        self.cache = ClusterCache.create(self.api)
        for informer in self.cache.all():
            informer.relist()


def test_losing_the_lease_mid_pass_stops_the_very_next_write() -> None:
    """Each Workload create takes half the renew deadline: after the second one the lease no
    longer counts as held, and the rest of the pass writes nothing (no Event either)."""
    clock = ManualClock()
    seeded = _Seeded(jobs=6)

    real_create = seeded.api.create

    def slow_create(resource: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        if resource == WORKLOADS:
            clock.advance(TIMINGS["renew_deadline_s"] / 2)
        return real_create(resource, obj, namespace)

    seeded.api.create = slow_create  # type: ignore[method-assign]
    leader = elector(seeded.api, "a", monotonic=clock)
    assert leader.step()
    fence = WriteFence(leader)
    events = EventRecorder(seeded.api)
    # One write at a time: with two creates side by side, whether the first one's Event comes
    # before the second create has spent the lease is up to the thread scheduler.
    controller = Controller(seeded.api, seeded.cache, ControllerSettings(concurrent_writes=1), is_leader=fence,
                            events=events)
    assert fence.begin_pass() == 1
    before = len(seeded.api.calls)
    controller.reconcile()
    fence.end_pass()
    events.flush()
    writes = [c for c in seeded.api.calls[before:] if c[1] != "leases"]
    assert [c for c in writes if c[1] != "events"] == [("create", "workloads", None)] * 2
    # The first Workload's "CreatedWorkload" Event was recorded while leading; none after.
    assert [e["reason"] for e in seeded.api.objects(EVENTS)] == ["CreatedWorkload"]
    assert controller.writer.skipped_not_leading > 0


def test_a_pass_from_an_old_term_cannot_write_after_leadership_is_won_back() -> None:
    clock = ManualClock()
    api = FakeApi()
    leader = elector(api, "a", monotonic=clock)
    assert leader.step()
    fence = WriteFence(leader)
    assert fence.begin_pass() == 1 and fence()
    clock.advance(TIMINGS["renew_deadline_s"])  # e.g. the process was paused (SIGSTOP)
    assert not leader.step()  # the term ended ...
    assert leader.step()  # ... and a new one began (the lease still names us)
    assert leader.term == 2 and leader.holds_lease()
    assert not fence()  # the old pass still may not write
    fence.end_pass()
    assert fence.begin_pass() == 2 and fence()


def test_a_new_term_reconciles_only_once_the_workload_cache_caught_up() -> None:
    clock = ManualClock()
    seeded = _Seeded(jobs=0)
    leader = elector(seeded.api, "a", monotonic=clock)
    passes: list[int] = []
    fence = WriteFence(leader)
    loop = LeadingLoop(seeded.api, seeded.cache, leader, fence, lambda: passes.append(1), lambda _s: None, 5.0)
    assert not loop.run_pass()  # not leading: nothing runs
    assert leader.step()
    # The previous leader's last write reached the API server; our watch has not delivered it.
    seeded.api.create(WORKLOADS, {"metadata": {"name": "late", "namespace": NS}, "spec": {}}, NS)
    assert not workloads_caught_up(seeded.api, seeded.cache, timeout_s=0.1)
    assert not loop.run_pass() and passes == []
    seeded.cache.workloads.relist()  # the watch event arrives
    assert loop.run_pass() and passes == [1]
    assert not fence()  # outside a pass the fence is closed


def test_the_controller_command_wires_the_fence_into_the_writer(monkeypatch: Any) -> None:
    """``toposched controller`` gives the Controller a WriteFence on its elector."""
    from scheduler.commands import controller as command

    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def fake_controller(api: Any, cache: Any, settings: Any, **kwargs: Any) -> None:
        seen.update(kwargs, settings=settings)
        raise Stop

    monkeypatch.setattr("scheduler.kube.controller.Controller", fake_controller)
    monkeypatch.setattr("scheduler.k8s.client.api_client", lambda _kubeconfig, **_kw: None)
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    args = parser.parse_args(["controller", "--lease-name", "l", "--namespace", "ns", "--identity", "me",
                              "--solver", "greedy"])
    try:
        command.run(args)  # type: ignore[arg-type]
    except Stop:
        pass
    assert isinstance(seen["is_leader"], WriteFence)
    assert isinstance(seen["is_leader"].elector, LeaseElector)
    assert seen["is_leader"].elector.renew_deadline_s == 10.0
