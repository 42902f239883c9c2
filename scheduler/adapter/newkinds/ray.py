"""KubeRay RayCluster, RayJob and RayService (ray.io/v1, ray-operator v1.6.0) as Kueue v0.17.0's
``ray.io/raycluster``, ``ray.io/rayjob`` and ``ray.io/rayservice`` integrations read them
(``pkg/controller/jobs/raycluster/common.go``, ``rayjob/``, ``rayservice/``; docs/design/new-kinds.md).

Pod sets: ``head`` (1) then one per worker group (name = ``groupName``, count = ``replicas``
(absent: 1) x ``numOfHosts`` when above 1), plus, for a RayJob in ``K8sJobMode``, ``submitter``
(1). No rank label: Kueue's ungater places Ray pods greedily. The whole declared size is charged
at once (head and workers together)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.newkinds.common import (
    NOT_FINISHED,
    FinishState,
    as_int,
    condition_true,
    finished,
    pod_set,
)
from scheduler.adapter.newkinds.mergepatch import merge_patched

GROUP = "ray.io"
VERSION = "v1"
RAYCLUSTER_FRAMEWORK = "ray.io/raycluster"
RAYJOB_FRAMEWORK = "ray.io/rayjob"
RAYSERVICE_FRAMEWORK = "ray.io/rayservice"
HEAD_POD_SET = "head"
SUBMITTER_POD_SET = "submitter"
K8S_JOB_MODE = "K8sJobMode"
MAX_WORKER_GROUPS = 7  # Kueue's 8 pod sets minus the head
LABEL_RAY_CLUSTER = "ray.io/cluster"  # KubeRay's pod label naming the cluster (rayutils.RayClusterLabelKey)

# RayJob status (KubeRay JobDeploymentStatus / JobStatus values)
DEPLOYMENT_SUSPENDED, DEPLOYMENT_NEW = "Suspended", ""
DEPLOYMENT_COMPLETE, DEPLOYMENT_FAILED = "Complete", "Failed"
JOB_SUCCEEDED = "SUCCEEDED"
CLUSTER_READY, CLUSTER_FAILED = "ready", "failed"


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def cluster_spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The RayClusterSpec inside any of the three kinds."""
    if obj.get("kind") == "RayCluster":
        return _spec(obj)
    return _spec(obj).get("rayClusterSpec") or {}


def worker_count(group: Mapping[str, Any]) -> int:
    count = as_int(group.get("replicas"), 1)
    hosts = as_int(group.get("numOfHosts"), 1)
    return count * hosts if hosts > 1 else count


