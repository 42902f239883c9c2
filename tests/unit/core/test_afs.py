"""Admission Fair Sharing (core/kueue/afs.py) on plain data, restated from Kueue v0.17's tests:
``pkg/cache/queue/cluster_queue_test.go`` TestFsAdmission (queue order by LocalQueue usage),
``pkg/controller/core/localqueue_controller_test.go`` (decay of consumedResources),
``pkg/scheduler/preemption/common/ordering.go`` (candidate order step 3)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from scheduler.core.config import AdmissionFairSharing, FeatureGates, KueueConfig
from scheduler.core.kueue import afs
from scheduler.core.kueue.afs import USAGE_BASED, LocalQueueUsage
from scheduler.core.kueue.cycle import run_cycle, run_cycles
from scheduler.core.kueue.decisions import Admit
from scheduler.core.preemption.cost import candidates_ordering

from ._admission import NS, admitted, cq, lqs, pending, rq, snapshot, wl

HL5 = AdmissionFairSharing(enabled=True, usage_half_life_time_s=300, usage_sampling_interval_s=300)


def on(weights: dict[str, float] | None = None, **gates: bool) -> KueueConfig:
    return KueueConfig(admission_fair_sharing=AdmissionFairSharing(enabled=True, resource_weights=weights or {}),
                       feature_gates=FeatureGates(gates))


def _first_admitted(mode: str, config: KueueConfig, usages: dict[str, LocalQueueUsage]) -> str:
    """Kueue TestFsAdmission: wlA-high (lqA, priority 2) and wlB-low (lqB, priority 1) pending
    in one ClusterQueue with room for one of them; the one admitted is the queue's head."""
    spec = replace(cq("cq"), admission_mode=mode)  # 10 cpu: room for one
    pend = [pending(wl("wlA-high", 10, queue="lqA", prio=2)), pending(wl("wlB-low", 10, queue="lqB", prio=1))]
    snap = snapshot(cluster_queues={"cq": spec}, local_queues=lqs(("lqA", "cq"), ("lqB", "cq")), pending=pend,
                    config=config, lq_usage=usages)
    return [d.workload.split("/")[1] for d in run_cycle(snap) if isinstance(d, Admit)][0]


def usage(cpu: float, gpu: float | None = None, weight: float = 1.0) -> LocalQueueUsage:
    consumed = {"cpu": cpu, **({"nvidia.com/gpu": gpu} if gpu is not None else {})}
    return LocalQueueUsage(consumed=consumed, weight=weight)


def test_ordered_by_local_queue_usage_instead_of_priority() -> None:
    usages = {f"{NS}/lqA": usage(2), f"{NS}/lqB": usage(1)}
    assert _first_admitted(USAGE_BASED, on(), usages) == "wlB-low"


def test_resource_weights() -> None:
    usages = {f"{NS}/lqA": usage(1, 10), f"{NS}/lqB": usage(1000, 1)}
    assert _first_admitted(USAGE_BASED, on({"cpu": 0, "nvidia.com/gpu": 1}), usages) == "wlB-low"
    assert _first_admitted(USAGE_BASED, on(), usages) == "wlA-high"  # default weight 1


def test_local_queue_weights() -> None:
    usages = {f"{NS}/lqA": usage(10), f"{NS}/lqB": usage(6, weight=2)}  # 10/1 > 6/2
    assert _first_admitted(USAGE_BASED, on(), usages) == "wlB-low"


def test_priority_when_not_ordered_by_usage() -> None:
    usages = {f"{NS}/lqA": usage(2), f"{NS}/lqB": usage(1)}
    assert _first_admitted(afs.NO_AFS, on(), usages) == "wlA-high"
    assert _first_admitted("", on(), usages) == "wlA-high"  # no admissionScope
    assert _first_admitted(USAGE_BASED, KueueConfig(), usages) == "wlA-high"  # no admissionFairSharing
    assert _first_admitted(USAGE_BASED, on(AdmissionFairSharing=False), usages) == "wlA-high"  # gate off


def test_same_usage_orders_by_priority() -> None:
    spec = replace(cq("cq"), admission_mode=USAGE_BASED)
    pend = [pending(wl("wlA-low", 10, queue="lqA", prio=1)), pending(wl("wlA-high", 10, queue="lqA", prio=2))]
    snap = snapshot(cluster_queues={"cq": spec}, local_queues=lqs(("lqA", "cq")), pending=pend, config=on(),
                    lq_usage={f"{NS}/lqA": usage(10)})
    assert [d.workload for d in run_cycle(snap) if isinstance(d, Admit)] == [f"{NS}/wlA-high"]


def test_entry_penalty_counts_in_the_usage() -> None:
    # lqB consumed less but just got a workload in: its entry penalty puts it behind lqA.
    usages = {f"{NS}/lqA": usage(2), f"{NS}/lqB": LocalQueueUsage({"cpu": 1}, {"cpu": 1.5})}
    assert _first_admitted(USAGE_BASED, on(), usages) == "wlA-high"


