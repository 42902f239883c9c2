"""What runs is what was admitted (issue 39, webhook side): a tenant with namespace rights cannot
unhook its work after CREATE. Pods keep Kueue's keys and gates until the controller changes them
(in one step or several); the role hash is the webhook's, not the tenant's; the queue label is
immutable as Kueue's job, LeaderWorkerSet, Deployment and StatefulSet webhooks make it; the
template stamps (schedulerName, pod-suspending-parent, the managed and queue labels) come back on
UPDATE. Every case goes through ``admission.review.answer``, the webhook's own entry."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from admission import configs
from admission.mutation import apply_patch
from admission.review import answer
from admission.view import ClusterView
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.deployment import DEPLOYMENT
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.leaderworkerset import LEADERWORKERSET
from scheduler.adapter.kinds.pod import POD, role_hash
from scheduler.adapter.kinds.statefulset import STATEFULSET
from tests.unit.test_admission_pods import make_pod, mutated

CONTROLLER = "system:serviceaccount:toposched-system:toposched-controller"
QUEUE, MANAGED = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/managed"
GROUP, TOTAL = "kueue.x-k8s.io/pod-group-name", "kueue.x-k8s.io/pod-group-total-count"
INDEX, PREBUILT = "kueue.x-k8s.io/pod-group-pod-index", "kueue.x-k8s.io/prebuilt-workload-name"
ROLE_HASH, PARENT = "kueue.x-k8s.io/role-hash", "kueue.x-k8s.io/pod-suspending-parent"
ADMISSION, TOPOLOGY = "kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"


def review(path: str, obj: dict[str, Any], operation: str = "UPDATE", old: dict[str, Any] | None = None,
           user: str = "alice", view: ClusterView | None = None) -> dict[str, Any]:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": operation, "namespace": "ns", "userInfo": {"username": user},
        "object": obj, "oldObject": old}}
    code, out = answer(path, json.dumps(body).encode(), view or ClusterView())
    assert code == 200
    response: dict[str, Any] = out["response"]
    return response


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    ops = json.loads(base64.b64decode(response["patch"])) if response.get("patch") else []
    return apply_patch(obj, ops)


def message(response: dict[str, Any]) -> str:
    return str((response.get("status") or {}).get("message", ""))


def edited(obj: dict[str, Any], where: str, key: str, value: str | None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    entries = out["metadata"].setdefault(where, {})
    if value is None:
        entries.pop(key, None)
    else:
        entries[key] = value
    return out


def ungated(pod: dict[str, Any]) -> dict[str, Any]:
    return {**pod, "spec": {**pod["spec"], "schedulingGates": []}}


# ---- pods: Kueue's keys and gates ---------------------------------------------------------------

HELD = mutated(make_pod({QUEUE: "q"}))
GROUPED = mutated(make_pod({QUEUE: "q", GROUP: "g", PREBUILT: "g", INDEX: "0"}, {TOTAL: "2"}))


@pytest.mark.parametrize("where, key, value", [
    ("labels", MANAGED, None), ("labels", QUEUE, None), ("labels", QUEUE, "other"),
    ("labels", INDEX, None), ("labels", INDEX, "1"), ("labels", PREBUILT, "other"),
    ("annotations", TOTAL, None), ("annotations", TOTAL, "1"), ("annotations", ROLE_HASH, "leader"),
    ("annotations", ROLE_HASH, None),
])
def test_a_tenant_cannot_remove_or_change_the_keys_that_tie_a_pod_to_its_workload(
        where: str, key: str, value: str | None) -> None:
    response = review(POD.validate_path, edited(GROUPED, where, key, value), old=GROUPED)
    assert response["allowed"] is False
    shown = json.dumps(value or "")
    assert f"metadata.{where}[{key}]: Invalid value: {shown}: field is immutable" in message(response)
    assert "only toposched's controller may change it" in message(response)
    if (key, value) != (TOTAL, None):  # (a group without its count is Kueue's refusal, for everyone)
        assert review(POD.validate_path, edited(GROUPED, where, key, value), old=GROUPED, user=CONTROLLER)["allowed"]


def test_the_group_name_is_immutable_in_kueues_words() -> None:
    response = review(POD.validate_path, edited(GROUPED, "labels", GROUP, None), old=GROUPED)
    assert response["allowed"] is False
    assert f'metadata.labels[{GROUP}]: Invalid value: "": field is immutable' in message(response)


def test_other_labels_of_a_held_pod_may_change() -> None:
    assert review(POD.validate_path, edited(HELD, "labels", "team", "a"), old=HELD)["allowed"] is True


def test_removing_the_labels_first_and_the_gates_next_is_refused_at_both_steps() -> None:
    """The old code judged the gates by the OLD object's managed label: labels first, gates next."""
    step_one = edited(edited(HELD, "labels", MANAGED, None), "labels", QUEUE, None)
    assert review(POD.validate_path, step_one, old=HELD)["allowed"] is False
    # had step one got in (the webhook down, a bypass): the gates still stay until the controller lifts them
    response = review(POD.validate_path, ungated(step_one), old=step_one)
    assert response["allowed"] is False
    assert f"spec.schedulingGates: Forbidden: only toposched's controller may remove {ADMISSION}, {TOPOLOGY}" \
        in message(response)
    assert review(POD.validate_path, ungated(step_one), old=step_one, user=CONTROLLER)["allowed"] is True


