"""Kueue v0.19.2's webhook rules for elastic jobs (``kueue.x-k8s.io/elastic-job: "true"``
while ``ElasticJobsViaWorkloadSlices`` is on; ``pkg/controller/jobframework/validation.go``
``ValidateElasticJobAnnotation`` / ``validatedUpdateForEnabledWorkloadSlice``,
``pkg/controller/jobs/job/job_webhook.go``). With the gate off the annotation means nothing and
nothing is refused, as in Kueue (``workloadslicing.Enabled`` is false)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.manifest.fielderrors import FieldError, forbidden, invalid
from scheduler.core.config import FeatureGates
from scheduler.core.topology_request import ANN_PREFERRED, ANN_REQUIRED
from scheduler.core.workload import ANN_JOB_MIN_PARALLELISM

Obj = Mapping[str, Any]
ANNOTATION_PATH = f"metadata.annotations[{ws.ELASTIC_ANNOTATION}]"
MIN_PARALLELISM_PATH = f"metadata.annotations[{ANN_JOB_MIN_PARALLELISM}]"
TEMPLATE_ANNOTATIONS = "spec.template.metadata.annotations"
# Kueue's HyperPodPyTorchJob is an external framework: no Kueue webhook judges it.
EXTERNAL = frozenset({"HyperPodPyTorchJob"})


def gvk(kind: JobKind) -> str:
    """Go's ``schema.GroupVersionKind.String()``: ``batch/v1, Kind=Job``."""
    return f"{kind.group}/{kind.version}, Kind={kind.kind}"


def _annotations(obj: Obj) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _batch_job_errors(job: Obj, old: Obj | None, gates: FeatureGates) -> list[FieldError]:
    """The Job webhook: partial admission (``validatePartialAdmissionCreate``, on UPDATE only
    when the annotation changed) and, with TAS, a required or preferred topology (only an
    unconstrained one is supported with elastic jobs) are refused."""
    out: list[FieldError] = []
    raw = _annotations(job).get(ANN_JOB_MIN_PARALLELISM)
    if raw is not None and (old is None or _annotations(old).get(ANN_JOB_MIN_PARALLELISM) != raw):
        out.append(invalid(MIN_PARALLELISM_PATH, raw, "partial admission and elastic job cannot be used together",
                           fix=f"remove {ANN_JOB_MIN_PARALLELISM} or {ws.ELASTIC_ANNOTATION}"))
    if not gates.enabled("TopologyAwareScheduling"):
        return out
    template = ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}
    annotations = template.get("annotations") or {}
    if ANN_REQUIRED in annotations:
        out.append(forbidden(f"{TEMPLATE_ANNOTATIONS}[{ANN_REQUIRED}]",
                             "required topology is not supported with elastic jobs",
                             fix="drop the topology annotation (an elastic job is placed unconstrained)"))
    elif ANN_PREFERRED in annotations:
        out.append(forbidden(f"{TEMPLATE_ANNOTATIONS}[{ANN_PREFERRED}]",
                             "preferred topology is not supported with elastic jobs",
                             fix="drop the topology annotation (an elastic job is placed unconstrained)"))
    return out


AUTOSCALING_PATH = "spec.enableInTreeAutoscaling"
# Kueue v0.19.2's RayCluster webhook (raycluster_webhook.go validateCreate) when the cluster is
# not an elastic job; v0.17.0's words are the kind's own (adapter/kinds/ray.py).
RAYCLUSTER_AUTOSCALING = (f"a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the "
                          f'ElasticJobsViaWorkloadSlices feature gate and set the "{ws.ELASTIC_ANNOTATION}": '
                          f'"{ws.ELASTIC_VALUE}" annotation')


def kind_refusals(kind: JobKind, job: Obj, refused: list[FieldError], gates: FeatureGates) -> list[FieldError]:
    """The kind's own refusals as Kueue v0.19.2 words them once the gate is on: a RayCluster's
    in-tree autoscaling is allowed for an elastic cluster (its autoscaler's resizes are scales:
    workload slices) and refused with v0.19.2's message otherwise. (Kueue v0.19.2 also lets an
    elastic RayJob or RayService autoscale, following its child RayCluster's replicas: not
    built, still refused.)"""
    if (kind.group, kind.kind) != ("ray.io", "RayCluster") or not gates.enabled(ws.GATE):
        return refused
    out = []
    for err in refused:
        if err.path == AUTOSCALING_PATH:
            if ws.enabled(job, gates):
                continue
            err = invalid(err.path, err.value, RAYCLUSTER_AUTOSCALING,
                          fix=f'set {ws.ELASTIC_ANNOTATION}: "true" on the RayCluster or turn autoscaling off')
        out.append(err)
    return out


def elastic_errors(kind: JobKind, job: Obj, old: Obj | None, gates: FeatureGates) -> list[FieldError]:
    """Kueue's refusals for the elastic-job annotation on a governed job (CREATE, or UPDATE
    with ``old``)."""
    if kind.kind in EXTERNAL:
        return []
    now = ws.enabled(job, gates)
    out: list[FieldError] = []
    if now and not ws.supported(kind.group, kind.kind):
        out.append(forbidden(ANNOTATION_PATH, f'elastic job is not supported for "{gvk(kind)}"',
                             fix="only batch Jobs and Ray clusters, jobs and services scale as elastic jobs"))
    if old is not None and ws.enabled(old, gates) != now:
        out.append(invalid(ANNOTATION_PATH, now, "field is immutable",
                           fix="create a new job to change whether it is elastic"))
    if now and (kind.group, kind.kind) == ("batch", "Job"):
        out.extend(_batch_job_errors(job, old, gates))
    return out
