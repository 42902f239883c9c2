"""toposched explain with fair sharing on: a job waiting behind its team's fair share says so,
with the share figures."""

from __future__ import annotations

from typing import Any

from scheduler.api.engine import EngineSnapshot
from scheduler.core.config import AdmissionFairSharing, FairSharing, KueueConfig
from scheduler.core.fakecluster import generate_nodes
from scheduler.explain import explain, to_text
from tests.unit.test_explain import CLUSTER, FLAVOR, GPU, TOPOLOGY, cq, lq, workload

FAIR = KueueConfig(fair_sharing=FairSharing(enabled=True))


def admitted(name: str, ns: str, cluster_queue: str, pods: int) -> dict[str, Any]:
    wl = workload(name, pods, ns=ns)
    wl["status"] = {"conditions": [
        {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for t in ("QuotaReserved", "Admitted")],
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": [
            {"name": "main", "count": pods, "flavors": {GPU: "p5"}, "resourceUsage": {GPU: str(8 * pods)}}]}}
    return wl


def fair_snap() -> EngineSnapshot:
    # Three teams of 16 GPUs in one cohort: a uses 24 (borrows 8), b uses 16, c lends.
    wls = [admitted("a-old", "team-a", "cq-a", 3), admitted("b-old", "team-b", "cq-b", 2),
           workload("a-new", 1, ns="team-a", created="2026-01-01T00:01:00Z"),
           workload("b-new", 1, ns="team-b", created="2026-01-01T00:02:00Z")]
    return EngineSnapshot(nodes=generate_nodes(CLUSTER), flavors=[FLAVOR], topologies=[TOPOLOGY], workloads=wls,
                          cluster_queues=[cq("cq-a", 16, None), cq("cq-b", 16, None), cq("cq-c", 16, None)],
                          local_queues=[lq("team-a", "cq-a"), lq("team-b", "cq-b"), lq("team-c", "cq-c")],
                          namespaces=[{"metadata": {"name": n}} for n in ("team-a", "team-b", "team-c")])


def test_waiting_behind_the_fair_share_of_another_team() -> None:
    out = explain(fair_snap(), "team-a", "a-new", solver="greedy", config=FAIR)
    # with its head a would borrow 16 of the 48 lendable GPUs (333.3 per mille), b only 8 (166.7)
    rows = {r["clusterQueue"]: r for r in out["fairSharing"]["clusterQueues"]}
    assert (rows["cq-a"]["share"], rows["cq-a"]["shareWithHead"]) == ("166.7", "333.3")
    assert (rows["cq-b"]["share"], rows["cq-b"]["shareWithHead"], rows["cq-b"]["head"]) == ("0.0", "166.7",
                                                                                           "team-b/b-new")
    assert rows["cq-c"]["head"] == "" and rows["cq-c"]["shareWithHead"] == "-"
    assert out["fairSharing"]["ahead"] == [{"workload": "team-b/b-new", "clusterQueue": "cq-b"}]
    [reason] = [r for r in out["reasons"] if r["reason"] == "FairSharing"]
    assert reason["message"] == (
        "waits behind its team's fair share: fair sharing admits first the heads of cq-b (share 166.7 with "
        "team-b/b-new); ClusterQueue cq-a would have share 333.3 with this workload (now 166.7, weight 1)")
    text = to_text(out)
    assert "cq-a (weight 1): 166.7 -> 333.3 with team-a/a-new" in text


def test_first_in_fair_order_and_fair_sharing_off() -> None:
    out = explain(fair_snap(), "team-b", "b-new", solver="greedy", config=FAIR)
    assert out["fairSharing"]["ahead"] == []
    assert not [r for r in out["reasons"] if r["reason"] == "FairSharing"]
    off = explain(fair_snap(), "team-a", "a-new", solver="greedy")
    assert "fairSharing" not in off


def test_admission_fair_sharing_shows_the_local_queue_usage() -> None:
    # One ClusterQueue ordered by LocalQueue usage; team-a's LocalQueue consumed 16 GPUs,
    # team-b's 2: b-new goes first although a-new is older.
    afs_cq = cq("cq-x", 16, None)
    afs_cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    queues = [lq("team-a", "cq-x"), lq("team-b", "cq-x")]
    for q, gpus in zip(queues, ("16", "2"), strict=True):
        q["status"] = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
            "consumedResources": {GPU: gpus}, "lastUpdate": "2026-01-01T00:00:00Z"}}}
    snap = EngineSnapshot(nodes=generate_nodes(CLUSTER), flavors=[FLAVOR], topologies=[TOPOLOGY],
                          workloads=[workload("a-new", 1, ns="team-a", created="2026-01-01T00:01:00Z"),
                                     workload("b-new", 1, ns="team-b", created="2026-01-01T00:02:00Z")],
                          cluster_queues=[afs_cq], local_queues=queues,
                          namespaces=[{"metadata": {"name": n}} for n in ("team-a", "team-b")])
    config = KueueConfig(admission_fair_sharing=AdmissionFairSharing(enabled=True, usage_half_life_time_s=3600))
    out = explain(snap, "team-a", "a-new", solver="greedy", config=config)
    assert (out["queue"]["position"], out["queue"]["ahead"]) == (2, 1)
    assert out["queue"]["admissionFairSharing"] == {"localQueue": "team-a/q", "usage": 16.0,
                                                    "others": {"team-b/q": 2.0}}
    assert ("Admission fair sharing orders this ClusterQueue by LocalQueue usage first: team-a/q 16 "
            "(lower goes first; others: team-b/q 2)") in to_text(out)
    plain = explain(snap, "team-a", "a-new", solver="greedy")  # no admissionFairSharing in the Configuration
    assert plain["queue"]["position"] == 1 and "admissionFairSharing" not in plain["queue"]
