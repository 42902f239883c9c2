"""What Kueue v0.19.2 charges that v0.17.0 does not (issue 41 item 3), restated on dicts:

- pkg/controller/jobs/raycluster/common_test.go TestBuildPodSets at v0.19.2: "spec with gcs
  fault tolerance", "spec with gcs fault tolerance annotation", "spec with gcs fault tolerance
  and missing head container", "autoscaler sidecar added to head podSet with default resources
  when in-tree autoscaling is enabled", "autoscaler sidecar uses AutoscalerOptions.Resources
  override when set";
- pkg/controller/jobs/rayjob/rayjob_controller_test.go TestPodSets at v0.19.2: "with sidecar
  submission mode accounts for the injected submitter on the head podSet";
- pkg/workload/resources_test.go TestAdjustResources at v0.19.2: "Apply pod-level limits to
  requests";
- test/integration/singlecluster/scheduler/scheduler_test.go at v0.19.2 (also in v0.17.0 through
  component-helpers' PodRequests): "Pod-level resources are counted against ClusterQueue quota".

Under v0.17 (the default) none of Kueue v0.19's Ray charges apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.adapter.files import load_workload
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.charging import charged_pod_sets
from scheduler.adapter.kinds.equivalence import equivalent, job_pod_sets
from scheduler.adapter.kinds.ray import RAYCLUSTER, RAYJOB, RAYSERVICE
from scheduler.adapter.kinds.workloads import workload_for_job, workload_pod_sets
from scheduler.adapter.manifest.shape import shape_errors
from scheduler.core.config import KUEUE_V017, KUEUE_V019
from scheduler.core.nodes import pod_spec_requests
from scheduler.core.workload import WorkloadFormatError, workload_from_kueue

SUBMITTER = {"name": "ray-job-submitter",
             "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}}


def worker_group() -> dict[str, Any]:
    return {"groupName": "workers", "replicas": 1, "template": {"spec": {"containers": [{"name": "worker"}]}}}


def head(requests: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "head", "image": "rayproject/ray:2.0.0"}
    if requests is not None:
        container["resources"] = {"requests": requests}
    return {"template": {"metadata": {"labels": {"ray.io/cluster": "raycluster"}}, "spec": {"containers": [container]}}}


def raycluster(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "raycluster", "namespace": "ns", "uid": "u1"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def head_containers(pod_sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert pod_sets[0]["name"] == "head"
    return list(pod_sets[0]["template"]["spec"]["containers"])


def test_gcs_fault_tolerance_folds_the_redis_cleanup_into_the_head_container() -> None:
    # "spec with gcs fault tolerance": head requests cpu 1 -> cpu 1 (kept, larger), memory 256Mi added.
    obj = raycluster({"gcsFaultToleranceOptions": {"redisAddress": "redis:6379"},
                      "headGroupSpec": head({"cpu": "1"}), "workerGroupSpecs": [worker_group()]})
    pod_sets = workload_pod_sets(RAYCLUSTER, obj, release=KUEUE_V019)
    assert head_containers(pod_sets) == [{"name": "head", "image": "rayproject/ray:2.0.0",
                                          "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]
    assert pod_sets[1]["template"] == {"spec": {"containers": [{"name": "worker"}]}}
    # v0.17.0 charges the head as written.
    assert head_containers(workload_pod_sets(RAYCLUSTER, obj)) == [
        {"name": "head", "image": "rayproject/ray:2.0.0", "resources": {"requests": {"cpu": "1"}}}]


def test_gcs_fault_tolerance_annotation_charges_the_cleanup_requests() -> None:
    # "spec with gcs fault tolerance annotation": no requests -> 200m / 256Mi.
    obj = raycluster({"headGroupSpec": head()}, {"ray.io/ft-enabled": "true"})
    assert head_containers(workload_pod_sets(RAYCLUSTER, obj, release=KUEUE_V019)) == [
        {"name": "head", "image": "rayproject/ray:2.0.0",
         "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]
    per_pod = workload_from_kueue({"metadata": {"name": "w", "namespace": "ns"}, "spec": {
        "podSets": workload_pod_sets(RAYCLUSTER, obj, release=KUEUE_V019)}}).pod_sets[0].requests
    assert per_pod == {"cpu": 200, "memory": 256 * 1024 ** 2}


def test_gcs_fault_tolerance_without_a_head_container_makes_no_workload() -> None:
    # "spec with gcs fault tolerance and missing head container": wantErr.
    obj = raycluster({"gcsFaultToleranceOptions": {"redisAddress": "redis:6379"}, "headGroupSpec": {"template": {}}})
    with pytest.raises(WorkloadFormatError, match="head pod template must include the Ray container"):
        workload_pod_sets(RAYCLUSTER, obj, release=KUEUE_V019)
    workload_pod_sets(RAYCLUSTER, obj, release=KUEUE_V017)  # v0.17.0 builds it


@pytest.mark.parametrize("options,resources", [
    (None, {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}),
    ({"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}},
     {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}),
], ids=["default resources", "AutoscalerOptions.Resources override"])
def test_in_tree_autoscaling_charges_the_autoscaler_sidecar(options: dict[str, Any] | None,
                                                            resources: dict[str, Any]) -> None:
    spec: dict[str, Any] = {"enableInTreeAutoscaling": True, "headGroupSpec": head()}
    if options is not None:
        spec["autoscalerOptions"] = options
    service = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "s", "namespace": "ns"},
               "spec": {"rayClusterConfig": spec}}
    for kind, obj in ((RAYCLUSTER, raycluster(spec)), (RAYSERVICE, service)):
        assert head_containers(workload_pod_sets(kind, obj, release=KUEUE_V019))[1:] == [
            {"name": "autoscaler", "resources": resources}]
        assert len(head_containers(workload_pod_sets(kind, obj))) == 1


def rayjob(mode: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rayjob", "namespace": "ns", "uid": "u2"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": {
        "submissionMode": mode, "rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head_c"}]}}},
            "workerGroupSpecs": [{"groupName": "group1",
                                  "template": {"spec": {"containers": [{"name": "group1_c"}]}}}]}}}


def test_sidecar_mode_charges_the_submitter_on_the_head() -> None:
    # "with sidecar submission mode accounts for the injected submitter on the head podSet".
    pod_sets = workload_pod_sets(RAYJOB, rayjob("SidecarMode"), release=KUEUE_V019)
    assert [ps["name"] for ps in pod_sets] == ["head", "group1"]
    assert head_containers(pod_sets) == [{"name": "head_c"}, SUBMITTER]
    assert workload_from_kueue({"metadata": {"name": "w", "namespace": "ns"}, "spec": {"podSets": pod_sets}}) \
        .pod_sets[0].requests == {"cpu": 500, "memory": 200 * 1024 ** 2}
    assert head_containers(workload_pod_sets(RAYJOB, rayjob("SidecarMode"))) == [{"name": "head_c"}]


def test_k8s_job_mode_keeps_its_submitter_pod_set_and_an_uncharged_head() -> None:
    pod_sets = workload_pod_sets(RAYJOB, rayjob("K8sJobMode"), release=KUEUE_V019)
    assert [ps["name"] for ps in pod_sets] == ["head", "group1", "submitter"]
    assert head_containers(pod_sets) == [{"name": "head_c"}]


def test_rayjob_with_gcs_fault_tolerance_reads_the_rayjob_annotation() -> None:
    # BuildPodSets(j.Spec.RayClusterSpec, j.Annotations): the RayJob's own annotations.
    pod_sets = workload_pod_sets(RAYJOB, rayjob("SidecarMode", {"ray.io/ft-enabled": "TRUE"}), release=KUEUE_V019)
    assert head_containers(pod_sets) == [
        {"name": "head_c", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}, SUBMITTER]


def test_the_jobs_own_template_is_not_changed() -> None:
    job = rayjob("SidecarMode", {"ray.io/ft-enabled": "true"})
    workload_pod_sets(RAYJOB, job, release=KUEUE_V019)
    assert job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"] == {"spec": {"containers": [{"name": "head_c"}]}}


# --- pod-level resources (KEP-2837) --------------------------------------------------------------

def test_pod_level_requests_replace_the_containers_sum() -> None:
    # scheduler_test.go "Should block a second workload when pod-level requests exhaust quota":
    # containers 500m, pod-level 2 CPU -> each pod is charged 2 CPU (only one fits a 3-CPU queue).
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}}],
            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}
    assert pod_spec_requests(spec) == {"cpu": 2000}


def test_pod_level_requests_only_for_resources_declared_at_pod_level() -> None:
    # component-helpers: only cpu, memory and hugepages-* are pod-level; the rest stays the containers' sum.
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1",
                                                                     "memory": "1Gi"}}}],
            "resources": {"requests": {"memory": "4Gi", "nvidia.com/gpu": "8"}}, "overhead": {"cpu": "100m"}}
    assert pod_spec_requests(spec) == {"cpu": 1100, "memory": 4 * 1024 ** 3, "nvidia.com/gpu": 1}


def job_with_pod_level(resources: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns", "uid": "u3"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                                           "resources": resources}}}}


def test_pod_level_limits_stand_in_for_missing_pod_level_requests_under_v019() -> None:
    # resources_test.go "Apply pod-level limits to requests": a (limits cpu 1, memory 1Gi) -> requests
    # the same; b (request cpu 2, limits cpu 3, memory 1Gi) -> request cpu 2 kept, memory 1Gi added.
    a = job_with_pod_level({"limits": {"cpu": "1", "memory": "1Gi"}})
    b = job_with_pod_level({"requests": {"cpu": "2"}, "limits": {"cpu": "3", "memory": "1Gi"}})
    got_a = workload_pod_sets(BATCH_JOB, a, release=KUEUE_V019)[0]["template"]["spec"]["resources"]
    got_b = workload_pod_sets(BATCH_JOB, b, release=KUEUE_V019)[0]["template"]["spec"]["resources"]
    assert got_a == {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}
    assert got_b == {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "3", "memory": "1Gi"}}
    # v0.17.0 leaves a pod-level limit alone: the containers' 100m is charged.
    v017 = workload_pod_sets(BATCH_JOB, a)[0]["template"]["spec"]
    assert v017["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"}}
    assert pod_spec_requests(v017) == {"cpu": 100}


def test_what_runs_is_what_was_admitted_compares_under_the_same_charges() -> None:
    # Kueue's EquivalentToWorkload compares the job's PodSets() (charged) with the Workload's:
    # a v0.19-charged Workload matches its unchanged job; compared without the charges it would not.
    job = rayjob("SidecarMode")
    job["spec"]["suspend"] = True
    workload = workload_for_job(RAYJOB, job, 0, None, release=KUEUE_V019)
    assert equivalent(job_pod_sets(charged_pod_sets(RAYJOB, job, release=KUEUE_V019)), workload, True)
    assert not equivalent(job_pod_sets(charged_pod_sets(RAYJOB, job, release=KUEUE_V017)), workload, True)


def test_the_shape_gate_types_the_charged_fields_a_tenant_writes() -> None:
    # Boundary (docs/security.md): pod-level resources and a Ray autoscaler's resources are
    # quantities, refused with the field by the webhook otherwise (as the API server would).
    job = job_with_pod_level({"requests": {"cpu": "lots"}})
    assert [e.path for e in shape_errors("Job", job)] == ["spec.template.spec.resources.requests[cpu]"]
    cluster = raycluster({"headGroupSpec": head(), "enableInTreeAutoscaling": True,
                          "autoscalerOptions": {"resources": {"limits": {"memory": ["x"]}}}})
    assert [e.path for e in shape_errors("RayCluster", cluster)] == ["spec.autoscalerOptions.resources.limits[memory]"]


def test_place_charges_as_the_release_it_is_told(tmp_path: Path) -> None:
    # `toposched place --kueue-version v0.19` (and gRPC Place) read the manifest as the controller does
    path = tmp_path / "rayjob.yaml"
    path.write_text(yaml.safe_dump(rayjob("SidecarMode")))
    assert load_workload(path, release=KUEUE_V019).pod_sets[0].requests == {"cpu": 500, "memory": 200 * 1024 ** 2}
    assert load_workload(path).pod_sets[0].requests == {}
