"""The default deny (issue 31, item 5): a queued object of a kind toposched does not govern is
refused by the webhook with one line naming the gap, unless the admin lists the kind in the
Kueue Configuration's ``integrations.externalFrameworks``; pods carrying the queue label whose
owner is not governed are gated by the pod integration, never run."""

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
from scheduler.core.config import KueueConfig

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


POD_SPEC = {"containers": [{"name": "c", "image": "busybox"}]}


def with_pods(o: dict[str, Any]) -> dict[str, Any]:
    """The object of a CRD that runs pods (a pod template in its spec)."""
    return {**o, "spec": {"workers": [{"replicas": 2, "template": {"spec": POD_SPEC}}]}}


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


AW = ("workload.codeflare.dev/v1beta2", "AppWrapper")


def test_a_queued_appwrapper_is_refused_with_the_gap_and_what_to_do() -> None:
    message = refusal(decide(obj(*AW)))
    assert message == (
        "workload.codeflare.dev/v1beta2 AppWrapper is not governed by toposched (no integration built: no AppWrapper "
        "peer runs here to build it against): remove the kueue.x-k8s.io/queue-name label to run it outside the queue, "
        "or, if a controller of its own creates its Workloads, list AppWrapper.v1beta2.workload.codeflare.dev in the "
        "Kueue Configuration's integrations.externalFrameworks")
    assert refusal(decide(obj("sparkoperator.k8s.io/v1beta2", "SparkApplication"))).startswith(
        "sparkoperator.k8s.io/v1beta2 SparkApplication is not governed by toposched (no integration built: no Spark "
        "operator peer runs here")


def test_the_new_kinds_are_governed_now() -> None:
    """Issue 31: TrainJob, Ray, HyperPodPyTorchJob, pods, Deployments and StatefulSets pass the
    default deny (their own webhooks judge them)."""
    for api_version, kind in (("trainer.kubeflow.org/v1alpha1", "TrainJob"), ("ray.io/v1", "RayJob"),
                              ("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayService"),
                              ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob"), ("v1", "Pod"),
                              ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")):
        assert decide(obj(api_version, kind))["allowed"] is True, kind


def test_an_external_framework_passes_in_either_spelling_and_a_near_miss_is_named() -> None:
    external = Governance(external=frozenset({("workload.codeflare.dev", "v1beta2", "AppWrapper")}))
    assert decide(obj(*AW), governance=external)["allowed"] is True
    near = Governance(external=frozenset({("workload.codeflare.dev", "v1beta2", "Appwrapper")}))
    message = refusal(decide(obj(*AW), governance=near))
    assert "listed there is Appwrapper.v1beta2.workload.codeflare.dev, which differs in case" in message
    # AWS's spelling of the HyperPod kind stands for the kind the API server has
    aws = Governance.from_config(KueueConfig(external_frameworks=(
        ("sagemaker.amazonaws.com", "v1", "HyperPodPytorchJob"),)))
    assert decide(obj("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob"), governance=aws)["allowed"] is True
    assert [k.kind for k in aws.external_kinds()] == ["HyperPodPyTorchJob"]


def test_a_deployments_replicaset_passes_through_it() -> None:
    """The ReplicaSet carries the template's queue label (Kueue's stamp): governed through its
    Deployment, resolved by uid; with another uid it is refused."""
    deployment = obj("apps/v1", "Deployment", "web", uid="d-1")
    rs = obj("apps/v1", "ReplicaSet", "web-7c9", owner=ref_to(deployment), uid="rs-1")
    assert decide(rs, deployment)["allowed"] is True
    forged = {**deployment, "metadata": {**deployment["metadata"], "uid": "other"}}
    assert refusal(decide(rs, forged)).startswith("apps/v1 ReplicaSet (controlled by apps/v1 Deployment web)")


def test_a_queued_object_controlled_by_an_unqueued_parent_is_refused_resolved_by_uid() -> None:
    parent = obj(*AW, "aw", labels={}, uid="a-1")
    child = with_pods(obj("example.com/v1", "Thing", "t", owner=ref_to(parent)))
    assert refusal(decide(child, parent)).startswith(
        "example.com/v1 Thing (controlled by workload.codeflare.dev/v1beta2 AppWrapper aw) is not governed")


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
    ("labelled before this update", obj(*AW), {"operation": "UPDATE", "old": obj(*AW)}),
    ("the controller labels an object", with_pods(obj("example.com/v1", "Thing")), {
        "operation": "UPDATE", "user": CONTROLLER, "old": with_pods(obj("example.com/v1", "Thing", labels={}))}),
    ("deletes", obj(*AW), {"operation": "DELETE"}),
])
def test_what_passes(case: str, o: dict[str, Any], kwargs: dict[str, Any]) -> None:
    assert decide(o, **kwargs)["allowed"] is True, case


