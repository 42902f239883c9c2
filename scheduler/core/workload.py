"""Workloads as the core sees them: pod sets with per-pod requests and a topology request.

Converted from a batch/v1 Job or a Kueue Workload (plain dicts), the same way Kueue's job
integration builds ``spec.podSets`` (one PodSet ``main`` for a Job, count =
min(parallelism, completions)).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from scheduler.core.node_affinity import NodeAffinity, NodeAffinityError, node_affinity_from_k8s
from scheduler.core.nodes import Toleration, pod_spec_requests, tolerations_from_k8s
from scheduler.core.spreading import SpreadingSpec, spreading_from_annotations
from scheduler.core.topology_request import (
    CompactWait,
    TopologyRequest,
    compact_wait_from_annotations,
    request_from_annotations,
    request_from_kueue,
    slice_size_errors,
)

LABEL_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
# What Kueue (and toposched) put on the pods of an admitted workload: which Workload, which pod set.
ANN_WORKLOAD = "kueue.x-k8s.io/workload"
LABEL_PODSET = "kueue.x-k8s.io/podset"
# Kueue's pod-group labels: the prebuilt Workload a pod belongs to, and its pod set (role).
ANN_ROLE_HASH = "kueue.x-k8s.io/role-hash"
# The kube-scheduler profile (pod spec.schedulerName) whose pods go through toposched's extender:
# the webhook sets it, the controller checks it, the extender config names it.
SCHEDULER_NAME = "toposched"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

DEFAULT_POD_SET = "main"


@dataclass(frozen=True)
class PodSetSpec:
    name: str
    count: int
    # Per-pod requests in canonical units, WITHOUT the implicit ``pods: 1`` (placement adds it).
    requests: Mapping[str, int]
    topology: TopologyRequest | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    # ``minCount``: partial admission may admit as few as this many pods (None: all or none).
    min_count: int | None = None
    # The pod template's spec.affinity.nodeAffinity (required terms filter, preferred terms score).
    affinity: NodeAffinity | None = None
    # kueue.x-k8s.io/podset-topology-spreading of the pod template (None: absent or unusable).
    spreading: SpreadingSpec | None = None
    # toposched's bounded wait for a compact placement (toposched.io/compact-* annotations).
    compact: CompactWait | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    namespace: str
    name: str
    pod_sets: tuple[PodSetSpec, ...]
    uid: str = ""
    queue_name: str = ""
    priority: int = 0
    priority_class: str | None = None
    # Seconds since the epoch; queue order ties are broken by it.
    created_at: float = 0.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    # Kueue v0.19's slice-size field errors of the Workload's topology requests (refused at
    # creation under TASValidateWorkloadSliceSize; toposched holds it: docs/kueue-versions.md).
    slice_size_errors: tuple[str, ...] = ()

    @cached_property
    def key(self) -> str:
        # Cached: a cycle over 50k pending Workloads asked for it 150k times (issue 18).
        return f"{self.namespace}/{self.name}"


class WorkloadFormatError(ValueError):
    """An object that cannot be read as a workload; the message names the field. (A bad topology
    request raises :class:`TopologyRequestError`, also a ValueError.)"""


def pod_set_from_template(
    name: str, count: int, template: Mapping[str, Any], pod_index_label: str | None = None
) -> PodSetSpec:
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    return PodSetSpec(
        name=name,
        count=count,
        requests=pod_spec_requests(spec),
        topology=request_from_annotations(meta.get("annotations") or {}, pod_index_label),
        node_selector=dict(spec.get("nodeSelector") or {}),
        tolerations=tolerations_from_k8s(spec.get("tolerations")),
        affinity=_node_affinity(spec),
        spreading=spreading_from_annotations(meta.get("annotations") or {}),
        compact=compact_wait_from_annotations(meta.get("annotations") or {}),
    )


def json_object_annotation(annotations: Mapping[str, str], key: str) -> dict[str, Any] | None:
    """A JSON object toposched recorded in an annotation (previous domains, the preemption
    target); None when absent or not a JSON object (a hand-edited value is ignored, not fatal)."""
    raw = annotations.get(key)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _node_affinity(spec: Mapping[str, Any]) -> NodeAffinity | None:
    try:
        return node_affinity_from_k8s(spec.get("affinity"))
    except NodeAffinityError as err:
        raise WorkloadFormatError(str(err)) from err


def _timestamp(meta: Mapping[str, Any]) -> float:
    text = meta.get("creationTimestamp")
    if not text:
        return 0.0
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


def job_pod_count(job: Mapping[str, Any]) -> int:
    """Kueue: count = min(parallelism, completions); parallelism defaults to 1."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism", 1)
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


