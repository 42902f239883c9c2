"""LeaderWorkerSet end to end: the real LWS v0.8.0 controller (built from the Go module proxy;
the release Kueue v0.17.0 is built against; its LWS and pod webhooks on loopback) next to
toposched's webhook, controller, extender and the real kube-scheduler. As Kueue's LWS
integration: one Workload per group with a ``leader`` and a ``worker`` pod set, the group's
pods labelled with it (Kueue's pod-group labels) and held until it is admitted; leader and
workers of a PodSet group share the required domain; scaling down deletes the group's
Workload."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.devcluster.lws import start_lws
from scheduler.k8s.informer import LEADERWORKERSETS, PODS, WORKLOADS
from tests.e2e.conftest import Stack

CLUSTER = {"name": "e2e-lws", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}
NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
L3 = "topology.k8s.aws/network-node-layer-3"
GROUP = {"kueue.x-k8s.io/podset-required-topology": L3, "kueue.x-k8s.io/podset-group-name": "serving"}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, before_toposched=start_lws)


def template(name: str) -> dict[str, Any]:
    return {"metadata": {"annotations": dict(GROUP)}, "spec": {"containers": [{
        "name": name, "image": "busybox",
        "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}


def leaderworkerset(name: str, replicas: int, size: int) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": size, "leaderTemplate": template("leader"), "workerTemplate": template("worker")}}}


def pods_of(stack: Stack, name: str) -> list[dict[str, Any]]:
    pods = stack.api.list(PODS, NS, labelSelector=f"leaderworkerset.sigs.k8s.io/name={name}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def running(stack: Stack, name: str, count: int) -> list[dict[str, Any]] | None:
    up = [p for p in pods_of(stack, name) if p["status"].get("phase") == "Running"]
    return up if len(up) == count else None


def workloads_of(stack: Stack, uid: str) -> list[dict[str, Any]]:
    return sorted((w for w in stack.api.list(WORKLOADS, NS)["items"]
                   if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences") or ())),
                  key=lambda w: w["metadata"]["annotations"]["kueue.x-k8s.io/component-workload-index"])


def test_lws_groups_are_workloads_placed_with_their_leader_and_scaled_down(stack: Stack) -> None:
    created = stack.api.create(LEADERWORKERSETS, leaderworkerset("vllm", 2, 4), NS)
    lwt = created["spec"]["leaderWorkerTemplate"]
    assert "suspend" not in created["spec"]  # an LWS is never suspended: its pods are held instead
    for t in ("leaderTemplate", "workerTemplate"):
        assert lwt[t]["spec"]["schedulerName"] == "toposched"
        assert lwt[t]["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == \
            "leaderworkerset.x-k8s.io/leaderworkerset"
    pods = stack.wait(lambda: running(stack, "vllm", 8), 180, "2 groups x (leader + 3 workers) Running")
    wls = workloads_of(stack, created["metadata"]["uid"])
    assert [w["metadata"]["name"].rsplit("-", 1)[0] for w in wls] == ["leaderworkerset-vllm-0",
                                                                      "leaderworkerset-vllm-1"]
    for index, wl in enumerate(wls):
        assert wl["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-gvk"] == \
            "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"
        assert wl["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [("leader", 1), ("worker", 3)]
        assert {c["type"]: c["status"] for c in wl["status"]["conditions"]}["Admitted"] == "True"
        group = [p for p in pods if p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] == str(index)]
        assert {p["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] for p in group} == {
            wl["metadata"]["name"]}
        roles = sorted(p["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] for p in group)
        assert roles == ["leader", "worker", "worker", "worker"]
        node_labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in stack.nodes}
        domains = {node_labels[p["spec"]["nodeName"]][L3] for p in group}
        assert len(domains) == 1, domains  # the leader shares its workers' layer-3 domain
        print(f"\n[lws] group {index}: workload {wl['metadata']['name']} in {domains.pop()}")

    stack.api.merge_patch(LEADERWORKERSETS, "vllm", {"spec": {"replicas": 1}}, NS)
    stack.wait(lambda: len(workloads_of(stack, created["metadata"]["uid"])) == 1, 90,
               "group 1's Workload deleted after scaling down")
    stack.wait(lambda: running(stack, "vllm", 4), 90, "one group left Running")
    stack.api.delete(LEADERWORKERSETS, "vllm", NS, propagationPolicy="Background")


def test_lws_group_waits_while_its_workload_cannot_be_admitted(stack: Stack) -> None:
    """A group of 4 that does not fit now (every layer-3 domain taken) stays pending with its pods
    labelled and held by the extender (Kueue holds them with its admission scheduling gate),
    never bound; it runs once capacity frees."""
    stack.api.create(LEADERWORKERSETS, leaderworkerset("fill", 4, 4), NS)  # 16 nodes: everything
    stack.wait(lambda: running(stack, "fill", 16), 180, "4 groups fill the cluster")
    late = stack.api.create(LEADERWORKERSETS, leaderworkerset("late", 1, 4), NS)
    stack.wait(lambda: len(pods_of(stack, "late")) >= 1 and workloads_of(stack, late["metadata"]["uid"]), 60,
               "the late group's Workload and leader pod exist")
    stack.wait(lambda: all(p["metadata"]["labels"].get("kueue.x-k8s.io/prebuilt-workload-name")
                           for p in pods_of(stack, "late")), 60, "the late group's pods labelled")
    assert not any(p["spec"].get("nodeName") for p in pods_of(stack, "late"))  # held: never bound
    [wl] = workloads_of(stack, late["metadata"]["uid"])
    assert {c["type"]: c["status"] for c in wl["status"].get("conditions") or ()}.get("QuotaReserved") != "True"
    stack.api.delete(LEADERWORKERSETS, "fill", NS, propagationPolicy="Background")
    stack.wait(lambda: running(stack, "late", 4), 180, "the late group admitted and Running once capacity frees")
    stack.api.delete(LEADERWORKERSETS, "late", NS, propagationPolicy="Background")
