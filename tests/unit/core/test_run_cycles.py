"""Back-to-back admission cycles on one snapshot (``run_cycles``): every head that fits is
admitted one cycle after another, as Kueue's scheduler loop does, instead of one head per
ClusterQueue per pass; each cycle sees the quota and topology the earlier ones took."""

from __future__ import annotations

from scheduler.core.kueue.cycle import run_cycle, run_cycles
from scheduler.core.kueue.decisions import Admit, Pending

from ._admission import cq, lqs, pending, rq, snapshot, summary, wl
from ._helpers import RACK
from .test_cycle_tas import _tas_snapshot


def _one_queue(*workloads, strategy="BestEffortFIFO", quota=4):  # type: ignore[no-untyped-def]
    cqs = {"a": cq("a", {"f": {"cpu": rq(quota)}}, strategy=strategy)}
    return snapshot(cluster_queues=cqs, local_queues=lqs(("lq", "a")),
                    pending=[pending(w) for w in workloads])


def test_every_fitting_head_of_a_queue_is_admitted_in_one_pass() -> None:
    snap = _one_queue(wl("x1", 1, created=1), wl("x2", 1, created=2), wl("x3", 1, created=3))
    assert summary(run_cycle(snap)) == [("admit", "x1", "a")]  # one head per ClusterQueue
    assert summary(run_cycles(snap)) == [("admit", "x1", "a"), ("admit", "x2", "a"), ("admit", "x3", "a")]


def test_quota_taken_by_earlier_cycles_counts() -> None:
    snap = _one_queue(*(wl(f"x{i}", 1, created=i) for i in range(1, 6)), quota=3)
    out = summary(run_cycles(snap))
    assert out[:3] == [("admit", "x1", "a"), ("admit", "x2", "a"), ("admit", "x3", "a")]
    assert [d[:2] for d in out[3:]] == [("pending", "x4"), ("pending", "x5")]  # parked, one a cycle


def test_best_effort_fifo_parks_a_head_that_does_not_fit_and_admits_those_behind() -> None:
    snap = _one_queue(wl("big", 5, created=1), wl("s1", 1, created=2), wl("s2", 1, created=3))
    out = summary(run_cycles(snap))
    assert ("admit", "s1", "a") in out and ("admit", "s2", "a") in out
    [big] = [d for d in run_cycles(snap) if d.workload.endswith("/big")]
    assert isinstance(big, Pending)


def test_strict_fifo_head_blocks_the_queue() -> None:
    snap = _one_queue(wl("big", 5, created=1), wl("s1", 1, created=2), strategy="StrictFIFO")
    decisions = run_cycles(snap)
    assert not any(isinstance(d, Admit) for d in decisions)


def test_later_cycles_see_the_topology_earlier_ones_took() -> None:
    # Two racks of 2 hosts x 4 cpu; three workloads each wanting one whole rack: two fit.
    snap = _tas_snapshot([], [wl(f"r{i}", 4, count=2, required=RACK, created=i) for i in range(3)])
    decisions = run_cycles(snap)
    admits = [d for d in decisions if isinstance(d, Admit)]
    assert len(admits) == 2
    hosts = [dom.values for a in admits for dom in a.pod_sets[0].topology.domains]  # type: ignore[union-attr]
    assert len(hosts) == len(set(hosts)) == 4  # no host given twice
    assert [d.workload.split("/")[1] for d in decisions if isinstance(d, Pending)] == ["r2"]
