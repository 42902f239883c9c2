"""reserve-compact's held domain as the writer keeps it (kube/apply.py): written on the compact
waiter's Workload with its pending decision, read back by the next snapshot, removed by a
pending decision that holds nothing and once the workload is admitted. In-memory API, fake clock."""

from __future__ import annotations

from scheduler.commands import controller as cmd
from scheduler.core.beyond.domain_target import DomainTarget
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN, Reservation, parse_reserved
from scheduler.core.kueue.decisions import Pending
from scheduler.core.workload import PodSetSpec
from scheduler.k8s.informer import JOBS
from scheduler.kube.apply import apply_decisions
from tests.unit.kube.test_phases import BLOCK, NS, Harness, job

HELD = Reservation("x", 0, 0.0, DomainTarget("main", "gpu", BLOCK, {BLOCK: "b1"}), 1e12,
                   PodSetSpec("main", 2, {})).encode()


def _decide(harness: Harness, reserved: str) -> None:
    wl = harness.workload()
    key = f"{NS}/{wl['metadata']['name']}"
    decision = Pending(key, wl["metadata"]["uid"], "cq", "WaitingForCompactPlacement", "waiting",
                       reserved_domain=reserved)
    ctl = harness.controller
    apply_decisions(ctl.writer, ctl.admission.parts.queue_state, ctl._snapshot(), [decision], harness.clock())
    harness.sync()


def _annotations(harness: Harness) -> dict[str, str]:
    return harness.workload()["metadata"].get("annotations") or {}


def _queued(harness: Harness) -> None:
    harness.api.create(JOBS, job("train", 2), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    harness.sync()


def test_held_domain_is_written_read_back_and_removed_when_nothing_is_held(harness: Harness) -> None:
    _queued(harness)
    _decide(harness, HELD)
    stored = _annotations(harness)[ANN_RESERVED_DOMAIN]
    assert parse_reserved({ANN_RESERVED_DOMAIN: stored}) == parse_reserved({ANN_RESERVED_DOMAIN: HELD})
    [pending] = harness.controller._snapshot().pending
    assert pending.spec.annotations[ANN_RESERVED_DOMAIN] == stored  # survives a restart: it is on the object
    _decide(harness, "")
    assert ANN_RESERVED_DOMAIN not in _annotations(harness)


def test_held_domain_is_removed_once_admitted(harness: Harness) -> None:
    _queued(harness)
    _decide(harness, HELD)
    harness.controller.admit()
    harness.sync()
    assert (harness.workload().get("status") or {}).get("admission")
    assert ANN_RESERVED_DOMAIN not in _annotations(harness)


def test_the_controller_flag_turns_it_on() -> None:
    assert not cmd.placement_options("kueue").reserve_compact
    assert cmd.placement_options("reserve-compact").reserve_compact
    assert cmd.placement_options("all").reserve_compact
