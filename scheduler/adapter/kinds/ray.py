"""KubeRay RayJob, RayCluster and RayService (ray.io/v1, ray-operator v1.6.0) as Kueue v0.17.0's
``ray.io/rayjob``, ``ray.io/raycluster`` and ``ray.io/rayservice`` integrations read them
(``pkg/controller/jobs/raycluster/common.go``, ``rayjob/``, ``rayservice/``; docs/design/new-kinds.md).

Pod sets: ``head`` (1) then one per worker group (name = ``groupName``, count = ``replicas``
(absent: 1) x ``numOfHosts`` when above 1), plus, for a RayJob in ``K8sJobMode``, ``submitter``
(1). No rank label: the topology ungater places Ray pods greedily. The whole declared size is
charged at once (head and workers together); under ``--kueue-version v0.19`` the head is also
charged for what KubeRay adds to it (``ray_charges.py``). A RayCluster its RayJob or RayService created is
governed through its parent (a child, never queued on its own); a RayJob on an existing
cluster (``spec.clusterSelector``) is not managed. Autoscaling is refused, except (Kueue v0.19's
``ElasticJobsViaWorkloadSlices``) on a RayCluster annotated ``kueue.x-k8s.io/elastic-job: "true"``,
whose resizes are workload slices (``adapter/manifest/elastic.py``, ``workload_slicing.py``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import (
    NOT_FINISHED,
    FinishState,
    JobKind,
    KindError,
    Obj,
    PathPart,
    PodSetSource,
    as_int,
    finished,
    true_condition,
)
from scheduler.adapter.kinds.ray_charges import (
    HEAD_POD_SET,
    SERVICE_CLUSTER,
    raycluster_charges,
    rayjob_charges,
    rayservice_charges,
)
from scheduler.adapter.kinds.shapes import METADATA, POD_TEMPLATE, RESOURCES

GROUP = "ray.io"
VERSION = "v1"
RAYCLUSTER_FRAMEWORK = "ray.io/raycluster"
RAYJOB_FRAMEWORK = "ray.io/rayjob"
RAYSERVICE_FRAMEWORK = "ray.io/rayservice"
SUBMITTER_POD_SET = "submitter"
K8S_JOB_MODE = "K8sJobMode"
V017_MAX_POD_SETS = 8  # Kueue v0.17.0's Workload (the default of the validators below)
LABEL_RAY_CLUSTER = "ray.io/cluster"  # KubeRay's pod label naming the cluster (rayutils.RayClusterLabelKey)

# RayJob status (KubeRay JobDeploymentStatus / JobStatus values)
DEPLOYMENT_SUSPENDED, DEPLOYMENT_NEW = "Suspended", ""
DEPLOYMENT_COMPLETE, DEPLOYMENT_FAILED = "Complete", "Failed"
JOB_SUCCEEDED = "SUCCEEDED"
CLUSTER_READY = "ready"


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def worker_count(group: Mapping[str, Any]) -> int:
    count = as_int(group.get("replicas"), 1)
    hosts = as_int(group.get("numOfHosts"), 1)
    return count * hosts if hosts > 1 else count


def cluster_pod_sets(cluster_spec: Mapping[str, Any], base: tuple[PathPart, ...]) -> list[PodSetSource]:
    """Kueue's ``BuildPodSets``: head, then each worker group in order (``base``: where the
    RayClusterSpec sits in the object)."""
    head = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    out = [PodSetSource(HEAD_POD_SET, 1, head, (*base, "headGroupSpec", "template"))]
    for i, group in enumerate(cluster_spec.get("workerGroupSpecs") or ()):
        out.append(PodSetSource(str(group.get("groupName", "")), worker_count(group), group.get("template") or {},
                                (*base, "workerGroupSpecs", i, "template")))
    return out


def default_submitter_template(rayjob: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's default submitter pod template (KubeRay's default submitter Job): the head's
    first image, requests 500m / 200Mi, limits 1 / 1Gi, restartPolicy Never."""
    head = (((_spec(rayjob).get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}) \
        .get("spec") or {}
    containers = head.get("containers") or [{}]
    return {"spec": {
        "containers": [{"name": "ray-job-submitter", "image": containers[0].get("image", ""),
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                      "requests": {"cpu": "500m", "memory": "200Mi"}}}],
        "restartPolicy": "Never"}}


def has_submitter(rayjob: Mapping[str, Any]) -> bool:
    """In ``K8sJobMode``, the CRD's default (a manifest read offline has no defaults applied)."""
    return bool(_spec(rayjob).get("submissionMode", K8S_JOB_MODE) == K8S_JOB_MODE)


