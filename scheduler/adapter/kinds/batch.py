"""batch/v1 Job, as Kueue's ``batch/job`` integration: one pod set ``main`` of
min(parallelism, completions) pods (``minCount`` from ``kueue.x-k8s.io/job-min-parallelism``:
partial admission), ranked by the completion index, suspended through ``spec.suspend``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.adapter.kinds.base import (
    FinishState,
    JobKind,
    Obj,
    Patch,
    PodSetSource,
    PodSetStart,
    finish_from_conditions,
)
from scheduler.adapter.kinds.shapes import JOB_SPEC, TOP
from scheduler.core.workload import DEFAULT_POD_SET, JOB_COMPLETION_INDEX, job_min_parallelism, job_pod_count

ANN_COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"


def pod_sets(job: Obj) -> list[PodSetSource]:
    template = (job.get("spec") or {}).get("template") or {}
    return [PodSetSource(DEFAULT_POD_SET, job_pod_count(job), template, ("spec", "template"), JOB_COMPLETION_INDEX,
                         min_count=job_min_parallelism(job))]


def _parallelism_patch(job: Obj, count: Any) -> dict[str, Any]:
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
    return {"spec": out} if out else {}


def start_extra(job: Obj, starts: Sequence[PodSetStart]) -> Patch:
    return _parallelism_patch(job, starts[0].count) if starts else {}


def restore_extra(job: Obj, original_pod_sets: Sequence[Obj]) -> Patch:
    return _parallelism_patch(job, original_pod_sets[0].get("count")) if original_pod_sets else {}


def restorable(job: Obj) -> bool:
    """The Job controller has cleared ``status.startTime``: the API server refuses template
    changes of a Job that has one."""
    return not (job.get("status") or {}).get("startTime")


def finish_state(job: Obj) -> FinishState:
    """Kueue's ``Job.Finished``: the Complete or Failed condition's own message (the Job
    controller writes e.g. "Reached expected number of succeeded pods")."""
    return finish_from_conditions(job, "Complete", "Failed", None, "Job failed")


def active_pods(job: Obj) -> int:
    status = job.get("status") or {}
    return int(status.get("active") or 0) + int(status.get("terminating") or 0)


def pods_ready(job: Obj) -> bool:
    """Kueue's batch Job ``PodsReady``: ready + succeeded (+ uncounted succeeded) pods reach
    ``min(parallelism, completions)``."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    count = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    if spec.get("completions") is not None:
        count = min(count, int(spec["completions"]))
    uncounted = len(((status.get("uncountedTerminatedPods") or {}).get("succeeded")) or ())
    return int(status.get("succeeded") or 0) + int(status.get("ready") or 0) + uncounted >= count


BATCH_JOB = JobKind(
    group="batch", version="v1", kind="Job", plural="jobs", framework="batch/job",
    pod_sets=pod_sets, finish_state=finish_state, active_pods=active_pods, pods_ready=pods_ready,
    shape={**TOP, "spec": JOB_SPEC}, suspend_path=("spec", "suspend"),
    rank_label=JOB_COMPLETION_INDEX, single_pod_set=True,
    start_extra=start_extra, restore_extra=restore_extra, restorable=restorable,
)