def test_a_statefulset_pod_held_for_its_parent_keeps_its_gates() -> None:
    """Managed label, no queue label yet: judged on UPDATE (its own validating webhook)."""
    pod = mutated(make_pod({}, {PARENT: "statefulset"}))
    assert pod["spec"]["schedulingGates"]
    assert review(POD.validate_path, ungated(pod), old=pod)["allowed"] is False
    hooks = {h["name"]: h for h in configs.validating_configuration(configs.url_client_config("https://x"))["webhooks"]}
    hook = hooks["vpod-managed.toposched.io"]
    assert hook["rules"][0]["operations"] == ["UPDATE"] and hook["failurePolicy"] == "Fail"
    assert hook["objectSelector"]["matchExpressions"][0] == {"key": MANAGED, "operator": "Exists"}
    gated = hooks["vpod-gated.toposched.io"]  # labels stripped past the webhook: the old gates select it
    assert "objectSelector" not in gated and gated["rules"][0]["operations"] == ["UPDATE"]
    assert [c["name"] for c in gated["matchConditions"]] == ["not-toposched-controller", "holds-a-kueue-gate"]
    expression = gated["matchConditions"][1]["expression"]
    assert ADMISSION in expression and TOPOLOGY in expression


# ---- the role hash --------------------------------------------------------------------------------

def test_the_role_hash_is_always_the_webhooks_at_create() -> None:
    pod = make_pod({QUEUE: "q", GROUP: "g"}, {TOTAL: "2", ROLE_HASH: "leader"})
    out = patched(pod, review(POD.mutate_path, pod, "CREATE"))
    assert out["metadata"]["annotations"][ROLE_HASH] == role_hash(pod["spec"]) != "leader"


# ---- the queue label of jobs, LeaderWorkerSets, Deployments, StatefulSets -------------------------

