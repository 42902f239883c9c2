"""Kueue's UnadmittedWorkloadsExplicitStatus (``scheduler/kube/explicit_status.py``; new in
v0.19, beta but off by default; it needs UnadmittedWorkloadsObservability): with it, a new
Workload is stamped ``QuotaReserved=False`` ``PendingEvaluation`` and ``Admitted=False``
``NoReservation`` before any cycle; without it (both releases' default) nothing is written then.

Restates Kueue v0.19.2: ``pkg/controller/core/workload_controller_test.go`` (``TestReconcile``:
"newly created workload (initial reconcile, ExplicitStatus enabled)" and "... ExplicitStatus
disabled)") and ``pkg/config/validation_test.go`` ("UnadmittedWorkloadsExplicitStatus requires
UnadmittedWorkloadsObservability"). The deactivated stamp is ``resolveGranularUnadmittedQuotaReservedCondition``'s
first case.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.adapter.kueue_config import ConfigError, parse_kueue_config
from scheduler.adapter.objects import find_condition
from scheduler.core.config import KUEUE_V019, FeatureGates, KueueConfig
from scheduler.k8s.informer import JOBS, WORKLOADS
from tests.unit.kube.test_phases import NS, Harness, job

BOTH = {"UnadmittedWorkloadsObservability": True, "UnadmittedWorkloadsExplicitStatus": True}


def stamped(gates: dict[str, bool], active: bool = True) -> dict[str, Any]:
    h = Harness()
    h.rebuild(config=KueueConfig(feature_gates=FeatureGates(gates, KUEUE_V019)))
    h.api.create(JOBS, job("train", 1), NS)
    h.sync()
    h.controller.ensure_workloads()
    if not active:
        h.api.merge_patch(*_deactivate(h))
    h.sync()
    h.controller.explicit_status.run()
    h.sync()
    return h.workload()


def _deactivate(h: Harness) -> tuple[Any, str, dict[str, Any], str]:
    return WORKLOADS, h.workload()["metadata"]["name"], {"spec": {"active": False}}, NS


def condition(wl: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    cond = find_condition(wl, type_)
    return (cond["status"], cond["reason"], cond["message"]) if cond else None


def test_with_the_gate_a_new_workload_is_stamped_pending_evaluation() -> None:
    wl = stamped(BOTH)
    assert condition(wl, "QuotaReserved") == (
        "False", "PendingEvaluation", "Workload is pending evaluation in the scheduling queue")
    assert condition(wl, "Admitted") == ("False", "NoReservation", "The workload has no reservation")


def test_an_inactive_workload_is_stamped_deactivated() -> None:
    assert condition(stamped(BOTH, active=False), "QuotaReserved") == (
        "False", "Deactivated", "The workload is deactivated")


@pytest.mark.parametrize("gates", [{}, {"UnadmittedWorkloadsObservability": True}])
def test_without_the_gate_nothing_is_written_before_the_cycle(gates: dict[str, bool]) -> None:
    wl = stamped(gates)
    assert condition(wl, "QuotaReserved") is None and condition(wl, "Admitted") is None


def test_the_gate_without_observability_is_refused_as_kueue_refuses_it() -> None:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "featureGates": {"UnadmittedWorkloadsExplicitStatus": True}}
    with pytest.raises(ConfigError) as refused:
        parse_kueue_config(doc, KUEUE_V019)
    assert str(refused.value) == ('featureGates: Invalid value: "UnadmittedWorkloadsExplicitStatus": '
                                  "UnadmittedWorkloadsExplicitStatus requires UnadmittedWorkloadsObservability "
                                  "to be enabled")
    doc["featureGates"] = BOTH
    assert parse_kueue_config(doc, KUEUE_V019).config.feature_gates.enabled("UnadmittedWorkloadsExplicitStatus")
