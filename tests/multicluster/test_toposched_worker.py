"""toposched as a MultiKueue worker behind the real Kueue v0.17.0 (the manager): what the
manager creates on the worker (the remote Workload with the origin label, then the job with the
prebuilt-workload-name label) is admitted and placed by topology on the worker, and the
worker's status reaches the manager as it does from a Kueue worker."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.k8s.informer import JOBS, PODS
from tests.multicluster.conftest import MultiCluster
from tests.multicluster.jobs import (
    FAKE_PHASE,
    NS,
    ORIGIN_LABEL,
    PREBUILT_LABEL,
    batch_job,
    condition,
    remote_workload,
    workload_of,
)

WORKER = "topo"


@pytest.fixture(scope="module")
def mc(multicluster_factory: Any) -> MultiCluster:
    return multicluster_factory({WORKER: "toposched"})


def test_batch_job_runs_on_the_toposched_worker_and_finishes_on_the_manager(mc: MultiCluster) -> None:
    manager, worker = mc.manager, mc.worker(WORKER)
    manager.api.create(JOBS, batch_job("mk-job", 2, 8), NS)
    local = manager.wait(lambda: workload_of(manager.api, "Job", "mk-job"), what="manager Workload")
    name = local["metadata"]["name"]
    remote = worker.wait(lambda: (w := remote_workload(worker.api, name)) and condition(w, "Admitted") and w,
                         timeout_s=90, what="remote Workload admitted on the worker")
    assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
    assignment = remote["status"]["admission"]["podSetAssignments"][0]
    assert assignment.get("topologyAssignment"), assignment
    job = worker.wait(lambda: worker.api.get(JOBS, "mk-job", NS), what="remote Job")
    assert job["metadata"]["labels"][PREBUILT_LABEL] == name
    local = manager.wait(lambda: (w := workload_of(manager.api, "Job", "mk-job")) and condition(w, "Admitted") and w,
                         timeout_s=60, what="manager Workload admitted")
    assert local["status"]["clusterName"] == WORKER
    pods = worker.wait(lambda: [p for p in worker.api.list(PODS, NS, labelSelector="job-name=mk-job")["items"]
                                if p["spec"].get("nodeName")] or None, timeout_s=90, what="pods bound on the worker")
    worker.wait(lambda: len([p for p in worker.api.list(PODS, NS, labelSelector="job-name=mk-job")["items"]
                             if p.get("status", {}).get("phase") == "Running"]) == 2, what="pods running")
    for pod in worker.api.list(PODS, NS, labelSelector="job-name=mk-job")["items"]:
        worker.api.merge_patch(PODS, pod["metadata"]["name"], {"metadata": {"labels": {FAKE_PHASE: "Succeeded"}}}, NS)
    manager.wait(lambda: condition(workload_of(manager.api, "Job", "mk-job"), "Finished"), timeout_s=90,
                 what="manager Workload finished")
    manager.wait(lambda: (manager.api.get(JOBS, "mk-job", NS).get("status") or {}).get("succeeded") == 2,
                 what="manager Job status mirrored")
    del pods
