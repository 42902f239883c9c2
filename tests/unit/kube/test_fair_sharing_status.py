"""``status.fairSharing.weightedShare`` on ClusterQueues and Cohort objects, written through the
queue-status writer against the in-memory API server (as Kueue's ClusterQueue and Cohort
controllers write it)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scheduler.core.config import FairSharing, KueueConfig
from scheduler.k8s.informer import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES, WORKLOADS
from scheduler.kube.metrics_gauges import gauge_values
from scheduler.kube.snapshot import build_snapshot
from tests.unit.kube.test_phases import GPU, NS, Harness


def _cq(name: str, weight: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceSelector": {}, "cohortName": "team-pool", "resourceGroups": [
        {"coveredResources": [GPU], "flavors": [{"name": "gpu", "resources": [{"name": GPU, "nominalQuota": "8"}]}]}]}
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"metadata": {"name": name}, "spec": spec}


def _admitted(name: str, cq: str, gpus: int) -> dict[str, Any]:
    """A Workload holding quota in ``cq`` (a v1beta2 admission without topology)."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"queueName": "lq-" + cq, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}}}]},
            "status": {"conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "admission": {"clusterQueue": cq, "podSetAssignments": [
                    {"name": "main", "count": 1, "flavors": {GPU: "gpu"}, "resourceUsage": {GPU: str(gpus)}}]}}}


def _harness() -> Harness:
    h = Harness()
    h.api.create(CLUSTER_QUEUES, _cq("team-a", "2"))
    h.api.create(CLUSTER_QUEUES, _cq("team-b"))
    h.api.create(COHORTS, {"metadata": {"name": "team-pool"}, "spec": {"fairSharing": {"weight": "500m"}}})
    for team in ("team-a", "team-b"):
        h.api.create(LOCAL_QUEUES, {"metadata": {"name": "lq-" + team, "namespace": NS},
                                    "spec": {"clusterQueue": team}}, NS)
    h.api.create(WORKLOADS, _admitted("a-big", "team-a", 12), NS)
    h.sync()
    return h


def _sync(h: Harness, config: KueueConfig) -> None:
    snap = replace(build_snapshot(h.cache, h.clock()), config=config)
    h.controller.queue_objects.sync(snap)
    h.sync()


def _status(h: Harness, resource: Any, name: str) -> dict[str, Any]:
    return dict(h.api.get(resource, name).get("status") or {})


def test_weighted_share_written_when_fair_sharing_is_on_and_removed_when_off() -> None:
    h = _harness()
    _sync(h, KueueConfig())
    assert "fairSharing" not in _status(h, CLUSTER_QUEUES, "team-a")
    assert "fairSharing" not in _status(h, COHORTS, "team-pool")

    _sync(h, KueueConfig(fair_sharing=FairSharing(enabled=True)))
    # team-a borrows 4 GPUs; the cohort's lendable GPUs are all 16 (Kueue counts the
    # parent's potential availability): 250 per mille, weight 2 -> 125.
    assert _status(h, CLUSTER_QUEUES, "team-a")["fairSharing"] == {"weightedShare": 125}
    assert _status(h, CLUSTER_QUEUES, "team-b")["fairSharing"] == {"weightedShare": 0}
    # A root cohort has no share (Kueue writes 0); its weight does not matter.
    assert _status(h, COHORTS, "team-pool")["fairSharing"] == {"weightedShare": 0}

    _sync(h, KueueConfig())
    assert "fairSharing" not in _status(h, CLUSTER_QUEUES, "team-a")
    assert "fairSharing" not in _status(h, COHORTS, "team-pool")


def test_weighted_share_gauges_only_with_fair_sharing() -> None:
    h = _harness()
    snap = build_snapshot(h.cache, h.clock())
    assert not gauge_values(snap, {}).get("kueue_cluster_queue_weighted_share")
    fair = gauge_values(replace(snap, config=KueueConfig(fair_sharing=FairSharing(enabled=True))), {})
    shares = fair.get("kueue_cluster_queue_weighted_share")
    assert shares[("team-a", "team-pool", "leader")] == 125.0  # precise share (status: rounded up)
    assert shares[("team-b", "team-pool", "leader")] == 0.0
    assert fair.get("kueue_cohort_weighted_share") == {("team-pool", "leader"): 0.0}
