"""What users feel, per job class: job completion time (submission to the end of the run that
finished) and the work the cluster completed per day (GPU-hours at compact speed).

Classes (:func:`job_class`): ``1-GPU`` (one pod, at most one GPU), ``1-node`` (one pod, more
GPUs), ``multi-node`` (2-31 pods), ``32+ nodes`` (32 pods or more); a pod of the multi-pod jobs
is a whole node in the traces this is used on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from scheduler.sim.model import SimJob

CLASSES = ("1-GPU", "1-node", "multi-node", "32+ nodes")
ALL = "all"
LARGE_PODS = 32


def pods(job: SimJob) -> int:
    return sum(ps.count for ps in job.spec.pod_sets)


def job_class(job: SimJob) -> str:
    n = pods(job)
    if n >= LARGE_PODS:
        return CLASSES[3]
    if n >= 2:
        return CLASSES[2]
    return CLASSES[0] if job.gpus <= 1 else CLASSES[1]


def by_class(jobs: Iterable[SimJob]) -> dict[str, list[SimJob]]:
    """Jobs per class, and every job under :data:`ALL`; classes with no job are left out."""
    out: dict[str, list[SimJob]] = {ALL: []}
    for j in jobs:
        out.setdefault(job_class(j), []).append(j)
        out[ALL].append(j)
    return {k: out[k] for k in (ALL, *CLASSES) if k in out}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return float(ordered[rank - 1])


def jct(job: SimJob) -> float | None:
    return job.finished_at - job.submit_at if job.finished_at is not None else None


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"count": len(values), "p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1)}


def jct_by_class(jobs: Iterable[SimJob], time: Callable[[SimJob], float | None] = jct) -> dict[str, dict[str, float]]:
    """Per class: finished jobs, and the p50/p95 of ``time`` (default: completion time)."""
    out = {}
    for cls, members in by_class(jobs).items():
        values = [t for t in (time(j) for j in members) if t is not None]
        out[cls] = _stats(values)
    return out


def compact_jct(job: SimJob) -> float:
    """The completion time with no wait and no slowdown: a bound no scheduler can beat."""
    return job.duration


def completed_gpu_hours_per_day(jobs: Iterable[SimJob], window_s: float) -> dict[str, float]:
    """Per class: GPU-hours of work (trace durations, i.e. at compact speed) of the jobs that
    finished by ``window_s``, per day of the window. A slowed job delivers the same work later;
    a run cut short by preemption delivers none."""
    days = window_s / 86_400 if window_s > 0 else 1.0
    out = {}
    for cls, members in by_class(jobs).items():
        done = sum(j.gpus * j.duration for j in members if j.finished_at is not None and j.finished_at <= window_s)
        out[cls] = round(done / 3600 / days, 1)
    return out


def arrival_window(jobs: Sequence[SimJob], makespan: float) -> float:
    """The window the per-day figures are over: until the last arrival (the whole run when all
    jobs arrive at once)."""
    last = max((j.submit_at for j in jobs), default=0.0)
    return last if last > 0 else makespan


def mean_slowdown(jobs: Iterable[SimJob]) -> Mapping[str, float]:
    """Per class, the mean run-time factor of the finished runs."""
    out = {}
    for cls, members in by_class(jobs).items():
        done = [j.slowdown for j in members if j.finished_at is not None]
        out[cls] = round(sum(done) / len(done), 4) if done else 1.0
    return out
