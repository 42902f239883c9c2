"""KubeRay kinds as Kueue v0.17.0 reads them: the cases of Kueue's
pkg/controller/jobs/rayjob/rayjob_controller_test.go (TestPodSets, Test_RayJobFinished) and
raycluster_controller_test.go restated on dicts, plus suspend paths and webhook messages."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.adapter.kinds import ray
from scheduler.adapter.kinds.base import PodSetStart, merge_patched
from scheduler.adapter.kinds.ray import RAYCLUSTER, RAYJOB, RAYSERVICE
from scheduler.adapter.kinds.registry import kind_of
from scheduler.adapter.kinds.workloads import workload_pod_sets


class _PodSets:
    """Kueue's pod sets of a Ray object (the Workload's), as the old per-family reader gave them."""

    @staticmethod
    def pod_sets(obj: dict[str, Any]) -> list[dict[str, Any]]:
        kind = kind_of(obj)
        assert kind is not None
        return workload_pod_sets(kind, obj)


pod_sets_of = _PodSets.pod_sets

REQ, PREF = "kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"


def template(container: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"spec": {"containers": [{"name": container, "image": f"{container}-image"}]}}
    if annotations:
        out["metadata"] = {"annotations": annotations}
    return out


def cluster_spec(head_ann: dict[str, str] | None = None, g1_ann: dict[str, str] | None = None,
                 g2_ann: dict[str, str] | None = None) -> dict[str, Any]:
    return {"headGroupSpec": {"template": template("head_c", head_ann)},
            "workerGroupSpecs": [{"groupName": "group1", "template": template("group1_c", g1_ann)},
                                 {"groupName": "group2", "replicas": 3, "template": template("group2_c", g2_ann)}]}


def rayjob(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Kueue's test RayJobs leave submissionMode unset (Go's zero value, not K8sJobMode): HTTPMode here."""
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rayjob", "namespace": "ns"},
            "spec": {"rayClusterSpec": spec, "submissionMode": "HTTPMode", **extra}}


def shape(pod_sets: list[dict[str, Any]]) -> list[tuple[str, int, dict[str, Any] | None]]:
    return [(ps["name"], ps["count"], ps.get("topologyRequest")) for ps in pod_sets]


def test_no_annotations_head_then_groups_nil_replicas_count_one() -> None:
    job = rayjob(cluster_spec())
    pod_sets = pod_sets_of(job)
    assert shape(pod_sets) == [("head", 1, None), ("group1", 1, None), ("group2", 3, None)]
    assert pod_sets[0]["template"] == job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]
    assert pod_sets[2]["template"]["spec"]["containers"][0]["name"] == "group2_c"


def test_required_and_preferred_topology_annotations_per_group() -> None:
    required = pod_sets_of(rayjob(cluster_spec({REQ: "cloud.com/block"}, {REQ: "cloud.com/block"})))
    assert shape(required) == [("head", 1, {"required": "cloud.com/block"}),
                               ("group1", 1, {"required": "cloud.com/block"}), ("group2", 3, None)]
    preferred = pod_sets_of(rayjob(cluster_spec({PREF: "cloud.com/block"}, None, {PREF: "cloud.com/block"})))
    assert shape(preferred) == [("head", 1, {"preferred": "cloud.com/block"}), ("group1", 1, None),
                                ("group2", 3, {"preferred": "cloud.com/block"})]


def test_k8s_job_mode_adds_the_default_submitter_pod_set() -> None:
    spec = {"headGroupSpec": {"template": template("head_c", {REQ: "cloud.com/rack"})},
            "workerGroupSpecs": [{"groupName": "group1", "replicas": 3,
                                  "template": template("group1_c", {PREF: "cloud.com/block"})}]}
    pod_sets = pod_sets_of(rayjob(spec, submissionMode="K8sJobMode"))
    assert shape(pod_sets) == [("head", 1, {"required": "cloud.com/rack"}),
                               ("group1", 3, {"preferred": "cloud.com/block"}), ("submitter", 1, None)]
    assert pod_sets[2]["template"] == {"spec": {
        "containers": [{"name": "ray-job-submitter", "image": "head_c-image",
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                      "requests": {"cpu": "500m", "memory": "200Mi"}}}],
        "restartPolicy": "Never"}}
    # HTTPMode has no submitter Job; a manifest without a mode has the CRD's default, K8sJobMode
    assert [ps["name"] for ps in pod_sets_of(rayjob(spec, submissionMode="HTTPMode"))] == ["head", "group1"]
    unset = rayjob(spec)
    del unset["spec"]["submissionMode"]
    assert [ps["name"] for ps in pod_sets_of(unset)] == ["head", "group1", "submitter"]


