"""How many Kueue cycles an admission pass runs (scheduler/kube/cycle_budget.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.kueue.decisions import Admit, Pending
from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.cycle_budget import MAX_CYCLES_PER_PASS, CycleBudget
from tests.unit.kube.test_phases import GPU, NS, Harness, job


def admit(workload: str, cq: str) -> Admit:
    return Admit(workload, f"uid-{workload}", cq, (), borrows=False)


PENDING = Pending("ns/p", "uid-p", "cq-a", "Pending", "no room")


def test_without_a_budget_or_an_estimate_the_pass_runs_the_minimum() -> None:
    assert CycleBudget(minimum=8).cycles() == 8
    assert CycleBudget(minimum=8, budget_s=0.0, seconds_per_cycle=0.001).cycles() == 8
    assert CycleBudget(minimum=8, budget_s=1.0).cycles() == 8  # nothing measured yet
    assert CycleBudget(minimum=0).cycles() == 1


def test_the_time_per_cycle_is_over_the_busiest_queues_admissions() -> None:
    budget = CycleBudget(minimum=8, budget_s=1.0)
    # 3 admissions in cq-a and 1 in cq-b: at least 3 cycles ran in 0.3 s, at most 0.1 s each
    budget.observe(0.3, [admit("a1", "cq-a"), admit("a2", "cq-a"), admit("a3", "cq-a"), admit("b1", "cq-b"),
                         PENDING])
    assert budget.seconds_per_cycle == pytest.approx(0.1)
    assert budget.cycles() == 10
    budget.observe(0.5, [PENDING])  # a pass that admitted nothing says nothing about a backlog
    assert budget.seconds_per_cycle == pytest.approx(0.1)
    budget.observe(0.0001, [admit("c1", "cq-c")])
    assert budget.cycles() == MAX_CYCLES_PER_PASS  # bounded however fast the cycles are
    budget.observe(10.0, [admit("d1", "cq-d")])
    assert budget.cycles() == 8  # slow cycles never go below the minimum


def small_job(name: str) -> dict[str, Any]:
    body = job(name, 1)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    return body


def admitted(harness: Harness) -> int:
    return sum(st.condition_true(w, st.ADMITTED) for w in harness.api.objects(WORKLOADS, NS))


def test_a_pass_admits_beyond_the_minimum_once_its_cycles_have_shown_they_fit() -> None:
    """20 one-GPU jobs in one ClusterQueue (32 GPUs): the first pass runs its 8 cycles and admits
    8; it took 1 ms, so the next pass runs as many cycles as the backlog needs."""
    harness = Harness()
    controller = harness.rebuild(cycle_budget_s=1.0)
    ticks = iter(range(10_000))
    controller.admission.timer = lambda: next(ticks) * 0.001  # each reading 1 ms after the last
    for i in range(20):
        harness.api.create(JOBS, small_job(f"j{i:02d}"), NS)
    harness.sync()
    controller.reconcile()
    harness.sync()
    assert admitted(harness) == 8
    controller.reconcile()
    assert admitted(harness) == 20
