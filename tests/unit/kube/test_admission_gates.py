"""The controller's side of Kueue's AdmissionGatedBy (``scheduler/kube/admission_gates.py``): a job
carrying ``kueue.x-k8s.io/admission-gated-by`` waits, its Workload carrying the annotation and
``QuotaReserved=False`` reason ``AdmissionGated``, until every name is gone; then it is admitted.

Restates Kueue v0.19.2's cases: ``pkg/controller/jobframework/reconciler_test.go``
(``TestReconcileGenericJob``: "job with AdmissionGatedBy annotation should create workload with
annotation", "... removed should update workload", "... multiple gates ...", "... when feature
gate disabled should not propagate annotation", "... unchanged should not emit event", "...
changed should emit event") and ``pkg/controller/core/workload_controller_test.go``
(``TestReconcile``: "workload with AdmissionGatedBy annotation should set QuotaReserved
condition to AdmissionGated", "... removed should clear the gate and emit event", "workload with
multiple AdmissionGatedBy gates should remain gated", "workload without AdmissionGatedBy
annotation and no gated condition should not be affected").
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.adapter.objects import find_condition, has_reservation
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates, KueueConfig
from scheduler.k8s.informer import JOBS, WORKLOADS
from tests.unit.kube.test_phases import GPU, NS, Harness, job

ANN = "kueue.x-k8s.io/admission-gated-by"
TWO = "example.com/controller1,example.com/controller2"


def config(release: str = KUEUE_V019, **gates: bool) -> KueueConfig:
    return KueueConfig(feature_gates=FeatureGates(gates, release))


def gated_job(name: str, value: str) -> dict[str, Any]:
    out = job(name, 1)
    out["metadata"]["annotations"] = {ANN: value}
    return out


def harness(cfg: KueueConfig) -> Harness:
    h = Harness()
    h.rebuild(config=cfg)
    return h


def one_pass(h: Harness) -> dict[str, Any]:
    h.sync()
    h.controller.reconcile()
    h.sync()
    return h.workload()


def quota_reserved(wl: dict[str, Any]) -> tuple[str, str, str]:
    cond = find_condition(wl, "QuotaReserved") or {}
    return cond.get("status", ""), cond.get("reason", ""), cond.get("message", "")


def set_job_gates(h: Harness, value: str | None) -> None:
    h.api.merge_patch(JOBS, "train", {"metadata": {"annotations": {ANN: value}}}, NS)


def test_a_gated_job_waits_with_kueues_condition_until_every_name_is_gone() -> None:
    h = harness(config())
    h.api.create(JOBS, gated_job("train", TWO), NS)
    wl = one_pass(h)
    assert wl["metadata"]["annotations"][ANN] == TWO  # created with the annotation (constructWorkload)
    assert quota_reserved(wl) == ("False", "AdmissionGated", f"Admission is gated by: {TWO}")
    assert not has_reservation(wl) and h.job("train")["spec"]["suspend"] is True
    assert [e["message"] for e in h.events_of("AdmissionGated")] == [f"Workload admission is gated by: {TWO}"]

    wl = one_pass(h)  # nothing changed: nothing written, still held
    assert not has_reservation(wl) and len(h.events_of("AdmissionGated")) == 1

    set_job_gates(h, "example.com/controller2")  # one controller is done
    wl = one_pass(h)
    assert wl["metadata"]["annotations"][ANN] == "example.com/controller2"
    assert [e["message"] for e in h.events_of("UpdatedWorkload")] == [
        'Updated workload AdmissionGatedBy to "example.com/controller2"']
    # Kueue writes the condition once, when the gate is first seen: the message keeps the first list.
    assert quota_reserved(wl) == ("False", "AdmissionGated", f"Admission is gated by: {TWO}")
    assert not has_reservation(wl)

    set_job_gates(h, None)  # the last one is done
    h.sync()
    h.controller.ensure_workloads()
    h.controller.admission_gates.run()
    h.sync()
    wl = h.workload()
    assert ANN not in (wl["metadata"].get("annotations") or {})
    assert quota_reserved(wl) == ("False", "Pending", "AdmissionGatedBy cleared, waiting for quota reservation")
    assert [e["message"] for e in h.events_of("AdmissionGateCleared")] == [
        "Admission gate cleared, workload is now admissible"]
    wl = one_pass(h)
    assert has_reservation(wl)


def test_with_unadmitted_workloads_observability_the_cleared_reason_is_pending_evaluation() -> None:
    h = harness(config(UnadmittedWorkloadsObservability=True))
    h.api.create(JOBS, gated_job("train", "example.com/controller1"), NS)
    one_pass(h)
    set_job_gates(h, "")  # an empty value is no gate (HasAdmissionGate: val != "")
    h.sync()
    h.controller.admission_gates.run()
    h.sync()
    assert quota_reserved(h.workload())[:2] == ("False", "PendingEvaluation")


@pytest.mark.parametrize("cfg", [config(KUEUE_V017), config(AdmissionGatedBy=False)])
def test_with_the_gate_off_the_annotation_is_not_propagated_and_nothing_waits(cfg: KueueConfig) -> None:
    h = harness(cfg)
    h.api.create(JOBS, gated_job("train", "example.com/controller1"), NS)
    wl = one_pass(h)
    assert ANN not in (wl["metadata"].get("annotations") or {})
    assert has_reservation(wl) and not h.events_of("AdmissionGated")


def test_a_tenant_cannot_lift_the_jobs_gate_by_rewriting_the_workload() -> None:
    """The job's annotation is the truth (PropagateAdmissionGatedByAnnotation on every sync)."""
    h = harness(config())
    h.api.create(JOBS, gated_job("train", "example.com/controller1"), NS)
    wl = one_pass(h)
    h.api.merge_patch(WORKLOADS, wl["metadata"]["name"], {"metadata": {"annotations": {ANN: None}}}, NS)
    wl = one_pass(h)
    assert wl["metadata"]["annotations"][ANN] == "example.com/controller1" and not has_reservation(wl)
    assert quota_reserved(wl)[1] == "AdmissionGated"


def test_a_workload_created_directly_with_the_annotation_is_held() -> None:
    h = harness(config())
    h.api.create(WORKLOADS, {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "direct", "namespace": NS, "annotations": {ANN: TWO}},
        "spec": {"queueName": "lq", "active": True, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {GPU: "8"}}}]}}}]}}, NS)
    wl = one_pass(h)
    assert quota_reserved(wl) == ("False", "AdmissionGated", f"Admission is gated by: {TWO}")
    assert not has_reservation(wl)


def test_an_ungated_workload_is_not_touched() -> None:
    h = harness(config())
    h.api.create(JOBS, job("train", 1), NS)
    h.sync()
    h.controller.ensure_workloads()
    h.controller.admission_gates.run()
    h.sync()
    assert find_condition(h.workload(), "QuotaReserved") is None and not h.events_of("AdmissionGated")
