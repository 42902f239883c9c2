"""Priority is bounded at the Workload door (issue 39 item 9): a Workload naming a PriorityClass
is held to the same rules as one naming a WorkloadPriorityClass, and both to the namespace's:
the class exists ("... not found; create it or fix ..."), its value is the Workload's priority
(refused, not corrected), a system class needs kube-system or a ResourceQuota scoped to it, and
the Namespace's ``toposched.io/allowed-priority-classes`` bounds both kinds. Before, a batch-admin
Workload naming a missing PriorityClass with priority 2,147,483,647 was allowed and preempted.
The job webhook refuses a job naming a system class the same way. Through ``review.answer``."""

from __future__ import annotations

import json
from typing import Any

from admission import review, routes
from admission.suspension import DEFAULT_CONTROLLER_USERS
from admission.validation import validate_job_against_cluster
from admission.view import ClusterView
from scheduler.adapter.priority_policy import ANN_ALLOWED_CLASSES

NS = "team-a"
CRITICAL = "system-cluster-critical"
PC = {"group": "scheduling.k8s.io", "kind": "PriorityClass"}


def view(**extra: Any) -> ClusterView:
    fields: dict[str, Any] = {
        "priority_classes": {"batch-high": {"metadata": {"name": "batch-high"}, "value": 900}},
        "k8s_priority_classes": {CRITICAL: {"metadata": {"name": CRITICAL}, "value": 2000000000},
                                 "team-high": {"metadata": {"name": "team-high"}, "value": 5000}},
        "namespaces": {NS: {"metadata": {"name": NS}}},
        "local_queues": {f"{NS}/lq": {"metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "cq"}}},
    }
    return ClusterView(**{**fields, **extra})


def workload(priority: int, ref: dict[str, str], namespace: str = NS, api: str = "v1beta2") -> dict[str, Any]:
    spec: dict[str, Any] = {"queueName": "lq", "priority": priority, "podSets": [
        {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}]}
    if api == "v1beta2":
        spec["priorityClassRef"] = ref
    else:
        spec["priorityClassName"] = ref["name"]
        spec["priorityClassSource"] = "scheduling.k8s.io/priorityclass"
    return {"apiVersion": f"kueue.x-k8s.io/{api}", "kind": "Workload",
            "metadata": {"name": "w", "namespace": namespace}, "spec": spec}


def decide(obj: dict[str, Any], cluster: ClusterView, path: str = routes.VALIDATE_WORKLOAD) -> dict[str, Any]:
    request = {"uid": "u-1", "kind": {"kind": "Workload"}, "namespace": obj["metadata"]["namespace"],
               "operation": "CREATE", "object": obj, "userInfo": {"username": "alice"}}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    code, out = review.answer(path, json.dumps(body).encode(), cluster, controller_users=DEFAULT_CONTROLLER_USERS)
    assert code == 200
    return dict(out["response"])


def refusal(resp: dict[str, Any]) -> str:
    assert resp["allowed"] is False and resp["status"]["code"] == 403, resp
    return str(resp["status"]["message"])


def test_a_workload_naming_a_missing_priority_class_is_refused_with_the_fix() -> None:
    message = refusal(decide(workload(2147483647, {**PC, "name": "ghost"}), view()))
    assert message.startswith('spec.priorityClassRef.name: Not found: "ghost"')
    assert "create it (kubectl get priorityclasses lists the existing ones) or fix spec.priorityClassRef.name" \
        in message


def test_the_v1beta1_spelling_is_judged_the_same() -> None:
    message = refusal(decide(workload(2147483647, {**PC, "name": "ghost"}, api="v1beta1"), view(),
                             path="/validate-kueue-x-k8s-io-v1beta1-workload"))
    assert message.startswith('spec.priorityClassName: Not found: "ghost"')


def test_a_priority_that_disagrees_with_its_priority_class_is_refused() -> None:
    assert refusal(decide(workload(2147483647, {**PC, "name": "team-high"}), view())) == (
        'spec.priority: Forbidden: PriorityClass "team-high" gives priority 5000, not 2147483647 (user "alice" is '
        "not toposched's controller); set spec.priority to 5000")
    assert decide(workload(5000, {**PC, "name": "team-high"}), view())["allowed"] is True


def test_a_system_class_outside_kube_system_needs_a_quota_scoped_to_it() -> None:
    message = refusal(decide(workload(2000000000, {**PC, "name": CRITICAL}), view()))
    assert message.startswith(f'spec.priorityClassRef.name: Forbidden: PriorityClass "{CRITICAL}" is reserved for '
                              f'system components: namespace "{NS}" has no ResourceQuota')
    quota = {"metadata": {"name": "critical", "namespace": NS}, "spec": {"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": [CRITICAL]}]}}}
    assert decide(workload(2000000000, {**PC, "name": CRITICAL}),
                  view(resource_quotas={f"{NS}/critical": quota}))["allowed"] is True
    assert decide(workload(2000000000, {**PC, "name": CRITICAL}, namespace="kube-system"), view())["allowed"] is True


def test_the_namespace_allow_list_bounds_both_kinds() -> None:
    listed = view(namespaces={NS: {"metadata": {"name": NS, "annotations": {ANN_ALLOWED_CLASSES: "team-high"}}}})
    wpc = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "batch-high"}
    assert 'WorkloadPriorityClass "batch-high" is not one namespace "team-a" may use' in \
        refusal(decide(workload(900, wpc), listed))
    assert decide(workload(5000, {**PC, "name": "team-high"}), listed)["allowed"] is True


def job(pc: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"template": {"spec": {"priorityClassName": pc, "containers": [{"name": "c"}]}}}}


def test_the_job_webhook_refuses_a_class_its_namespace_may_not_use() -> None:
    errors = [str(e) for e in validate_job_against_cluster(job(CRITICAL), view()).errors]
    assert any(e.startswith(f'spec.template.spec.priorityClassName: Forbidden: PriorityClass "{CRITICAL}" is '
                            "reserved for system components") for e in errors), errors
    errors = [str(e) for e in validate_job_against_cluster(job("ghost"), view()).errors]
    assert any(e.startswith('spec.template.spec.priorityClassName: Not found: "ghost"') for e in errors), errors
    errors = [str(e) for e in validate_job_against_cluster(job("team-high"), view()).errors]
    assert not any("priorityClassName" in e for e in errors), errors
