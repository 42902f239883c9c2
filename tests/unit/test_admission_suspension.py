"""Only toposched's controller may unsuspend a queued Job, JobSet or PyTorchJob (issue 13, item 2
"quota bypass"): a user's ``suspend: true -> false`` is refused by the validating webhook with the
field and the fix; the controller's own unsuspend, other updates and unmanaged jobs pass."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from admission import review
from admission.suspension import DEFAULT_CONTROLLER_USERS, controller_username, unsuspend_errors
from admission.view import ClusterView
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.pytorchjob import PYTORCHJOB
from scheduler.core.workload import LABEL_QUEUE_NAME

CONTROLLER = "system:serviceaccount:toposched-system:toposched-controller"
PATHS = {"Job": BATCH_JOB.validate_path, "JobSet": JOBSET.validate_path, "PyTorchJob": PYTORCHJOB.validate_path}


def managed(kind: str, suspended: bool, queue: str | None = "lq") -> dict[str, Any]:
    """A queued job of ``kind`` with its suspend flag where that kind keeps it."""
    labels = {LABEL_QUEUE_NAME: queue} if queue else {}
    obj: dict[str, Any] = {"kind": kind, "metadata": {"name": "train", "namespace": "team-a", "labels": labels}}
    if kind == "PyTorchJob":
        obj["spec"] = {"runPolicy": {"suspend": suspended}, "pytorchReplicaSpecs": {}}
    elif kind == "JobSet":
        obj["spec"] = {"suspend": suspended, "replicatedJobs": []}
    else:
        obj["spec"] = {"suspend": suspended, "template": {"spec": {"containers": []}}}
    return obj


def update(kind: str, new: dict[str, Any], old: dict[str, Any], user: Any) -> dict[str, Any]:
    request: dict[str, Any] = {"uid": "u-1", "kind": {"kind": kind}, "operation": "UPDATE", "namespace": "team-a",
                               "object": new, "oldObject": old}
    if user is not None:
        request["userInfo"] = user
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def decide(kind: str, new: dict[str, Any], old: dict[str, Any], user: Any = None,
           controllers: frozenset[str] = DEFAULT_CONTROLLER_USERS) -> dict[str, Any]:
    code, out = review.answer(PATHS[kind], json.dumps(update(kind, new, old, user)).encode(), ClusterView(),
                              controller_users=controllers)
    assert code == 200 and out["response"]["uid"] == "u-1"
    return dict(out["response"])


def test_default_controller_is_the_deployed_service_account() -> None:
    assert controller_username() == CONTROLLER and DEFAULT_CONTROLLER_USERS == {CONTROLLER}


@pytest.mark.parametrize("kind, field", [("Job", "spec.suspend"), ("JobSet", "spec.suspend"),
                                         ("PyTorchJob", "spec.runPolicy.suspend")])
def test_a_user_unsuspending_a_queued_job_is_refused_naming_the_field_and_the_fix(kind: str, field: str) -> None:
    resp = decide(kind, managed(kind, False), managed(kind, True), {"username": "alice", "groups": ["devs"]})
    assert resp["allowed"] is False and resp["status"]["code"] == 403 and resp["status"]["reason"] == "Forbidden"
    message = resp["status"]["message"]
    assert message.startswith(f"{field}: Forbidden: only toposched's controller may unsuspend a queued {kind}")
    assert 'user "alice"' in message and "when the Workload is admitted" in message
    assert f"remove the {LABEL_QUEUE_NAME} label (queue \"lq\") to run it outside the queue" in message


@pytest.mark.parametrize("kind", ["Job", "JobSet", "PyTorchJob"])
def test_the_controller_may_unsuspend(kind: str) -> None:
    assert decide(kind, managed(kind, False), managed(kind, True), {"username": CONTROLLER})["allowed"] is True


def test_the_controller_identity_is_configurable() -> None:
    dev = frozenset({"toposched-admin"})
    assert decide("Job", managed("Job", False), managed("Job", True), {"username": "toposched-admin"},
                  dev)["allowed"] is True
    assert decide("Job", managed("Job", False), managed("Job", True), {"username": CONTROLLER}, dev)["allowed"] is False


def test_removing_the_suspend_field_is_unsuspending_too() -> None:
    new = managed("Job", False)
    del new["spec"]["suspend"]
    assert decide("Job", new, managed("Job", True), {"username": "alice"})["allowed"] is False
    new = managed("PyTorchJob", False)
    del new["spec"]["runPolicy"]
    assert decide("PyTorchJob", new, managed("PyTorchJob", True), {"username": "alice"})["allowed"] is False


@pytest.mark.parametrize("user", [None, {}, {"username": None}, {"username": 7}, "alice", ["alice"],
                                  {"username": ""}])
def test_a_review_without_a_usable_username_is_refused(user: Any) -> None:
    """Fail closed: no username is nobody, and nobody is the controller."""
    resp = decide("Job", managed("Job", False), managed("Job", True), user)
    assert resp["allowed"] is False and "spec.suspend: Forbidden" in resp["status"]["message"]


@pytest.mark.parametrize("name, new, old", [
    ("suspending", managed("Job", True), managed("Job", False)),
    ("staying suspended", managed("Job", True), managed("Job", True)),
    ("staying unsuspended", managed("Job", False), managed("Job", False)),
    ("leaving the queue while suspended", managed("Job", True, queue=None), managed("Job", True)),
    ("never queued", managed("Job", False, queue=None), managed("Job", True, queue=None)),
])
def test_other_updates_by_a_user_pass(name: str, new: dict[str, Any], old: dict[str, Any]) -> None:
    assert decide("Job", new, old, {"username": "alice"})["allowed"] is True, name


def test_leaving_the_queue_while_unsuspending_is_refused_as_kueue_does() -> None:
    """Kueue's validateUpdateForQueueName: the label is immutable once the job runs (issue 39)."""
    resp = decide("Job", managed("Job", False, queue=None), managed("Job", True), {"username": "alice"})
    assert resp["allowed"] is False
    assert f'metadata.labels[{LABEL_QUEUE_NAME}]: Invalid value: "": field is immutable' in resp["status"]["message"]


