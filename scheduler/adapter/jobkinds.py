"""The pod sets of each job kind toposched manages, as Kueue's integrations build them.

One place for "what are this object's pod sets": the controller's integrations
(:mod:`scheduler.kube.jobs`) turn them into the Workload they create, and ``toposched place`` /
gRPC ``Place`` (:func:`workload_from_manifest`) into the :class:`WorkloadSpec` they place, so a
JobSet placed offline has the same pod sets (names, counts, topology requests, pod indexes) as
the Workload the controller would queue for it. Pure functions on object dicts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.core.topology_request import request_from_annotations, request_to_kueue
from scheduler.core.workload import (
    DEFAULT_POD_SET,
    JOB_COMPLETION_INDEX,
    LABEL_QUEUE_NAME,
    WorkloadFormatError,
    WorkloadSpec,
    job_min_parallelism,
    job_pod_count,
    workload_from_kueue,
    workload_from_object,
)

JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"  # child Job's index within its replicated job
KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"
PYTORCH_REPLICA_SPECS = "pytorchReplicaSpecs"
PYTORCH_REPLICA_TYPES = ("Master", "Worker")
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"  # leader 0, workers 1..size-1
LWS_LEADER_POD_SET, LWS_WORKER_POD_SET = "leader", "worker"
MPI_REPLICA_SPECS = "mpiReplicaSpecs"
MPI_REPLICA_TYPES = ("Launcher", "Worker")  # Kueue's orderedReplicaTypes for kubeflow.org/v2beta1 MPIJob

# Kinds Kueue manages that toposched has no integration for yet: named in the error, so a
# user knows it is a gap of toposched, not a mistake in the manifest.
NOT_BUILT_KINDS = ("HyperPodPyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob", "RayJob")


def topology_request_from_template(template: Mapping[str, Any], pod_index_label: str | None,
                                   sub_group: tuple[str, int] | None = None) -> dict[str, Any] | None:
    """Kueue's ``PodSetTopologyRequest`` from pod-template annotations (jobframework rules, via
    the codec). ``sub_group``: (index label, count) of a pod set made of several child jobs
    (JobSet). Raises :class:`TopologyRequestError` for a malformed annotation: like Kueue's
    job reconciler, no Workload is created for such a job."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    request = request_from_annotations(annotations, pod_index_label, sub_group)
    return (request_to_kueue(request) or None) if request is not None else None


def _pod_set(name: str, count: int, template: Mapping[str, Any], pod_index_label: str | None,
             sub_group: tuple[str, int] | None = None, spec_only: bool = False) -> dict[str, Any]:
    copied = copy.deepcopy(dict(template))
    request = topology_request_from_template(copied, pod_index_label, sub_group)
    if spec_only:  # Kueue's pod-group integrations (LWS) keep only the template's spec
        copied = {"spec": copied.get("spec") or {}}
    ps: dict[str, Any] = {"name": name, "count": count, "template": copied}
    if request:
        ps["topologyRequest"] = request
    return ps


