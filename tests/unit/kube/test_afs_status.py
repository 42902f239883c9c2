"""Admission Fair Sharing through the controller against the in-memory API server: the
LocalQueue ``status.fairSharing.admissionFairSharingStatus`` written as Kueue's LocalQueue
controller writes it (initialized, sampled every ``usageSamplingInterval`` with the
half-life decay, a new admission's entry penalty folded in), read back into the snapshot, and
the ClusterQueue's queue ordered by LocalQueue usage."""

from __future__ import annotations

from typing import Any

from scheduler.core.config import AdmissionFairSharing, KueueConfig
from scheduler.k8s.informer import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS
from scheduler.kube.snapshot import build_snapshot
from tests.unit.kube.test_phases import GPU, NS, Harness

AFS = KueueConfig(admission_fair_sharing=AdmissionFairSharing(
    enabled=True, usage_half_life_time_s=300, usage_sampling_interval_s=300))


def _workload(name: str, lq: str, gpus: int, admitted_at: str | None) -> dict[str, Any]:
    wl: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                     "creationTimestamp": "2025-12-31T00:00:00Z"},
        "spec": {"queueName": lq, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}}}]}}
    if admitted_at is not None:
        wl["status"] = {"conditions": [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": admitted_at}
            for t in ("QuotaReserved", "Admitted")],
            "admission": {"clusterQueue": "afs", "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {GPU: "gpu"}, "resourceUsage": {GPU: str(gpus)}}]}}
    return wl


def _harness() -> Harness:
    h = Harness()
    h.rebuild(config=AFS)
    h.api.create(CLUSTER_QUEUES, {"metadata": {"name": "afs"}, "spec": {
        "namespaceSelector": {}, "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": "16"}]}]}]}})
    for lq in ("lq-a", "lq-b"):
        h.api.create(LOCAL_QUEUES, {"metadata": {"name": lq, "namespace": NS}, "spec": {"clusterQueue": "afs"}}, NS)
    h.api.create(LOCAL_QUEUES, {"metadata": {"name": "lq-held", "namespace": NS},
                                "spec": {"clusterQueue": "afs", "stopPolicy": "Hold"}}, NS)
    h.api.create(WORKLOADS, _workload("a-running", "lq-a", 8, "2026-01-01T00:00:00Z"), NS)
    h.sync()
    return h


def _sync(h: Harness) -> None:
    h.controller.queue_objects.sync(build_snapshot(h.cache, h.clock(), config=AFS))
    h.sync()


def _afs_status(h: Harness, lq: str) -> dict[str, Any]:
    status = h.api.get(LOCAL_QUEUES, lq, NS).get("status") or {}
    return dict((status.get("fairSharing") or {}).get("admissionFairSharingStatus") or {})


def test_status_initialized_then_decayed_every_sampling_interval() -> None:
    h = _harness()
    _sync(h)  # uninitialized: starts from the current admitted usage
    assert _afs_status(h, "lq-a") == {"consumedResources": {GPU: "8"}, "lastUpdate": "2026-01-01T00:00:00Z"}
    assert _afs_status(h, "lq-b") == {"consumedResources": {}, "lastUpdate": "2026-01-01T00:00:00Z"}
    assert _afs_status(h, "lq-held") == {}  # Kueue's reconciler stops at an inactive LocalQueue
    h.clock.advance(120)
    _sync(h)  # before the sampling interval: unchanged
    assert _afs_status(h, "lq-a")["lastUpdate"] == "2026-01-01T00:00:00Z"
    h.api.delete(WORKLOADS, "a-running", NS)
    h.clock.advance(180)
    h.sync()
    _sync(h)  # one half-life later, nothing running: halved
    assert _afs_status(h, "lq-a") == {"consumedResources": {GPU: "4"}, "lastUpdate": "2026-01-01T00:05:00Z"}
    snap = build_snapshot(h.cache, h.clock(), config=AFS)
    assert snap.lq_usage[f"{NS}/lq-a"].consumed == {GPU: 4.0}


def test_pending_workloads_ordered_by_local_queue_usage_and_penalty_folded_in() -> None:
    h = _harness()
    _sync(h)
    # a-next (lq-a, high priority, older) and b-next (lq-b): lq-b's usage is lower, it goes
    # first although only one of them fits (8 of 16 GPUs are in use).
    h.api.create(WORKLOADS, {**_workload("a-next", "lq-a", 8, None), "spec": {
        **_workload("a-next", "lq-a", 8, None)["spec"], "priority": 100}}, NS)
    h.api.create(WORKLOADS, _workload("b-next", "lq-b", 8, None), NS)
    h.clock.advance(10)
    h.sync()
    h.controller.admit()  # the pass also writes queue status
    h.sync()
    reserved = {wl["metadata"]["name"] for wl in h.api.objects(WORKLOADS, NS)
                if (wl.get("status") or {}).get("admission")}
    assert reserved == {"a-running", "b-next"}
    # the admission shows up in lq-b's status right away (not after the sampling interval):
    # lq-b: 0 * (1 - a) + 8 * a (a = alpha(10s, 5m)) decayed, plus the penalty 8 * alpha(5m, 5m) = 4
    assert _afs_status(h, "lq-b") == {"consumedResources": {GPU: "4182m"}, "lastUpdate": "2026-01-01T00:00:10Z"}
    assert h.api.get(LOCAL_QUEUES, "lq-b", NS)["status"]["fairSharing"]["weightedShare"] == 0
    assert _afs_status(h, "lq-a")["lastUpdate"] == "2026-01-01T00:00:00Z"  # no new admission there
