"""Ownership resolved, not assumed (issue 30, finding 2): a queued Job whose controller owner
reference names a governed kind is taken out of the queue only when that owner exists with the
reference's uid, is of a governed kind and is itself queued (Kueue's
``FindAncestorJobManagedByKueue``, resolved by uid). A forged reference (``kubeflow.org/v2beta1
MPIJob``, any uid) leaves the Job queued like any other: suspended by the webhook, never
unsuspended by its user, given a Workload by the controller (tests/unit/kube/test_ownership.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from admission import review
from admission.mutation import apply_patch, mutate_job
from admission.suspension import DEFAULT_CONTROLLER_USERS, unsuspend_errors
from admission.view import ClusterView
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.ownership import (
    OwnerRef,
    OwnerUnreadable,
    managed_ancestor,
)
from scheduler.adapter.kinds.registry import KINDS

Q = "kueue.x-k8s.io/queue-name"
NS = "team-a"


def parent(kind: str = "MPIJob", api_version: str = "kubeflow.org/v2beta1", uid: str = "p-1",
           queued: bool = True) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "nccl", "namespace": NS, "uid": uid, "labels": {Q: "lq"} if queued else {}}}


def child(uid: str = "p-1", kind: str = "MPIJob", api_version: str = "kubeflow.org/v2beta1",
          suspend: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "launcher", "namespace": NS, "labels": {Q: "lq"}, "ownerReferences": [
                {"apiVersion": api_version, "kind": kind, "name": "nccl", "uid": uid, "controller": True}]},
            "spec": spec}


class Owners:
    """The objects the API server holds, by (kind, name); counts the reads."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        self.reads = 0

    def __call__(self, namespace: str, ref: OwnerRef) -> Mapping[str, Any] | None:
        self.reads += 1
        return self.objs.get((ref.kind, ref.name))


def view(*objs: dict[str, Any]) -> ClusterView:
    return ClusterView(owners=Owners(*objs))


def suspended(job: dict[str, Any], v: ClusterView | None) -> bool:
    return apply_patch(job, mutate_job(job, "CREATE", v).patch)["spec"].get("suspend") is True


@pytest.mark.parametrize("case, cluster", [
    ("no such MPIJob", view()),
    ("an MPIJob of that name with another uid", view(parent(uid="someone-else"))),
    ("the MPIJob exists but is not queued", view(parent(queued=False))),
    ("no way to read owners", None),
])
def test_a_forged_owner_reference_leaves_the_job_queued(case: str, cluster: ClusterView | None) -> None:
    assert suspended(child(), cluster), case


def test_a_child_of_a_queued_parent_is_governed_through_it() -> None:
    """The mpi-operator's launcher Job: its MPIJob exists with that uid and is queued."""
    assert not suspended(child(), view(parent()))
    js = parent("JobSet", "jobset.x-k8s.io/v1alpha2")
    assert not suspended(child(kind="JobSet", api_version="jobset.x-k8s.io/v1alpha2"), view(js))


def test_only_governed_kinds_at_their_version_are_owners() -> None:
    """Kueue matches the owner reference's apiVersion and kind exactly."""
    assert suspended(child(api_version="kubeflow.org/v1"), view(parent(api_version="kubeflow.org/v1")))
    assert suspended(child(kind="Deployment", api_version="apps/v1"), view(parent("Deployment", "apps/v1")))


def test_the_user_may_not_unsuspend_a_job_with_a_forged_owner() -> None:
    old, new = child(suspend=True), child(suspend=False)
    refused = unsuspend_errors(BATCH_JOB, new, old, "alice", DEFAULT_CONTROLLER_USERS, Owners())
    assert [e.path for e in refused] == ["spec.suspend"]
    assert unsuspend_errors(BATCH_JOB, new, old, "mpi-operator", DEFAULT_CONTROLLER_USERS, Owners(parent())) == []


def test_an_owner_that_cannot_be_read_refuses_the_review_with_retry() -> None:
    def broken(namespace: str, ref: OwnerRef) -> Mapping[str, Any] | None:
        raise OwnerUnreadable("reading kubeflow.org/v2beta1 MPIJob nccl: HTTP 500")

    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "namespace": NS, "object": child()}}
    _, out = review.answer(BATCH_JOB.mutate_path, json.dumps(body).encode(), ClusterView(owners=broken))
    resp = out["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 503
    assert "belongs to a queued owner" in resp["status"]["message"] and "retry" in resp["status"]["message"]


def test_the_walk_takes_the_top_most_queued_ancestor_and_stops_at_cycles() -> None:
    """Job -> JobSet (not queued) -> JobSet (queued): the top one (Kueue's examples)."""
    top = parent("JobSet", "jobset.x-k8s.io/v1alpha2", uid="top")
    top["metadata"]["name"] = "outer"
    middle = parent("JobSet", "jobset.x-k8s.io/v1alpha2", uid="mid", queued=False)
    middle["metadata"]["ownerReferences"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                              "name": "outer", "uid": "top", "controller": True}]
    owners = Owners(middle)
    owners.objs[("JobSet", "outer")] = top
    found = managed_ancestor(child(uid="mid", kind="JobSet", api_version="jobset.x-k8s.io/v1alpha2"), owners, KINDS)
    assert found.ancestor is not None and found.ancestor.uid == "top"
    loop = parent("JobSet", "jobset.x-k8s.io/v1alpha2", uid="mid")
    loop["metadata"]["ownerReferences"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                            "name": "nccl", "uid": "mid", "controller": True}]
    with pytest.raises(OwnerUnreadable, match="cyclic"):
        managed_ancestor(child(uid="mid", kind="JobSet", api_version="jobset.x-k8s.io/v1alpha2"),
                         Owners(loop), [JOBSET])
