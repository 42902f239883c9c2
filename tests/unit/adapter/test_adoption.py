"""The replace-Kueue pre-flight (scheduler/adapter/adoption.py) on plain objects."""

from __future__ import annotations

import datetime as dt
from typing import Any

from scheduler.adapter.adoption import KUEUE_TOPOLOGY_GATE, assess, lease_is_live

NOW = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.UTC)


def workload(name: str, admitted: bool, cq: str = "cq", finished: bool = False, owner: str = "Job") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team"}
    conditions = [{"type": "QuotaReserved", "status": "True" if admitted else "False"}]
    if finished:
        conditions.append({"type": "Finished", "status": "True"})
    status: dict[str, Any] = {"conditions": conditions}
    meta["ownerReferences"] = [{"kind": owner, "name": name, "controller": True}]
    if admitted:
        status["admission"] = {"clusterQueue": cq, "podSetAssignments": []}
    return {"metadata": meta, "status": status}


KUEUE_HOOKS = {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "kueue-validating-webhook-configuration"},
               "webhooks": [{"name": "vworkload.kb.io", "rules": [{"apiGroups": ["kueue.x-k8s.io"],
                                                                  "resources": ["workloads"]}]}]}
TOPOSCHED_HOOKS = {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "toposched-webhook"},
                   "webhooks": [{"name": "mjob.toposched.io", "rules": [{"apiGroups": ["batch"],
                                                                        "resources": ["jobs"]}]}]}


def check(**overrides: Any) -> Any:
    kwargs: dict[str, Any] = {
        "workloads": [workload("a", True), workload("b", False), workload("done", True, finished=True)],
        "cluster_queues": [{"metadata": {"name": "cq"}, "spec": {}}], "webhook_configurations": [TOPOSCHED_HOOKS],
        "pods": [], "kueue_deployments": [{"metadata": {"name": "kueue-controller-manager"}, "spec": {"replicas": 0}}],
        "kueue_lease": None, "now": NOW}
    kwargs.update(overrides)
    return assess(**kwargs)


def test_a_stopped_kueue_is_ready_and_counts_what_is_adopted() -> None:
    report = check()
    assert report.ready and report.findings == ()
    assert report.lines()[-1].startswith("1 admitted Workloads keep their admission, 1 pending")


def test_each_way_kueue_can_still_act_is_a_blocker() -> None:
    lease = {"spec": {"holderIdentity": "kueue-0", "renewTime": "2026-12-03T11:59:58.000000Z",
                      "leaseDurationSeconds": 15}}
    report = check(
        kueue_deployments=[{"metadata": {"name": "kueue-controller-manager"}, "spec": {"replicas": 1}}],
        kueue_lease=lease, webhook_configurations=[KUEUE_HOOKS, TOPOSCHED_HOOKS],
        pods=[{"metadata": {"name": "p", "namespace": "team"}, "spec": {"schedulingGates": [
            {"name": KUEUE_TOPOLOGY_GATE}]}}],
        cluster_queues=[{"metadata": {"name": "cq"}, "spec": {"admissionChecks": ["prov"]}}])
    assert not report.ready
    texts = [f.text for f in report.findings if f.blocker]
    assert len(texts) == 5
    assert "scale it to 0" in texts[0] and "renewed by kueue-0" in texts[1]
    assert "ValidatingWebhookConfiguration kueue-validating-webhook-configuration" in texts[2]
    assert "toposched-webhook" not in texts[2]
    assert "team/p" in texts[3] and "admission checks (cq)" in texts[4]
    assert report.lines()[-1].endswith("not ready: fix the blockers above, then run again")


def test_a_lease_not_renewed_within_its_duration_is_not_live() -> None:
    lease = {"spec": {"holderIdentity": "kueue-0", "renewTime": "2026-12-03T11:59:00Z", "leaseDurationSeconds": 15}}
    assert not lease_is_live(lease, NOW)
    assert not lease_is_live({"spec": {"renewTime": "2026-12-03T11:59:59Z"}}, NOW)  # released: no holder
    assert not lease_is_live(None, NOW)


def test_an_admission_into_a_missing_cluster_queue_is_a_note() -> None:
    report = check(workloads=[workload("a", True, cq="gone")])
    assert report.ready
    assert [f.blocker for f in report.findings] == [False] and "team/a" in report.findings[0].text


def test_a_pending_workload_of_a_kind_toposched_does_not_start_is_a_blocker() -> None:
    report = check(workloads=[workload("r", False, owner="AppWrapper"), workload("p", True, owner="Pod")])
    assert not report.ready and "team/r (AppWrapper)" in report.findings[0].text  # the admitted Pod group is kept
    # RayJobs, TrainJobs, pods ... are governed now: their pending Workloads are adopted
    assert check(workloads=[workload("r", False, owner="RayJob"), workload("q", False, owner="Pod")]).ready


def test_pods_gated_by_kueues_ungater_are_released_by_toposched_when_they_name_their_pod_set() -> None:
    named = {"metadata": {"name": "n", "namespace": "team", "annotations": {"kueue.x-k8s.io/workload": "w"},
                          "labels": {"kueue.x-k8s.io/podset": "main"}},
             "spec": {"schedulingGates": [{"name": KUEUE_TOPOLOGY_GATE}]}}
    assert check(pods=[named]).ready


def test_hyperpod_jobs_of_task_governance_are_adopted_in_either_spelling() -> None:
    """Task governance clusters: the operator's Workloads name their owner HyperPodPytorchJob (AWS's
    spelling in its externalFrameworks entry) or HyperPodPyTorchJob (the CLI's): toposched governs
    that kind (natively, or as an external framework), so admitted ones keep their admission and
    pending ones are adopted, not a blocker."""
    for kind in ("HyperPodPytorchJob", "HyperPodPyTorchJob"):
        report = check(workloads=[workload("running", True, owner=kind), workload("queued", False, owner=kind)])
        assert report.ready, report.lines()
        assert report.lines()[-1].startswith("1 admitted Workloads keep their admission, 1 pending")
