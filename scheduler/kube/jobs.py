"""Job integrations: how a kind of job becomes a Workload, and how it is started/stopped.

batch/v1 Job, JobSet (jobset.x-k8s.io/v1alpha2), Kubeflow PyTorchJob (kubeflow.org/v1) and
MPIJob (kubeflow.org/v2beta1) are implemented, as Kueue's integrations do them. LeaderWorkerSet
is not a suspendable job (one Workload per group, pods held by the extender): it has its own
module, :mod:`scheduler.kube.lws`. Others (HyperPod's HyperPodPyTorchJob) plug in the same way:
implement :class:`JobIntegration` (pod sets, suspend field, finished conditions) and register in
:data:`INTEGRATIONS`; nothing else in the controller knows a job's kind.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.adapter.jobkinds import (
    MPI_REPLICA_SPECS,
    MPI_REPLICA_TYPES,
    batch_job_pod_sets,
    jobset_pod_sets,
    kubeflow_pod_sets,
)
from scheduler.core.defrag import DEFRAG_ANNOTATIONS
from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.core.topology_request import ANN_UNCONSTRAINED
from scheduler.core.workload import (
    ANN_WORKLOAD,
    LABEL_PODSET,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    job_min_parallelism,
    kueue_workload_name,
)
from scheduler.k8s.informer import JOBS, JOBSETS, MPIJOBS, PYTORCHJOBS, Resource

# HyperPod auto-resume (on the job's metadata).
ANN_AUTO_RESUME = "sagemaker.amazonaws.com/enable-job-auto-resume"
ANN_MAX_RETRY = "sagemaker.amazonaws.com/job-max-retry-count"


@dataclass(frozen=True)
class PodSetStart:
    """What the controller injects into one pod set's template when it starts the job."""

    name: str
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # e.g. the unconstrained-topology annotation Kueue adds for implicit TAS, so the pods are
    # recognised as TAS pods (counted once, from the assignment) and not as foreign usage.
    annotations: Mapping[str, str] = field(default_factory=dict)
    count: int | None = None  # the admitted pod count (partial admission may have reduced it)


@dataclass(frozen=True)
class FinishState:
    finished: bool
    reason: str = ""
    message: str = ""


def finish_from_conditions(job: Mapping[str, Any], succeeded: str, failed: str,
                           succeeded_message: str | None, failed_message: str) -> FinishState:
    """Finished when the job's ``succeeded`` or ``failed`` condition is True (Kueue's Finished
    reason Succeeded / Failed, with the condition's message, or the given default; a
    ``succeeded_message`` given is used as is, as Kueue's batch Job integration does)."""
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("status") != "True":
            continue
        if cond.get("type") == succeeded:
            return FinishState(True, "Succeeded", succeeded_message or cond.get("message") or "succeeded")
        if cond.get("type") == failed:
            return FinishState(True, "Failed", cond.get("message") or failed_message)
    return FinishState(False)


class JobIntegration(Protocol):
    kind: str
    group: str
    resource: Resource

    def pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]: ...
    def is_suspended(self, job: Mapping[str, Any]) -> bool: ...
    def start_patch(
        self, job: Mapping[str, Any], workload_name: str, pod_sets: list[PodSetStart]
    ) -> dict[str, Any]: ...
    def stop_patch(self, job: Mapping[str, Any]) -> dict[str, Any]: ...
    def restore_patch(self, job: Mapping[str, Any],
                      original_pod_sets: list[Mapping[str, Any]]) -> dict[str, Any] | None: ...
    def finish_state(self, job: Mapping[str, Any]) -> FinishState: ...
    def active_pods(self, job: Mapping[str, Any]) -> int: ...
    def can_restore(self, job: Mapping[str, Any]) -> bool: ...
    def pods_ready(self, job: Mapping[str, Any]) -> bool: ...