def test_submitter_topology_from_the_given_submitter_template() -> None:
    job = rayjob(cluster_spec(), submissionMode="K8sJobMode",
                 submitterPodTemplate=template("submit", {REQ: "cloud.com/rack"}))
    assert shape(pod_sets_of(job))[-1] == ("submitter", 1, {"required": "cloud.com/rack"})


def test_num_of_hosts_multiplies_the_worker_count_and_the_whole_cluster_is_charged() -> None:
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "c"},
               "spec": {"headGroupSpec": {"template": template("h")},
                        "workerGroupSpecs": [{"groupName": "tpu", "replicas": 2, "numOfHosts": 4,
                                              "template": template("w")},
                                             {"groupName": "cpu", "replicas": 0, "template": template("c")}]}}
    assert shape(pod_sets_of(cluster)) == [("head", 1, None), ("tpu", 8, None), ("cpu", 0, None)]


@pytest.mark.parametrize(("job_status", "deployment", "success", "done"), [
    ("RUNNING", "Running", False, False),
    ("SUCCEEDED", "Complete", True, True),
    ("FAILED", "Complete", False, True),
    ("FAILED", "Failed", False, True),
    ("RUNNING", "Failed", False, True),  # activeDeadlineSeconds exceeded
])
def test_rayjob_finished(job_status: str, deployment: str, success: bool, done: bool) -> None:
    job = {**rayjob(cluster_spec()), "status": {"jobStatus": job_status, "jobDeploymentStatus": deployment,
                                                "message": "m"}}
    state = RAYJOB.finish_state(job)
    assert (state.finished, state.reason == "Succeeded") == (done, success)
    if done:
        assert state.message == "m"


def test_raycluster_and_rayservice_never_finish() -> None:
    for kind in (RAYCLUSTER, RAYSERVICE):
        assert not kind.finish_state({"kind": kind.kind, "status": {"state": "failed"}}).finished