def cluster_pod_sets(cluster_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Kueue's ``BuildPodSets``: head, then each worker group in order."""
    head = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    out = [pod_set(HEAD_POD_SET, 1, head)]
    for group in cluster_spec.get("workerGroupSpecs") or ():
        out.append(pod_set(str(group.get("groupName", "")), worker_count(group), group.get("template") or {}))
    return out


def default_submitter_template(rayjob: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's default submitter pod template (KubeRay's default submitter Job): the head's
    first image, requests 500m / 200Mi, limits 1 / 1Gi, restartPolicy Never."""
    head = ((cluster_spec_of(rayjob).get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    containers = head.get("containers") or [{}]
    return {"spec": {
        "containers": [{"name": "ray-job-submitter", "image": containers[0].get("image", ""),
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                      "requests": {"cpu": "500m", "memory": "200Mi"}}}],
        "restartPolicy": "Never"}}


def submitter_template(rayjob: Mapping[str, Any]) -> dict[str, Any]:
    given = _spec(rayjob).get("submitterPodTemplate")
    return copy.deepcopy(dict(given)) if given is not None else default_submitter_template(rayjob)


def has_submitter(rayjob: Mapping[str, Any]) -> bool:
    return _spec(rayjob).get("submissionMode") == K8S_JOB_MODE


def pod_sets(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod sets of a RayCluster, RayJob or RayService."""
    out = cluster_pod_sets(cluster_spec_of(obj))
    if obj.get("kind") == "RayJob" and has_submitter(obj):
        out.append(pod_set(SUBMITTER_POD_SET, 1, submitter_template(obj)))
    return out


def is_skipped(obj: Mapping[str, Any]) -> bool:
    """A RayJob running on an existing cluster (``spec.clusterSelector``) is not managed."""
    return obj.get("kind") == "RayJob" and bool(_spec(obj).get("clusterSelector"))


# --- suspend -----------------------------------------------------------------------------------

def is_suspended(obj: Mapping[str, Any]) -> bool:
    if obj.get("kind") == "RayService":
        return bool(cluster_spec_of(obj).get("suspend"))
    return bool(_spec(obj).get("suspend"))


def _suspend_patch(obj: Mapping[str, Any], value: bool) -> dict[str, Any]:
    if obj.get("kind") == "RayService":
        return {"spec": {"rayClusterSpec": {"suspend": value}}}
    return {"spec": {"suspend": value}}


def stop_patch(obj: Mapping[str, Any]) -> dict[str, Any]:
    return _suspend_patch(obj, True)


def templates(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Each pod set's current pod template, by pod-set name."""
    cluster = cluster_spec_of(obj)
    out: dict[str, Mapping[str, Any]] = {HEAD_POD_SET: (cluster.get("headGroupSpec") or {}).get("template") or {}}
    for group in cluster.get("workerGroupSpecs") or ():
        out[str(group.get("groupName", ""))] = group.get("template") or {}
    if obj.get("kind") == "RayJob" and has_submitter(obj):
        out[SUBMITTER_POD_SET] = submitter_template(obj)
    return out


def _templates_patch(obj: Mapping[str, Any], patches: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The cluster-spec part of a merge patch applying ``patches`` (pod-set name -> merge patch
    of that template). ``workerGroupSpecs`` is a list: a merge patch replaces it whole, so every
    group is carried, each with its template patched."""
    cluster = cluster_spec_of(obj)
    out: dict[str, Any] = {}
    if HEAD_POD_SET in patches:
        out["headGroupSpec"] = {"template": dict(patches[HEAD_POD_SET])}
    groups = [dict(g) for g in cluster.get("workerGroupSpecs") or ()]
    if any(str(g.get("groupName", "")) in patches for g in groups):
        for group in groups:
            patch = patches.get(str(group.get("groupName", "")))
            if patch:
                group["template"] = merge_patched(group.get("template") or {}, patch)
        out["workerGroupSpecs"] = groups
    return out


def _with_templates(obj: Mapping[str, Any], patches: Mapping[str, Mapping[str, Any]],
                    suspend: bool | None) -> dict[str, Any]:
    cluster_patch = _templates_patch(obj, patches)
    spec: dict[str, Any] = {}
    if obj.get("kind") == "RayCluster":
        spec.update(cluster_patch)
        if suspend is not None:
            spec["suspend"] = suspend
    else:
        if obj.get("kind") == "RayService" and suspend is not None:
            cluster_patch["suspend"] = suspend
        elif suspend is not None:
            spec["suspend"] = suspend
        if cluster_patch:
            spec["rayClusterSpec"] = cluster_patch
        if obj.get("kind") == "RayJob" and SUBMITTER_POD_SET in patches and has_submitter(obj):
            # The submitter template is written out whole (Kueue merges into the default one
            # when the RayJob has none, which sets it).
            spec["submitterPodTemplate"] = merge_patched(submitter_template(obj), patches[SUBMITTER_POD_SET])
    return {"spec": spec} if spec else {}


def start_patch(obj: Mapping[str, Any], patches: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Unsuspend with each pod set's template patched (Kueue's ``RunWithPodSetsInfo``)."""
    return _with_templates(obj, patches, False)


def restore_patch(obj: Mapping[str, Any], patches: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The templates restored (Kueue's ``RestorePodSetsInfo``), suspend left as it is."""
    return _with_templates(obj, patches, None) or None


# --- state -------------------------------------------------------------------------------------

def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def finish_state(obj: Mapping[str, Any]) -> FinishState:
    """RayJob: finished when its deployment status is Complete or Failed, succeeded iff the job
    status is SUCCEEDED (message ``status.message``). A RayCluster or RayService never finishes."""
    if obj.get("kind") != "RayJob":
        return NOT_FINISHED
    status = _status(obj)
    if status.get("jobDeploymentStatus") in (DEPLOYMENT_COMPLETE, DEPLOYMENT_FAILED):
        return finished(status.get("jobStatus") == JOB_SUCCEEDED, str(status.get("message") or ""))
    return NOT_FINISHED


def is_active(obj: Mapping[str, Any]) -> bool:
    status = _status(obj)
    kind = obj.get("kind")
    if kind == "RayJob":
        return status.get("jobDeploymentStatus", DEPLOYMENT_NEW) not in (DEPLOYMENT_SUSPENDED, DEPLOYMENT_NEW)
    if kind == "RayService":
        return condition_true(obj, "Ready") is not None
    return status.get("state") == CLUSTER_READY


def pods_ready(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("kind")
    if kind == "RayJob":
        return (_status(obj).get("rayClusterStatus") or {}).get("state") == CLUSTER_READY
    return is_active(obj)


def cluster_name(obj: Mapping[str, Any]) -> str:
    """The RayCluster whose pods are this object's (``ray.io/cluster`` label value), or ''."""
    kind = obj.get("kind")
    if kind == "RayCluster":
        return str((obj.get("metadata") or {}).get("name", ""))
    if kind == "RayJob":
        return str(_status(obj).get("rayClusterName") or "")
    return str((_status(obj).get("activeServiceStatus") or {}).get("rayClusterName") or "")


# --- webhook validation (Kueue's messages) -----------------------------------------------------

def validation_errors(obj: Mapping[str, Any], elastic: bool = False) -> list[tuple[str, str, str]]:
    """(field path, Kubernetes error type, detail) of what Kueue's Ray webhooks refuse on a queued
    object. ``elastic``: the object is an elastic job (workload slices on); toposched has no
    workload slices, so the caller passes False and autoscaling is always refused."""
    kind = obj.get("kind")
    spec = _spec(obj)
    errors: list[tuple[str, str, str]] = []
    base = "spec" if kind == "RayCluster" else "spec.rayClusterSpec"
    if kind == "RayJob":
        has_selector, has_cluster = bool(spec.get("clusterSelector")), spec.get("rayClusterSpec") is not None
        if has_selector and has_cluster:
            return [("spec.clusterSelector", "Invalid", "a kueue managed job should not use an existing cluster")]
        if has_selector:
            return []
        if not has_cluster:
            return [("spec.rayClusterSpec", "Required",
                     "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector")]
        if not spec.get("shutdownAfterJobFinishes"):
            errors.append(("spec.shutdownAfterJobFinishes", "Invalid",
                           "a kueue managed job should delete the cluster after finishing"))
    cluster = cluster_spec_of(obj)
    if cluster.get("enableInTreeAutoscaling") and not elastic:
        detail = ("a kueue managed job can use autoscaling only when the ElasticJobsViaWorkloadSlices feature gate "
                  "is on and the job is an elastic job") if kind == "RayCluster" else \
            "a kueue managed job should only use autoscaling when workload slicing is enabled"
        errors.append((f"{base}.enableInTreeAutoscaling", "Invalid", detail))
    groups = cluster.get("workerGroupSpecs") or []
    if len(groups) > MAX_WORKER_GROUPS:
        errors.append((f"{base}.workerGroupSpecs", "TooMany", f"must have at most {MAX_WORKER_GROUPS} items"))
    for i, group in enumerate(groups):
        if group.get("groupName") == HEAD_POD_SET:
            errors.append((f"{base}.workerGroupSpecs[{i}].groupName", "Forbidden",
                           f'"{HEAD_POD_SET}" is reserved for the head group'))
    return errors