def template_start_patch(template: Mapping[str, Any], start: PodSetStart, workload_name: str) -> dict[str, Any]:
    """Merge patch of one pod template at start: the flavor's (and required domain's) node
    selector, its tolerations, the workload annotation and the pod-set label."""
    selector = {**((template.get("spec") or {}).get("nodeSelector") or {}), **start.node_selector}
    spec_patch: dict[str, Any] = {"nodeSelector": selector}
    if start.tolerations:
        existing = list((template.get("spec") or {}).get("tolerations") or [])
        spec_patch["tolerations"] = existing + [dict(t) for t in start.tolerations if dict(t) not in existing]
    return {"metadata": {"annotations": {**start.annotations, ANN_WORKLOAD: workload_name},
                         "labels": {LABEL_PODSET: start.name}},
            "spec": spec_patch}


def template_restore_patch(current: Mapping[str, Any], original: Mapping[str, Any]) -> dict[str, Any] | None:
    """Merge patch that undoes :func:`template_start_patch` (Kueue restores from the Workload's
    pod set templates), or None when there is nothing to restore."""
    ospec, cspec = original.get("spec") or {}, current.get("spec") or {}
    cmeta = current.get("metadata") or {}
    spec_patch: dict[str, Any] = {}
    if (cspec.get("nodeSelector") or {}) != (ospec.get("nodeSelector") or {}):
        spec_patch["nodeSelector"] = ospec.get("nodeSelector") or None
    if (cspec.get("tolerations") or []) != (ospec.get("tolerations") or []):
        spec_patch["tolerations"] = ospec.get("tolerations") or None
    meta_patch: dict[str, Any] = {}
    original_ann = (original.get("metadata") or {}).get("annotations") or {}
    stale = {k: None for k in (cmeta.get("annotations") or {})
             if k in (ANN_WORKLOAD, ANN_UNCONSTRAINED) and k not in original_ann}
    if stale:
        meta_patch["annotations"] = stale
    if LABEL_PODSET in (cmeta.get("labels") or {}):
        meta_patch["labels"] = {LABEL_PODSET: None}
    patch: dict[str, Any] = {}
    if spec_patch:
        patch["spec"] = spec_patch
    if meta_patch:
        patch["metadata"] = meta_patch
    return patch or None


def merge_patched(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with a JSON merge patch (RFC 7386) applied: what the API server would store.
    Used where the patched object sits inside a list (a merge patch replaces lists whole)."""
    out = copy.deepcopy(dict(obj))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_patched(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


ANN_COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"


def _parallelism_patch(job: Mapping[str, Any], count: Any) -> dict[str, int]:
    """Kueue's partial admission on a batch Job (``RunWithPodSetsInfo`` /
    ``RestorePodSetsInfo``): a Job with ``kueue.x-k8s.io/job-min-parallelism`` runs with
    ``parallelism`` = the admitted count (and ``completions`` too when
    ``kueue.x-k8s.io/job-completions-equal-parallelism`` is true); stopped, it gets the
    Workload's count back. Empty when nothing changes."""
    if count is None or job_min_parallelism(job) is None:
        return {}
    spec = job.get("spec") or {}
    if spec.get("parallelism") == int(count):
        return {}
    out = {"parallelism": int(count)}
    raw = str(((job.get("metadata") or {}).get("annotations") or {}).get(ANN_COMPLETIONS_EQUAL_PARALLELISM, ""))
    if raw.lower() in ("1", "t", "true"):
        out["completions"] = int(count)
    return out


