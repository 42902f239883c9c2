"""How many pod sets a job may have, by Kueue release (issue 41, item 1): Kueue v0.17.0's Workload
holds 8 (the CRD's MaxItems), v0.19.2's 18 (``jobframework.MaxPodSets``); Ray's webhook counts
worker groups against 7 at v0.17.0 and pod sets (head included) against 18 at v0.19.2. Every
other kind over the cap is refused at the door (Kueue leaves it suspended with no Workload)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from admission.validation import validate_job
from admission.workloads import validate_workload
from scheduler.adapter.kinds import ray
from scheduler.adapter.manifest.checks import manifest_errors
from scheduler.adapter.manifest.podset_cap import pod_set_list_path
from scheduler.adapter.workload_checks import max_pod_sets, schema_problems
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates
from tests.unit.test_jobset_integration import jobset

V017, V019 = FeatureGates(release=KUEUE_V017), FeatureGates(release=KUEUE_V019)


def test_the_cap_per_release() -> None:
    assert (max_pod_sets(KUEUE_V017), max_pod_sets(KUEUE_V019)) == (8, 18)


def _rayjob(groups: int, mode: str = "HTTPMode") -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job", "namespace": "ns",
                                                                       "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"shutdownAfterJobFinishes": True, "submissionMode": mode, "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}},
                "workerGroupSpecs": [{"groupName": f"g{i}", "replicas": 1, "template": {
                    "spec": {"containers": [{"name": "w", "image": "ray"}]}}} for i in range(groups)]}}}


# pkg/controller/jobs/rayjob/rayjob_webhook_test.go TestValidateCreate, "invalid managed - too many
# worker groups": v0.17.0 has 8 worker groups -> TooMany(spec.rayClusterSpec.workerGroupSpecs, 8, 7);
# v0.19.2 has MaxPodSets (18) worker groups -> TooMany(..., MaxPodSets+1, MaxPodSets).
@pytest.mark.parametrize(("groups", "gates", "want"), [
    (7, V017, None),
    (8, V017, "spec.rayClusterSpec.workerGroupSpecs: Too many: 8: must have at most 7 items"),
    (8, V019, None),
    (17, V019, None),
    (18, V019, "spec.rayClusterSpec.workerGroupSpecs: Too many: 19: must have at most 18 items"),
])
def test_rayjob_worker_groups_as_kueues_webhook_counts_them(groups: int, gates: FeatureGates, want: str | None) -> None:
    errors = manifest_errors(_rayjob(groups), gates)
    assert errors == ([want] if want else [])


def test_a_rayjob_whose_submitter_takes_it_over_the_cap_is_refused_at_the_door() -> None:
    """K8sJobMode adds the submitter's pod set, which Kueue's webhook does not count: 7 worker
    groups pass Kueue v0.17.0's webhook and then its Workload (9 pod sets) cannot be created."""
    assert manifest_errors(_rayjob(6, "K8sJobMode"), V017) == []
    errors = manifest_errors(_rayjob(7, "K8sJobMode"), V017)
    assert errors[0].startswith("spec: Too many: 9: must have at most 8 items; its Workload would have 9 pod sets")
    assert manifest_errors(_rayjob(16, "K8sJobMode"), V019) == []
    assert manifest_errors(_rayjob(17, "K8sJobMode"), V019)[0].startswith("spec: Too many: 19: must have at most 18")


# raycluster_webhook_test.go at v0.19.2: MakeWorkerGroups(MaxPodSets) -> TooMany(spec.workerGroupSpecs, 19, 18).
def test_raycluster_and_rayservice_paths() -> None:
    assert ray.raycluster_errors({"spec": {"workerGroupSpecs": [{}] * 18}}, 18) == [
        ("spec.workerGroupSpecs", "TooMany", "must have at most 18 items", 19)]
    assert ray.raycluster_errors({"spec": {"workerGroupSpecs": [{}] * 8}}) == [
        ("spec.workerGroupSpecs", "TooMany", "must have at most 7 items", 8)]
    assert ray.rayservice_errors({"spec": {"rayClusterConfig": {"workerGroupSpecs": [{}] * 17}}}, 18) == []


def _jobset(replicated_jobs: int) -> dict[str, Any]:
    js = jobset()
    one = js["spec"]["replicatedJobs"][0]
    js["spec"]["replicatedJobs"] = [dict(copy.deepcopy(one), name=f"rj{i}") for i in range(replicated_jobs)]
    return js


def test_a_jobset_over_the_cap_is_refused_at_the_door_with_the_crds_words() -> None:
    verdict = validate_job(_jobset(9), gates=V017)
    assert not verdict.allowed
    assert verdict.message().startswith("spec.replicatedJobs: Too many: 9: must have at most 8 items; its Workload "
                                        "would have 9 pod sets and a Workload of Kueue v0.17.0 holds at most 8")
    assert validate_job(_jobset(8), gates=V017).allowed
    assert validate_job(_jobset(18), gates=V019).allowed
    assert "spec.replicatedJobs: Too many: 19: must have at most 18 items" in validate_job(_jobset(19),
                                                                                          gates=V019).message()


def test_the_cap_is_checked_on_update_too() -> None:
    old = _jobset(2)
    assert not validate_job(_jobset(9), old=old, gates=V017).allowed


def _workload(pod_sets: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"queueName": "q", "podSets": [{"name": f"p{i}", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}} for i in range(pod_sets)]}}


# apis/kueue/v1beta2/workload_types.go: spec.podSets MaxItems=8 at v0.17.0, MaxItems=18 at v0.19.2.
def test_workload_schema_follows_the_release() -> None:
    assert [str(p) for p in schema_problems(_workload(9))] == ["spec.podSets: Too many: 9: must have at most 8 items"]
    assert schema_problems(_workload(18), KUEUE_V019) == []
    assert [str(p) for p in schema_problems(_workload(19), KUEUE_V019)] == [
        "spec.podSets: Too many: 19: must have at most 18 items"]
    assert validate_workload(_workload(12), None, None, "u", (), FeatureGates(release=KUEUE_V019)).allowed
    assert not validate_workload(_workload(12), None, None, "u", (), FeatureGates(release=KUEUE_V017)).allowed


def test_pod_set_list_path() -> None:
    assert pod_set_list_path(["spec.replicatedJobs[0].template.a", "spec.replicatedJobs[1].template.a"]) == \
        "spec.replicatedJobs"
    assert pod_set_list_path(["spec.pytorchReplicaSpecs.Master.template", "spec.pytorchReplicaSpecs.Worker.template"]) \
        == "spec.pytorchReplicaSpecs"
    assert pod_set_list_path(["a", "b"]) == "spec"
