"""A governed object -> the Workload Kueue's job reconciler would create for it, from the kind's
pod sets: the controller creates it (``scheduler/kube/controller.py``), ``toposched place`` and
gRPC ``Place`` place it (:func:`workload_from_manifest`), so a JobSet placed offline has the
same pod sets (names, counts, topology requests, pod indexes) as the Workload the controller
would queue for it. Pure functions on object dicts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds.base import JobKind, Obj, PodSetSource, Related
from scheduler.adapter.kinds.charging import charged_pod_sets
from scheduler.adapter.kinds.notbuilt import NOT_BUILT
from scheduler.adapter.kinds.pod import POD, group_name, group_pod_sets
from scheduler.adapter.kinds.registry import KINDS, kind_of
from scheduler.core.beyond.defrag import DEFRAG_ANNOTATIONS
from scheduler.core.config import DEFAULT_KUEUE_RELEASE
from scheduler.core.kueue_names import ANN_ADMISSION_GATED_BY, LABEL_JOB_UID
from scheduler.core.topology_request import request_from_annotations, request_to_kueue
from scheduler.core.workload import (
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    WorkloadFormatError,
    WorkloadSpec,
    kueue_workload_name,
    workload_from_kueue,
    workload_from_object,
)

# HyperPod auto-resume (on the job's metadata), copied onto its Workload.
ANN_AUTO_RESUME = "sagemaker.amazonaws.com/enable-job-auto-resume"
ANN_MAX_RETRY = "sagemaker.amazonaws.com/job-max-retry-count"


def topology_request_from_template(template: Mapping[str, Any], pod_index_label: str | None,
                                   sub_group: tuple[str, int] | None = None) -> dict[str, Any] | None:
    """Kueue's ``PodSetTopologyRequest`` from pod-template annotations (jobframework rules, via
    the codec). ``sub_group``: (index label, count) of a pod set made of several child jobs
    (JobSet). Raises :class:`TopologyRequestError` for a malformed annotation: like Kueue's
    job reconciler, no Workload is created for such a job."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    request = request_from_annotations(annotations, pod_index_label, sub_group)
    return (request_to_kueue(request) or None) if request is not None else None


def workload_pod_set(ps: PodSetSource) -> dict[str, Any]:
    """One Workload ``spec.podSets`` entry (v1beta2)."""
    copied = copy.deepcopy(dict(ps.template))
    request = topology_request_from_template(copied, ps.pod_index_label, ps.sub_group)
    if ps.spec_only:  # Kueue's pod-group integrations (LWS) keep only the template's spec
        copied = {"spec": copied.get("spec") or {}}
    out: dict[str, Any] = {"name": ps.name, "count": ps.count, "template": copied}
    if request:
        out["topologyRequest"] = request
    if ps.min_count is not None:
        out["minCount"] = ps.min_count
    return out


def workload_pod_sets(kind: JobKind, obj: Obj, related: Related | None = None,
                      release: str = DEFAULT_KUEUE_RELEASE) -> list[dict[str, Any]]:
    """The Workload's ``spec.podSets`` of an object (``related``: the objects a kind such as the
    TrainJob reads its templates from; raises :class:`WorkloadFormatError` when it needs them),
    charged as Kueue ``release`` charges them (charging.py)."""
    return [workload_pod_set(ps) for ps in charged_pod_sets(kind, obj, related, release)]


