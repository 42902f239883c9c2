"""A job manifest's checks that need no cluster, one verdict: the kind's own refusals (Kueue's
messages), Kueue's topology-annotation rules on every pod set's template, its PodSet-group
rules (at creation) and partial admission's annotation. The webhook adds the cluster's checks
to these (admission/validation.py); ``toposched place`` and gRPC ``Place`` refuse a manifest
these refuse, with the same words (:func:`manifest_errors`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.registry import kind_of, kind_or_job
from scheduler.adapter.manifest import gated_by
from scheduler.adapter.manifest.annotations import (
    NO_OVERRIDES,
    PODSET_PREFIX,
    PodSetAnnotations,
    validate_pod_set_groups,
    validate_topology_annotations,
)
from scheduler.adapter.manifest.fielderrors import FieldError, Verdict, invalid, required
from scheduler.adapter.manifest.podset_cap import pod_set_cap_errors
from scheduler.adapter.manifest.shape import shape_errors
from scheduler.adapter.workload_checks import max_pod_sets
from scheduler.core.config import DEFAULT_KUEUE_RELEASE, FeatureGates
from scheduler.core.workload import ANN_JOB_MIN_PARALLELISM, job_min_parallelism, job_pod_count

Obj = Mapping[str, Any]


def kind_errors(obj: Obj, release: str = DEFAULT_KUEUE_RELEASE) -> list[FieldError]:
    """The refusals a kind declares for a queued object (``JobKind.validation``: a RayJob on an
    existing cluster with a cluster spec, autoscaling without workload slices, too many worker
    groups for Kueue ``release``, ...), with Kueue's messages as field errors."""
    kind = kind_of(obj)
    if kind is None:
        return []
    out: list[FieldError] = []
    for path, error_type, detail, value in kind.validation(obj, max_pod_sets(release)):
        if error_type == "Required":
            out.append(required(path, detail))
        elif error_type == "Forbidden":
            out.append(FieldError(path, "Forbidden", detail))
        elif error_type == "TooMany":
            out.append(FieldError(path, "Too many", detail, value))
        else:
            out.append(invalid(path, value, detail))
    return out


def partial_admission_errors(job: Obj) -> list[FieldError]:
    """Kueue's ``validatePartialAdmissionCreate``: the min-parallelism annotation is an integer
    between 1 and the job's pod count - 1."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANN_JOB_MIN_PARALLELISM)
    if raw is None:
        return []
    path = f"metadata.annotations[{ANN_JOB_MIN_PARALLELISM}]"
    minimum = job_min_parallelism(job)
    if minimum is None:
        return [invalid(path, raw, f'strconv.Atoi: parsing "{raw}": invalid syntax')]
    count = job_pod_count(job)
    if minimum >= count or minimum <= 0:
        return [invalid(path, minimum, f"should be between 0 and {count - 1}")]
    return []


def pod_set_annotations(obj: Obj) -> list[tuple[str, Mapping[str, str], int]]:
    """(annotations path, pod template annotations, pod count) per pod set: the registry's pod
    sets, the very ones the controller's Workload gets (``scheduler/adapter/kinds``)."""
    return [(ps.annotations_path, ps.annotations, ps.count) for ps in kind_or_job(obj).pod_sets(obj)]


def _podset_keys(annotations: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if k.startswith(PODSET_PREFIX)}


def manifest_verdict(job: Obj, old: Obj | None = None, gates: FeatureGates = NO_OVERRIDES) -> Verdict:
    """The checks of a governed job that need no cluster. On UPDATE (``old`` given) only the
    pod sets whose topology annotations changed are checked again. The admission-gated-by
    annotation is judged on every CREATE and UPDATE (gated_by.py), as jobframework does."""
    kind = kind_or_job(job)
    gate_errors = gated_by.create_errors(job, gates) if old is None else gated_by.update_errors(old, job, gates)
    refused = kind_errors(job, gates.release) or pod_set_cap_errors(job, kind, gates.release)
    if refused:  # the kind's own refusals (Kueue's messages), then the Workload's cap: nothing else is judged
        return Verdict(refused + gate_errors)
    verdict = Verdict(gate_errors)
    if kind.single_pod_set:
        template = (job.get("spec") or {}).get("template") or {}
        ann = (template.get("metadata") or {}).get("annotations") or {}
        if old is not None:
            old_template = (old.get("spec") or {}).get("template") or {}
            if _podset_keys((old_template.get("metadata") or {}).get("annotations") or {}) == _podset_keys(ann):
                return verdict
        verdict.errors.extend(validate_topology_annotations(ann, job_pod_count(job), gates=gates))
        if old is None:
            verdict.errors.extend(partial_admission_errors(job))
        return verdict
    pod_sets = pod_set_annotations(job)
    if old is not None:
        before = {path: _podset_keys(ann) for path, ann, _ in pod_set_annotations(old)}
        pod_sets = [(path, ann, count) for path, ann, count in pod_sets if before.get(path) != _podset_keys(ann)]
    for path, ann, count in pod_sets:
        verdict.errors.extend(validate_topology_annotations(ann, count, path, single_pod_set=False, gates=gates))
    if old is None:  # groups span pod sets: checked on the whole job, at creation
        verdict.errors.extend(validate_pod_set_groups(
            [PodSetAnnotations(path, ann, count) for path, ann, count in pod_set_annotations(job)], gates))
    return verdict


def manifest_errors(obj: Obj, gates: FeatureGates = NO_OVERRIDES) -> list[str]:
    """The webhook's checks that need no cluster of a manifest of a governed kind, one line each;
    ``toposched place`` and gRPC ``Place`` refuse a manifest the webhook would deny, with the same
    words. Other kinds: none."""
    if kind_of(obj) is None:
        return []
    shape = shape_errors(str(obj["kind"]), obj)  # as the webhook: the types first, then the rules
    if shape:
        return [str(err) for err in shape]
    return [str(err) for err in manifest_verdict(obj, gates=gates).errors]