def test_adding_the_label_in_an_update_is_judged_like_a_create() -> None:
    assert refusal(decide(obj(*AW), operation="UPDATE", old=obj(*AW, labels={})))


def test_an_unknown_kind_that_runs_pods_is_named_with_its_pod_template() -> None:
    """Fail closed: a CRD nobody here knows whose object holds a pod template runs pods outside
    the queue; the line names the field."""
    assert refusal(decide(with_pods(obj("example.com/v1", "Trainer")))) == (
        "example.com/v1 Trainer is not governed by toposched (not a kind Kueue integrates, and it runs pods: "
        "spec.workers[0].template is a pod template): remove the kueue.x-k8s.io/queue-name label to run it outside "
        "the queue, or, if a controller of its own creates its Workloads, list Trainer.v1.example.com in the Kueue "
        "Configuration's integrations.externalFrameworks")


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
    assert refusal(decide(obj(*AW), user=CONTROLLER))


def test_an_external_or_disabled_kinds_own_webhook_paths_leave_it_alone() -> None:
    """Listed in externalFrameworks, the HyperPodPyTorchJob is its operator's: toposched's mutating
    webhook does not suspend it (the operator's does), nor does its validation judge it."""
    job = obj("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob")
    job["spec"] = {"replicaSpecs": [{"name": "pod", "replicas": 1, "template": {"spec": {"containers": []}}}]}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "namespace": NS, "userInfo": {"username": "alice"}, "object": job}}
    path = "/mutate-sagemaker-amazonaws-com-v1-hyperpodpytorchjob"
    native = review.answer(path, json.dumps(body).encode(), ClusterView())[1]["response"]
    assert native.get("patch")  # governed natively: created suspended
    aws = Governance.from_config(KueueConfig(external_frameworks=(
        ("sagemaker.amazonaws.com", "v1", "HyperPodPytorchJob"),)))
    external = review.answer(path, json.dumps(body).encode(), ClusterView(), governance=aws)[1]["response"]
    assert external == {"uid": "u", "allowed": True}
    # its validating path applies the default deny (the catch-all leaves the registry's kinds to it):
    # listed in externalFrameworks it passes unjudged
    vpath = "/validate-sagemaker-amazonaws-com-v1-hyperpodpytorchjob"
    assert review.answer(vpath, json.dumps(body).encode(), ClusterView(), governance=aws)[1]["response"] == \
        {"uid": "u", "allowed": True}


# Issue 40 item 1: the default deny refuses what would run pods outside the queue, not the
# objects a Helm chart's or a kustomization's common labels reach.

def allowed(resp: dict[str, Any]) -> list[str]:
    """The warnings of an allowed answer."""
    assert resp["allowed"] is True, resp
    return list(resp.get("warnings") or [])


def no_effect_warning(spelled: str) -> str:
    return (f"toposched: the kueue.x-k8s.io/queue-name label has no effect on a {spelled}: it runs no pods, so "
            "there is nothing to queue (Kueue ignores it too)")