ANN_JOB_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def job_min_parallelism(job: Mapping[str, Any]) -> int | None:
    """Kueue's ``minPodsCount``: the ``kueue.x-k8s.io/job-min-parallelism`` annotation as an
    integer, None when absent or not one (the Job then accepts no partial admission)."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANN_JOB_MIN_PARALLELISM)
    return int(raw) if isinstance(raw, str) and _GO_INT.fullmatch(raw) else None


_GO_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts


def workload_from_job(job: Mapping[str, Any]) -> WorkloadSpec:
    """A batch/v1 Job -> one PodSet ``main`` (Kueue's batch Job integration)."""
    if job.get("kind") not in (None, "Job"):
        raise WorkloadFormatError(f"kind: expected Job, got {job.get('kind')!r}")
    meta = job.get("metadata") or {}
    if "name" not in meta:
        raise WorkloadFormatError("metadata.name: missing")
    template = (job.get("spec") or {}).get("template")
    if not isinstance(template, Mapping):
        raise WorkloadFormatError("spec.template: missing pod template")
    indexed = (job.get("spec") or {}).get("completionMode") == "Indexed"
    pod_set = pod_set_from_template(
        DEFAULT_POD_SET, job_pod_count(job), template, JOB_COMPLETION_INDEX if indexed else None
    )
    pod_set = replace(pod_set, min_count=job_min_parallelism(job))
    labels = dict(meta.get("labels") or {})
    return WorkloadSpec(
        namespace=meta.get("namespace", "default"),
        name=meta["name"],
        uid=meta.get("uid", ""),
        pod_sets=(pod_set,),
        queue_name=labels.get(LABEL_QUEUE_NAME, ""),
        priority_class=labels.get(LABEL_PRIORITY_CLASS),
        created_at=_timestamp(meta),
        annotations=dict(meta.get("annotations") or {}),
        labels=labels,
    )


def workload_from_kueue(obj: Mapping[str, Any]) -> WorkloadSpec:
    """A Kueue Workload (v1beta1 or v1beta2) -> :class:`WorkloadSpec`.

    ``spec.podSets[].topologyRequest`` wins; without it the pod template annotations are read.
    """
    if obj.get("kind") not in (None, "Workload"):
        raise WorkloadFormatError(f"kind: expected Workload, got {obj.get('kind')!r}")
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pod_sets = []
    slice_errors: list[str] = []
    for i, ps in enumerate(spec.get("podSets") or ()):
        template = ps.get("template")
        if not isinstance(template, Mapping):
            raise WorkloadFormatError(f"spec.podSets[{i}].template: missing pod template")
        built = pod_set_from_template(ps.get("name", DEFAULT_POD_SET), int(ps.get("count", 1)), template)
        request = request_from_kueue(ps.get("topologyRequest"))
        slice_errors.extend(slice_size_errors(ps.get("topologyRequest"), f"spec.podSets[{i}].topologyRequest"))
        min_count = ps.get("minCount")
        if request is not None:
            built = replace(built, topology=request)
        if min_count is not None:
            built = replace(built, min_count=int(min_count))
        pod_sets.append(built)
    if not pod_sets:
        raise WorkloadFormatError("spec.podSets: at least one pod set is required")
    ref = spec.get("priorityClassRef") or {}
    return WorkloadSpec(
        namespace=meta.get("namespace", "default"),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        pod_sets=tuple(pod_sets),
        queue_name=spec.get("queueName", ""),
        priority=int(spec.get("priority") or 0),
        priority_class=ref.get("name") or spec.get("priorityClassName"),
        created_at=_timestamp(meta),
        annotations=dict(meta.get("annotations") or {}),
        labels=dict(meta.get("labels") or {}),
        slice_size_errors=tuple(slice_errors),
    )


def workload_from_object(obj: Mapping[str, Any]) -> WorkloadSpec:
    kind = obj.get("kind")
    if kind == "Job":
        return workload_from_job(obj)
    if kind == "Workload":
        return workload_from_kueue(obj)
    raise WorkloadFormatError(f"kind: expected a batch/v1 Job or a Kueue Workload, got {kind!r}")


def kueue_workload_name(owner_kind: str, owner_group: str, owner_name: str, owner_uid: str, max_len: int = 253,
                        extra: str = "") -> str:
    """Kueue's ``GetWorkloadNameForOwnerWithGVK``: ``<kind>-<name>`` truncated, plus a 5-hex
    SHA-1 suffix over ``Kind\\nGroup\\nname\\nuid`` (e.g. ``job-sample-job-7f173``);
    ``extra`` (``GenerateWorkloadNameWithExtra``: an elastic job's generation, one name per
    workload slice) is hashed after one more newline."""
    prefix = f"{owner_kind.lower()}-{owner_name}"[: max_len - 6]
    parts = [owner_kind, owner_group, owner_name, owner_uid, *([extra] if extra else [])]
    digest = hashlib.sha1("\n".join(parts).encode()).hexdigest()
    return f"{prefix}-{digest[:5]}"

