"""Kueue's PreemptionConfig and toposched's PreemptionLimit through the controller (in-memory API server):
a ClusterQueue annotated ``kueue.x-k8s.io/preemption-config-name`` lets its domain clearing
preempt what the rules select (reason ``ConfigurablePreemption``), the PreemptionLimit's
``status.counts`` shows the eviction, and a limit of 0 blocks it with Kueue's condition and
Event (KEP-13396; toposched.io's PreemptionLimit; docs/quota-and-preemption.md)."""

from __future__ import annotations

from typing import Any

from scheduler.k8s.informer import CLUSTER_QUEUES, JOBS, PREEMPTION_CONFIGS, PREEMPTION_LIMITS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.events import EVENTS

from .test_phases import BLOCK, NS, Harness, job

CONFIG = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig",
          "metadata": {"name": "defrag"},
          "spec": {"rules": [{"name": "defrag-within-queue",
                              "activationPolicy": {"trigger": "QuotaFeasibleAndInsufficientTopology"},
                              "candidateSelectors": [{"scope": "WithinClusterQueue"}]}]}}


def limit(name: str, n: int, scope: str = "Global") -> dict[str, Any]:
    return {"apiVersion": "toposched.io/v1alpha1", "kind": "PreemptionLimit", "metadata": {"name": name},
            "spec": {"scope": scope, "limit": n, "limitWindowSeconds": 3600}}


def _pinned(name: str, block: str) -> dict[str, Any]:
    body = job(name, 1)
    body["spec"]["template"]["spec"]["nodeSelector"] = {BLOCK: block}
    return body


def _fragmented(h: Harness, *, annotate: bool = True) -> None:
    """One 1-node job in each block (b0, b1): 2 nodes free, none of the 2 blocks free."""
    h.api.create(PREEMPTION_CONFIGS, CONFIG)
    if annotate:
        h.api.merge_patch(CLUSTER_QUEUES, "cq", {"metadata": {"annotations": {
            "kueue.x-k8s.io/preemption-config-name": "defrag"}}})
    for name, block in (("a", "b0"), ("b", "b1")):
        h.api.create(JOBS, _pinned(name, block), NS)
        _pass(h)
        h.controller.start_admitted()
        h.sync()
    h.api.create(JOBS, job("c", 2), NS)  # needs one whole block
    _pass(h)


def _pass(h: Harness) -> None:
    h.sync()
    h.controller.ensure_workloads()
    h.sync()
    h.controller.admit()
    h.sync()


def _by_job(h: Harness) -> dict[str, dict[str, Any]]:
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in h.api.objects(WORKLOADS, NS)}


def test_without_the_annotation_the_job_waits_as_in_kueue() -> None:
    h = Harness()
    _fragmented(h, annotate=False)
    wls = _by_job(h)
    assert not any(st.condition_true(w, st.EVICTED) for w in wls.values())
    assert (st.find_condition(wls["c"], st.QUOTA_RESERVED) or {}).get("status") == "False"


def test_the_config_clears_a_block_and_the_limit_counts_it() -> None:
    h = Harness()
    h.api.create(PREEMPTION_LIMITS, limit("hourly", 5))
    _fragmented(h)
    wls = _by_job(h)
    victims = [n for n in ("a", "b") if st.condition_true(wls[n], st.EVICTED)]
    assert len(victims) == 1
    preempted = st.find_condition(wls[victims[0]], "Preempted") or {}
    assert preempted.get("reason") == "ConfigurablePreemption"
    assert "due to the configured preemption rules" in preempted.get("message", "")
    counts = (h.api.get(PREEMPTION_LIMITS, "hourly").get("status") or {}).get("counts")
    assert counts == [{"key": "Global", "count": 1}]


def test_a_limit_of_zero_blocks_it_with_kueues_condition_and_event() -> None:
    h = Harness()
    h.api.create(PREEMPTION_LIMITS, limit("freeze", 0))
    _fragmented(h)
    wls = _by_job(h)
    assert not any(st.condition_true(w, st.EVICTED) for w in wls.values())
    blocked = st.find_condition(wls["c"], "PreemptionBlockedByLimit") or {}
    assert (blocked.get("status"), blocked.get("reason"), blocked.get("message")) == (
        "True", "PreemptionLimitExceeded", "Preemption was blocked by PreemptionLimit freeze")
    h.events.flush()
    assert "PreemptionThrottled" in [e["reason"] for e in h.api.objects(EVENTS)]
    # the limit lifted: the preemption goes ahead and the condition turns False
    h.api.delete(PREEMPTION_LIMITS, "freeze")
    _pass(h)
    wls = _by_job(h)
    assert any(st.condition_true(wls[n], st.EVICTED) for n in ("a", "b"))
    assert (st.find_condition(wls["c"], "PreemptionBlockedByLimit") or {}).get("status") == "False"


def test_an_invalid_config_is_not_applied_and_named_once(caplog: Any) -> None:
    h = Harness()
    h.api.create(PREEMPTION_CONFIGS, {**CONFIG, "metadata": {"name": "broken"},
                                      "spec": {"rules": [{"name": "Bad Name", "activationPolicy": {
                                          "trigger": "Sometimes"}}]}})
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"metadata": {"annotations": {
        "kueue.x-k8s.io/preemption-config-name": "broken"}}})
    _pass(h)
    _pass(h)
    lines = [r.getMessage() for r in caplog.records if "PreemptionConfig broken" in r.getMessage()]
    assert sorted(line.split(":")[0] for line in lines) == ["ClusterQueue cq", "PreemptionConfig broken"]
    assert any("spec.rules[0].name" in line and "it is not applied until it is fixed" in line for line in lines)
