"""The controller's Kubernetes shell against the real API server: Workloads built for Jobs pass
Kueue's own CRD validation, informers see changes, leases elect one leader."""

from __future__ import annotations

import threading
import time
from typing import Any

import yaml
from kubernetes import client

from scheduler.devcluster.binaries import repo_root
from scheduler.k8s.informer import JOBS, WORKLOADS, Api, Informer, wait_synced
from scheduler.k8s.leader import LeaseElector
from scheduler.kube.jobs import BatchJob, workload_for_job


def _sample_job(namespace: str) -> dict[str, Any]:
    job = yaml.safe_load((repo_root() / "examples" / "jobs" / "hyperpod-required-layer3.yaml").read_text())
    job["metadata"]["namespace"] = namespace
    return job


def test_workload_for_job_passes_kueue_crd_validation(kube_api: client.ApiClient, namespace: str) -> None:
    api = Api(kube_api)
    job = api.create(JOBS, _sample_job(namespace), namespace)
    body = workload_for_job(BatchJob(), job, 70, {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                    "name": "training-priority"})
    created = api.create(WORKLOADS, body, namespace)
    assert created["metadata"]["name"].startswith("job-test-tas-job-")
    assert len(created["metadata"]["name"]) == len("job-test-tas-job-") + 5
    ps = created["spec"]["podSets"][0]
    assert ps["count"] == 10
    assert ps["topologyRequest"]["required"] == "topology.k8s.aws/network-node-layer-3"
    assert created["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    # Kueue's CEL rules are live: QuotaReserved=True with an admission whose podSetAssignments
    # do not match spec.podSets is refused with Kueue's own message.
    bad_status = {"status": {
        "admission": {"clusterQueue": "cq", "podSetAssignments": []},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": "x", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    try:
        api.merge_patch(WORKLOADS, created["metadata"]["name"], bad_status, namespace, subresource="status")
        refused = ""
    except client.ApiException as exc:
        refused = str(exc.body) if exc.status == 422 else ""
    assert "podSetAssignments must have the same number of podSets as the spec" in refused


def test_informer_sees_create_update_delete(kube_api: client.ApiClient, namespace: str) -> None:
    api = Api(kube_api)
    inf = Informer(api, JOBS).start()
    events: list[tuple[str, str]] = []
    seen = threading.Event()

    def handler(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if obj["metadata"].get("namespace") == namespace:
            events.append((kind, obj["metadata"]["name"]))
            if kind == "DELETED":
                seen.set()

    inf.add_handler(handler)
    wait_synced([inf])
    api.create(JOBS, _sample_job(namespace), namespace)
    api.merge_patch(JOBS, "test-tas-job", {"metadata": {"labels": {"x": "y"}}}, namespace)
    api.delete(JOBS, "test-tas-job", namespace, propagationPolicy="Background")
    assert seen.wait(20)
    inf.stop()
    kinds = [k for k, _ in events]
    assert kinds[0] == "ADDED" and "MODIFIED" in kinds and kinds[-1] == "DELETED"
    assert inf.get(f"{namespace}/test-tas-job") is None


def test_only_one_of_two_candidates_leads_and_successor_takes_over(kube_api: client.ApiClient,
                                                                     namespace: str) -> None:
    api = Api(kube_api)
    electors = [LeaseElector(api, "toposched-test", namespace, f"cand-{i}", lease_duration_s=3,
                             renew_deadline_s=2, retry_period_s=0.3) for i in range(2)]
    threads = [threading.Thread(target=e.run, args=(lambda: None, lambda: None), daemon=True) for e in electors]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(e.is_leader.is_set() for e in electors):
        time.sleep(0.1)
    time.sleep(1.0)
    leaders = [e for e in electors if e.is_leader.is_set()]
    assert len(leaders) == 1
    leader = leaders[0]
    other = electors[1 - electors.index(leader)]
    leader.stop()  # clean shutdown releases the lease
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not other.is_leader.is_set():
        time.sleep(0.1)
    assert other.is_leader.is_set()
    other.stop()
