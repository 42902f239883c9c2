"""``workloads/status`` writes by anyone but toposched's controller (admission/workload_status.py):
a client such as a MultiKueue manager's identity on a worker may give a Workload up
(DeactivationTarget or Finished set to True, as Kueue v0.17's manager and external frameworks
write) but never admit it."""

from __future__ import annotations

import copy
import json
from typing import Any

from admission import review, routes
from admission.suspension import DEFAULT_CONTROLLER_USERS
from admission.view import ClusterView
from tests.unit.test_admission_workloads import CONTROLLER, workload

MANAGER = "system:serviceaccount:kueue-system:multikueue-sa"
NOW = "2026-12-07T16:00:00Z"


def status_write(new: dict[str, Any], old: dict[str, Any], user: str = MANAGER) -> dict[str, Any]:
    request = {"uid": "u-1", "kind": {"kind": "Workload"}, "namespace": "team-a", "operation": "UPDATE",
               "subResource": "status", "object": new, "oldObject": old, "userInfo": {"username": user}}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    code, out = review.answer(routes.VALIDATE_WORKLOAD, json.dumps(body).encode(), ClusterView(),
                              controller_users=DEFAULT_CONTROLLER_USERS)
    assert code == 200
    return dict(out["response"])


def condition(kind: str, status: str = "True", reason: str = "ByTest") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": "m", "lastTransitionTime": NOW}


def with_status(**status: Any) -> dict[str, Any]:
    wl = workload()
    wl["status"] = copy.deepcopy(status)
    return wl


ADMISSION = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2,
                                                          "flavors": {"nvidia.com/gpu": "f"}}]}


def test_a_client_cannot_admit_a_workload_through_its_status() -> None:
    old = with_status(conditions=[])
    forged = with_status(admission=ADMISSION, conditions=[condition("QuotaReserved"), condition("Admitted")])
    resp = status_write(forged, old)
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    message = resp["status"]["message"]
    assert "status.admission: Forbidden: only toposched's controller writes a Workload's status" in message
    assert MANAGER in message and "DeactivationTarget or Finished" in message


def test_a_client_cannot_set_quota_reserved_alone_nor_clear_an_eviction() -> None:
    old = with_status(conditions=[condition("Evicted", reason="Preempted")])
    resp = status_write(with_status(conditions=[condition("QuotaReserved")]), old)
    assert resp["allowed"] is False and "status.conditions[Evicted]" in resp["status"]["message"]
    resp = status_write(with_status(conditions=[condition("Evicted", reason="Preempted"), condition("QuotaReserved")]),
                        old)
    assert resp["allowed"] is False and "status.conditions[QuotaReserved]" in resp["status"]["message"]


def test_the_multikueue_manager_may_mark_its_copy_for_deactivation() -> None:
    # Kueue v0.17 pkg/controller/admissionchecks/multikueue/workload.go (step 6): on eviction on the
    # manager, workload.SetDeactivationTarget(remoteWl, WorkloadEvictedOnManagerCluster, "Evicted on manager: ...").
    admitted = with_status(admission=ADMISSION, conditions=[condition("QuotaReserved"), condition("Admitted")])
    marked = copy.deepcopy(admitted)
    marked["status"]["conditions"].append(condition("DeactivationTarget", reason="WorkloadEvictedOnManagerCluster"))
    assert status_write(marked, admitted)["allowed"] is True


def test_finishing_and_nominating_pass_but_undoing_a_finish_does_not() -> None:
    old = with_status(conditions=[condition("QuotaReserved")])
    assert status_write(with_status(conditions=[condition("QuotaReserved"), condition("Finished")]), old)["allowed"]
    assert status_write(with_status(conditions=[condition("QuotaReserved")], nominatedClusterNames=["w1"]),
                        old)["allowed"]
    finished = with_status(conditions=[condition("Finished")])
    resp = status_write(with_status(conditions=[condition("Finished", "False")]), finished)
    assert resp["allowed"] is False and "status.conditions[Finished]" in resp["status"]["message"]


def test_the_controller_writes_any_status() -> None:
    forged = with_status(admission=ADMISSION, conditions=[condition("QuotaReserved")])
    assert status_write(forged, with_status(conditions=[]), user=CONTROLLER)["allowed"] is True
