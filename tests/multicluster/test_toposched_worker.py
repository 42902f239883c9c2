"""toposched as a MultiKueue worker behind the real Kueue v0.17.0 (the manager): what the
manager creates on the worker (the remote Workload with the origin label, then the job with the
prebuilt-workload-name label) is admitted and placed by topology on the worker, and the
worker's status reaches the manager as it does from a Kueue worker."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from scheduler.devcluster.multikueue import SECRET_NAMESPACE
from scheduler.k8s.informer import CLUSTER_QUEUES, JOBS, PODS, WORKLOADS, Api, Resource
from scheduler.kube import status as st
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
SECRETS = Resource("", "v1", "secrets")
WORKER_QUEUE = "hyperpod-ns-team-a-clusterqueue"  # the ClusterQueue of the copies on the worker
EVENTS = Resource("", "v1", "events")


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
    # The Job runs under the manager's copy, adopted as Kueue's worker does; no second Workload.
    adopted = worker.wait(lambda: workload_of(worker.api, "Job", "mk-job"), what="the copy owned by the Job")
    assert adopted["metadata"]["name"] == name
    assert adopted["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == job["metadata"]["uid"]
    assert [w["metadata"]["name"] for w in worker.api.list(WORKLOADS, NS)["items"]
            if w["metadata"]["name"].startswith("job-mk-job-")] == [name]
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


def manager_api_on(mc: MultiCluster, worker: str) -> Api:
    """The API of ``worker`` as the manager reaches it: the kubeconfig in the manager's Secret."""
    secret = mc.manager.api.get(SECRETS, f"{worker}-kubeconfig", SECRET_NAMESPACE)
    text = base64.b64decode(secret["data"]["kubeconfig"]).decode()
    return Api(config.new_client_from_config_dict(yaml.safe_load(text)))


def test_the_managers_identity_cannot_admit_on_the_worker(mc: MultiCluster) -> None:
    """The manager's user may write ``workloads/status`` on the worker (Kueue's RBAC for it) but
    only to give a Workload up: a forged admission is refused, naming the field."""
    manager, worker = mc.manager, mc.worker(WORKER)
    manager.api.create(JOBS, batch_job("mk-toobig", 17, 8, topology=None), NS)  # 17 nodes: the worker has 16
    local = manager.wait(lambda: workload_of(manager.api, "Job", "mk-toobig"), what="manager Workload")
    name = local["metadata"]["name"]
    remote = worker.wait(lambda: remote_workload(worker.api, name), what="remote copy on the worker")
    as_manager = manager_api_on(mc, WORKER)
    now = st.utcnow()
    conditions = st.set_condition(st.conditions_of(remote), st.QUOTA_RESERVED, "True", "QuotaReserved", "forged", now)
    forged = {"admission": {"clusterQueue": "hyperpod-ns-team-a-clusterqueue", "podSetAssignments": [
        {"name": "main", "count": 17, "flavors": {"nvidia.com/gpu": "ml.p5.48xlarge"},
         "resourceUsage": {"nvidia.com/gpu": "136"}}]}, "conditions": conditions}
    with pytest.raises(client.ApiException) as refused:
        as_manager.merge_patch(WORKLOADS, name, {"status": forged}, NS, subresource="status")
    assert refused.value.status == 403
    raw = refused.value.body
    body = raw.decode() if isinstance(raw, bytes) else str(raw)
    assert "status.admission: Forbidden: only toposched's controller writes a Workload's status" in body, body
    assert not condition(remote_workload(worker.api, name), "QuotaReserved")
    manager.api.delete(JOBS, "mk-toobig", NS, propagationPolicy="Background")


