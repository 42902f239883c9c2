"""Kueue's re-suspension (issue 13, reproduction 2): a managed job that a user unsuspends while
its Workload is not admitted is suspended again, with Kueue's ``Stopped`` event."""

from __future__ import annotations

from typing import Any

from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import JOBS, PYTORCHJOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.events import EVENTS
from tests.unit.kube.test_phases import GPU, NS, Harness, job


def stopped_messages(harness: Harness, name: str) -> list[str]:
    harness.events.flush()
    return [e["message"] for e in harness.api.objects(EVENTS)
            if e["involvedObject"]["name"] == name and e["reason"] == "Stopped"]


def unsuspend(harness: Harness, name: str) -> None:
    harness.api.merge_patch(JOBS, name, {"spec": {"suspend": False}}, NS)
    harness.sync()


def test_a_pending_job_unsuspended_by_its_user_is_suspended_again(harness: Harness) -> None:
    harness.api.create(JOBS, job("too-big", 5), NS)  # 5 x 8 GPUs > the 32-GPU quota: stays pending
    harness.sync()
    harness.controller.reconcile()
    harness.sync()
    assert not st.condition_true(harness.workload(), st.ADMITTED)
    unsuspend(harness, "too-big")
    harness.controller.reconcile()
    assert harness.job("too-big")["spec"]["suspend"] is True
    assert stopped_messages(harness, "too-big") == ["Not admitted by cluster queue"]


def test_a_job_without_a_workload_is_suspended_with_no_matching_workload(harness: Harness) -> None:
    body = job("no-workload", 1)
    body["spec"]["template"]["metadata"]["annotations"][
        "kueue.x-k8s.io/podset-slice-required-topology-constraints"] = "[" * 1000 + "]" * 1000  # rejected
    body["spec"]["suspend"] = False
    harness.api.create(JOBS, body, NS)
    harness.sync()
    harness.controller.reconcile()
    assert harness.api.objects(WORKLOADS, NS) == []
    assert harness.job("no-workload")["spec"]["suspend"] is True
    assert stopped_messages(harness, "no-workload") == ["No matching Workload"]


def test_admitted_and_unmanaged_jobs_keep_running(harness: Harness) -> None:
    harness.admitted("train", 1)
    unmanaged = job("unmanaged", 1)
    del unmanaged["metadata"]["labels"][LABEL_QUEUE_NAME]
    unmanaged["spec"]["suspend"] = False
    harness.api.create(JOBS, unmanaged, NS)
    harness.sync()
    harness.controller.reconcile()
    assert harness.job("train")["spec"]["suspend"] is False
    assert harness.job("unmanaged")["spec"]["suspend"] is False
    assert stopped_messages(harness, "train") == stopped_messages(harness, "unmanaged") == []


def pytorch_job(name: str) -> dict[str, Any]:
    template = job(name, 1)["spec"]["template"]
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": NS, "labels": {LABEL_QUEUE_NAME: "lq"}},
            "spec": {"runPolicy": {"suspend": False},
                     "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                             "Worker": {"replicas": 8, "template": template}}}}


def test_a_running_pytorchjob_without_admission_is_suspended(harness: Harness) -> None:
    harness.api.create(PYTORCHJOBS, pytorch_job("ddp"), NS)  # 9 x 8 GPUs: never fits the quota
    harness.sync()
    harness.controller.reconcile()
    stored = harness.api.get(PYTORCHJOBS, "ddp", NS)
    assert stored["spec"]["runPolicy"]["suspend"] is True
    assert stopped_messages(harness, "ddp") == ["Not admitted by cluster queue"]
    assert GPU in str(harness.api.objects(WORKLOADS, NS)[0]["spec"]["podSets"])