def test_usage_value() -> None:
    lq = LocalQueueUsage({"cpu": 4, "nvidia.com/gpu": 2}, {"cpu": 1}, weight=2)
    assert afs.usage_value(lq, {"nvidia.com/gpu": 3}) == (5 + 6) / 2
    assert afs.usage_value(LocalQueueUsage({"cpu": 1}, weight=0), {}) == math.inf
    assert math.isnan(afs.usage_value(LocalQueueUsage(weight=0), {}))


@pytest.mark.parametrize(("half_life", "old", "new", "want"), [
    (300, 8, 0, 4.0),  # decays if there is no running workload
    (300, 8, 4, 6.0),  # sums the previous state and running workloads
    (600, 8, 4, 6.827),  # half time twice the sampling interval (milli-units truncated)
    (24 * 3600, 8, 0, 7.98),  # long half-life, nothing running
])
def test_decayed_consumed(half_life: float, old: float, new: float, want: float) -> None:
    assert afs.decayed_consumed({"cpu": old}, {"cpu": new}, 300, half_life) == {"cpu": want}


def test_sample_due_only_after_the_sampling_interval() -> None:
    config = KueueConfig(admission_fair_sharing=HL5)
    state = LocalQueueUsage({"cpu": 8}, last_update=1000.0)
    assert afs.sample(state, {"cpu": 4}, {}, 1100.0, config) is None  # not enough time has passed
    assert afs.sample(state, {"cpu": 4}, {}, 1300.0, config) == afs.Sample({"cpu": 6.0}, 1300.0)
    # uninitialized: starts from the current usage
    assert afs.sample(None, {"cpu": 4}, {}, 1100.0, config) == afs.Sample({"cpu": 4}, 1100.0)
    # half-life 0: reset to empty
    zero = KueueConfig(admission_fair_sharing=replace(HL5, usage_half_life_time_s=0))
    assert afs.sample(state, {"cpu": 4}, {}, 1300.0, zero) == afs.Sample({}, 1300.0)


def test_new_admission_folds_its_entry_penalty_in_at_once() -> None:
    config = KueueConfig(admission_fair_sharing=HL5)
    state = LocalQueueUsage({"cpu": 8}, last_update=1000.0)
    got = afs.sample(state, {"cpu": 4}, {"cpu": 4}, 1000.0, config)
    assert got == afs.Sample({"cpu": 8 + 2.0}, 1000.0)  # penalty = 4 * alpha(5m, 5m) = 2
    assert afs.entry_penalty({"cpu": 3}, config) == {"cpu": 1.5}


def test_format_decimal_si() -> None:
    assert [afs.format_decimal_si(v) for v in (6.827, 4.0, 0.0, 2000.0)] == ["6827m", "4", "0", "2k"]


def test_preemption_candidates_higher_local_queue_usage_first() -> None:
    a = admitted(wl("a", 1, queue="lqA", prio=1), "cq", at=5)
    b = admitted(wl("b", 1, queue="lqB", prio=2), "cq", at=1)
    other = admitted(wl("o", 1, queue="lqO", prio=9), "other", at=1)
    prio = {"team/a": 1, "team/b": 2, "team/o": 9}

    def priority(w: object) -> int:
        return prio[w.key]  # type: ignore[attr-defined]

    usages = {"lqA": 1.0, "lqB": 3.0}
    classic = candidates_ordering([a, b, other], "cq", priority)
    assert [w.key.split("/")[1] for w in classic] == ["o", "a", "b"]
    with_afs = candidates_ordering([a, b, other], "cq", priority, lambda w: usages.get(w.spec.queue_name))
    assert [w.key.split("/")[1] for w in with_afs] == ["o", "b", "a"]  # lqB uses more: b first


def test_back_to_back_cycles_apply_the_entry_penalty_of_each_admission() -> None:
    # Room for three of four 10-cpu workloads. lqB uses a little less, so b1 goes first; its
    # entry penalty (10 cpu * alpha(5m, 5m) = 5) then puts lqB behind lqA for the next head.
    config = KueueConfig(admission_fair_sharing=HL5)
    spec = replace(cq("cq", {"f": {"cpu": rq(30)}}), admission_mode=USAGE_BASED)
    pend = [pending(wl(n, 10, queue=q, created=i)) for i, (n, q) in
            enumerate((("a1", "lqA"), ("a2", "lqA"), ("b1", "lqB"), ("b2", "lqB")))]
    snap = snapshot(cluster_queues={"cq": spec}, local_queues=lqs(("lqA", "cq"), ("lqB", "cq")), pending=pend,
                    config=config, lq_usage={f"{NS}/lqA": usage(2), f"{NS}/lqB": usage(1.8)})
    got = [d.workload.split("/")[1] for d in run_cycles(snap) if isinstance(d, Admit)]
    assert got == ["b1", "a1", "b2"]