RUN_NOTHING = [
    ("v1", "Service", {"spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
    ("v1", "ConfigMap", {"data": {"containers": "a string, not a pod template"}}),
    ("v1", "Secret", {"type": "Opaque", "stringData": {"password": "x"}}),
    ("v1", "PersistentVolumeClaim", {"spec": {"accessModes": ["ReadWriteOnce"],
                                              "resources": {"requests": {"storage": "1Gi"}}}}),
    ("networking.k8s.io/v1", "NetworkPolicy", {"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
    ("v1", "ServiceAccount", {}),
    ("rbac.authorization.k8s.io/v1", "Role", {"rules": [{"apiGroups": [""], "resources": ["pods"],
                                                          "verbs": ["get"]}]}),
    ("networking.k8s.io/v1", "Ingress", {"spec": {"rules": [{"host": "x.example.com"}]}}),
    ("v1", "PodTemplate", {"template": {"spec": POD_SPEC}}),  # holds a template, runs nothing
]


@pytest.mark.parametrize("api_version, kind, body", RUN_NOTHING, ids=[k for _, k, _ in RUN_NOTHING])
def test_a_labelled_object_that_runs_no_pods_passes_with_a_warning(api_version: str, kind: str,
                                                                  body: dict[str, Any]) -> None:
    """Refused on main ("list Service.v1 in externalFrameworks"): a chart's common labels made
    installing toposched break every release that carries them."""
    o = {**obj(api_version, kind), **body}
    spelled = f"{api_version} {kind}"
    assert allowed(decide(o)) == [no_effect_warning(spelled)]
    # adding the label in an update, and every later update a user makes, is told the same
    assert allowed(decide(o, operation="UPDATE", old={**o, "metadata": {**o["metadata"], "labels": {}}})) == \
        [no_effect_warning(spelled)]
    assert allowed(decide(o, operation="UPDATE", old=o)) == [no_effect_warning(spelled)]


def test_an_object_that_runs_no_pods_and_a_controller_wrote_passes_silently() -> None:
    """The EndpointSlice controller copies a Service's labels onto its slices: nobody reads a
    warning sent to a controller, and its owner's owner is never looked up (no 503 to retry)."""
    service = obj("v1", "Service", "web", uid="s-1")
    slice_ = obj("discovery.k8s.io/v1", "EndpointSlice", "web-abc", owner=ref_to(service))

    def unreadable(namespace: str, ref: OwnerRef) -> Mapping[str, Any] | None:
        raise AssertionError("looked up")

    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "namespace": NS, "userInfo": {"username": "system:serviceaccount:x:y"},
        "kind": {"group": "discovery.k8s.io", "version": "v1", "kind": "EndpointSlice"}, "object": slice_}}
    _, out = review.answer(QUEUED_PATH, json.dumps(body).encode(), ClusterView(owners=unreadable))
    assert out["response"] == {"uid": "u", "allowed": True}
    assert allowed(decide(obj("v1", "Service"), user=CONTROLLER)) == []


def test_a_crd_object_without_a_pod_template_passes_with_a_warning() -> None:
    cert = {**obj("cert-manager.io/v1", "Certificate"), "spec": {"secretName": "tls", "dnsNames": ["a.example"],
                                                                  "template": {"labels": {"a": "b"}}}}
    assert allowed(decide(cert)) == [no_effect_warning("cert-manager.io/v1 Certificate")]


@pytest.mark.parametrize("spec, at", [
    ({"template": {"metadata": {}, "spec": POD_SPEC}}, "spec.template"),
    ({"roles": [{"podTemplate": {"metadata": {}}}]}, "spec.roles[0].podTemplate"),
    ({"schedule": "* * * * *", "jobTemplate": {"spec": {}}}, "spec.jobTemplate"),
    ({"a": {"b": [{"c": {"containers": []}}]}}, "spec.a.b[0].c.containers"),
    ({"steps": [{"initContainers": [{"name": "i"}]}]}, "spec.steps[0].initContainers"),
    ({"runner": {"podSpec": {"nodeName": "n"}}}, "spec.runner.podSpec"),
])
def test_a_crd_object_with_a_pod_template_anywhere_is_refused_naming_it(spec: dict[str, Any], at: str) -> None:
    message = refusal(decide({**obj("example.com/v1", "Runner"), "spec": spec}))
    assert message.startswith(f"example.com/v1 Runner is not governed by toposched (not a kind Kueue integrates, "
                              f"and it runs pods: {at} is a pod template): remove the kueue.x-k8s.io/queue-name "
                              "label to run it outside the queue, or, if a controller of its own creates its "
                              "Workloads, list Runner.v1.example.com in"), message


def test_a_crd_object_too_deep_to_look_through_is_refused() -> None:
    """Fail closed: the object is the tenant's; a walk it could make endless or blind stops, and
    the object counts as running pods."""
    deep: dict[str, Any] = {"leaf": "x"}
    for _ in range(60):
        deep = {"n": deep}
    message = refusal(decide({**obj("example.com/v1", "Runner"), "spec": deep}))
    assert "(not a kind Kueue integrates, and the object is too deep or too large to look through for pod " \
           "templates, so it is taken to run pods)" in message
    wide = {"spec": {"items": [{"k": [i]} for i in range(30_000)]}}
    assert "too deep or too large" in refusal(decide({**obj("example.com/v1", "Runner"), **wide}))


def test_a_daemonset_is_refused_naming_the_gap() -> None:
    ds = {**obj("apps/v1", "DaemonSet"), "spec": {"template": {"spec": POD_SPEC}}}
    assert refusal(decide(ds)) == (
        "apps/v1 DaemonSet is not governed by toposched (Kueue does not govern DaemonSets: it runs a pod on every "
        "node it selects, outside the queue): remove the kueue.x-k8s.io/queue-name label to run it outside the queue")


def test_a_bare_replicaset_is_refused_and_pointed_at_deployments() -> None:
    assert refusal(decide(obj("apps/v1", "ReplicaSet"))) == (
        "apps/v1 ReplicaSet is not governed by toposched (Kueue does not govern ReplicaSets: it would run its pods "
        "outside the queue): queue its pods through a Deployment (Kueue's deployment integration), or remove the "
        "kueue.x-k8s.io/queue-name label to run it outside the queue")
    assert refusal(decide(obj("v1", "ReplicationController"))).startswith(
        "v1 ReplicationController is not governed by toposched (Kueue does not govern ReplicationControllers")


def cronjob(template_labels: dict[str, str] | None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}}}
    if template_labels is not None:
        template["metadata"] = {"labels": template_labels}
    return {**obj("batch/v1", "CronJob"), "spec": {"schedule": "*/5 * * * *", "jobTemplate": template}}