def workload_for_job(kind: JobKind, job: Obj, priority: int,
                     priority_class_ref: Mapping[str, str] | None, related: Related | None = None,
                     admission_gated_by: bool = False, release: str = DEFAULT_KUEUE_RELEASE,
                     elastic: bool = False) -> dict[str, Any]:
    """The Workload Kueue's job reconciler would create for ``job`` (v1beta2).
    ``admission_gated_by``: Kueue's AdmissionGatedBy gate is on, so the job's
    ``kueue.x-k8s.io/admission-gated-by`` goes onto the Workload at creation, before any cycle
    could admit it (``PropagateAdmissionGatedByAnnotation`` in ``constructWorkload``).
    ``release``: the charges of that Kueue release (charging.py).
    ``elastic``: the job scales through workload slices (``adapter/kinds/workload_slicing.py``):
    Kueue's ``newWorkloadName`` hashes the job's generation in, one name per slice."""
    meta = job["metadata"]
    extra = str(meta.get("generation") or 0) if elastic else ""
    name = kueue_workload_name(kind.kind, kind.group, meta["name"], meta["uid"], extra=extra)
    spec: dict[str, Any] = {
        "queueName": (meta.get("labels") or {}).get(LABEL_QUEUE_NAME, ""),
        "podSets": workload_pod_sets(kind, job, related, release),
        "priority": priority,
        "active": True,
    }
    if priority_class_ref:
        spec["priorityClassRef"] = dict(priority_class_ref)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k in (ANN_AUTO_RESUME, ANN_MAX_RETRY, *DEFRAG_ANNOTATIONS)
                   or (admission_gated_by and k == ANN_ADMISSION_GATED_BY and v)}
    body: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "labels": {LABEL_JOB_UID: meta["uid"]},
            "ownerReferences": [{
                "apiVersion": kind.api_version, "kind": kind.kind, "name": meta["name"], "uid": meta["uid"],
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": spec,
    }
    if annotations:
        body["metadata"]["annotations"] = annotations
    if (meta.get("labels") or {}).get(LABEL_PRIORITY_CLASS):
        body["metadata"]["labels"][LABEL_PRIORITY_CLASS] = meta["labels"][LABEL_PRIORITY_CLASS]
    return body


PLACEABLE_KINDS = (*(k.kind for k in KINDS), "Workload")


def _with_article(word: str) -> str:
    """``a JobSet``, ``an HTTPJob`` (an initialism is read letter by letter)."""
    vowel = word[0] in "AEIOU" or (word[:2].isupper() and word[0] in "FHLMNRSX")
    return f"{'an' if vowel else 'a'} {word}"


EXPECTED_KINDS = ", ".join(_with_article(k.spelled if k.kind == "Job" else k.kind) for k in KINDS) \
    + " or a Kueue Workload"
_NOT_BUILT_KINDS = {k.kind: k for k in NOT_BUILT}


def is_placeable(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") in PLACEABLE_KINDS


def related_in(documents: Sequence[Mapping[str, Any]]) -> Related:
    """A related-object lookup over the documents of a file (a TrainJob's runtime next to it)."""
    def find(kind: str, namespace: str, name: str) -> Obj | None:
        for doc in documents:
            meta = doc.get("metadata") or {}
            if doc.get("kind") == kind and meta.get("name") == name and (
                    not namespace or meta.get("namespace", namespace) == namespace):
                return doc
        return None
    return find


def workload_from_manifest(obj: Mapping[str, Any], documents: Sequence[Mapping[str, Any]] = (),
                           release: str = DEFAULT_KUEUE_RELEASE) -> WorkloadSpec:
    """Any governed kind -> the :class:`WorkloadSpec` of the Workload Kueue would create for it
    (a LeaderWorkerSet: one group's; a Deployment: one replica's; a pod of a pod group: the
    group's, its members among ``documents``). ``documents``: the other objects of the file (a
    TrainJob's runtime). ``release``: the Kueue release whose charges apply (charging.py).
    Raises :class:`WorkloadFormatError` (or the codec's :class:`TopologyRequestError`)."""
    kind_name = obj.get("kind")
    if kind_name in ("Job", "Workload"):  # read by the core directly (core/workload.py)
        return workload_from_object(obj)
    kind = kind_of(obj)
    if kind is None:
        known = _NOT_BUILT_KINDS.get(str(kind_name))
        if known is not None:
            raise WorkloadFormatError(f"kind: {known.kind} is not built in toposched yet (no {known.kind} "
                                      f"integration); expected {EXPECTED_KINDS}")
        raise WorkloadFormatError(f"kind: expected {EXPECTED_KINDS}, got {kind_name!r}")
    meta = obj.get("metadata") or {}
    if "name" not in meta:
        raise WorkloadFormatError("metadata.name: missing")
    if kind is POD and group_name(obj):
        members = [d for d in documents if d.get("kind") == "Pod" and group_name(d) == group_name(obj)] or [obj]
        pod_sets = [workload_pod_set(ps) for ps in group_pod_sets(members)]
    else:
        given = [d for d in documents if d.get("kind") in {r.kind for r in kind.related}]
        pod_sets = workload_pod_sets(kind, obj, related_in(given) if given else None, release)
    workload = {
        "kind": "Workload",
        "metadata": meta,
        "spec": {"podSets": pod_sets, "queueName": (meta.get("labels") or {}).get(LABEL_QUEUE_NAME, "")},
    }
    return workload_from_kueue(workload)
