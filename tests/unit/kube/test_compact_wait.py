"""The bounded wait for a compact placement through the controller's phases (in-memory API
server, fixed clock): pending with its reason while waiting, woken at the deadline with no
other change in the cluster, admitted with the CompactPlacementRelaxed Event."""

from __future__ import annotations

from typing import Any

from scheduler.core.topology_request import ANN_COMPACT_LEVEL, ANN_COMPACT_WAIT, ANN_PREFERRED
from scheduler.k8s.informer import JOBS
from scheduler.kube import status as st

from .test_phases import BLOCK, GPU, NS, Harness, job


def compact_job(name: str, pods: int) -> dict[str, Any]:
    body = job(name, pods)
    body["spec"]["template"]["metadata"]["annotations"] = {
        ANN_PREFERRED: BLOCK, ANN_COMPACT_LEVEL: BLOCK, ANN_COMPACT_WAIT: "10m"}
    return body


def test_waits_then_relaxes_with_an_event() -> None:
    h = Harness()  # two blocks of two 8-GPU nodes: 3 pods can never share a block
    h.api.create(JOBS, compact_job("wide", 3), NS)
    h.sync()
    h.controller.ensure_workloads()
    h.sync()
    h.controller.admit()
    h.sync()
    wl = h.workload()
    cond = st.find_condition(wl, st.QUOTA_RESERVED) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", "WaitingForCompactPlacement")
    assert "at most 1" in cond.get("message", "") and not st.condition_true(wl, st.ADMITTED)
    h.clock.advance(599)
    h.controller.admit()
    h.sync()
    assert not st.condition_true(h.workload(), st.QUOTA_RESERVED)
    h.clock.advance(1)  # the wait's end; nothing else changed in the cluster
    h.controller.admit()
    h.sync()
    wl = h.workload()
    assert st.condition_true(wl, st.QUOTA_RESERVED)
    assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == 3
    assert "CompactPlacementRelaxed" in h.event_reasons()
    assert GPU in wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
