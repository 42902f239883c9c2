"""Traces: jobs (arrival, size, duration, topology request) and node failures.

A trace file is YAML/JSON::

    jobs:
      - {at: 0, namespace: hyperpod-ns-team-a, queue: hyperpod-ns-team-a-localqueue,
         priorityClass: training-priority, pods: 4, gpusPerPod: 8, duration: 3600,
         topology: {required: topology.k8s.aws/network-node-layer-3}}
    failures:
      - {at: 1800, node: <node name>, recoverAfter: 600}

(``name`` is optional: ``job-<index>``; ``topology`` optional: no request; ``recoverAfter``
optional: never recovers.) A plain list is read as ``jobs``. :func:`synthetic_trace` draws a
seeded trace from the published distributions of reference section 4 (see docs/simulate.md).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.core.resources import GPU
from scheduler.core.workload import WorkloadFormatError, workload_from_object


class TraceError(ValueError):
    """A trace entry that cannot be read; the message names the entry and the field."""


@dataclass(frozen=True)
class TraceJob:
    at: float
    namespace: str
    name: str
    queue: str
    pods: int
    gpus_per_pod: int
    duration: float
    priority_class: str | None = None
    required: str | None = None
    preferred: str | None = None
    spec: Any = None  # a WorkloadSpec when the entry gave a full manifest ({at, job: <Job>, duration})


@dataclass(frozen=True)
class TraceFailure:
    at: float
    node: str
    recover_after: float | None = None


@dataclass(frozen=True)
class Trace:
    jobs: tuple[TraceJob, ...]
    failures: tuple[TraceFailure, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        jobs = []
        for j in self.jobs:
            d: dict[str, Any] = {"at": j.at, "namespace": j.namespace, "name": j.name, "queue": j.queue,
                                 "pods": j.pods, "gpusPerPod": j.gpus_per_pod, "duration": j.duration}
            if j.priority_class:
                d["priorityClass"] = j.priority_class
            if j.required or j.preferred:
                d["topology"] = {"required": j.required} if j.required else {"preferred": j.preferred}
            jobs.append(d)
        failures = [{"at": f.at, "node": f.node, **({"recoverAfter": f.recover_after}
                                                    if f.recover_after is not None else {})}
                    for f in self.failures]
        return {"jobs": jobs, "failures": failures}


def _num(entry: Mapping[str, Any], key: str, where: str, *, minimum: float = 0.0, integer: bool = False,
         default: Any = ...) -> Any:
    if key not in entry:
        if default is not ...:
            return default
        raise TraceError(f"{where}.{key}: missing")
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise TraceError(f"{where}.{key}: expected {'an integer' if integer else 'a number'}, got {value!r}")
    if value < minimum or (isinstance(value, float) and math.isnan(value)):
        raise TraceError(f"{where}.{key}: must be >= {minimum:g}, got {value!r}")
    return value


def _str(entry: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or not value:
        raise TraceError(f"{where}.{key}: missing" if value is None else f"{where}.{key}: expected a string")
    return value


def trace_from_data(data: Any) -> Trace:
    """A parsed trace document -> :class:`Trace` (TraceError names the bad entry)."""
    if isinstance(data, list):
        data = {"jobs": data}
    if not isinstance(data, Mapping):
        raise TraceError("top level: expected a mapping with jobs (and failures) or a list of jobs")
    unknown = sorted(set(data) - {"jobs", "failures"})
    if unknown:
        raise TraceError(f"top level: unknown key {unknown[0]!r} (expected jobs, failures)")
    raw_jobs = data.get("jobs") or []
    if not isinstance(raw_jobs, list):
        raise TraceError("jobs: expected a list")
    jobs: list[TraceJob] = []
    for i, e in enumerate(raw_jobs):
        where = f"jobs[{i}]"
        if not isinstance(e, Mapping):
            raise TraceError(f"{where}: expected a mapping")
        if "job" in e:
            jobs.append(_manifest_job(e, where))
            continue
        topo = e.get("topology") or {}
        if not isinstance(topo, Mapping) or set(topo) - {"required", "preferred"} or len(topo) > 1:
            raise TraceError(f"{where}.topology: expected {{required: <level>}} or {{preferred: <level>}}")
        ns = _str(e, "namespace", where)
        name = _str(e, "name", where, default=f"job-{i}")
        pc = e.get("priorityClass")
        if pc is not None and not isinstance(pc, str):
            raise TraceError(f"{where}.priorityClass: expected a string")
        jobs.append(TraceJob(
            at=float(_num(e, "at", where)), namespace=ns, name=name, queue=_str(e, "queue", where),
            pods=_num(e, "pods", where, minimum=1, integer=True),
            gpus_per_pod=_num(e, "gpusPerPod", where, integer=True, default=0),
            duration=float(_num(e, "duration", where)), priority_class=pc,
            required=topo.get("required"), preferred=topo.get("preferred")))
    seen: set[str] = set()
    for j in jobs:
        if f"{j.namespace}/{j.name}" in seen:
            raise TraceError(f"jobs: {j.namespace}/{j.name} appears twice")
        seen.add(f"{j.namespace}/{j.name}")
    raw_failures = data.get("failures") or []
    if not isinstance(raw_failures, list):
        raise TraceError("failures: expected a list")
    failures = []
    for i, e in enumerate(raw_failures):
        where = f"failures[{i}]"
        if not isinstance(e, Mapping):
            raise TraceError(f"{where}: expected a mapping")
        rec = _num(e, "recoverAfter", where, default=None)
        failures.append(TraceFailure(float(_num(e, "at", where)), _str(e, "node", where),
                                     None if rec is None else float(rec)))
    return Trace(tuple(jobs), tuple(failures))


def _manifest_job(e: Mapping[str, Any], where: str) -> TraceJob:
    """``{at, job: <batch/v1 Job or Kueue Workload>, duration}`` (the gRPC SimulateRequest form)."""
    if not isinstance(e["job"], Mapping):
        raise TraceError(f"{where}.job: expected a batch/v1 Job (a mapping)")
    try:
        spec = workload_from_object(dict(e["job"]))
    except (WorkloadFormatError, ValueError, TypeError, KeyError) as exc:
        raise TraceError(f"{where}.job: {exc}") from exc
    if not spec.queue_name:
        raise TraceError(f"{where}.job: no kueue.x-k8s.io/queue-name label")
    pods = sum(ps.count for ps in spec.pod_sets)
    ps0 = spec.pod_sets[0]
    return TraceJob(at=float(_num(e, "at", where)), namespace=spec.namespace, name=spec.name,
                    queue=spec.queue_name, pods=pods, gpus_per_pod=int(ps0.requests.get(GPU, 0)),
                    duration=float(_num(e, "duration", where)), priority_class=spec.priority_class,
                    required=ps0.topology.required if ps0.topology else None,
                    preferred=ps0.topology.preferred if ps0.topology else None, spec=spec)


# ---------------------------------------------------------------------- synthetic

# Reference section 4.6 (derived recipe for 8-GPU nodes): job size in whole nodes.
NODES_PER_JOB = ((1, 0.55), (2, 0.15), (4, 0.12), (8, 0.10), (16, 0.05), (32, 0.03))
# Section 4.2: Philly median ~1,186 s, p90 ~12,860 s -> log-normal with that median and p90.
DURATION_MEDIAN_S = 1200.0
DURATION_P90_S = 12600.0
DURATION_SIGMA = math.log(DURATION_P90_S / DURATION_MEDIAN_S) / 1.2816
DURATION_MAX_S = 3 * 86400.0  # section 4.6: p99 ~3 days; longer draws are clipped
DURATION_MIN_S = 30.0
OFFERED_LOAD = 0.8  # section 4.6: arrivals tuned so offered load ~70-90 % of the GPUs
# HyperPod task governance classes (section 4.6); the mix between them is not published: uniform.
PRIORITY_CLASSES = ("inference-priority", "experimentation-priority", "training-priority", "fine-tuning-priority")


def _mean_nodes(max_nodes: int) -> float:
    return sum(min(n, max_nodes) * p for n, p in NODES_PER_JOB)


def synthetic_trace(n: int, seed: int, *, gpus_per_node: int, node_count: int,
                    queues: Sequence[tuple[str, str]], level_capacity: Sequence[tuple[str, int]],
                    priority_classes: Sequence[str] = PRIORITY_CLASSES,
                    failures_per_day: float = 0.0, node_names: Sequence[str] = (),
                    recover_after_s: float = 3600.0) -> Trace:
    """``n`` jobs, reproducible from ``seed``.

    ``queues``: (namespace, LocalQueue) pairs, chosen uniformly (one per team).
    ``level_capacity``: (level, nodes in its largest domain), widest first, hostname excluded.
    Topology (section 4.6): 1-node jobs none, 2-4 nodes preferred at the narrowest level, >= 8
    nodes required at the narrowest level whose largest domain holds them (none when none does).
    Arrivals: Poisson, rate set so the offered GPU load is OFFERED_LOAD of the cluster.
    """
    if n < 1:
        raise TraceError("--synthetic: the number of jobs must be >= 1")
    if not queues:
        raise TraceError("synthetic trace: the queues file defines no LocalQueue")
    rng = random.Random(seed)
    gpn = max(1, gpus_per_node)
    sizes = [min(s, node_count) for s, _ in NODES_PER_JOB]
    weights = [p for _, p in NODES_PER_JOB]
    narrow = level_capacity[-1][0] if level_capacity else None
    drawn = []
    for _ in range(n):
        nodes = rng.choices(sizes, weights)[0]
        duration = min(DURATION_MAX_S, max(DURATION_MIN_S, rng.lognormvariate(math.log(DURATION_MEDIAN_S),
                                                                             DURATION_SIGMA)))
        drawn.append((nodes, round(duration, 1)))
    # Poisson arrivals whose rate makes the drawn node-seconds OFFERED_LOAD of the cluster's.
    window = sum(nd * d for nd, d in drawn) / (OFFERED_LOAD * node_count)
    rate = n / window
    t = 0.0
    jobs = []
    for i, (nodes, duration) in enumerate(drawn):
        t += rng.expovariate(rate)
        ns, lq = queues[rng.randrange(len(queues))]
        pc = priority_classes[rng.randrange(len(priority_classes))] if priority_classes else None
        required = preferred = None
        if nodes >= 8:
            required = next((lv for lv, cap in reversed(level_capacity) if cap >= nodes), None)
        elif nodes >= 2:
            preferred = narrow
        jobs.append(TraceJob(round(t, 1), ns, f"job-{i:05d}", lq, nodes, gpn, duration, pc, required, preferred))
    mean_duration = sum(d for _, d in drawn) / n
    failures = node_failures(rng, t + mean_duration, failures_per_day, node_names, recover_after_s)
    return Trace(tuple(jobs), tuple(failures))


def node_failures(rng: random.Random, horizon_s: float, per_day: float, node_names: Sequence[str],
                  recover_after_s: float) -> list[TraceFailure]:
    """Poisson node failures until ``horizon_s`` on uniformly chosen nodes, each recovering
    after ``recover_after_s`` (none without a rate or nodes)."""
    failures: list[TraceFailure] = []
    if per_day <= 0 or not node_names:
        return failures
    ft = 0.0
    while True:
        ft += rng.expovariate(per_day / 86400.0)
        if ft > horizon_s:
            return failures
        failures.append(TraceFailure(round(ft, 1), node_names[rng.randrange(len(node_names))], recover_after_s))