def raycluster_pod_sets(cluster: Obj) -> list[PodSetSource]:
    return cluster_pod_sets(_spec(cluster), ("spec",))


def rayjob_pod_sets(rayjob: Obj) -> list[PodSetSource]:
    out = cluster_pod_sets(_spec(rayjob).get("rayClusterSpec") or {}, ("spec", "rayClusterSpec"))
    if has_submitter(rayjob):
        given = _spec(rayjob).get("submitterPodTemplate")
        template = copy.deepcopy(dict(given)) if given is not None else default_submitter_template(rayjob)
        out.append(PodSetSource(SUBMITTER_POD_SET, 1, template, ("spec", "submitterPodTemplate"),
                                defaulted=given is None))
    return out


def rayservice_pod_sets(service: Obj) -> list[PodSetSource]:
    return cluster_pod_sets(_spec(service).get(SERVICE_CLUSTER) or {}, ("spec", SERVICE_CLUSTER))


def rayjob_skipped(rayjob: Obj) -> bool:
    """A RayJob running on an existing cluster (``spec.clusterSelector``) is not managed."""
    return bool(_spec(rayjob).get("clusterSelector"))


# --- state -------------------------------------------------------------------------------------

def rayjob_finish_state(rayjob: Obj) -> FinishState:
    """Finished when its deployment status is Complete or Failed, succeeded iff the job status
    is SUCCEEDED (message ``status.message``)."""
    status = _status(rayjob)
    if status.get("jobDeploymentStatus") in (DEPLOYMENT_COMPLETE, DEPLOYMENT_FAILED):
        return finished(status.get("jobStatus") == JOB_SUCCEEDED, str(status.get("message") or ""))
    return NOT_FINISHED


def never_finished(_: Obj) -> FinishState:
    return NOT_FINISHED  # a RayCluster or RayService does not finish


def rayjob_active(rayjob: Obj) -> int:
    deployment = _status(rayjob).get("jobDeploymentStatus", DEPLOYMENT_NEW)
    return int(deployment not in (DEPLOYMENT_SUSPENDED, DEPLOYMENT_NEW))


def rayjob_ready(rayjob: Obj) -> bool:
    return (_status(rayjob).get("rayClusterStatus") or {}).get("state") == CLUSTER_READY


def raycluster_ready(cluster: Obj) -> bool:
    return _status(cluster).get("state") == CLUSTER_READY


def raycluster_active(cluster: Obj) -> int:
    """Whether anything of the cluster is still going: KubeRay sets its state to ``suspended``
    once a suspended cluster's pods are deleted (before its first run it has none)."""
    return int(_status(cluster).get("state") not in (None, "", "suspended"))


def rayservice_ready(service: Obj) -> bool:
    return true_condition(service, "Ready") is not None


def rayservice_active(service: Obj) -> int:
    return int(rayservice_ready(service))


def cluster_name(obj: Mapping[str, Any]) -> str:
    """The RayCluster whose pods are this object's (``ray.io/cluster`` label value), or ''."""
    kind = obj.get("kind")
    if kind == "RayCluster":
        return str((obj.get("metadata") or {}).get("name", ""))
    if kind == "RayJob":
        return str(_status(obj).get("rayClusterName") or "")
    return str((_status(obj).get("activeServiceStatus") or {}).get("rayClusterName") or "")


# --- webhook validation (Kueue's messages) -----------------------------------------------------

def worker_groups_too_many(groups: int, base: str, max_pod_sets: int) -> list[KindError]:
    """Kueue's cap on worker groups (raycluster/common.go ``ValidateCreate``). v0.17.0 counts the
    worker groups against 8 - 1 (``TooMany(path, len(groups), 7)``); from v0.19 it counts the pod
    sets, head included, against ``jobframework.MaxPodSets`` (``TooMany(path, len(groups) + 1, 18)``)."""
    count, most = (groups, max_pod_sets - 1) if max_pod_sets == V017_MAX_POD_SETS else (groups + 1, max_pod_sets)
    if count <= most:
        return []
    return [(f"{base}.workerGroupSpecs", "TooMany", f"must have at most {most} items", count)]


def _cluster_errors(cluster: Mapping[str, Any], base: str, autoscaling_detail: str,
                    max_pod_sets: int) -> list[KindError]:
    errors: list[KindError] = []
    if cluster.get("enableInTreeAutoscaling"):  # an elastic RayCluster's is let through: manifest/elastic.py
        errors.append((f"{base}.enableInTreeAutoscaling", "Invalid", autoscaling_detail,
                       cluster["enableInTreeAutoscaling"]))
    groups = cluster.get("workerGroupSpecs") or []
    errors.extend(worker_groups_too_many(len(groups), base, max_pod_sets))
    for i, group in enumerate(groups):
        if isinstance(group, Mapping) and group.get("groupName") == HEAD_POD_SET:
            errors.append((f"{base}.workerGroupSpecs[{i}].groupName", "Forbidden",
                           f'"{HEAD_POD_SET}" is reserved for the head group', None))
    return errors


