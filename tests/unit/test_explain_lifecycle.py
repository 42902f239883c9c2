"""``toposched explain`` shows the waitForPodsReady state: PodsReady, the requeue count and the
backoff left, a hold by Requeued=False."""

from __future__ import annotations

import datetime as dt

from scheduler.explain import explain, to_text
from tests.unit.test_explain import snap, workload


def test_backoff_and_pods_ready_are_shown() -> None:
    wl = workload("held", 1)
    wl["status"]["conditions"] += [
        {"type": "PodsReady", "status": "False", "reason": "WaitForStart",
         "message": "Not all pods are ready or succeeded", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout",
         "message": "Exceeded the PodsReady timeout team-a/held", "lastTransitionTime": "2026-01-01T00:05:00Z"}]
    wl["status"]["requeueState"] = {"count": 2, "requeueAt": "2026-01-01T00:07:00Z"}
    now = dt.datetime(2026, 1, 1, 0, 6, 0, tzinfo=dt.UTC)
    out = explain(snap(wl), "team-a", "held", solver="greedy", now=now)
    life = out["lifecycle"]
    assert life["requeueCount"] == 2 and life["backoffLeftSeconds"] == 60
    assert life["held"]["reason"] == "PodsReadyTimeout"
    assert life["podsReady"]["reason"] == "WaitForStart"
    assert out["reasons"][0]["reason"] == "Held"
    text = to_text(out)
    assert "Requeued 2 time(s) after an eviction; backoff ends 2026-01-01T00:07:00Z (60 s left)." in text
    assert "Held out of the queue: Requeued=False reason PodsReadyTimeout" in text
    assert "PodsReady=False reason WaitForStart" in text
