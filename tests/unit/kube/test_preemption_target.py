"""The sticky preemption target as the writer keeps it (kube/apply.py): written on the
preemptor's Workload with its WaitingForPreemptedWorkloads decision, read back by the next
snapshot, removed once the workload is admitted. In-memory API, fake clock."""

from __future__ import annotations

import argparse

from scheduler.commands import controller as cmd
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET, DomainTarget, parse_target
from scheduler.core.kueue.decisions import Pending
from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube.apply import apply_decisions
from tests.unit.kube.test_phases import BLOCK, NS, Harness, job

TARGET = DomainTarget("main", "gpu", BLOCK, {BLOCK: "b1"}).encode()


def _waiting(harness: Harness) -> None:
    harness.api.create(JOBS, job("train", 2), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    harness.sync()
    wl = harness.workload()
    key = f"{NS}/{wl['metadata']['name']}"
    decision = Pending(key, wl["metadata"]["uid"], "cq", "WaitingForPreemptedWorkloads",
                       "couldn't assign flavors to pod set main: ... Pending the preemption of 1 workload(s)",
                       "immediate", preemption_target=TARGET)
    ctl = harness.controller
    apply_decisions(ctl.writer, ctl.admission.parts.queue_state, ctl._snapshot(), [decision], harness.clock())
    harness.sync()


def test_target_is_written_and_read_back_by_the_next_snapshot(harness: Harness) -> None:
    _waiting(harness)
    wl = harness.workload()
    stored = wl["metadata"]["annotations"][ANN_PREEMPTION_TARGET]
    assert parse_target({ANN_PREEMPTION_TARGET: stored}) == parse_target({ANN_PREEMPTION_TARGET: TARGET})
    assert harness.controller.writer.signer.verify(wl["metadata"]["uid"], ANN_PREEMPTION_TARGET, stored)  # signed
    [pending] = harness.controller._snapshot().pending
    assert pending.spec.annotations[ANN_PREEMPTION_TARGET] == stored  # survives a restart: it is on the object


def test_target_is_removed_once_admitted_there(harness: Harness) -> None:
    _waiting(harness)
    harness.controller.admit()  # both blocks free: admitted in the target block (else b0 first)
    harness.sync()
    wl = harness.workload()
    assert ANN_PREEMPTION_TARGET not in (wl["metadata"].get("annotations") or {})
    harness.controller.start_admitted()
    harness.sync()
    assert harness.job("train")["spec"]["template"]["spec"]["nodeSelector"][BLOCK] == "b1"
    assert len(harness.api.objects(WORKLOADS, NS)) == 1


def test_no_domain_preemption_reaches_the_cycle(harness: Harness) -> None:
    # --no-domain-preemption: the controller's snapshots turn domain clearing and sticky targets off.
    assert harness.controller._snapshot().domain_preemption
    harness.rebuild(domain_preemption=False)
    assert not harness.controller._snapshot().domain_preemption


def test_the_controller_flag() -> None:
    sub = argparse.ArgumentParser().add_subparsers()
    cmd.register(sub)
    parser = sub.choices["controller"]
    assert parser.parse_args([]).domain_preemption
    assert not parser.parse_args(["--no-domain-preemption"]).domain_preemption