def test_eviction_on_the_worker_reaches_the_manager_and_eviction_on_the_manager_reaches_the_worker(
        mc: MultiCluster) -> None:
    manager, worker = mc.manager, mc.worker(WORKER)
    manager.api.create(JOBS, batch_job("mk-evict", 1, 8), NS)
    local = manager.wait(lambda: (w := workload_of(manager.api, "Job", "mk-evict")) and condition(w, "Admitted") and w,
                         timeout_s=90, what="manager Workload admitted")
    name = local["metadata"]["name"]
    # The worker's admin drains its ClusterQueue: the copy is evicted there; the manager's check
    # goes to Retry (Kueue's MultiKueueRedoAdmissionOnEvictionInWorker, on by default in v0.17).
    # Not by deactivating the copy: that makes its spec differ from the manager's, and Kueue
    # v0.17.0's manager, when it sees the difference before the eviction, deletes the copy as out
    # of sync and strands the job (fixed upstream in v0.17.8, kubernetes-sigs/kueue#13087).
    copy_uid = remote_workload(worker.api, name)["metadata"]["uid"]
    worker.api.merge_patch(CLUSTER_QUEUES, WORKER_QUEUE, {"spec": {"stopPolicy": "HoldAndDrain"}})
    try:
        # The manager may replace the evicted copy within a second (a new uid): seen either way.
        worker.wait(lambda: (w := remote_workload(worker.api, name)) is None or w["metadata"]["uid"] != copy_uid
                    or condition(w, "Evicted"), what="copy evicted on the worker")
        manager.wait(lambda: any(e.get("reason") == "MultiKueue" and
                                 f'Workload evicted on worker cluster: "{WORKER}"' in (e.get("message") or "")
                                 for e in manager.api.list(EVENTS, NS,
                                                           fieldSelector=f"involvedObject.name={name}")["items"]),
                     timeout_s=60, what="the eviction on the worker reaches the manager")
    finally:
        worker.api.merge_patch(CLUSTER_QUEUES, WORKER_QUEUE, {"spec": {"stopPolicy": "None"}})
    # Re-admitted (a new copy, active), then the manager deactivates its Workload: the manager
    # writes DeactivationTarget on the worker's copy (a status write the guard lets through).
    manager.wait(lambda: (w := remote_workload(worker.api, name)) and condition(w, "Admitted")
                 and (w.get("spec") or {}).get("active") is not False, timeout_s=120, what="re-admitted on the worker")
    # What the worker owns: the copy evicted and its quota given back there, or the copy removed
    # by the manager. Not asserted: the manager's own release of its Workload, which Kueue v0.17.0
    # can leave pending (it deletes a copy whose spec.active differs as out of sync, and then has
    # no remote status to learn that the job's pods are gone; kubernetes-sigs/kueue#13087).
    manager.api.merge_patch(WORKLOADS, name, {"spec": {"active": False}}, NS)
    worker.wait(lambda: (w := remote_workload(worker.api, name)) is None
                or (condition(w, "Evicted") and not condition(w, "QuotaReserved")), timeout_s=90,
                what="the manager's eviction reaches the worker, whose quota is released")


def test_preemption_on_the_worker_reaches_the_manager(mc: MultiCluster) -> None:
    """A job of the worker's own tenants with a higher priority preempts the manager's copy on
    the worker; the manager hears of it as from a Kueue worker (its check goes to Retry)."""
    manager, worker = mc.manager, mc.worker(WORKER)
    manager.api.create(JOBS, batch_job("mk-low", 16, 8, "topology.k8s.aws/network-node-layer-1",
                                       priority="fine-tuning-priority"), NS)  # every node of the worker
    local = manager.wait(lambda: (w := workload_of(manager.api, "Job", "mk-low")) and condition(w, "Admitted") and w,
                         timeout_s=120, what="the manager's low-priority job admitted")
    name = local["metadata"]["name"]
    worker.wait(lambda: len([p for p in worker.api.list(PODS, NS, labelSelector="job-name=mk-low")["items"]
                             if p["spec"].get("nodeName")]) == 16, timeout_s=120, what="its pods bound on the worker")
    high = batch_job("worker-high", 1, 8, topology=None, priority="inference-priority")
    del high["spec"]["managedBy"]
    worker.api.create(JOBS, high, NS)
    worker.wait(lambda: (w := remote_workload(worker.api, name)) is None or condition(w, "Evicted"), timeout_s=120,
                what="the manager's copy preempted on the worker")
    manager.wait(lambda: any(e.get("reason") == "MultiKueue" and
                             f'Workload evicted on worker cluster: "{WORKER}"' in (e.get("message") or "")
                             for e in manager.api.list(EVENTS, NS,
                                                       fieldSelector=f"involvedObject.name={name}")["items"]),
                 timeout_s=90, what="the preemption on the worker reaches the manager")
    worker.wait(lambda: condition(workload_of(worker.api, "Job", "worker-high"), "Admitted"), timeout_s=120,
                what="the worker's high-priority job admitted")
    manager.api.delete(JOBS, "mk-low", NS, propagationPolicy="Background")
