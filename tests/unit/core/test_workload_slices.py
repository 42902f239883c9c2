"""An elastic job's new slice in the cycle (core/kueue/slices.py), restating Kueue v0.19.2's
pkg/workloadslicing/workloadslicing_test.go TestReplacedWorkloadSlice (found in the ClusterQueue;
not found when in another one; cross-namespace rejected), pkg/scheduler/flavorassigner/
flavorassigner_test.go's workload-slice cases (only the delta new - old is charged against the
quota) and pkg/scheduler/scheduler_test.go's elastic cases (the old slice is not preempted: the
new slice's admission replaces it). Each fails on main, where the new slice was fitted for its
whole size on top of the old one."""

from __future__ import annotations

from dataclasses import replace

from scheduler.core.kueue.cycle import run_cycle, run_cycles
from scheduler.core.kueue.decisions import Admit, Pending, Preempt
from scheduler.core.kueue.snapshot import Snapshot
from tests.unit.core._admission import NS, admitted, cq, lqs, pending, snapshot, wl

OLD = wl("old", cpu=1, count=6, created=1.0)
NEW = wl("new", cpu=1, count=9, created=2.0)


def snap(replacements: dict[str, str] | None = None, *, old_cq: str = "cq", namespace: str = NS,
         within: str = "Never") -> Snapshot:
    new = NEW if namespace == NS else replace(NEW, namespace=namespace)
    return snapshot(cluster_queues={"cq": cq("cq", within=within), "other": cq("other")},
                    local_queues={**lqs(("lq", "cq")), f"{namespace}/lq": lqs(("lq", "cq"))[f"{NS}/lq"]},
                    admitted=(admitted(OLD, old_cq),), pending=(pending(new),),
                    slice_replacements=replacements if replacements is not None else {new.key: OLD.key})


def test_the_new_slice_is_admitted_for_the_delta_and_replaces_the_old() -> None:
    """6 of 10 CPUs held by the old slice; the new one asks 9: 3 more, which fit."""
    [decision] = run_cycle(snap())
    assert isinstance(decision, Admit) and decision.workload == NEW.key
    assert decision.replaces == OLD.key
    assert decision.pod_sets[0].count == 9 and decision.pod_sets[0].resource_usage == {"cpu": 9000}


def test_without_the_replacement_the_whole_size_does_not_fit() -> None:
    [decision] = run_cycle(snap({}))
    assert isinstance(decision, Pending)


def test_the_old_slice_is_never_preempted_for_its_replacement() -> None:
    """Kueue's FindReplacedSliceTarget: the old slice is removed from the preemption targets."""
    decisions = run_cycle(snap(within="LowerPriority"))
    assert not [d for d in decisions if isinstance(d, Preempt)]
    assert isinstance(decisions[0], Admit) and decisions[0].replaces == OLD.key


def test_a_slice_in_another_cluster_queue_is_not_replaced() -> None:
    """EdgeCase_ReplacedWorkloadIsNotFound_NotInClusterQueue."""
    [decision] = run_cycle(snap(old_cq="other"))
    assert isinstance(decision, Admit) and decision.replaces == ""  # 9 fits in cq alone


def test_a_replacement_across_namespaces_is_rejected() -> None:
    """CrossNamespaceReplacementIsRejected."""
    decisions = run_cycle(snap({f"elsewhere/{NEW.name}": OLD.key}, namespace="elsewhere"))
    assert all(not isinstance(d, Admit) or d.replaces == "" for d in decisions)


def test_the_next_cycle_no_longer_counts_the_replaced_slice() -> None:
    """After the admission the old slice's quota is the new one's: a 1-CPU job still fits
    (10 - 9), which it would not if both slices were counted."""
    extra = wl("extra", cpu=1, count=1, created=3.0)
    s = snap()
    s = replace(s, pending=(*s.pending, pending(extra)))
    admits = [d for d in run_cycles(s) if isinstance(d, Admit)]
    assert {d.workload for d in admits} == {NEW.key, extra.key}


def test_the_new_slice_keeps_the_old_slices_flavor() -> None:
    """flavorassigner_test.go's workload-slice case: the original flavor is enforced. The old
    slice holds flavor "b"; "a" (tried first, and empty) is not given to the new slice."""
    from tests.unit.core._admission import rq

    queue = cq("cq", {"a": {"cpu": rq(10)}, "b": {"cpu": rq(10)}})
    s = snapshot(cluster_queues={"cq": queue}, local_queues=lqs(("lq", "cq")),
                 admitted=(admitted(OLD, "cq", flavor="b"),), pending=(pending(NEW),),
                 slice_replacements={NEW.key: OLD.key})
    [decision] = run_cycle(s)
    assert isinstance(decision, Admit) and decision.replaces == OLD.key
    assert dict(decision.pod_sets[0].flavors) == {"cpu": "b"}