def test_active_and_suspended_per_kind() -> None:
    assert not RAYJOB.active_pods({"kind": "RayJob", "status": {"jobDeploymentStatus": "Suspended"}})
    assert not RAYJOB.active_pods({"kind": "RayJob", "status": {}})  # New
    assert RAYJOB.active_pods({"kind": "RayJob", "status": {"jobDeploymentStatus": "Initializing"}})
    assert RAYCLUSTER.active_pods({"kind": "RayCluster", "status": {"state": "ready"}})
    assert not RAYCLUSTER.active_pods({"kind": "RayCluster", "status": {"state": "suspended"}})
    service = {"kind": "RayService", "spec": {"rayClusterConfig": {"suspend": True}},
               "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert RAYSERVICE.active_pods(service) and RAYSERVICE.is_suspended(service)
    assert not RAYSERVICE.is_suspended({"kind": "RayService", "spec": {"suspend": True, "rayClusterConfig": {}}})
    assert RAYSERVICE.stop_patch(service) == {"spec": {"rayClusterConfig": {"suspend": True}}}
    assert RAYJOB.stop_patch({"kind": "RayJob"}) == {"spec": {"suspend": True}}


SEL = {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}


def start(name: str, assigned: bool = False) -> PodSetStart:
    return PodSetStart(name, SEL, topology_assigned=assigned)


def test_start_patch_unsuspends_and_patches_every_template_carrying_the_group_list_whole() -> None:
    job = rayjob(cluster_spec(), submissionMode="K8sJobMode", suspend=True)
    [patch] = RAYJOB.start_writes(job, "wl", [start("head"), start("group2", assigned=True), start("submitter")])
    started = merge_patched(job, patch)
    assert started["spec"]["suspend"] is False
    rcs = started["spec"]["rayClusterSpec"]
    assert rcs["headGroupSpec"]["template"]["spec"]["nodeSelector"] == SEL
    assert [g["groupName"] for g in rcs["workerGroupSpecs"]] == ["group1", "group2"]
    assert "nodeSelector" not in rcs["workerGroupSpecs"][0]["template"]["spec"]
    group2 = rcs["workerGroupSpecs"][1]["template"]
    assert group2["spec"]["nodeSelector"] == SEL
    # Kueue's FromAssignment: a pod set admitted with a topology assignment is gated for the ungater
    assert group2["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert group2["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "group2"
    assert group2["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == "wl"
    assert "schedulingGates" not in rcs["headGroupSpec"]["template"]["spec"]
    # the default submitter template is written out whole (a partial template would be invalid)
    submitter = started["spec"]["submitterPodTemplate"]
    assert submitter["spec"]["nodeSelector"] == SEL
    assert submitter["spec"]["containers"][0]["name"] == "ray-job-submitter"
    assert pod_sets_of(started)[-1]["template"]["spec"]["containers"][0]["name"] == "ray-job-submitter"
    # restore undoes it from the Workload's pod sets
    restore = RAYJOB.restore_patch(merge_patched(started, {"spec": {"suspend": True}}), workload_pod_sets(RAYJOB, job))
    assert restore is not None
    restored = merge_patched(started, restore)["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]["template"]
    assert "schedulingGates" not in restored["spec"] and "nodeSelector" not in restored["spec"]


def test_rayservice_start_patch_unsuspends_inside_the_cluster_spec() -> None:
    # KubeRay's JSON field is rayClusterConfig (Kueue's Go field RayClusterSpec)
    service = {"kind": "RayService", "spec": {"rayClusterConfig": {**cluster_spec(), "suspend": True}}}
    started = merge_patched(service, RAYSERVICE.start_patch(service, "wl", [start("head")]))
    config = started["spec"]["rayClusterConfig"]
    assert config["suspend"] is False and "suspend" not in started["spec"]
    assert config["headGroupSpec"]["template"]["spec"]["nodeSelector"] == SEL
    assert [ps["name"] for ps in pod_sets_of(service)] == ["head", "group1", "group2"]


def test_webhook_messages_are_kueues() -> None:
    spec = {**cluster_spec(), "enableInTreeAutoscaling": True}
    spec["workerGroupSpecs"] = [{"groupName": "head"}] + [{"groupName": f"g{i}"} for i in range(7)]
    errors = [e[:3] for e in ray.rayjob_errors(rayjob(spec))]
    assert ("spec.shutdownAfterJobFinishes", "Invalid",
            "a kueue managed job should delete the cluster after finishing") in errors
    assert ("spec.rayClusterSpec.enableInTreeAutoscaling", "Invalid",
            "a kueue managed job should only use autoscaling when workload slicing is enabled") in errors
    assert ("spec.rayClusterSpec.workerGroupSpecs", "TooMany", "must have at most 7 items") in errors
    assert ("spec.rayClusterSpec.workerGroupSpecs[0].groupName", "Forbidden",
            '"head" is reserved for the head group') in errors
    cluster_errors = [e[:3] for e in ray.raycluster_errors({"kind": "RayCluster",
                                                             "spec": {"enableInTreeAutoscaling": True}})]
    assert cluster_errors == [("spec.enableInTreeAutoscaling", "Invalid",
                               "a kueue managed job can use autoscaling only when the ElasticJobsViaWorkloadSlices "
                               "feature gate is on and the job is an elastic job")]
    assert ray.rayjob_errors(rayjob(cluster_spec(), clusterSelector={"a": "b"})) == [
        ("spec.clusterSelector", "Invalid", "a kueue managed job should not use an existing cluster", {"a": "b"})]
    assert ray.rayjob_errors({"kind": "RayJob", "spec": {}}) == [
        ("spec.rayClusterSpec", "Required",
         "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector", None)]
    assert ray.rayjob_errors({"kind": "RayJob", "spec": {"clusterSelector": {"a": "b"}}}) == []
    assert RAYJOB.skipped({"kind": "RayJob", "spec": {"clusterSelector": {"a": "b"}}})


def test_cluster_name_of_each_kind() -> None:
    assert ray.cluster_name({"kind": "RayCluster", "metadata": {"name": "c"}}) == "c"
    assert ray.cluster_name({"kind": "RayJob", "status": {"rayClusterName": "j-abc"}}) == "j-abc"
    assert ray.cluster_name({"kind": "RayService", "status": {"activeServiceStatus": {"rayClusterName": "s"}}}) == "s"
