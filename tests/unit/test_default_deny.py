"""The default deny (issue 31, item 5): a queued object of a kind toposched does not govern is
refused by the webhook with one line naming the gap, unless the admin lists the kind in the
Kueue Configuration's ``integrations.externalFrameworks``; pods carrying the queue label whose
owner is not governed are refused (gated, once the pod integration is built), never run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from admission import configs, review
from admission.governance import QUEUED_PATH
from admission.review import GOVERN_ALL
from admission.view import ClusterView
from scheduler.adapter.kinds.governance import Governance
from scheduler.adapter.kinds.ownership import OwnerRef
from scheduler.adapter.kinds.registry import enabled_kinds
from scheduler.adapter.kueue_config import ConfigError, load_kueue_config_text

Q = "kueue.x-k8s.io/queue-name"
NS = "team-a"
CONTROLLER = "system:serviceaccount:toposched-system:toposched-controller"


def obj(api_version: str, kind: str, name: str = "x", labels: dict[str, str] | None = None,
        owner: dict[str, Any] | None = None, uid: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {Q: "lq"} if labels is None else labels}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    if uid:
        meta["uid"] = uid
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def ref_to(o: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"]}


class Cluster:
    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {(o["kind"], o["metadata"]["name"]): o for o in objs}

    def __call__(self, namespace: str, ref: OwnerRef) -> Mapping[str, Any] | None:
        return self.objs.get((ref.kind, ref.name))


def decide(o: dict[str, Any], *in_cluster: dict[str, Any], governance: Governance = GOVERN_ALL,
           operation: str = "CREATE", old: dict[str, Any] | None = None, user: str = "alice") -> dict[str, Any]:
    group, _, version = o["apiVersion"].rpartition("/")
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": operation, "namespace": NS, "userInfo": {"username": user},
        "kind": {"group": group, "version": version, "kind": o["kind"]}, "object": o, "oldObject": old}}
    code, out = review.answer(QUEUED_PATH, json.dumps(body).encode(), ClusterView(owners=Cluster(*in_cluster)),
                              governance=governance)
    assert code == 200
    resp: dict[str, Any] = out["response"]
    return resp


def refusal(resp: dict[str, Any]) -> str:
    assert resp["allowed"] is False, resp
    return str(resp["status"]["message"])


def test_a_queued_rayjob_is_refused_with_the_gap_and_what_to_do() -> None:
    message = refusal(decide(obj("ray.io/v1", "RayJob")))
    assert message == (
        "ray.io/v1 RayJob is not governed by toposched (no integration built: KubeRay): remove the "
        "kueue.x-k8s.io/queue-name label to run it outside the queue, or, if a controller of its own creates its "
        "Workloads, list RayJob.v1.ray.io in the Kueue Configuration's integrations.externalFrameworks")


def test_an_external_framework_passes_and_a_near_miss_in_spelling_is_named() -> None:
    ray = Governance(external=frozenset({("ray.io", "v1", "RayJob")}))
    assert decide(obj("ray.io/v1", "RayJob"), governance=ray)["allowed"] is True
    aws = Governance(external=frozenset({("sagemaker.amazonaws.com", "v1", "HyperPodPytorchJob")}))
    message = refusal(decide(obj("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob"), governance=aws))
    assert message.startswith("sagemaker.amazonaws.com/v1 HyperPodPyTorchJob is not governed by toposched")
    assert "list HyperPodPyTorchJob.v1.sagemaker.amazonaws.com in" in message
    assert "listed there is HyperPodPytorchJob.v1.sagemaker.amazonaws.com, which differs in case" in message


def test_a_bare_pod_or_a_deployments_pod_with_the_queue_label_is_refused() -> None:
    message = refusal(decide(obj("v1", "Pod")))
    assert message.startswith("v1 Pod is not governed by toposched (no integration built: Kueue's pod integration")
    deployment = obj("apps/v1", "Deployment", "web", uid="d-1")
    rs = obj("apps/v1", "ReplicaSet", "web-7c9", owner=ref_to(deployment), uid="rs-1")
    message = refusal(decide(obj("v1", "Pod", "web-7c9-x", owner=ref_to(rs)), rs, deployment))
    assert message.startswith("v1 Pod (controlled by apps/v1 ReplicaSet web-7c9) is not governed by toposched")
    assert refusal(decide(obj("apps/v1", "Deployment", "web"))).startswith(
        "apps/v1 Deployment is not governed by toposched (no integration built: Kueue's deployment integration")


def test_pods_of_a_queued_job_pass_resolved_by_uid() -> None:
    job = obj("batch/v1", "Job", "train", uid="j-1")
    pod = obj("v1", "Pod", "train-0", owner=ref_to(job))
    assert decide(pod, job)["allowed"] is True
    assert refusal(decide(pod, {**job, "metadata": {**job["metadata"], "uid": "other"}})).startswith(
        "v1 Pod (controlled by batch/v1 Job train) is not governed")
    unqueued = obj("batch/v1", "Job", "train", labels={}, uid="j-1")
    assert decide(pod, unqueued)["allowed"] is False
    jobset = obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", uid="js-1")
    child = obj("batch/v1", "Job", "js-workers-0", labels={}, owner=ref_to(jobset), uid="c-1")
    assert decide(obj("v1", "Pod", "js-workers-0-0", owner=ref_to(child)), child, jobset)["allowed"] is True


def test_leaderworkerset_pods_pass_through_their_statefulsets() -> None:
    """LWS: leader StatefulSet -> leader pod -> worker StatefulSet -> worker pod."""
    lws = obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "vllm", uid="l-1")
    leader_sts = obj("apps/v1", "StatefulSet", "vllm", labels={}, owner=ref_to(lws), uid="s-1")
    leader = obj("v1", "Pod", "vllm-0", owner=ref_to(leader_sts), uid="p-0")
    worker_sts = obj("apps/v1", "StatefulSet", "vllm-0", labels={}, owner=ref_to(leader), uid="s-2")
    worker = obj("v1", "Pod", "vllm-0-1", owner=ref_to(worker_sts))
    assert decide(worker, worker_sts, leader, leader_sts, lws)["allowed"] is True


def test_a_kind_left_out_of_integrations_frameworks_is_refused() -> None:
    only_jobs = Governance(enabled_kinds(("batch/job",)))
    message = refusal(decide(obj("kubeflow.org/v2beta1", "MPIJob"), governance=only_jobs))
    assert message == ("kubeflow.org/v2beta1 MPIJob is not governed by toposched (its integration kubeflow.org/mpijob "
                       "is not in the Kueue Configuration's integrations.frameworks): add kubeflow.org/mpijob to "
                       "integrations.frameworks, or remove the kueue.x-k8s.io/queue-name label")
    assert decide(obj("kubeflow.org/v2beta1", "MPIJob"))["allowed"] is True  # governed: its own webhook judges


def test_a_registry_kind_left_out_of_frameworks_is_refused_by_its_own_validating_webhook() -> None:
    """The catch-all leaves the registry's kinds to their own validating webhooks (one call per
    Job, not two), so those apply the default deny first, with the same line."""
    from scheduler.adapter.kinds.registry import BY_GROUP_KIND

    mpijob = BY_GROUP_KIND[("kubeflow.org", "MPIJob")]
    only_jobs = Governance(enabled_kinds(("batch/job",)))
    o = obj("kubeflow.org/v2beta1", "MPIJob")
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "namespace": NS, "userInfo": {"username": "alice"},
        "kind": {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"}, "object": o}}
    _, out = review.answer(mpijob.validate_path, json.dumps(body).encode(), ClusterView(), governance=only_jobs)
    assert refusal(out["response"]) == refusal(decide(o, governance=only_jobs))


def test_the_catch_all_leaves_the_registry_kinds_and_their_hooks_leave_the_controller() -> None:
    from scheduler.adapter.kinds.registry import KINDS

    hooks = {h["name"]: h for h in configs.validating_configuration(configs.url_client_config("https://x"),
                                                                     controller_users=["ctl"])["webhooks"]}
    (condition,) = hooks["vqueued.toposched.io"]["matchConditions"]
    for kind in KINDS:
        assert f'"{kind.group}/{kind.kind}"' in condition["expression"]
        assert hooks[f"v{kind.kind.lower()}.toposched.io"]["matchConditions"] == [
            {"name": "not-toposched-controller", "expression": '!(request.userInfo.username in ["ctl"])'}]
    assert condition["expression"].startswith("!((request.kind.group + '/' + request.kind.kind) in [")


@pytest.mark.parametrize("case, o, kwargs", [
    ("Kueue's own objects", obj("kueue.x-k8s.io/v1beta2", "Workload"), {}),
    ("labelled before this update", obj("ray.io/v1", "RayJob"), {"operation": "UPDATE",
                                                                  "old": obj("ray.io/v1", "RayJob")}),
    ("the controller labels a pod-group pod", obj("v1", "Pod"), {"operation": "UPDATE", "user": CONTROLLER,
                                                                  "old": obj("v1", "Pod", labels={})}),
    ("deletes", obj("ray.io/v1", "RayJob"), {"operation": "DELETE"}),
])
def test_what_passes(case: str, o: dict[str, Any], kwargs: dict[str, Any]) -> None:
    assert decide(o, **kwargs)["allowed"] is True, case


def test_adding_the_label_in_an_update_is_judged_like_a_create() -> None:
    assert refusal(decide(obj("ray.io/v1", "RayJob"), operation="UPDATE", old=obj("ray.io/v1", "RayJob", labels={})))


def test_an_unknown_kind_is_named_too() -> None:
    assert refusal(decide(obj("v1", "ConfigMap"))).startswith(
        "v1 ConfigMap is not governed by toposched (not a kind Kueue integrates)")


def test_the_catch_all_webhook_sees_only_queued_namespaced_objects_outside_system_namespaces() -> None:
    hooks = configs.validating_configuration(configs.url_client_config("https://x"), "toposched-system")["webhooks"]
    (hook,) = [h for h in hooks if h["name"] == "vqueued.toposched.io"]
    assert hook["rules"] == [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                              "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}]
    assert hook["objectSelector"] == {"matchExpressions": [{"key": Q, "operator": "Exists"}]}
    assert hook["failurePolicy"] == "Fail" and hook["clientConfig"]["url"] == f"https://x{QUEUED_PATH}"
    exempt = hook["namespaceSelector"]["matchExpressions"][0]
    assert exempt["operator"] == "NotIn" and {"kube-system", "toposched-system"} <= set(exempt["values"])


CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: [batch/job]
  externalFrameworks: {external}
"""


def test_external_frameworks_are_read_as_kueue_validates_them() -> None:
    loaded = load_kueue_config_text(CONFIG.format(external="[HyperPodPytorchJob.v1.sagemaker.amazonaws.com]"))
    assert loaded.config.external_frameworks == (("sagemaker.amazonaws.com", "v1", "HyperPodPytorchJob"),)
    assert not any("externalFrameworks" in f for f in loaded.not_supported)
    with pytest.raises(ConfigError, match=r"integrations.externalFrameworks\[0\]: Invalid value: \"RayJob.ray\": "
                                          r"must be format, 'Kind.version.group.com'"):
        load_kueue_config_text(CONFIG.format(external="[RayJob.ray]"))
    with pytest.raises(ConfigError, match=r"externalFrameworks\[1\]: Duplicate value"):
        load_kueue_config_text(CONFIG.format(external="[RayJob.v1.ray.io, RayJob.v1.ray.io]"))


def test_the_controller_identity_creates_nothing_ungoverned() -> None:
    """Its exemption is for labelling pods of pod groups (UPDATE), not for creating objects."""
    assert refusal(decide(obj("v1", "Pod"), user=CONTROLLER))
