"""``toposched controller --defrag`` (kube/defrag.py) against the in-memory API: 2 blocks of 2
nodes; two 1-node jobs left in different blocks, a 2-node job pending. The executor moves the
cheaper one through the writer (Evicted, reason Defragmentation, Kueue-style condition), records
the opened block as the pending job's preemption target, keeps to its budget, and the cycle then
admits the pending job in that block."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.kinds.workloads import ANN_AUTO_RESUME, ANN_MAX_RETRY
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET, parse_target
from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.defrag import REASON
from scheduler.kube.settings import DefragSettings
from tests.unit.kube.test_phases import BLOCK, NS, Harness, job


def _resumable(name: str, pods: int) -> dict[str, Any]:
    j = job(name, pods)
    j["metadata"]["annotations"] = {ANN_AUTO_RESUME: "true", ANN_MAX_RETRY: "2"}
    return j


def _run(harness: Harness, name: str, pods: int) -> None:
    harness.api.create(JOBS, _resumable(name, pods), NS)
    harness.sync()
    harness.controller.reconcile()
    harness.sync()


def _finish(harness: Harness, name: str) -> None:
    harness.api.merge_patch(JOBS, name, {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}, NS,
                            subresource="status")
    harness.sync()
    harness.controller.reconcile()
    harness.sync()


def _workloads(harness: Harness) -> dict[str, dict[str, Any]]:
    return {wl["metadata"]["ownerReferences"][0]["name"]: wl for wl in harness.api.objects(WORKLOADS, NS)}


def _fragmented(harness: Harness) -> None:
    for name in ("a", "b", "c", "d"):  # a, b fill block b0; c, d fill b1 (BestFit packs)
        _run(harness, name, 1)
        harness.clock.advance(60)
    _finish(harness, "b")
    _finish(harness, "d")
    _run(harness, "big", 2)  # 16 GPUs of quota left, 2 nodes free, no block free


def test_defrag_moves_the_cheaper_workload_and_the_pending_job_lands_in_the_opened_block(harness: Harness) -> None:
    _fragmented(harness)
    wls = _workloads(harness)
    assert not st.has_reservation(wls["big"])
    harness.rebuild(defrag=DefragSettings(budget=1, interval_s=30))
    harness.controller.reconcile()
    harness.sync()
    wls = _workloads(harness)
    moved = [n for n in ("a", "c") if (st.find_condition(wls[n], st.EVICTED) or {}).get("reason") == REASON]
    assert moved == ["c"]  # admitted last: the least GPU time lost since its admission
    cond = st.find_condition(wls["c"], st.EVICTED) or {}
    assert cond["status"] == "True" and cond["message"].startswith(
        f"Moved by toposched defragmentation to open {BLOCK} domain ")
    target = parse_target(wls["big"]["metadata"]["annotations"])
    assert target is not None and target.level == BLOCK
    assert "EvictedDueDefragmentation" in harness.event_reasons()
    for _ in range(4):  # the moved job stops, its reservation is released, big is admitted
        harness.controller.reconcile()
        harness.sync()
    wls = _workloads(harness)
    assert st.has_reservation(wls["big"])
    assert harness.job("big")["spec"]["template"]["spec"]["nodeSelector"][BLOCK] == target.name
    assert ANN_PREEMPTION_TARGET not in (wls["big"]["metadata"].get("annotations") or {})


def test_budget_per_cluster_queue_per_hour_defers_more_moves(harness: Harness) -> None:
    _fragmented(harness)
    executor = harness.rebuild(defrag=DefragSettings(budget=1, interval_s=30)).defrag
    assert executor is not None
    executor._evictions["cq"] = [harness.clock().timestamp() - 10]  # one move this hour already
    harness.controller.reconcile()
    harness.sync()
    assert not any((st.find_condition(wl, st.EVICTED) or {}).get("reason") == REASON
                   for wl in _workloads(harness).values())
    harness.clock.advance(3600)
    harness.controller.reconcile()
    harness.sync()
    assert sum((st.find_condition(wl, st.EVICTED) or {}).get("reason") == REASON
               for wl in _workloads(harness).values()) == 1


def _moves(harness: Harness) -> int:
    return sum((st.find_condition(wl, st.EVICTED) or {}).get("reason") == REASON
               for wl in _workloads(harness).values())


def test_preemption_limits_replace_the_budget_and_count_the_moves(harness: Harness) -> None:
    """With a PreemptionLimit (toposched.io/v1alpha1) the limit is the budget: 0 protects
    the ClusterQueue whatever --defrag-budget says; 1 allows the move, which the controller's
    ledger then counts in the limit's status."""
    from scheduler.k8s.informer import PREEMPTION_LIMITS

    def limit(n: int) -> dict[str, Any]:
        return {"apiVersion": "toposched.io/v1alpha1", "kind": "PreemptionLimit", "metadata": {"name": "moves"},
                "spec": {"scope": "PreemptedClusterQueue", "limit": n, "limitWindowSeconds": 3600}}

    _fragmented(harness)
    harness.api.create(PREEMPTION_LIMITS, limit(0))
    harness.rebuild(defrag=DefragSettings(budget=10, interval_s=30))
    harness.sync()
    harness.controller.reconcile()
    harness.sync()
    assert _moves(harness) == 0
    harness.api.merge_patch(PREEMPTION_LIMITS, "moves", {"spec": {"limit": 1}})
    harness.clock.advance(60)
    harness.sync()
    harness.controller.reconcile()
    harness.sync()
    assert _moves(harness) == 1
    harness.controller.reconcile()  # writes the limit's status (the move was recorded)
    counts = (harness.api.get(PREEMPTION_LIMITS, "moves").get("status") or {}).get("counts")
    assert counts == [{"key": "cq", "count": 1}]
