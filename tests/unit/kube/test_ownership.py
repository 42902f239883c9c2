"""The controller resolves a queued Job's owner before it skips it (issue 30, finding 2): only a
queued owner of a governed kind with the reference's uid takes the Job out of the queue, and a
child of such an owner runs only while the owner's Workload is admitted (Kueue's
``shouldSuspendChildJob``). A forged owner reference gets the Job a Workload of its own."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.kinds.mpijob import MPIJOB
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.jobs import resource_of
from tests.unit.kube.test_phases import NS, Harness, job

MPIJOBS = resource_of(MPIJOB)


def mpijob(name: str, workers: int) -> dict[str, Any]:
    template = job(name, 1)["spec"]["template"]
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "namespace": NS, "labels": {LABEL_QUEUE_NAME: "lq"}},
            "spec": {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": {
                "Worker": {"replicas": workers, "template": template}}}}


def launcher(name: str, owner: str, uid: str, suspend: bool = False) -> dict[str, Any]:
    body = job(name, 1)
    body["spec"]["suspend"] = suspend
    body["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                                            "name": owner, "uid": uid, "controller": True}]
    return body


def workloads_of(harness: Harness, name: str) -> list[dict[str, Any]]:
    uid = harness.job(name)["metadata"]["uid"]
    return [wl for wl in harness.api.objects(WORKLOADS, NS)
            if any(r.get("uid") == uid for r in wl["metadata"].get("ownerReferences") or ())]


def test_a_job_with_a_forged_owner_gets_its_own_workload_and_is_suspended(harness: Harness) -> None:
    harness.api.create(JOBS, launcher("forged", "no-such-mpijob", "any-uid"), NS)  # created running
    harness.sync()
    harness.controller.reconcile()
    harness.sync()
    (wl,) = workloads_of(harness, "forged")
    assert wl["spec"]["queueName"] == "lq"
    assert "OwnerReferenceNotHonoured" in harness.event_reasons()
    harness.controller.reconcile()  # admitted (1 x 8 GPUs fits) and started through the queue
    harness.sync()
    assert st.condition_true(harness.api.get(WORKLOADS, wl["metadata"]["name"], NS), st.ADMITTED)


def test_an_owner_under_the_same_name_with_another_uid_is_not_honoured(harness: Harness) -> None:
    harness.api.create(MPIJOBS, mpijob("nccl", 1), NS)
    harness.api.create(JOBS, launcher("impostor", "nccl", "not-its-uid", suspend=True), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    harness.sync()
    assert len(workloads_of(harness, "impostor")) == 1


def test_the_launcher_of_a_queued_mpijob_is_governed_through_it(harness: Harness) -> None:
    created = harness.api.create(MPIJOBS, mpijob("nccl", 9), NS)  # 9 x 8 GPUs > 32: never admitted
    harness.api.create(JOBS, launcher("nccl-launcher", "nccl", created["metadata"]["uid"]), NS)
    harness.sync()
    harness.controller.reconcile()
    harness.sync()
    assert workloads_of(harness, "nccl-launcher") == []  # one Workload: the MPIJob's
    assert [wl["metadata"]["ownerReferences"][0]["kind"] for wl in harness.api.objects(WORKLOADS, NS)] == ["MPIJob"]
    # ...and it may not run while the MPIJob's Workload is not admitted
    assert harness.job("nccl-launcher")["spec"]["suspend"] is True