CRON_UNQUEUED = ("toposched: the kueue.x-k8s.io/queue-name label on a CronJob does not queue the Jobs it creates (they "
                 "take their labels from spec.jobTemplate.metadata.labels) and they will run outside the queue: to "
                 "queue them, put the label in spec.jobTemplate.metadata.labels")


def test_a_cronjob_labelled_on_itself_only_passes_with_how_to_queue_its_jobs() -> None:
    """Refused on main with advice that was wrong ("remove the label to run it outside the queue")."""
    assert allowed(decide(cronjob(None))) == [CRON_UNQUEUED]
    assert allowed(decide(cronjob({"app": "x"}))) == [CRON_UNQUEUED]
    assert allowed(decide(cronjob({Q: ""}))) == [CRON_UNQUEUED]


def test_a_cronjob_whose_job_template_is_labelled_passes_silently() -> None:
    """Its Jobs carry the label and are governed by the Job webhooks."""
    assert allowed(decide(cronjob({Q: "lq"}))) == []
    only_pods = Governance(enabled_kinds(("pod",)))
    assert allowed(decide(cronjob({Q: "lq"}), governance=only_pods)) == [
        "toposched: the Jobs this CronJob creates carry the kueue.x-k8s.io/queue-name label and will be refused: "
        "batch/job is not in the Kueue Configuration's integrations.frameworks"]


def test_a_hostile_cronjob_body_is_read_safely() -> None:
    for spec in ("x", {"jobTemplate": "x"}, {"jobTemplate": {"metadata": "x"}},
                 {"jobTemplate": {"metadata": {"labels": ["x"]}}}):
        assert allowed(decide({**obj("batch/v1", "CronJob"), "spec": spec})) == [CRON_UNQUEUED]
