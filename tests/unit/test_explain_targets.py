"""toposched explain on the kinds without one Workload of their own (Deployment, StatefulSet,
LeaderWorkerSet, plain pod groups) and on a misspelled queue: the true state, no broken lines."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.kinds.leaderworkerset import LEADERWORKERSET
from scheduler.adapter.kinds.podgroups import group_workload_name
from scheduler.adapter.kinds.statefulset import STATEFULSET
from scheduler.api.engine import EngineSnapshot
from scheduler.explain import explain, to_text
from tests.unit.test_explain import snap, workload

NS = "team-a"
ADMITTED = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""},
                           {"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""}],
            "admission": {"clusterQueue": "cq-a", "podSetAssignments": [
                {"name": "main", "flavors": {"nvidia.com/gpu": "p5"}, "count": 1}]}}


def with_objects(base: EngineSnapshot, jobs: list[dict[str, Any]], pods: list[dict[str, Any]],
                 workloads: list[dict[str, Any]]) -> EngineSnapshot:
    o = base.objects
    return EngineSnapshot(nodes=o.nodes, pods=pods, flavors=o.flavors, topologies=o.topologies,
                          workloads=[*o.workloads, *workloads], jobs=jobs, cluster_queues=o.cluster_queues,
                          local_queues=o.local_queues, namespaces=o.namespaces)


def pod(name: str, labels: dict[str, str] | None = None, owner: dict[str, Any] | None = None,
        phase: str = "Running", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": labels or {},
                         "annotations": annotations or {}, "ownerReferences": [owner] if owner else []},
            "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": phase}}


def owned(wl: dict[str, Any], uid: str, admitted: bool) -> dict[str, Any]:
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": uid,
                                          "controller": True}]
    if admitted:
        wl["status"] = ADMITTED
    return wl


def deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": NS, "uid": "uid-web",
                         "labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {"replicas": replicas}}


def replica(name: str) -> dict[str, Any]:
    return pod(name, {"pod-template-hash": "abc", "kueue.x-k8s.io/queue-name": "q"},
               {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "rs", "controller": True})


def test_deployment_with_its_replicas_admitted_and_running() -> None:
    pods = [replica("web-abc-1"), replica("web-abc-2")]
    wls = [owned(workload(f"pod-web-abc-{i}-x", 1), f"uid-web-abc-{i}", True) for i in (1, 2)]
    out = explain(with_objects(snap(), [deployment(2)], pods, wls), NS, "web")
    assert out["admitted"] is True and out["kind"] == "Deployment" and out["clusterQueue"] == "cq-a"
    assert out["reasons"][0]["message"].startswith("2 of 2 replicas admitted, 2 running")
    text = to_text(out)
    assert "team-a/web (Deployment) is admitted in ClusterQueue cq-a: nothing is pending." in text
    assert "NoWorkload" not in text and "is not admitted" not in text


def test_deployment_with_a_replica_pending_explains_that_replica() -> None:
    pods = [replica("web-abc-1"), replica("web-abc-2")]
    wls = [owned(workload("pod-web-abc-1-x", 1), "uid-web-abc-1", True),
           owned(workload("pod-web-abc-2-x", 9), "uid-web-abc-2", False)]  # 9 x 8 GPUs: more than cq-a has
    pods[1]["status"]["phase"] = "Pending"
    out = explain(with_objects(snap(), [deployment(3)], pods, wls), NS, "web", solver="greedy")
    assert out["admitted"] is False and out["pendingMember"]["workload"] == "pod-web-abc-2-x"
    assert out["reasons"][0]["message"].startswith("1 of 3 replicas admitted, 1 running (2 pods exist)")
    assert out["quota"]["clusterQueue"] == "cq-a" and out["queue"]["position"] == 1
    text = to_text(out)
    assert "Explained below: replica pod-web-abc-2-x (pods: web-abc-2), not admitted (ClusterQueue cq-a)." in text


def test_incomplete_pod_group_says_how_many_pods_exist() -> None:
    group = {"kueue.x-k8s.io/pod-group-name": "g1", "kueue.x-k8s.io/queue-name": "q"}
    total = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    pods = [pod("g1-a", group, annotations=total, phase="Pending")]
    out = explain(with_objects(snap(), pods, pods, []), NS, "g1-a")
    assert out["admitted"] is False and out["kind"] == "pod group"
    assert out["reasons"][0]["message"] == "pod group g1: 1 of 2 pods exist, 0 running"
    assert out["reasons"][1]["reason"] == "PodGroupIncomplete"
    assert explain(with_objects(snap(), pods, pods, []), NS, "g1")["reasons"] == out["reasons"]  # by group name
    assert "NoWorkload" not in to_text(out)


def test_statefulset_and_leaderworkerset_groups() -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "db", "namespace": NS, "uid": "uid-db", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"replicas": 2}}
    name = group_workload_name(STATEFULSET, sts, 0)
    wl = workload(name, 2)
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                                          "uid": "uid-db"}]
    wl["status"] = ADMITTED
    pods = [pod(f"db-{i}", {"kueue.x-k8s.io/pod-group-name": name}) for i in (0, 1)]
    out = explain(with_objects(snap(), [sts], pods, [wl]), NS, "db")
    assert out["admitted"] is True and out["reasons"][0]["message"].startswith("1 of 1 group admitted, 2 of 2 pods")
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "lws", "namespace": NS, "uid": "uid-lws", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2}}}
    first = workload(group_workload_name(LEADERWORKERSET, lws, 0), 2)
    first["metadata"]["ownerReferences"] = [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                             "name": "lws", "uid": "uid-lws"}]
    first["status"] = ADMITTED
    out = explain(with_objects(snap(), [lws], [], [first]), NS, "lws")
    assert out["admitted"] is False
    assert out["reasons"][0]["message"].startswith("1 of 2 groups admitted, 0 of 2 pods running")
    assert out["reasons"][1]["reason"] == "NoWorkload" and group_workload_name(LEADERWORKERSET, lws, 1) in \
        out["reasons"][1]["message"]


def test_misspelled_queue_no_broken_lines() -> None:
    wl = workload("typo", 1)
    wl["spec"]["queueName"] = "qq"
    out = explain(snap(wl), NS, "typo", solver="greedy")
    assert out["reasons"][0]["message"] == "LocalQueue qq doesn't exist"
    text = to_text(out)
    assert "Queue: position" not in text and " in  (" not in text and "()" not in text
    assert "queue" not in out and "quota" not in out


def test_list_items_without_kind_are_read_as_their_kind() -> None:
    """A list response's items carry no kind or apiVersion: `explain --kubeconfig` stamps them
    with the kind it listed, or a Deployment would read as no kind at all."""
    from scheduler.commands.explain import read_cluster

    bare = {k: v for k, v in deployment(2).items() if k not in ("kind", "apiVersion")}

    class Lists:
        def list(self, resource: Any, **_: Any) -> dict[str, Any]:
            return {"items": [bare] if resource.plural == "deployments" else []}

    snapshot = read_cluster(Lists())
    assert [(j["kind"], j["apiVersion"]) for j in snapshot.jobs_raw] == [("Deployment", "apps/v1")]
    out = explain(snapshot, NS, "web")
    assert out["kind"] == "Deployment" and out["reasons"][0]["reason"] == "Replicas"


def test_a_trainjob_before_its_jobset_of_the_same_name_and_a_rayjob() -> None:
    train = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
             "metadata": {"name": "t", "namespace": NS, "uid": "uid-t", "labels": {"kueue.x-k8s.io/queue-name": "q"}}}
    child = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
             "metadata": {"name": "t", "namespace": NS, "uid": "uid-js", "labels": {"kueue.x-k8s.io/queue-name": "q"},
                          "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                               "name": "t", "uid": "uid-t", "controller": True}]}}
    ray = {"apiVersion": "ray.io/v1", "kind": "RayJob",
           "metadata": {"name": "r", "namespace": NS, "uid": "uid-r", "labels": {"kueue.x-k8s.io/queue-name": "q"}}}
    wls = []
    for name, owner in (("trainjob-t-1", train), ("rayjob-r-1", ray)):
        wl = workload(name, 1)
        wl["metadata"]["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                              "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                              "controller": True}]
        wl["status"] = ADMITTED
        wls.append(wl)
    state = with_objects(snap(), [child, train, ray], [], wls)
    for name, wl in (("t", "trainjob-t-1"), ("r", "rayjob-r-1")):
        out = explain(state, NS, name)
        assert out["admitted"] is True and out["workload"] == wl, out