def test_joining_a_queue_while_unsuspending_is_refused() -> None:
    assert decide("Job", managed("Job", False), managed("Job", True, queue=None),
                  {"username": "alice"})["allowed"] is False


def test_a_jobset_child_job_is_unsuspended_by_the_jobset_controller() -> None:
    """Its JobSet is the managed object (and is guarded); the JobSet controller resumes the children."""
    child, old = managed("Job", False), managed("Job", True)
    for obj in (child, old):
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                               "name": "js", "uid": "x", "controller": True}]
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js", "uid": "x", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}}
    assert unsuspend_errors(BATCH_JOB, child, old, "system:serviceaccount:jobset-system:jobset-controller-manager",
                            DEFAULT_CONTROLLER_USERS, lambda namespace, ref: jobset) == []


def test_create_and_delete_are_not_judged_here() -> None:
    body = update("Job", managed("Job", False), managed("Job", True), {"username": "alice"})
    for operation in ("CREATE", "DELETE"):
        body["request"]["operation"] = operation
        _, out = review.answer(BATCH_JOB.validate_path, json.dumps(body).encode(), ClusterView())
        assert "spec.suspend" not in (out["response"].get("status") or {}).get("message", ""), operation


def test_the_mutating_path_does_not_judge_updates() -> None:
    """UPDATE is registered on the validating webhook only; the mutating path leaves it alone."""
    body = update("Job", managed("Job", False), managed("Job", True), {"username": "alice"})
    _, out = review.answer(BATCH_JOB.mutate_path, json.dumps(body).encode(), ClusterView())
    assert out["response"]["allowed"] is True


def test_update_is_registered_for_every_job_kind() -> None:
    from admission import configs  # a test helper import: configs pulls the Kubernetes client

    hooks = configs.validating_configuration(configs.url_client_config("https://x"))["webhooks"]
    for name in ("vjob.toposched.io", "vjobset.toposched.io", "vpytorchjob.toposched.io"):
        hook = next(h for h in hooks if h["name"] == name)
        assert "UPDATE" in hook["rules"][0]["operations"] and hook["failurePolicy"] == "Fail"


def test_the_old_object_is_not_modified() -> None:
    old = managed("Job", True)
    before = copy.deepcopy(old)
    unsuspend_errors(BATCH_JOB, managed("Job", False), old, "alice", DEFAULT_CONTROLLER_USERS)
    assert old == before