SLICES_ONLY = "a kueue managed job should only use autoscaling when workload slicing is enabled"


def rayjob_errors(rayjob: Obj, max_pod_sets: int = V017_MAX_POD_SETS) -> list[KindError]:
    """What Kueue's RayJob webhook refuses on a queued RayJob."""
    spec = _spec(rayjob)
    has_selector, has_cluster = bool(spec.get("clusterSelector")), spec.get("rayClusterSpec") is not None
    if has_selector and has_cluster:
        return [("spec.clusterSelector", "Invalid", "a kueue managed job should not use an existing cluster",
                 spec.get("clusterSelector"))]
    if has_selector:
        return []
    if not has_cluster:
        return [("spec.rayClusterSpec", "Required",
                 "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector", None)]
    errors: list[KindError] = []
    if not spec.get("shutdownAfterJobFinishes"):
        errors.append(("spec.shutdownAfterJobFinishes", "Invalid",
                       "a kueue managed job should delete the cluster after finishing",
                       bool(spec.get("shutdownAfterJobFinishes"))))
    return errors + _cluster_errors(spec.get("rayClusterSpec") or {}, "spec.rayClusterSpec", SLICES_ONLY, max_pod_sets)


def raycluster_errors(cluster: Obj, max_pod_sets: int = V017_MAX_POD_SETS) -> list[KindError]:
    return _cluster_errors(_spec(cluster), "spec", (
        "a kueue managed job can use autoscaling only when the ElasticJobsViaWorkloadSlices feature gate is on and "
        "the job is an elastic job"), max_pod_sets)


def rayservice_errors(service: Obj, max_pod_sets: int = V017_MAX_POD_SETS) -> list[KindError]:
    return _cluster_errors(_spec(service).get(SERVICE_CLUSTER) or {}, "spec.rayClusterSpec", SLICES_ONLY,
                           max_pod_sets)


_CLUSTER_SHAPE: dict[str, Any] = {"suspend": "bool", "headGroupSpec": {"template": POD_TEMPLATE},
                                  "enableInTreeAutoscaling": "bool", "autoscalerOptions": {"resources": RESOURCES},
                                  "workerGroupSpecs": [{"groupName": "str", "replicas": "int", "numOfHosts": "int",
                                                        "template": POD_TEMPLATE}]}

RAYCLUSTER = JobKind(
    group=GROUP, version=VERSION, kind="RayCluster", plural="rayclusters", framework=RAYCLUSTER_FRAMEWORK,
    pod_sets=raycluster_pod_sets, finish_state=never_finished, active_pods=raycluster_active,
    pods_ready=raycluster_ready, shape={"metadata": METADATA, "spec": _CLUSTER_SHAPE},
    suspend_path=("spec", "suspend"), topology_gate=True, validation=raycluster_errors,
    injected_charges=raycluster_charges,
)
RAYJOB = JobKind(
    group=GROUP, version=VERSION, kind="RayJob", plural="rayjobs", framework=RAYJOB_FRAMEWORK,
    pod_sets=rayjob_pod_sets, finish_state=rayjob_finish_state, active_pods=rayjob_active, pods_ready=rayjob_ready,
    shape={"metadata": METADATA, "spec": {"suspend": "bool", "submissionMode": "str",
                                          "shutdownAfterJobFinishes": "bool", "rayClusterSpec": _CLUSTER_SHAPE,
                                          "submitterPodTemplate": POD_TEMPLATE}},
    suspend_path=("spec", "suspend"), topology_gate=True, children=(RAYCLUSTER_FRAMEWORK,),
    skipped=rayjob_skipped, validation=rayjob_errors, injected_charges=rayjob_charges,
)
RAYSERVICE = JobKind(
    group=GROUP, version=VERSION, kind="RayService", plural="rayservices", framework=RAYSERVICE_FRAMEWORK,
    pod_sets=rayservice_pod_sets, finish_state=never_finished, active_pods=rayservice_active,
    pods_ready=rayservice_ready, shape={"metadata": METADATA, "spec": {SERVICE_CLUSTER: _CLUSTER_SHAPE}},
    suspend_path=("spec", SERVICE_CLUSTER, "suspend"), topology_gate=True, children=(RAYCLUSTER_FRAMEWORK,),
    validation=rayservice_errors, injected_charges=rayservice_charges,
)
