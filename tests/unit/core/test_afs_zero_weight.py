"""A LocalQueue of fair-sharing weight 0 under Admission Fair Sharing, by Kueue release (issue 41,
item 5). Kueue v0.17.0 divides the usage by the weight as Go does (``CalcFSUsageFromResources``):
an idle queue's 0/0 is NaN, which ``cmp.Compare`` sorts ahead of every value, so the zero-weight
queue goes first. From v0.19.1 (#13559, ``admissionfairsharing.CalculateUsage``) a weight of 0 or
less gives +Inf: the queue goes last."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from scheduler.core.config import KUEUE_V017, KUEUE_V019, AdmissionFairSharing, FeatureGates, KueueConfig
from scheduler.core.kueue import afs
from scheduler.core.kueue.afs import USAGE_BASED, LocalQueueUsage
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit

from ._admission import NS, cq, lqs, pending, snapshot, wl


def _config(release: str) -> KueueConfig:
    return KueueConfig(admission_fair_sharing=AdmissionFairSharing(enabled=True),
                       feature_gates=FeatureGates(release=release))


# pkg/util/admissionfairsharing/admission_fair_sharing_test.go at v0.19.2,
# TestCalculateUsageWithNonPositiveWeight: "zero weight, idle queue (no usage)", "zero weight,
# active queue" (cpu 4), "negative weight" (cpu 4, weight -1) -> +Inf, never NaN.
@pytest.mark.parametrize(("consumed", "weight"), [({}, 0.0), ({"cpu": 4.0}, 0.0), ({"cpu": 4.0}, -1.0)])
def test_usage_of_a_non_positive_weight(consumed: dict[str, float], weight: float) -> None:
    lq = LocalQueueUsage(consumed, weight=weight)
    assert afs.usage_value(lq, {}, KUEUE_V019) == math.inf
    v017 = afs.usage_value(lq, {}, KUEUE_V017)  # Go's float division at v0.17.0
    if not consumed:
        assert math.isnan(v017)
    else:
        assert v017 == (math.inf if weight == 0 else -4.0)


# pkg/scheduler/scheduler_afs_test.go at v0.19.2, TestScheduleForAFS "does not prioritize a
# zero-weight localqueue": lq-a (weight 1) and lq-zero (weight 0) both idle; wl-z1 (lq-zero,
# created first) and wl-a1 (lq-a, a second later) each ask 8 cpu where there is room for one (here 10 of 10):
# wl-a1 is admitted. Kueue v0.17.0, without the guard, admits wl-z1 (NaN sorts first).
@pytest.mark.parametrize(("release", "admitted"), [(KUEUE_V019, "wl-a1"), (KUEUE_V017, "wl-z1")])
def test_a_zero_weight_local_queue_under_each_release(release: str, admitted: str) -> None:
    spec = replace(cq("cq1"), admission_mode=USAGE_BASED)
    pend = [pending(wl("wl-z1", 10, queue="lq-zero", created=0.0)), pending(wl("wl-a1", 10, queue="lq-a", created=1.0))]
    usages = {f"{NS}/lq-a": LocalQueueUsage({"cpu": 0.0}), f"{NS}/lq-zero": LocalQueueUsage({"cpu": 0.0}, weight=0)}
    snap = snapshot(cluster_queues={"cq1": spec}, local_queues=lqs(("lq-a", "cq1"), ("lq-zero", "cq1")),
                    pending=pend, config=_config(release), lq_usage=usages)
    assert [d.workload for d in run_cycle(snap) if isinstance(d, Admit)] == [f"{NS}/{admitted}"]