def batch_job_pod_sets(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """batch/v1 Job: one pod set ``main`` of min(parallelism, completions) pods, with
    ``minCount`` from the min-parallelism annotation (Kueue's partial admission)."""
    template = (job.get("spec") or {}).get("template") or {}
    ps = _pod_set(DEFAULT_POD_SET, job_pod_count(job), template, JOB_COMPLETION_INDEX)
    min_count = job_min_parallelism(job)
    if min_count is not None:
        ps["minCount"] = min_count
    return [ps]


def jobset_pod_sets(jobset: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JobSet: one pod set per replicated job (name = the replicated job's name, count =
    replicas x pods per child Job), ranked by child-Job index and completion index."""
    out = []
    for rj in (jobset.get("spec") or {}).get("replicatedJobs") or ():
        job_spec = (rj.get("template") or {}).get("spec") or {}
        replicas = int(rj.get("replicas", 1) or 0)
        out.append(_pod_set(rj.get("name", DEFAULT_POD_SET), replicas * job_pod_count({"spec": job_spec}),
                            job_spec.get("template") or {}, JOB_COMPLETION_INDEX, (JOBSET_JOB_INDEX, replicas)))
    return out


def kubeflow_pod_sets(job: Mapping[str, Any], replica_specs_field: str = PYTORCH_REPLICA_SPECS,
                      replica_types: tuple[str, ...] = PYTORCH_REPLICA_TYPES) -> list[dict[str, Any]]:
    """Kubeflow training job (PyTorchJob): one pod set per replica type present, in Kueue's
    order (name = the type in lower case, count = replicas, default 1)."""
    specs = (job.get("spec") or {}).get(replica_specs_field) or {}
    out = []
    for replica_type in replica_types:
        spec = specs.get(replica_type)
        if spec is None:
            continue
        replicas = spec.get("replicas")
        out.append(_pod_set(replica_type.lower(), 1 if replicas is None else int(replicas),
                            spec.get("template") or {}, KUBEFLOW_REPLICA_INDEX))
    return out


def lws_pod_sets(lws: Mapping[str, Any]) -> list[dict[str, Any]]:
    """leaderworkerset.x-k8s.io/v1 LeaderWorkerSet, one group (Kueue's LWS integration builds the
    same pod sets for each group's Workload): with a leader template, ``leader`` (1 pod, no pod
    index label) and ``worker`` (size - 1 pods); without, ``main`` (size pods). Workers are ranked
    by ``leaderworkerset.sigs.k8s.io/worker-index``; the templates keep only their spec."""
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = lwt.get("size")
    count = 1 if size is None else int(size)
    out = []
    worker_name = DEFAULT_POD_SET
    leader = lwt.get("leaderTemplate")
    if leader is not None:
        worker_name, count = LWS_WORKER_POD_SET, count - 1
        out.append(_pod_set(LWS_LEADER_POD_SET, 1, leader, None, spec_only=True))
    out.append(_pod_set(worker_name, count, lwt.get("workerTemplate") or {}, LWS_WORKER_INDEX, spec_only=True))
    return out


def mpijob_pod_sets(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """kubeflow.org/v2beta1 MPIJob (Kueue's mpijob integration): pod sets ``launcher`` and
    ``worker`` (those present, in that order; count = replicas, default 1), TAS ranks by
    ``training.kubeflow.org/replica-index``."""
    return kubeflow_pod_sets(job, MPI_REPLICA_SPECS, MPI_REPLICA_TYPES)


# Kinds whose pod sets come from :func:`jobset_pod_sets` & co. (Job and Workload are read by
# the core directly: their pod sets need no integration).
POD_SETS_OF: Mapping[str, Callable[[Mapping[str, Any]], list[dict[str, Any]]]] = {
    "JobSet": jobset_pod_sets,
    "PyTorchJob": kubeflow_pod_sets,
    "MPIJob": mpijob_pod_sets,
    "LeaderWorkerSet": lws_pod_sets,
}
PLACEABLE_KINDS = ("Job", "JobSet", "PyTorchJob", "MPIJob", "LeaderWorkerSet", "Workload")
EXPECTED_KINDS = "a batch/v1 Job, a JobSet, a PyTorchJob, an MPIJob, a LeaderWorkerSet or a Kueue Workload"


def is_placeable(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") in PLACEABLE_KINDS


def workload_from_manifest(obj: Mapping[str, Any]) -> WorkloadSpec:
    """Any managed kind -> the :class:`WorkloadSpec` of the Workload Kueue would create for it.
    Raises :class:`WorkloadFormatError` (or the codec's :class:`TopologyRequestError`)."""
    kind = obj.get("kind")
    if kind in ("Job", "Workload"):
        return workload_from_object(obj)
    pod_sets_of = POD_SETS_OF.get(str(kind))
    if pod_sets_of is None:
        if kind in NOT_BUILT_KINDS:
            raise WorkloadFormatError(
                f"kind: {kind} is not built in toposched yet (no {kind} integration); expected {EXPECTED_KINDS}")
        raise WorkloadFormatError(f"kind: expected {EXPECTED_KINDS}, got {kind!r}")
    meta = obj.get("metadata") or {}
    if "name" not in meta:
        raise WorkloadFormatError("metadata.name: missing")
    workload = {
        "kind": "Workload",
        "metadata": meta,
        "spec": {"podSets": pod_sets_of(obj), "queueName": (meta.get("labels") or {}).get(LABEL_QUEUE_NAME, "")},
    }
    return workload_from_kueue(workload)
