"""Synthetic traces in the shape of an LLM cluster: the Acme trace's two clusters, Kalos and
Seren (Hu et al., "Characterization of Large Language Model Development in the Datacenter",
NSDI'24; InternLM/AcmeTrace ``data/cluster_summary.csv``; reference ``hyperpod-and-peers.md``
§4.1). Seeded: the same seed gives the same trace.

**Published, reproduced** (:class:`AcmeShape`, checked by ``tests/unit/test_sim_acme.py`` on
a large sample): GPUs per job (mean 26.77 Kalos / 5.68 Seren, median 1, at most 1,024), run
time (mean 1,260 s / 1,414 s, median 124 s / 122 s), and the final states by count and by
GPU time (Kalos: completed 54.1 % of jobs and 31.3 % of GPU time, cancelled 6.2 % / 60.7 %,
failed 39.7 % / 8.0 %; Seren 49.7 / 21.2, 7.5 / 66.4, 42.9 / 12.4).

**Assumed** (the summary does not publish them):

* the size mix: 55 % 1-GPU jobs, 4 % 2-GPU, 4 % 4-GPU, the rest of the single-node jobs 8
  GPUs; multi-node jobs of 2-128 whole nodes (powers of two) with P(n) proportional to
  n^-0.5, their share (:attr:`AcmeShape.multi_node_share`) set so the mean GPUs per job is
  the published one (Kalos 19.2 % of jobs, Seren 1.6 %);
* run time log-normal, its median growing with the square root of the job's GPUs (large jobs
  run longer: pretraining), times a factor per final state (cancelled jobs run longest:
  that is where the published GPU-time shares put them, failed ones shortest); the spread
  ``sigma``, the scale and the state factors were fitted (numerically, 600,000 draws) to the
  published mean and median run time and GPU-time shares; clipped to 5 s .. 7 days;
* the final state is drawn with the published count shares, independent of the size; a
  failed or cancelled job simply ends: it is not resubmitted.

Arrivals are Poisson, at the rate that makes the offered GPU load ``load`` of the cluster
(as :func:`scheduler.sim.trace.synthetic_trace`); over a window of hours, a run counts for the
part of it expected inside the window (:func:`in_window`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.sim.trace import Trace, TraceError, TraceJob, node_failures

STATES = ("completed", "cancelled", "failed")
SINGLE_NODE_GPUS = ((1, 0.55), (2, 0.04), (4, 0.04))  # the rest of the single-node share: 8 GPUs
MULTI_NODE_NODES = (2, 4, 8, 16, 32, 64, 128)
TAIL_EXPONENT = 0.5  # P(n nodes) ~ n^-0.5 among the multi-node jobs
SIZE_EXPONENT = 0.5  # median run time ~ GPUs^0.5
MIN_RUN_S, MAX_RUN_S = 5.0, 7 * 86400.0
GPUS_PER_NODE = 8  # Acme's nodes (A100 x 8), the unit of MULTI_NODE_NODES


@dataclass(frozen=True)
class AcmeShape:
    name: str
    # published (reference §4.1)
    mean_gpus: float
    median_gpus: int
    max_gpus: int
    mean_run_s: float
    median_run_s: float
    count_shares: tuple[float, float, float]  # completed, cancelled, failed
    gpu_time_shares: tuple[float, float, float]
    # fitted to the published figures (module docstring)
    multi_node_share: float
    sigma: float
    scale_s: float  # median run time of a completed 1-GPU job
    state_factors: tuple[float, float, float]


KALOS = AcmeShape("kalos", 26.77, 1, 1024, 1260.0, 124.0, (0.541, 0.062, 0.397), (0.313, 0.607, 0.080),
                  multi_node_share=0.1918, sigma=1.35, scale_s=96.2, state_factors=(1.0, 20.15, 0.345))
SEREN = AcmeShape("seren", 5.68, 1, 1024, 1414.0, 122.0, (0.497, 0.075, 0.429), (0.212, 0.664, 0.124),
                  multi_node_share=0.0161, sigma=1.60, scale_s=80.7, state_factors=(1.0, 24.74, 0.663))
SHAPES: Mapping[str, AcmeShape] = {s.name: s for s in (KALOS, SEREN)}


@dataclass(frozen=True)
class AcmeDraw:
    gpus: int
    duration: float
    state: str


def _sizes(shape: AcmeShape) -> tuple[list[int], list[float]]:
    weights = [n ** -TAIL_EXPONENT for n in MULTI_NODE_NODES]
    total = sum(weights)
    single = [g for g, _ in SINGLE_NODE_GPUS] + [GPUS_PER_NODE]
    single_p = [p for _, p in SINGLE_NODE_GPUS]
    single_p.append(1 - sum(single_p) - shape.multi_node_share)
    multi = [n * GPUS_PER_NODE for n in MULTI_NODE_NODES]
    multi_p = [shape.multi_node_share * w / total for w in weights]
    return single + multi, single_p + multi_p


def draw_jobs(shape: AcmeShape, rng: random.Random, count: int) -> list[AcmeDraw]:
    """``count`` jobs (GPUs, run time, final state) from ``shape``."""
    sizes, size_p = _sizes(shape)
    total_p = sum(shape.count_shares)
    state_p = [p / total_p for p in shape.count_shares]
    out = []
    for _ in range(count):
        gpus = rng.choices(sizes, size_p)[0]
        state = rng.choices(range(len(STATES)), state_p)[0]
        median = shape.scale_s * shape.state_factors[state] * gpus ** SIZE_EXPONENT
        duration = min(MAX_RUN_S, max(MIN_RUN_S, rng.lognormvariate(math.log(median), shape.sigma)))
        out.append(AcmeDraw(gpus, round(duration, 1), STATES[state]))
    return out


def in_window(duration: float, window: float) -> float:
    """The run time a job arriving uniformly in ``[0, window]`` is expected to spend inside it:
    E[min(duration, window - arrival)]. Days-long runs would otherwise count in full toward the
    offered load of a window they mostly run after, leaving the window under-loaded."""
    if duration >= window:
        return window / 2
    return duration - duration * duration / (2 * window)


def acme_trace(shape: AcmeShape, seed: int, *, gpus_per_node: int, node_count: int,
               queues: Sequence[tuple[str, str]], level_capacity: Sequence[tuple[str, int]],
               count: int | None = None, hours: float | None = None, load: float = 0.9,
               priority_classes: Sequence[str] = (), failures_per_day: float = 0.0,
               node_names: Sequence[str] = (), recover_after_s: float = 3600.0) -> Trace:
    """A trace of ``count`` jobs, or of as many as make ``load`` x the cluster's GPUs busy for
    ``hours`` (arrivals spread over those hours; a run counts for the part of it expected within
    them, :func:`in_window`). ``queues``: (namespace, LocalQueue), chosen
    uniformly; ``level_capacity``: (level, nodes in its largest domain), widest first,
    hostname excluded. A job larger than the cluster is cut to the cluster. A multi-node job
    prefers the narrowest level one domain of which holds it (the widest when none does);
    single-node jobs have no topology request (implied TAS).
    The job's final state is in its name (``job-00012-cancelled``)."""
    if (count is None) == (hours is None):
        raise TraceError("acme trace: give either a job count or hours")
    if not queues:
        raise TraceError("synthetic trace: the queues file defines no LocalQueue")
    if count is not None and count < 1:
        raise TraceError("--synthetic: the number of jobs must be >= 1")
    rng = random.Random(seed)
    gpn = max(1, gpus_per_node)
    capacity = load * gpn * node_count
    if count is not None:
        drawn = draw_jobs(shape, rng, count)
        window = sum(d.gpus * d.duration for d in drawn) / capacity
    else:
        assert hours is not None
        window = hours * 3600.0
        drawn = []
        work = 0.0
        while work < capacity * window:
            (d,) = draw_jobs(shape, rng, 1)
            drawn.append(d)
            work += d.gpus * in_window(d.duration, window)
    rate = len(drawn) / window
    t = 0.0
    jobs = []
    for i, d in enumerate(drawn):
        t += rng.expovariate(rate)
        ns, lq = queues[rng.randrange(len(queues))]
        pc = priority_classes[rng.randrange(len(priority_classes))] if priority_classes else None
        pods, per_pod = (1, d.gpus) if d.gpus <= gpn else (min(node_count, math.ceil(d.gpus / gpn)), gpn)
        preferred = None
        if pods > 1 and level_capacity:
            preferred = next((lv for lv, cap in reversed(level_capacity) if cap >= pods), level_capacity[0][0])
        jobs.append(TraceJob(round(t, 1), ns, f"job-{i:05d}-{d.state}", lq, pods, per_pod, d.duration, pc,
                             None, preferred))
    failures = node_failures(rng, t, failures_per_day, node_names, recover_after_s)
    return Trace(tuple(jobs), tuple(failures))