class BatchJob:
    kind = "Job"
    group = "batch"
    resource = JOBS

    def pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        return batch_job_pod_sets(job)

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def start_patch(self, job: Mapping[str, Any], workload_name: str, pod_sets: list[PodSetStart]) -> dict[str, Any]:
        """Unsuspend with the flavor's node selectors (and the domain selector for required
        placement), the workload annotation and the podset label: one merge patch, applied
        while the Job is still suspended, which is when its template may change."""
        template = (job.get("spec") or {}).get("template") or {}
        spec: dict[str, Any] = {"suspend": False,
                                "template": template_start_patch(template, pod_sets[0], workload_name)}
        spec.update(_parallelism_patch(job, pod_sets[0].count))
        return {"spec": spec}

    def stop_patch(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """Suspend only: the API server refuses template changes while the Job has a
        startTime; the template is restored once the Job controller has cleared it."""
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Mapping[str, Any],
                      original_pod_sets: list[Mapping[str, Any]]) -> dict[str, Any] | None:
        """Restore the template as it was before start (Kueue restores from the Workload's pod
        set templates), or None when there is nothing to restore. Valid only while suspended
        with no ``status.startTime``."""
        original = (original_pod_sets[0].get("template") or {}) if original_pod_sets else {}
        patch = template_restore_patch((job.get("spec") or {}).get("template") or {}, original)
        spec: dict[str, Any] = {"template": patch} if patch else {}
        if original_pod_sets:
            spec.update(_parallelism_patch(job, original_pod_sets[0].get("count")))
        return {"spec": spec} if spec else None

    def can_restore(self, job: Mapping[str, Any]) -> bool:
        """Suspended, no pods left, and ``status.startTime`` cleared by the Job controller:
        the template may change and nothing of the previous run is still going."""
        status = job.get("status") or {}
        return self.is_suspended(job) and not status.get("startTime") and self.active_pods(job) == 0

    def finish_state(self, job: Mapping[str, Any]) -> FinishState:
        return finish_from_conditions(job, "Complete", "Failed", "Job finished successfully", "Job failed")

    def active_pods(self, job: Mapping[str, Any]) -> int:
        status = job.get("status") or {}
        return int(status.get("active") or 0) + int(status.get("terminating") or 0)

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        """Kueue's batch Job ``PodsReady``: ready + succeeded (+ uncounted succeeded) pods reach
        ``min(parallelism, completions)``."""
        spec, status = job.get("spec") or {}, job.get("status") or {}
        count = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        if spec.get("completions") is not None:
            count = min(count, int(spec["completions"]))
        uncounted = len(((status.get("uncountedTerminatedPods") or {}).get("succeeded")) or ())
        return int(status.get("succeeded") or 0) + int(status.get("ready") or 0) + uncounted >= count



class JobSetJob:
    """jobset.x-k8s.io/v1alpha2 JobSet, as Kueue's JobSet integration: one pod set per
    replicated job (name = the replicated job's name, count = replicas x pods per child Job),
    TAS ranks by child-Job index and completion index, the whole JobSet suspended/unsuspended.

    The JobSet controller must be running (it creates the child Jobs); without the JobSet CRD
    the integration stays idle (its informer is optional)."""

    kind = "JobSet"
    group = "jobset.x-k8s.io"
    resource = JOBSETS

    @staticmethod
    def _replicated_jobs(jobset: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [dict(rj) for rj in (jobset.get("spec") or {}).get("replicatedJobs") or ()]

    def pod_sets(self, jobset: Mapping[str, Any]) -> list[dict[str, Any]]:
        return jobset_pod_sets(jobset)

    def is_suspended(self, jobset: Mapping[str, Any]) -> bool:
        return bool((jobset.get("spec") or {}).get("suspend"))

    def _with_templates(self, jobset: Mapping[str, Any], patch_of: Any) -> list[dict[str, Any]] | None:
        """The replicated jobs with each pod template merge-patched by ``patch_of(name,
        template)`` (None: unchanged); None when nothing changed. A merge patch replaces the
        replicatedJobs list whole, so the patch carries every entry."""
        changed = False
        out = []
        for rj in self._replicated_jobs(jobset):
            job_template = dict(rj.get("template") or {})
            job_spec = dict(job_template.get("spec") or {})
            template = job_spec.get("template") or {}
            patch = patch_of(rj.get("name"), template)
            if patch:
                changed = True
                job_spec["template"] = merge_patched(template, patch)
                job_template["spec"] = job_spec
                rj["template"] = job_template
            out.append(rj)
        return out if changed else None

    def start_patch(self, jobset: Mapping[str, Any], workload_name: str, pod_sets: list[PodSetStart]) -> dict[str, Any]:
        starts = {ps.name: ps for ps in pod_sets}
        replicated = self._with_templates(jobset, lambda name, template: template_start_patch(
            template, starts[name], workload_name) if name in starts else None)
        spec: dict[str, Any] = {"suspend": False}
        if replicated is not None:
            spec["replicatedJobs"] = replicated
        return {"spec": spec}

    def stop_patch(self, jobset: Mapping[str, Any]) -> dict[str, Any]:
        return {"spec": {"suspend": True}}

    def restore_patch(self, jobset: Mapping[str, Any],
                      original_pod_sets: list[Mapping[str, Any]]) -> dict[str, Any] | None:
        originals = {ps.get("name"): ps.get("template") or {} for ps in original_pod_sets}
        replicated = self._with_templates(jobset, lambda name, template: template_restore_patch(
            template, originals[name]) if name in originals else None)
        return {"spec": {"replicatedJobs": replicated}} if replicated is not None else None

    def can_restore(self, jobset: Mapping[str, Any]) -> bool:
        return self.is_suspended(jobset) and self.active_pods(jobset) == 0

    def finish_state(self, jobset: Mapping[str, Any]) -> FinishState:
        return finish_from_conditions(jobset, "Completed", "Failed", None, "jobset failed")

    def active_pods(self, jobset: Mapping[str, Any]) -> int:
        """Child Jobs with pods still pending or running (JobSet reports jobs, not pods: enough
        to know whether anything of the previous run is still going)."""
        return sum(int(s.get("active") or 0) for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or ())

    def pods_ready(self, jobset: Mapping[str, Any]) -> bool:
        """Kueue's JobSet ``PodsReady``: ready + succeeded child Jobs equal the replicas."""
        replicas = sum(int(rj.get("replicas", 1) if rj.get("replicas") is not None else 1)
                       for rj in self._replicated_jobs(jobset))
        ready = sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0)
                    for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or ())
        return replicas == ready



