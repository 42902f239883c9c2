"""A child of a queued ancestor is suspended until the ancestor is admitted, labelled or not
(issue 39; Kueue's ``shouldSuspendChildJob`` on ``FindAncestorJobManagedByKueue``). Fails on the
old code: a batch Job without the queue label, owned (real uid) by its tenant's own queued,
never admitted JobSet or HyperPodPyTorchJob, was never seen by the controller and ran."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.jobs import resource_of
from scheduler.kube.resuspend import CHILD_SUSPENDED_MESSAGE
from tests.unit.kube.test_new_kinds_phases import Q, create, hyp_job, pod_template, reconcile
from tests.unit.kube.test_phases import NS, Harness, job


def jobset(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "labels": dict(Q)},
            "spec": {"suspend": True, "replicatedJobs": [{"name": "node", "replicas": replicas, "template": {
                "spec": {"parallelism": 1, "completions": 1, "template": pod_template()}}}]}}


def unlabelled_child(name: str, owner: dict[str, Any], uid: str | None = None) -> dict[str, Any]:
    body = job(name, 1)
    del body["metadata"]["labels"][LABEL_QUEUE_NAME]
    body["spec"]["suspend"] = False
    body["metadata"]["ownerReferences"] = [{
        "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
        "uid": uid or owner["metadata"]["uid"], "controller": True}]
    return body


def suspended_events(harness: Harness, name: str) -> list[str]:
    return [e["message"] for e in harness.events_of("Suspended") if e["involvedObject"]["name"] == name]


def test_an_unlabelled_job_of_a_queued_jobset_waits_for_the_jobsets_admission(harness: Harness) -> None:
    parent = create(harness, resource_of(JOBSET), jobset("big", 5))  # 5 x 8 GPUs > the quota: never admitted
    create(harness, JOBS, unlabelled_child("sneaky", parent))
    reconcile(harness, 2)
    [wl] = harness.api.objects(WORKLOADS, NS)  # the JobSet's; none for the child
    assert not st.condition_true(wl, st.ADMITTED)
    assert harness.job("sneaky")["spec"]["suspend"] is True
    assert suspended_events(harness, "sneaky") == [CHILD_SUSPENDED_MESSAGE]


def test_an_unlabelled_job_of_a_queued_hyperpod_job_waits_too(harness: Harness) -> None:
    body = hyp_job()
    body["spec"]["replicaSpecs"][0].update(replicas=8, spares=0)  # 8 x 8 GPUs: never fits
    parent = create(harness, resource_of(HYPERPODPYTORCHJOB), body)
    create(harness, JOBS, unlabelled_child("side", parent))
    reconcile(harness, 2)
    assert harness.job("side")["spec"]["suspend"] is True


def test_a_forged_owner_or_an_admitted_ancestor_leaves_an_unlabelled_job_running(harness: Harness) -> None:
    parent = create(harness, resource_of(JOBSET), jobset("small", 1))
    create(harness, JOBS, unlabelled_child("forged", parent, uid="not-the-jobsets-uid"))
    reconcile(harness, 3)
    [wl] = harness.api.objects(WORKLOADS, NS)
    assert st.condition_true(wl, st.ADMITTED)
    create(harness, JOBS, unlabelled_child("child", parent))
    reconcile(harness, 2)
    assert harness.job("child")["spec"]["suspend"] is False  # its ancestor is admitted
    assert harness.job("forged")["spec"]["suspend"] is False  # not a child: an unqueued Job of its own
    assert suspended_events(harness, "child") == suspended_events(harness, "forged") == []