def job(suspended: bool, queue: str | None = "q", scheduler: str = "toposched") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": {QUEUE: queue} if queue else {}},
            "spec": {"suspend": suspended, "template": {"spec": {"schedulerName": scheduler, "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}}


@pytest.mark.parametrize("queue", [None, "other"])
def test_a_running_jobs_queue_label_is_immutable(queue: str | None) -> None:
    response = review(BATCH_JOB.validate_path, job(False, queue), old=job(False))
    assert response["allowed"] is False
    assert f'metadata.labels[{QUEUE}]: Invalid value: {json.dumps(queue or "")}: field is immutable' \
        in message(response)


def test_a_suspended_job_may_change_queue_unless_the_namespace_has_a_default_queue() -> None:
    assert review(BATCH_JOB.validate_path, job(True, "other"), old=job(True))["allowed"] is True
    assert review(BATCH_JOB.validate_path, job(True, None), old=job(True))["allowed"] is True
    view = ClusterView(local_queues={"ns/default": {"metadata": {"name": "default", "namespace": "ns"}}})
    response = review(BATCH_JOB.validate_path, job(True, None), old=job(True), view=view)
    assert response["allowed"] is False
    assert f'metadata.labels[{QUEUE}]: Invalid value: "": queue-name must not be empty in namespace with default ' \
        "queue" in message(response)


def template_obj(kind: str, ready: int = 0, queue: str | None = "q", scheduler: str = "toposched",
                 stamped: bool = True) -> dict[str, Any]:
    labels = {MANAGED: "true", **({QUEUE: queue} if queue else {})} if stamped else {}
    annotations = {PARENT: kind.lower()} if stamped else {}
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "s", "namespace": "ns", "labels": {QUEUE: queue} if queue else {}},
            "spec": {"replicas": 2, "template": {"metadata": {"labels": labels, "annotations": annotations},
                                                 "spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]}}},
            "status": {"readyReplicas": ready}}


@pytest.mark.parametrize("kind", [DEPLOYMENT, STATEFULSET])
def test_a_deployment_or_statefulset_keeps_its_queue_label_as_kueue_says(kind: Any) -> None:
    """Kueue: immutable while a pod is ready (old status.readyReplicas), and never removed."""
    removed = review(kind.validate_path, template_obj(kind.kind, 0, None), old=template_obj(kind.kind, 0))
    assert removed["allowed"] is False and "field is immutable" in message(removed)
    moved = review(kind.validate_path, template_obj(kind.kind, 2, "other"), old=template_obj(kind.kind, 2))
    assert moved["allowed"] is False and "field is immutable" in message(moved)
    assert review(kind.validate_path, template_obj(kind.kind, 0, "other"), old=template_obj(kind.kind, 0))["allowed"]


def lws(queue: str | None = "q", scheduler: str = "toposched", stamped: bool = True) -> dict[str, Any]:
    annotations = {PARENT: "leaderworkerset.x-k8s.io/leaderworkerset",
                   "kueue.x-k8s.io/pod-group-serving": "true"} if stamped else {}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "l", "namespace": "ns", "labels": {QUEUE: queue} if queue else {}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
                "metadata": {"annotations": annotations},
                "spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]}}}}}


def test_a_leaderworkersets_queue_label_is_always_immutable() -> None:
    response = review(LEADERWORKERSET.validate_path, lws(None), old=lws())
    assert response["allowed"] is False and "field is immutable" in message(response)


# ---- the stamps re-applied on UPDATE ---------------------------------------------------------------

def test_a_leaderworkerset_updated_to_the_default_scheduler_is_stamped_back_with_a_warning() -> None:
    tampered = lws(scheduler="default-scheduler", stamped=False)
    response = review(LEADERWORKERSET.mutate_path, tampered, old=lws())
    out = patched(tampered, response)
    template = out["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert template["spec"]["schedulerName"] == "toposched"
    assert template["metadata"]["annotations"][PARENT] == "leaderworkerset.x-k8s.io/leaderworkerset"
    assert any("'default-scheduler' replaced by 'toposched'" in w for w in response["warnings"])
    assert not review(LEADERWORKERSET.mutate_path, out, old=lws()).get("patch")  # idempotent


@pytest.mark.parametrize("kind", [DEPLOYMENT, STATEFULSET])
def test_a_deployment_or_statefulset_template_is_stamped_again_on_update(kind: Any) -> None:
    tampered = template_obj(kind.kind, scheduler="default-scheduler", stamped=False)
    response = review(kind.mutate_path, tampered, old=template_obj(kind.kind))
    out = patched(tampered, response)
    template = out["spec"]["template"]
    assert template["spec"]["schedulerName"] == "toposched"
    assert template["metadata"]["annotations"][PARENT] == kind.kind.lower()
    assert template["metadata"]["labels"][MANAGED] == "true"
    if kind is DEPLOYMENT:
        assert template["metadata"]["labels"][QUEUE] == "q"
    assert response["warnings"]
    assert not review(kind.mutate_path, out, old=template_obj(kind.kind)).get("patch")  # idempotent


def test_a_queued_jobsets_templates_get_the_scheduler_back_on_update() -> None:
    def jobset(scheduler: str) -> dict[str, Any]:
        return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": "js", "namespace": "ns", "labels": {QUEUE: "q"}},
                "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                    "template": {"spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]}}}}}]}}
    response = review(JOBSET.mutate_path, jobset("default-scheduler"), old=jobset("toposched"))
    out = patched(jobset("default-scheduler"), response)
    assert out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["schedulerName"] == "toposched"


def test_a_job_created_outside_the_queue_is_not_stamped_on_update() -> None:
    """A batch Job's template is immutable: only a job stamped at CREATE is stamped again."""
    assert not review(BATCH_JOB.mutate_path, job(True, "q", "default-scheduler"),
                      old=job(True, None, "default-scheduler")).get("patch")


def test_the_update_hooks_skip_the_controller_and_only_queued_objects() -> None:
    hooks = configs.mutating_configuration(configs.url_client_config("https://x"), controller_users=["ctl"])
    update = [h for h in hooks["webhooks"] if h["name"].endswith("-update.toposched.io")]
    assert {h["name"] for h in update} == {f"m{k.lower()}-update.toposched.io" for k in (
        "Job", "JobSet", "PyTorchJob", "MPIJob", "LeaderWorkerSet", "TrainJob", "RayJob", "RayCluster", "RayService",
        "HyperPodPyTorchJob", "Deployment", "StatefulSet")}
    for hook in update:
        assert hook["rules"][0]["operations"] == ["UPDATE"] and hook["reinvocationPolicy"] == "IfNeeded"
        assert hook["matchConditions"][0]["expression"] == '!(request.userInfo.username in ["ctl"])'
        assert hook["objectSelector"]["matchExpressions"] == [{"key": QUEUE, "operator": "Exists"}]
