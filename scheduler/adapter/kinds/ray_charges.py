"""What Kueue v0.19 charges a Ray head pod set for the containers KubeRay adds at pod creation
(``pkg/controller/jobs/raycluster/common.go`` ``BuildPodSets`` and ``rayjob/rayjob_controller.go``
``addSidecarSubmitterToHeadPodSet`` at v0.19.2; Kueue v0.17.0 charges none of them):

- GCS fault tolerance (``spec.gcsFaultToleranceOptions`` or the object's ``ray.io/ft-enabled:
  "true"``, KubeRay's ``IsGCSFaultToleranceEnabled``): the Redis clean-up Job's requests
  (200m / 256Mi) folded into the head's Ray container (the first) by keeping the larger request;
- in-tree autoscaling: the ``autoscaler`` sidecar (``autoscalerOptions.resources``, else
  KubeRay's 500m / 512Mi) appended to the head's containers;
- a RayJob in ``SidecarMode``: the ``ray-job-submitter`` container with KubeRay's default
  resources (KubeRay ignores ``submitterPodTemplate`` there) appended to the head's containers.

Only the Workload's copy of the head template changes (the job's own template is left alone:
KubeRay adds these containers itself)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import Obj, PodSetSource
from scheduler.core.resources import QuantityError, parse_quantity
from scheduler.core.workload import WorkloadFormatError

HEAD_POD_SET = "head"
# A RayService's RayClusterSpec is its JSON field ``rayClusterConfig`` (Kueue's Go code and its
# error paths call it ``rayClusterSpec``).
SERVICE_CLUSTER = "rayClusterConfig"
ANN_FT_ENABLED = "ray.io/ft-enabled"  # KubeRay's RayFTEnabledAnnotationKey
SIDECAR_MODE = "SidecarMode"
SUBMITTER_CONTAINER = "ray-job-submitter"
AUTOSCALER_CONTAINER = "autoscaler"
# KubeRay's hard-coded Redis clean-up Job requests (raycluster_controller.go, via Kueue).
REDIS_CLEANUP_REQUESTS: Mapping[str, str] = {"cpu": "200m", "memory": "256Mi"}
NO_RAY_CONTAINER = "cannot account for Redis cleanup resources: head pod template must include the Ray container"


def submitter_resources() -> dict[str, Any]:
    """KubeRay's default submitter container resources (Kueue's ``defaultSubmitterResources``)."""
    return {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}


def _autoscaler_resources(cluster_spec: Mapping[str, Any]) -> dict[str, Any]:
    given = (cluster_spec.get("autoscalerOptions") or {}).get("resources")
    if isinstance(given, Mapping):
        return copy.deepcopy(dict(given))
    return {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}


def _keep_max(requests: Mapping[str, Any], extra: Mapping[str, str]) -> dict[str, Any]:
    """Kueue's ``MergeResourceListKeepMax``: each resource at the larger of the two."""
    out = dict(requests)
    for name, value in extra.items():
        try:
            larger = name not in out or parse_quantity(value, name) > parse_quantity(out[name], name)
        except (QuantityError, ValueError, TypeError):
            larger = False  # an unreadable request is refused where the pod set is read
        if larger:
            out[name] = value
    return out


def gcs_fault_tolerant(cluster_spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> bool:
    return str(annotations.get(ANN_FT_ENABLED, "")).lower() == "true" \
        or cluster_spec.get("gcsFaultToleranceOptions") is not None


def _charged_head(template: Obj, cluster_spec: Mapping[str, Any], annotations: Mapping[str, Any],
                  sidecar_submitter: bool) -> dict[str, Any]:
    out = copy.deepcopy(dict(template))
    spec = out.setdefault("spec", {})
    containers = list(spec.get("containers") or [])
    if gcs_fault_tolerant(cluster_spec, annotations):
        if not containers:
            raise WorkloadFormatError(NO_RAY_CONTAINER)
        ray = dict(containers[0])
        resources = dict(ray.get("resources") or {})
        resources["requests"] = _keep_max(resources.get("requests") or {}, REDIS_CLEANUP_REQUESTS)
        ray["resources"] = resources
        containers[0] = ray
    if cluster_spec.get("enableInTreeAutoscaling") is True:
        containers.append({"name": AUTOSCALER_CONTAINER, "resources": _autoscaler_resources(cluster_spec)})
    if sidecar_submitter:
        containers.append({"name": SUBMITTER_CONTAINER, "resources": submitter_resources()})
    spec["containers"] = containers
    return out


def _charge_head(sources: list[PodSetSource], cluster_spec: Mapping[str, Any], annotations: Mapping[str, Any],
                 sidecar_submitter: bool = False) -> list[PodSetSource]:
    return [dataclasses.replace(ps, template=_charged_head(ps.template, cluster_spec, annotations, sidecar_submitter))
            if ps.name == HEAD_POD_SET else ps for ps in sources]


def _annotations(obj: Obj) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def raycluster_charges(cluster: Obj, sources: list[PodSetSource]) -> list[PodSetSource]:
    return _charge_head(sources, _spec(cluster), _annotations(cluster))


def rayjob_charges(rayjob: Obj, sources: list[PodSetSource]) -> list[PodSetSource]:
    spec = _spec(rayjob)
    return _charge_head(sources, spec.get("rayClusterSpec") or {}, _annotations(rayjob),
                        sidecar_submitter=spec.get("submissionMode") == SIDECAR_MODE)


def rayservice_charges(service: Obj, sources: list[PodSetSource]) -> list[PodSetSource]:
    return _charge_head(sources, _spec(service).get(SERVICE_CLUSTER) or {}, _annotations(service))
