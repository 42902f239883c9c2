"""The pod webhook path (admission/pods.py) as Kueue v0.17.0's pod webhook: which pods are held,
the gates, labels, finalizer and role hash it adds (cases of Kueue's pod_webhook_test.go restated:
role hash a9f06f3a for Kueue's test pod), and its validation messages."""

from __future__ import annotations

import base64
import json
from typing import Any

from admission.mutation import apply_patch
from admission.pods import PodContext, mutate_pod, validate_pod
from admission.review import answer
from admission.view import ClusterView
from scheduler.adapter.kinds.governance import Governance

QUEUE, MANAGED = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/managed"
GROUP, TOTAL = "kueue.x-k8s.io/pod-group-name", "kueue.x-k8s.io/pod-group-total-count"


def make_pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    """Kueue's testingpod.MakePod: one container ``c``, image ``pause``, empty requests."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "test-pod", "namespace": "ns", "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {}, "limits": {}}}], **spec}}


DEFAULT = PodContext()


def mutated(pod: dict[str, Any], ctx: PodContext = DEFAULT) -> dict[str, Any]:
    return apply_patch(pod, mutate_pod(pod, "CREATE", ctx).patch)


def gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or ()]


def test_a_queued_pod_is_gated_labelled_finalized_and_hashed() -> None:
    out = mutated(make_pod({QUEUE: "test-queue"}))
    assert gates(out) == ["kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"]
    assert out["metadata"]["labels"] == {QUEUE: "test-queue", MANAGED: "true"}
    assert out["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert out["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "a9f06f3a"
    assert out["spec"]["schedulerName"] == "toposched"
    assert mutate_pod(out, "CREATE", PodContext()).patch == []  # idempotent (reinvocation)


def test_a_pod_without_queue_is_left_alone_unless_the_namespace_has_a_default_queue() -> None:
    pod = make_pod()
    assert mutate_pod(pod, "CREATE", PodContext()).patch == []
    out = mutated(pod, PodContext(default_local_queue=True))
    assert out["metadata"]["labels"][QUEUE] == "default" and "kueue.x-k8s.io/admission" in gates(out)
    assert mutated(pod, PodContext(manage_without_queue_name=True))["metadata"]["labels"] == {MANAGED: "true"}


def test_pods_of_governed_jobs_and_unmanaged_namespaces_are_left_alone() -> None:
    pod = make_pod({QUEUE: "q"})
    assert mutate_pod(pod, "CREATE", PodContext(governed_owner=True)).patch == []
    assert mutate_pod(pod, "CREATE", PodContext(namespace_managed=False)).patch == []
    assert mutate_pod(pod, "UPDATE", PodContext()).patch == []


def test_a_pod_suspended_by_its_parent_is_gated_without_label_or_finalizer() -> None:
    """Kueue: SuspendedByParent + Queue -> gate and role hash; no finalizer (the gate
    SkipFinalizersForPodsSuspendedByParent is on by default in v0.17)."""
    out = mutated(make_pod({QUEUE: "test-queue"}, {"kueue.x-k8s.io/pod-suspending-parent": "deployment"}))
    assert gates(out) == ["kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"]
    assert "finalizers" not in out["metadata"] and MANAGED not in out["metadata"]["labels"]
    assert out["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "a9f06f3a"
    # even in a namespace toposched does not manage, or without a queue label
    assert mutate_pod(make_pod(annotations={"kueue.x-k8s.io/pod-suspending-parent": "statefulset"}), "CREATE",
                      PodContext(namespace_managed=False)).patch != []
    # LeaderWorkerSet pods are held by the extender today: no gate that nothing would remove
    lws = make_pod({QUEUE: "q"}, {"kueue.x-k8s.io/pod-suspending-parent": "leaderworkerset.x-k8s.io/leaderworkerset"})
    assert mutate_pod(lws, "CREATE", PodContext()).patch == []


def test_pod_index_label_copied_and_existing_gates_kept_and_other_scheduler_warned() -> None:
    pod = make_pod({QUEUE: "q", "apps.kubernetes.io/pod-index": "3"},
                   {"kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index"},
                   schedulingGates=[{"name": "other"}], schedulerName="volcano")
    mutation = mutate_pod(pod, "CREATE", PodContext())
    out = apply_patch(pod, mutation.patch)
    assert out["metadata"]["labels"]["kueue.x-k8s.io/pod-group-pod-index"] == "3"
    assert gates(out) == ["other", "kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"]
    assert mutation.warnings == ["toposched: spec.schedulerName 'volcano' replaced by 'toposched' "
                                 "(pods of a Kueue queue are placed by toposched)"]


def messages(pod: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [str(e) for e in validate_pod(pod, old).errors]


def test_validation_messages_are_kueues() -> None:
    assert messages(make_pod({MANAGED: "false"})) == [
        "metadata.labels[kueue.x-k8s.io/managed]: Forbidden: managed label value can only be 'true'"]
    both = ("both the 'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' "
            "label should be set")
    assert messages(make_pod(annotations={TOTAL: "2"})) == [
        f"metadata.labels[kueue.x-k8s.io/pod-group-name]: Required value: {both}"]
    assert messages(make_pod({GROUP: "g"})) == [
        f"metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: {both}"]
    assert messages(make_pod({GROUP: "g"}, {TOTAL: "0"})) == [
        'metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Invalid value: "0": incorrect annotation '
        "value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be greater than zero"]
    [bad_name] = messages(make_pod({GROUP: "Bad_Name"}, {TOTAL: "2"}))
    assert bad_name.startswith('metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "Bad_Name": '
                               "a lowercase RFC 1123 subdomain must consist of")
    assert messages(make_pod({GROUP: "g"}, {TOTAL: "2"})) == []


def test_update_group_immutable_and_unretriable_stays() -> None:
    old = make_pod({GROUP: "g"}, {TOTAL: "2", "kueue.x-k8s.io/retriable-in-group": "false"})
    assert messages(make_pod({GROUP: "h"}, {TOTAL: "2", "kueue.x-k8s.io/retriable-in-group": "false"}), old) == [
        'metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "h": field is immutable']
    assert messages(make_pod({GROUP: "g"}, {TOTAL: "2"}), old) == [
        "metadata.annotations[kueue.x-k8s.io/retriable-in-group]: Forbidden: unretriable pod group can't be "
        "converted to retriable"]


def test_topology_annotations_checked_like_a_template() -> None:
    [error] = messages(make_pod({QUEUE: "q"}, {"kueue.x-k8s.io/podset-requried-topology": "x"}))
    assert "unknown Kueue pod set annotation" in error
    assert "did you mean kueue.x-k8s.io/podset-required-topology" in error


# ---- through the AdmissionReview: the webhook's /mutate--v1-pod and /validate--v1-pod paths

def review(path: str, pod: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None,
           owners: Any = None, governance: Any = None, user: str = "alice") -> dict[str, Any]:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": operation, "namespace": "ns", "userInfo": {"username": user},
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "object": pod, "oldObject": old}}
    kwargs = {"governance": governance} if governance is not None else {}
    code, out = answer(path, json.dumps(body).encode(), ClusterView(owners=owners), **kwargs)
    assert code == 200
    response: dict[str, Any] = out["response"]
    return response


def patched(pod: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    ops = json.loads(base64.b64decode(response["patch"])) if response.get("patch") else []
    return apply_patch(pod, ops)


def owned_by(pod: dict[str, Any], api_version: str, kind: str, uid: str = "o-1") -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "owner", "uid": uid,
                                           "controller": True}]
    return pod


def owner(api_version: str, kind: str, queued: bool = True) -> Any:
    obj = {"apiVersion": api_version, "kind": kind,
           "metadata": {"name": "owner", "namespace": "ns", "uid": "o-1", "labels": {QUEUE: "q"} if queued else {}}}
    return lambda _ns, ref: obj if ref.kind == kind else None


def test_the_webhook_gates_a_queued_pod_and_leaves_a_queued_jobs_pod_to_its_job() -> None:
    pod = make_pod({QUEUE: "q"})
    assert gates(patched(pod, review("/mutate--v1-pod", pod))) == ["kueue.x-k8s.io/admission",
                                                                   "kueue.x-k8s.io/topology"]
    job_pod = owned_by(make_pod({QUEUE: "q"}), "batch/v1", "Job")
    assert "patch" not in review("/mutate--v1-pod", job_pod, owners=owner("batch/v1", "Job"))
    # a forged owner (the Job under that name has another uid) leaves the pod managed on its own
    forged = owned_by(make_pod({QUEUE: "q"}), "batch/v1", "Job", uid="other")
    assert gates(patched(forged, review("/mutate--v1-pod", forged, owners=owner("batch/v1", "Job"))))


def test_an_external_frameworks_pod_is_its_controllers_never_a_second_workload() -> None:
    """Kueue registers the external GVK so its pods are not plain pods: no pod Workload of its own."""
    aw = ("workload.codeflare.dev", "v1beta2", "AppWrapper")
    pod = owned_by(make_pod({QUEUE: "q"}), "workload.codeflare.dev/v1beta2", "AppWrapper")
    lookup = owner("workload.codeflare.dev/v1beta2", "AppWrapper")
    assert gates(patched(pod, review("/mutate--v1-pod", pod, owners=lookup)))  # not listed: a plain pod
    external = Governance(external=frozenset({aw}))
    assert "patch" not in review("/mutate--v1-pod", pod, owners=lookup, governance=external)


def test_only_the_controller_releases_kueues_gates() -> None:
    held = mutated(make_pod({QUEUE: "q"}))
    released = {**held, "spec": {**held["spec"], "schedulingGates": []}}
    refused = review("/validate--v1-pod", released, "UPDATE", old=held)
    assert refused["allowed"] is False
    assert "spec.schedulingGates: Forbidden: only toposched's controller may remove kueue.x-k8s.io/admission, " \
           "kueue.x-k8s.io/topology from a managed pod" in refused["status"]["message"]
    controller = "system:serviceaccount:toposched-system:toposched-controller"
    assert review("/validate--v1-pod", released, "UPDATE", old=held, user=controller)["allowed"] is True


def test_a_leaderworkerset_pod_labelled_into_its_group_passes_validation() -> None:
    """Its template's PodSet group annotation pairs the leader's and workers' pod sets: judged on
    the LeaderWorkerSet, not on each pod (the controller's labelling update must pass)."""
    pod = make_pod({QUEUE: "q", MANAGED: "true", GROUP: "leaderworkerset-vllm-0-abcde",
                    "kueue.x-k8s.io/prebuilt-workload-name": "leaderworkerset-vllm-0-abcde"},
                   {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3",
                    "kueue.x-k8s.io/podset-group-name": "serving", TOTAL: "4"})
    assert validate_pod(pod, make_pod()).allowed
