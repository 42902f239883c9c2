"""Workload status dicts as Kueue writes them (pure functions of scheduler.kube.status)."""

from __future__ import annotations

import datetime as dt

from scheduler.kube.status import evict_status

NOW = dt.datetime(2026, 12, 3, 8, 0, tzinfo=dt.UTC)


def test_each_eviction_is_counted_once_by_reason_in_scheduling_stats() -> None:
    wl: dict = {"metadata": {"generation": 1}, "status": {"conditions": []}}
    first = evict_status(wl, "Preempted", "m", NOW, preempted_reason="InClusterQueue")
    assert first["schedulingStats"] == {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    evicted = {**wl, "status": {**first}}
    # the same eviction written again (a retried write) is not a second eviction
    assert "schedulingStats" not in evict_status(evicted, "Preempted", "m", NOW, preempted_reason="InClusterQueue")
    # re-admitted (Evicted flipped back), then evicted again for another reason, then the first again
    readmitted = {**wl, "status": {"conditions": [dict(c, status="False") if c["type"] == "Evicted" else c
                                                  for c in first["conditions"]],
                                   "schedulingStats": first["schedulingStats"]}}
    second = evict_status(readmitted, "NodeFailures", "n", NOW)
    assert second["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1},
        {"reason": "NodeFailures", "underlyingCause": "", "count": 1}]
    readmitted["status"]["schedulingStats"] = second["schedulingStats"]
    third = evict_status(readmitted, "Preempted", "m", NOW)
    assert third["schedulingStats"]["evictions"][0] == {"reason": "Preempted", "underlyingCause": "", "count": 2}