class PyTorchJobJob:
    """kubeflow.org/v1 PyTorchJob, as Kueue's Kubeflow integration: one pod set per replica type
    present, in the order Master, Worker (name = the type in lower case, count = replicas,
    default 1), TAS ranks by ``training.kubeflow.org/replica-index``; suspended through
    ``spec.runPolicy.suspend``; finished by the Succeeded / Failed conditions. The replica
    specs are a map, so a merge patch reaches each template without rewriting the others."""

    kind = "PyTorchJob"
    group = "kubeflow.org"
    resource = PYTORCHJOBS
    replica_specs_field = "pytorchReplicaSpecs"
    ordered_replica_types: tuple[str, ...] = ("Master", "Worker")
    failed_message = "PyTorchJob failed"

    def _replicas(self, job: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
        specs = (job.get("spec") or {}).get(self.replica_specs_field) or {}
        return [(t, specs[t]) for t in self.ordered_replica_types if specs.get(t) is not None]

    def pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        return kubeflow_pod_sets(job, self.replica_specs_field, self.ordered_replica_types)

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))

    def _templates_patch(self, job: Mapping[str, Any], patch_of: Any) -> dict[str, Any]:
        specs = {}
        for replica_type, spec in self._replicas(job):
            patch = patch_of(replica_type.lower(), spec.get("template") or {})
            if patch:
                specs[replica_type] = {"template": patch}
        return specs

    def start_patch(self, job: Mapping[str, Any], workload_name: str, pod_sets: list[PodSetStart]) -> dict[str, Any]:
        starts = {ps.name: ps for ps in pod_sets}
        specs = self._templates_patch(job, lambda name, template: template_start_patch(
            template, starts[name], workload_name) if name in starts else None)
        spec: dict[str, Any] = {"runPolicy": {"suspend": False}}
        if specs:
            spec[self.replica_specs_field] = specs
        return {"spec": spec}

    def stop_patch(self, job: Mapping[str, Any]) -> dict[str, Any]:
        return {"spec": {"runPolicy": {"suspend": True}}}

    def restore_patch(self, job: Mapping[str, Any],
                      original_pod_sets: list[Mapping[str, Any]]) -> dict[str, Any] | None:
        originals = {ps.get("name"): ps.get("template") or {} for ps in original_pod_sets}
        specs = self._templates_patch(job, lambda name, template: template_restore_patch(
            template, originals[name]) if name in originals else None)
        return {"spec": {self.replica_specs_field: specs}} if specs else None

    def can_restore(self, job: Mapping[str, Any]) -> bool:
        return self.is_suspended(job) and self.active_pods(job) == 0

    def finish_state(self, job: Mapping[str, Any]) -> FinishState:
        return finish_from_conditions(job, "Succeeded", "Failed", None, self.failed_message)

    def active_pods(self, job: Mapping[str, Any]) -> int:
        statuses = (job.get("status") or {}).get("replicaStatuses") or {}
        return sum(int((s or {}).get("active") or 0) for s in statuses.values())

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        """Kueue's Kubeflow ``PodsReady``: the job's ``Running`` condition is True."""
        return any(c.get("type") == "Running" and c.get("status") == "True"
                   for c in (job.get("status") or {}).get("conditions") or ())


