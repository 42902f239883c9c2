"""jobset.x-k8s.io/v1alpha2 JobSet, as Kueue's ``jobset.x-k8s.io/jobset`` integration: one pod
set per replicated job (name = the replicated job's name, count = replicas x pods per child
Job), TAS ranks by child-Job index and completion index, the whole JobSet suspended through
``spec.suspend``. The JobSet controller creates the child Jobs (governed through the JobSet)."""

from __future__ import annotations

from scheduler.adapter.kinds.base import FinishState, JobKind, Obj, PodSetSource, finish_from_conditions
from scheduler.adapter.kinds.shapes import JOB_SPEC, METADATA
from scheduler.core.workload import DEFAULT_POD_SET, JOB_COMPLETION_INDEX, job_pod_count

JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"  # child Job's index within its replicated job


def _replicas(rj: Obj) -> int:
    return int(rj.get("replicas", 1) or 0)


def pod_sets(jobset: Obj) -> list[PodSetSource]:
    out = []
    for i, rj in enumerate((jobset.get("spec") or {}).get("replicatedJobs") or ()):
        job_spec = (rj.get("template") or {}).get("spec") or {}
        replicas = _replicas(rj)
        out.append(PodSetSource(rj.get("name", DEFAULT_POD_SET), replicas * job_pod_count({"spec": job_spec}),
                                job_spec.get("template") or {},
                                ("spec", "replicatedJobs", i, "template", "spec", "template"),
                                JOB_COMPLETION_INDEX, (JOBSET_JOB_INDEX, replicas)))
    return out


def finish_state(jobset: Obj) -> FinishState:
    return finish_from_conditions(jobset, "Completed", "Failed", None, "jobset failed")


def active_pods(jobset: Obj) -> int:
    """Child Jobs with pods still pending or running (JobSet reports jobs, not pods: enough
    to know whether anything of the previous run is still going)."""
    return sum(int(s.get("active") or 0) for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or ())


def pods_ready(jobset: Obj) -> bool:
    """Kueue's JobSet ``PodsReady``: ready + succeeded child Jobs equal the replicas."""
    replicas = sum(int(rj.get("replicas", 1) if rj.get("replicas") is not None else 1)
                   for rj in (jobset.get("spec") or {}).get("replicatedJobs") or ())
    ready = sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0)
                for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or ())
    return replicas == ready


JOBSET = JobKind(
    group="jobset.x-k8s.io", version="v1alpha2", kind="JobSet", plural="jobsets",
    framework="jobset.x-k8s.io/jobset", pod_sets=pod_sets, finish_state=finish_state, active_pods=active_pods,
    pods_ready=pods_ready, suspend_path=("spec", "suspend"), rank_label=JOBSET_JOB_INDEX, children=("batch/job",),
    shape={"metadata": METADATA, "spec": {"suspend": "bool", "replicatedJobs": [
        {"name": "str", "replicas": "int", "template": {"metadata": METADATA, "spec": JOB_SPEC}}]}},
)
