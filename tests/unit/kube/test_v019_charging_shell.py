"""The controller under ``--kueue-version v0.19`` (issue 41, items 3 and 5): a SidecarMode
RayJob's Workload charges the submitter on its head and the job starts and keeps running (the
equivalence check compares under the same charges); an evicted plain Pod's Workload is not
requeued (SkipReassignmentForPodOwnedWorkloads, Kueue v0.19.2's jobframework/reconciler.go)."""

from __future__ import annotations

import copy

from scheduler.adapter.kinds.ray import RAYJOB
from scheduler.core.config import KUEUE_V019, kueue_defaults
from scheduler.k8s.informer import CLUSTER_QUEUES, NODES, PODS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.jobs import resource_of
from tests.unit.kube.test_new_kinds_phases import Q, create, gated_pod, ray_cluster_spec, reconcile, workloads
from tests.unit.kube.test_phases import GPU, NS, Harness, assigned_hosts


def v019(harness: Harness) -> Harness:
    harness.rebuild(config=kueue_defaults(KUEUE_V019))
    return harness


def test_a_sidecar_mode_rayjob_is_charged_its_submitter_and_runs(harness: Harness) -> None:
    harness = v019(harness)
    harness.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": [GPU, "cpu", "memory"], "flavors": [{"name": "gpu", "resources": [
            {"name": GPU, "nominalQuota": "32"}, {"name": "cpu", "nominalQuota": "8"},
            {"name": "memory", "nominalQuota": "8Gi"}]}]}]}})
    spec = ray_cluster_spec()
    create(harness, resource_of(RAYJOB), {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj", "namespace": NS, "labels": dict(Q)},
        "spec": {"suspend": True, "submissionMode": "SidecarMode", "shutdownAfterJobFinishes": True,
                 "rayClusterSpec": copy.deepcopy(spec)}})
    reconcile(harness, 4)
    [wl] = workloads(harness)
    head = wl["spec"]["podSets"][0]
    assert [c["name"] for c in head["template"]["spec"]["containers"]] == ["node", "ray-job-submitter"]
    assert wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] == "500m"
    started = harness.api.get(resource_of(RAYJOB), "rj", NS)
    assert started["spec"]["suspend"] is False
    # the job's own head template is left as written (KubeRay adds the submitter itself)
    assert [c["name"] for c in started["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]] \
        == ["node"]
    reconcile(harness, 2)
    assert [w["metadata"]["uid"] for w in workloads(harness)] == [wl["metadata"]["uid"]]  # not a mismatch
    assert "Stopped" not in harness.event_reasons()


def test_an_evicted_pod_owned_workload_is_not_requeued_under_v019(harness: Harness) -> None:
    harness = v019(harness)
    create(harness, PODS, gated_pod("solo", Q))
    reconcile(harness, 3)
    [wl] = workloads(harness)
    conditions = st.set_condition(st.conditions_of(wl), st.EVICTED, "True", "Preempted", "Preempted by test",
                                  harness.clock())
    harness.api.merge_patch(WORKLOADS, wl["metadata"]["name"], {"status": {"conditions": conditions}}, NS,
                            subresource="status")
    harness.sync()
    reconcile(harness, 2)
    assert "solo" not in [p["metadata"]["name"] for p in harness.api.objects(PODS, NS)]
    requeued = st.find_condition(harness.api.get(WORKLOADS, wl["metadata"]["name"], NS), st.REQUEUED)
    assert requeued is not None and (requeued["status"], requeued["reason"]) == ("False", "Preempted")


def _pod_owned_workload_on_a_deleted_node(harness: Harness) -> tuple[dict[str, int], dict[str, int]]:
    wl = harness.admitted("train", 1)
    before = assigned_hosts(wl)
    harness.api.merge_patch(WORKLOADS, wl["metadata"]["name"], {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "solo", "uid": "pod-uid"}]}}, NS)
    harness.sync()
    harness.controller.node_failures.run()  # a pass sees the node while it exists
    harness.api.delete(NODES, next(iter(before)))
    harness.sync()
    harness.controller.node_failures.run()
    harness.sync()
    return before, assigned_hosts(harness.workload())


def test_a_pod_owned_workload_keeps_its_failed_node_under_v019(harness: Harness) -> None:
    # the controller wires SkipReassignmentForPodOwnedWorkloads into the node-failure phase
    before, after = _pod_owned_workload_on_a_deleted_node(v019(harness))
    assert after == before and not st.condition_true(harness.workload(), st.EVICTED)
    assert "NodeReplaced" not in harness.event_reasons()


def test_under_v017_the_same_workload_is_hot_swapped(harness: Harness) -> None:
    before, after = _pod_owned_workload_on_a_deleted_node(harness)
    assert after != before and "NodeReplaced" in harness.event_reasons()