class MPIJobJob(PyTorchJobJob):
    """kubeflow.org/v2beta1 MPIJob, as Kueue's mpijob integration: pod sets ``launcher`` and
    ``worker`` (those present, in that order; count = replicas, default 1), TAS ranks by
    ``training.kubeflow.org/replica-index``, suspended through ``spec.runPolicy.suspend``,
    finished by the Succeeded / Failed conditions, active pods from ``status.replicaStatuses``.
    The mpi-operator creates the launcher as a batch/v1 Job owned by the MPIJob: that Job is
    the MPIJob's, never managed on its own (``owned_by_managed_parent``)."""

    kind = "MPIJob"
    resource = MPIJOBS
    replica_specs_field = MPI_REPLICA_SPECS
    ordered_replica_types = MPI_REPLICA_TYPES
    failed_message = "MPIJob failed"


INTEGRATIONS: dict[str, JobIntegration] = {
    "batch/Job": BatchJob(), "jobset.x-k8s.io/JobSet": JobSetJob(), "kubeflow.org/PyTorchJob": PyTorchJobJob(),
    "kubeflow.org/MPIJob": MPIJobJob()}

# LeaderWorkerSet is managed by scheduler.kube.lws (not a suspendable job), under this key.
LWS_KEY = "leaderworkerset.x-k8s.io/LeaderWorkerSet"
# Kueue's ``integrations.frameworks`` names -> the integrations above (and LWS).
KUEUE_FRAMEWORKS: dict[str, str] = {
    "batch/job": "batch/Job", "jobset.x-k8s.io/jobset": "jobset.x-k8s.io/JobSet",
    "kubeflow.org/pytorchjob": "kubeflow.org/PyTorchJob", "kubeflow.org/mpijob": "kubeflow.org/MPIJob",
    "leaderworkerset.x-k8s.io/leaderworkerset": LWS_KEY}


def managed_integrations(frameworks: Sequence[str]) -> frozenset[str]:
    """The :data:`INTEGRATIONS` keys (and :data:`LWS_KEY`) a Kueue ``integrations.frameworks``
    list enables; an empty list (no Configuration) keeps toposched's default: every integration
    it has."""
    if not frameworks:
        return frozenset(INTEGRATIONS) | {LWS_KEY}
    return frozenset(KUEUE_FRAMEWORKS[f] for f in frameworks if f in KUEUE_FRAMEWORKS)


def unmanaged_frameworks(frameworks: Sequence[str]) -> list[str]:
    """Frameworks the Configuration enables that toposched has no integration for."""
    return [f for f in frameworks if f not in KUEUE_FRAMEWORKS]


def workload_for_job(integration: JobIntegration, job: Mapping[str, Any], priority: int,
                     priority_class_ref: Mapping[str, str] | None) -> dict[str, Any]:
    """The Workload Kueue's job reconciler would create for ``job`` (v1beta2)."""
    meta = job["metadata"]
    name = kueue_workload_name(integration.kind, integration.group, meta["name"], meta["uid"])
    spec: dict[str, Any] = {
        "queueName": (meta.get("labels") or {}).get(LABEL_QUEUE_NAME, ""),
        "podSets": integration.pod_sets(job),
        "priority": priority,
        "active": True,
    }
    if priority_class_ref:
        spec["priorityClassRef"] = dict(priority_class_ref)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k in (ANN_AUTO_RESUME, ANN_MAX_RETRY, *DEFRAG_ANNOTATIONS)}
    body: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "labels": {LABEL_JOB_UID: meta["uid"]},
            "ownerReferences": [{
                "apiVersion": f"{integration.group}/{integration.resource.version}" if integration.group else "v1",
                "kind": integration.kind, "name": meta["name"], "uid": meta["uid"],
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
