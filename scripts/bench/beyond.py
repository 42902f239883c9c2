#!/usr/bin/env python3
"""Beyond Kueue, measured (issue 35): toposched's placement against Kueue's in the same
simulator run (``scheduler.sim``: the controller's own admission cycle in virtual time), on two
traces, with the run-time model off and at two strengths.

Traces (``--traces``):

- ``mix``: the synthetic HyperPod mix: 55 % single-pod jobs of 1/2/4/8 GPUs, 40 % multi-node
  jobs of 2/4/8/16 nodes, 5 % of 32/64 nodes; lognormal durations (median 1 h, 5 min .. 12 h);
- ``kalos`` (or ``seren``): an LLM cluster in the shape of the Acme trace
  (``scheduler/sim/acme.py``: mean 27 GPUs per job, median 1, up to 1,024 GPUs).

Both: Poisson arrivals over ``--hours`` at ``--load`` offered GPU load from ``--teams`` teams
(ClusterQueues in one cohort, nominal = GPUs / teams, borrowing, LowerPriority reclaim and
in-queue preemption), 30 % of the jobs preemptible (priority 10, the others 100),
``--failures-per-day`` node failures recovering after 2 h. A multi-node job prefers one
layer-3 domain (one layer-2 domain when larger than a layer-3 domain); the engines that use
the compact wait also give it ``toposched.io/compact-*`` for that level with ``--compact-wait``.

Engines (``--engines``, :data:`ENGINES`): ``kueue`` (Kueue's placement; compact annotations
ignored) is the baseline; the others are toposched's placement policies.

Run-time model (``--models``, ``scheduler/sim/runtime.py``): ``off``, ``moderate`` (the middle
strength), ``strong``. Each (trace, model) runs every engine on the same jobs and failures.

Prints one table per trace (a column per model and engine) with the goal's figures, the
ceilings (the share of multi-node jobs that can be compact; the completion time no scheduler
can beat), and the verdict for the last engine against ``kueue``. Writes ``--out``/summary.json
and one report.html per trace and model.

    python3 scripts/bench/beyond.py                                   # 1,024 nodes, 24 h (long)
    python3 scripts/bench/beyond.py --nodes 256 --hours 8 --models off,moderate   # quick look
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.core.placement.options import PlacementOptions  # noqa: E402
from scheduler.core.topology_request import CompactWait, TopologyRequest  # noqa: E402
from scheduler.core.workload import PodSetSpec, WorkloadSpec  # noqa: E402
from scheduler.sim.acme import SHAPES, acme_trace  # noqa: E402
from scheduler.sim.engine import Simulator  # noqa: E402
from scheduler.sim.model import GPU, SimFailure, SimJob, SimResult, World  # noqa: E402
from scheduler.sim.outcomes import CLASSES, compact_jct, jct_by_class, percentile, pods  # noqa: E402
from scheduler.sim.report import render_report  # noqa: E402
from scheduler.sim.runtime import PRESETS  # noqa: E402
from scheduler.sim.scenario import level_capacity, summarize, world_from_objects  # noqa: E402

KQ = "kueue.x-k8s.io/v1beta2"
L2 = "topology.k8s.aws/network-node-layer-2"
L3 = "topology.k8s.aws/network-node-layer-3"
NODES_PER_L3 = 16
PRIORITIES = {"production": 100, "preemptible": 10}
PREEMPTIBLE_SHARE = 0.3


# ---------------------------------------------------------------------- cluster and queues


def cluster(nodes: int) -> dict[str, Any]:
    l3_per_l2 = max(1, nodes // (2 * 4 * NODES_PER_L3))
    return {"name": f"beyond-{nodes}", "instanceType": "ml.p5.48xlarge", "layers": [2, 4, l3_per_l2],
            "nodesPerDomain": NODES_PER_L3}


def queue_objects(teams: int, gpus: int) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": KQ, "kind": "Topology", "metadata": {"name": "hp"}, "spec": {"levels": [
            {"nodeLabel": f"topology.k8s.aws/network-node-layer-{i}"} for i in (1, 2, 3)]
            + [{"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "p5"}, "spec": {"topologyName": "hp"}},
    ]
    objs += [{"apiVersion": KQ, "kind": "WorkloadPriorityClass", "metadata": {"name": k}, "value": v}
             for k, v in PRIORITIES.items()]
    for t in range(teams):
        objs.append({"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": f"team-{t}"}, "spec": {
            "cohortName": "all", "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "preemption": {"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "p5", "resources": [
                {"name": GPU, "nominalQuota": str(gpus // teams)}]}]}]}})
        objs.append({"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": f"team-{t}"},
                     "spec": {"clusterQueue": f"team-{t}"}})
    return objs


# ---------------------------------------------------------------------- traces


@dataclass(frozen=True)
class Drawn:
    """One job of a trace, before it becomes a workload."""

    at: float
    team: int
    pods: int
    gpus_per_pod: int
    duration: float
    priority: str


def compact_level(pods_: int) -> str:
    return L3 if pods_ <= NODES_PER_L3 else L2


def to_job(i: int, d: Drawn, wait_s: float | None) -> SimJob:
    """The workload: a multi-node job prefers one domain of its compact level and, with
    ``wait_s``, also asks (toposched.io/compact-*) to wait that long for one."""
    topo = compact = None
    if d.pods > 1:
        topo = TopologyRequest(preferred=compact_level(d.pods))
        if wait_s is not None:
            compact = CompactWait(compact_level(d.pods), 1, wait_s)
    ps = PodSetSpec("main", d.pods, {GPU: d.gpus_per_pod}, topo, compact=compact)
    spec = WorkloadSpec(f"team-{d.team}", f"job-{i:05d}", (ps,), uid=f"uid-{i}", queue_name="q",
                        priority_class=d.priority, created_at=d.at)
    return SimJob(spec, d.duration, d.at, d.priority)


def mix_trace(seed: int, world: World, hours: float, load: float, teams: int) -> list[Drawn]:
    """The synthetic HyperPod mix (module docstring)."""
    rng = random.Random(seed)
    gpus = sum(n.allocatable.get(GPU, 0) for n in world.nodes)

    def shape() -> tuple[int, int]:
        r = rng.random()
        if r < 0.55:
            return 1, rng.choice((1, 2, 4, 8))
        if r < 0.95:
            return rng.choices((2, 4, 8, 16), (0.4, 0.3, 0.2, 0.1))[0], 8
        return rng.choice((32, 64)), 8

    drawn = []
    horizon = hours * 3600
    gpu_s = 0.0
    while gpu_s < load * gpus * horizon:
        n, per_pod = shape()
        duration = min(12 * 3600.0, max(300.0, rng.lognormvariate(math.log(3600), 1.0)))
        drawn.append((n, per_pod, round(duration, 1)))
        gpu_s += n * per_pod * duration
    out, t = [], 0.0
    rate = len(drawn) / horizon
    for n, per_pod, duration in drawn:
        t += rng.expovariate(rate)
        team = rng.randrange(teams)
        prio = "preemptible" if rng.random() < PREEMPTIBLE_SHARE else "production"
        out.append(Drawn(round(t, 1), team, n, per_pod, duration, prio))
    return out


def acme_drawn(shape: str) -> Callable[[int, World, float, float, int], list[Drawn]]:
    def make(seed: int, world: World, hours: float, load: float, teams: int) -> list[Drawn]:
        trace = acme_trace(SHAPES[shape], seed, hours=hours, load=load, gpus_per_node=8, node_count=len(world.nodes),
                           queues=[(f"team-{t}", "q") for t in range(teams)], level_capacity=level_capacity(world))
        rng = random.Random(seed + 2)
        return [Drawn(j.at, int(j.namespace.rsplit("-", 1)[1]), j.pods, j.gpus_per_pod, j.duration,
                      "preemptible" if rng.random() < PREEMPTIBLE_SHARE else "production") for j in trace.jobs]
    return make


TRACES: Mapping[str, Callable[[int, World, float, float, int], list[Drawn]]] = {
    "mix": mix_trace, "kalos": acme_drawn("kalos"), "seren": acme_drawn("seren")}


def failures(seed: int, world: World, hours: float, per_day: float) -> list[SimFailure]:
    rng = random.Random(seed + 1)
    names = sorted(n.name for n in world.nodes)
    out, t = [], 0.0
    while per_day > 0:
        t += rng.expovariate(per_day / 86400.0)
        if t > hours * 3600:
            break
        out.append(SimFailure(round(t, 1), names[rng.randrange(len(names))], 7200.0))
    return out


# ---------------------------------------------------------------------- engines


@dataclass(frozen=True)
class Engine:
    compact_wait: bool  # the multi-node jobs ask for a compact wait (toposched.io/compact-*)
    options: PlacementOptions
    about: str
    domain_preemption: bool = True  # toposched's default; off: Kueue's classical preemption


ENGINES: Mapping[str, Engine] = {
    "kueue": Engine(False, PlacementOptions(), "Kueue's placement and preemption (the baseline)",
                    domain_preemption=False),
    "toposched": Engine(False, PlacementOptions(), "toposched's defaults (Kueue's placement, domain-clearing "
                        "preemption)"),
    "+compact": Engine(True, PlacementOptions(), "the jobs' compact wait"),
    "+reserve": Engine(True, PlacementOptions(reserve_compact=True), "compact wait + reserve-compact"),
    "+fragmentation": Engine(False, PlacementOptions(fragmentation_aware=True), "fragmentation-aware placement"),
    "+degraded": Engine(False, PlacementOptions(degraded_last=True), "degraded domains last"),
    "+patient": Engine(True, PlacementOptions(patient_compact=True), "compact wait, no preemption during it"),
    "+patient+frag": Engine(True, PlacementOptions(patient_compact=True, fragmentation_aware=True),
                            "compact wait without preemption, fragmentation-aware placement"),
    "+patient+reserve": Engine(True, PlacementOptions(patient_compact=True, reserve_compact=True),
                               "compact wait without preemption, holding the domain waited for"),
    "+patient/classical": Engine(True, PlacementOptions(patient_compact=True), "compact wait without preemption, "
                                 "Kueue's classical preemption", domain_preemption=False),
    "+patient+frag/classical": Engine(True, PlacementOptions(patient_compact=True, fragmentation_aware=True),
                                      "compact wait without preemption, fragmentation-aware placement, Kueue's "
                                      "classical preemption", domain_preemption=False),
    "all": Engine(True, PlacementOptions.from_names("all"), "every policy and the compact wait"),
}


# ---------------------------------------------------------------------- figures


def utilisation_until(result: SimResult, end: float) -> float:
    """Time-average of GPUs in use / healthy GPUs over [0, end] (the arrival window)."""
    used = avail = 0.0
    samples = result.samples
    for (t, u, h, _p), nxt in zip(samples, samples[1:] + [(end, 0, 0, 0)], strict=True):
        t1 = min(nxt[0], end)
        if t1 > t:
            used += u * (t1 - t)
            avail += h * (t1 - t)
        if nxt[0] >= end:
            break
    return used / avail if avail else 0.0


def lost_until(result: SimResult, end: float) -> float:
    """GPU time of runs cut short inside [0, end] (preempted or evicted), as a share of the
    healthy GPU time there: allocated, but no work came of it."""
    lost = sum(e.get("gpu_s_lost", 0.0) for e in result.events if e["t"] <= end)
    samples = result.samples
    avail = sum(h * (min(nxt[0], end) - t) for (t, _u, h, _p), nxt in zip(samples, samples[1:], strict=False)
                if t < end)
    return lost / avail if avail else 0.0


def _share(jobs: Sequence[SimJob], level: str) -> float:
    placed = [j for j in jobs if j.domains]
    return round(sum(1 for j in placed if j.domains.get(level) == 1) / len(placed), 4) if placed else 0.0


def measure(result: SimResult, end: float, wanted_nodes: int) -> dict[str, Any]:
    """The goal's figures for one run. ``wanted_nodes``: the largest job one layer-2 domain holds."""
    s = summarize(result)
    jobs = result.jobs
    multi = [j for j in jobs if pods(j) > 1]
    fit3 = [j for j in multi if pods(j) <= NODES_PER_L3]
    fit2 = [j for j in multi if NODES_PER_L3 < pods(j) <= wanted_nodes]
    waits_asked = [j.first_admitted - j.submit_at for j in multi if j.first_admitted is not None]
    waits_not = [j.first_admitted - j.submit_at for j in jobs if pods(j) <= 1 and j.first_admitted is not None]
    s.update({
        "multi_node_jobs": len(multi), "can_fit_layer3": len(fit3), "can_fit_layer2_only": len(fit2),
        "ceiling_compact": round((len(fit3) + len(fit2)) / len(multi), 4) if multi else 0.0,
        "fitting_in_one_layer3": _share(fit3, L3), "larger_in_one_layer2": _share(fit2, L2),
        "gpu_utilization_window": round(utilisation_until(result, end), 4),
        "gpu_utilization_useful_window": round(utilisation_until(result, end) - lost_until(result, end), 4),
        "wait_p95_not_asking_s": round(percentile(waits_not, 95), 1),
        "wait_p95_asking_s": round(percentile(waits_asked, 95), 1),
        "relaxed": sum(1 for e in result.events if e["kind"] == "relaxed"),
        "jct_floor_s": jct_by_class(jobs, lambda j: compact_jct(j)),
    })
    return s


# One row per figure: (label, how to read it from a summary, format).
Getter = Callable[[Mapping[str, Any]], float]
ROWS: list[tuple[str, Getter, str]] = [
    ("fit-L3 jobs in one L3", lambda s: s["fitting_in_one_layer3"], "{:.1%}"),
    ("larger jobs in one L2", lambda s: s["larger_in_one_layer2"], "{:.1%}"),
    ("GPU util (window)", lambda s: s["gpu_utilization_window"], "{:.1%}"),
    ("  less lost work", lambda s: s["gpu_utilization_useful_window"], "{:.1%}"),
    ("wait p95, not asking s", lambda s: s["wait_p95_not_asking_s"], "{:.0f}"),
    ("wait p95, compact s", lambda s: s["wait_p95_asking_s"], "{:.0f}"),
    ("relaxed compact waits", lambda s: s["relaxed"], "{:.0f}"),
    ("GPU-h lost", lambda s: s["gpu_hours_lost"], "{:.0f}"),
    ("preemptions", lambda s: s["preemptions"], "{:.0f}"),
]


def jct_getter(job_class: str, quantile: str) -> Getter:
    """Reads one class's completion-time quantile from a summary (0 when the class is absent)."""
    def get(s: Mapping[str, Any]) -> float:
        return float(s["jct_s"].get(job_class, {}).get(quantile, 0.0))
    return get


for _cls in ("all", *CLASSES):
    ROWS.append((f"JCT p50 {_cls} s", jct_getter(_cls, "p50"), "{:.0f}"))
    ROWS.append((f"JCT p95 {_cls} s", jct_getter(_cls, "p95"), "{:.0f}"))
ROWS.append(("GPU-h/day completed", lambda s: s["completed_gpu_hours_per_day"].get("all", 0.0), "{:,.0f}"))
ROWS.append(("wall s", lambda s: s["wall_s"], "{:.0f}"))


def table(columns: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    width = max(12, *(len(c) + 2 for c, _ in columns))
    lines = [f"{'':26}" + "".join(f"{c:>{width}}" for c, _ in columns)]
    for name, get, fmt in ROWS:
        lines.append(f"{name:26}" + "".join(f"{fmt.format(get(s)):>{width}}" for _, s in columns))
    return "\n".join(lines)


def ceilings(s: Mapping[str, Any], base: Mapping[str, Any]) -> list[str]:
    multi = s["multi_node_jobs"] or 1
    floor = s["jct_floor_s"]["all"]["p50"]
    kueue = base["jct_s"]["all"]["p50"] or 1.0
    return [f"ceiling: {s['can_fit_layer3']} of {s['multi_node_jobs']} multi-node jobs fit one layer-3 domain "
            f"({s['can_fit_layer3'] / multi:.1%}), {s['can_fit_layer2_only']} more fit one layer-2 domain "
            f"({s['can_fit_layer2_only'] / multi:.1%}); {s['ceiling_compact']:.1%} can be compact",
            f"completion-time floor (no wait, no slowdown): p50 {floor:.0f} s = {floor / kueue:.2f}x this Kueue "
            "column's p50"]


def verdict(runs: Mapping[str, Mapping[str, Mapping[str, Any]]], engine: str) -> list[tuple[bool, str]]:
    """The issue's goal for ``engine`` against ``kueue``: placement and costs with the model off,
    completion time at the middle strength."""
    out: list[tuple[bool, str]] = []
    off = runs.get("off", {})
    if engine in off and "kueue" in off:
        b, e = off["kueue"], off[engine]
        out += [
            (e["fitting_in_one_layer3"] >= 0.99, f"fit-L3 jobs in one L3 {e['fitting_in_one_layer3']:.1%} (>= 99%; "
                                                 f"kueue {b['fitting_in_one_layer3']:.1%})"),
            (e["larger_in_one_layer2"] >= 0.99 or e["can_fit_layer2_only"] == 0,
             f"larger jobs in one L2 {e['larger_in_one_layer2']:.1%} (>= 99%; kueue {b['larger_in_one_layer2']:.1%})"),
            (e["gpu_utilization_window"] >= b["gpu_utilization_window"],
             f"GPU util {e['gpu_utilization_window']:.1%} vs {b['gpu_utilization_window']:.1%} (>=)"),
            (e["wait_p95_not_asking_s"] <= b["wait_p95_not_asking_s"],
             f"wait p95 of jobs not asking to wait {e['wait_p95_not_asking_s']:.0f} s vs "
             f"{b['wait_p95_not_asking_s']:.0f} s (<=)"),
            (e["gpu_hours_lost"] <= b["gpu_hours_lost"],
             f"GPU-h lost {e['gpu_hours_lost']:.0f} vs {b['gpu_hours_lost']:.0f} (<=)"),
            (e["preemptions"] <= b["preemptions"], f"preemptions {e['preemptions']} vs {b['preemptions']} (<=)"),
        ]
    mid = runs.get("moderate", {})
    if engine in mid and "kueue" in mid:
        b, e = mid["kueue"], mid[engine]
        ratio = e["jct_s"]["all"]["p50"] / (b["jct_s"]["all"]["p50"] or 1.0)
        out.append((ratio <= 0.9, f"JCT p50 at moderate {ratio:.2f}x kueue's (<= 0.9x)"))
        worse = [c for c in CLASSES if c in b["jct_s"] and e["jct_s"][c]["p50"] > b["jct_s"][c]["p50"]]
        out.append((not worse, "no class's JCT p50 worse at moderate" + (f" (worse: {', '.join(worse)})"
                                                                         if worse else "")))
    return out


# ---------------------------------------------------------------------- main


def mean_of(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The mean of every number in ``summaries`` (same keys), nested mappings included; other
    values from the first."""
    out: dict[str, Any] = {}
    for key, first in summaries[0].items():
        values = [s[key] for s in summaries if key in s]
        if isinstance(first, Mapping):
            out[key] = mean_of(values)
        elif isinstance(first, int | float) and not isinstance(first, bool):
            out[key] = sum(values) / len(values)
        else:
            out[key] = first
    return out


def run_one(world: World, drawn: Sequence[Drawn], fails: Sequence[SimFailure], engine: Engine, model: str,
            budget: float, wait_s: float) -> SimResult:
    jobs = [to_job(i, d, wait_s if engine.compact_wait else None) for i, d in enumerate(drawn)]
    sim = Simulator(dataclasses.replace(world, placement_options=engine.options), jobs, fails, solver="greedy",
                    preemption_budget_s=budget, run_time=PRESETS[model], domain_preemption=engine.domain_preemption)
    return sim.run()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--teams", type=int, default=4)
    ap.add_argument("--load", type=float, default=0.9, help="offered GPU load over the arrival window")
    ap.add_argument("--compact-wait", type=float, default=1800.0, metavar="SECONDS")
    ap.add_argument("--failures-per-day", type=float, default=24.0)
    ap.add_argument("--seeds", default="1", help="comma list of trace seeds; figures are the mean over them "
                    "(each seed: its own jobs and node failures)")
    ap.add_argument("--preemption-budget", type=float, default=0.05, metavar="SECONDS",
                    help="CP-SAT budget per victim search (the controller's is 0.5 s; smaller keeps the run short)")
    ap.add_argument("--traces", default="mix,kalos", help=f"comma list of {', '.join(TRACES)}")
    ap.add_argument("--models", default="off,moderate,strong", help=f"comma list of {', '.join(PRESETS)}")
    ap.add_argument("--engines", default="kueue,+reserve", help=f"comma list of {', '.join(ENGINES)}; the first "
                    "is the baseline, the last is judged against kueue")
    ap.add_argument("--out", type=Path, default=Path("/tmp/toposched-beyond"))
    args = ap.parse_args(argv)
    traces = [t for t in args.traces.split(",") if t]
    models = [m for m in args.models.split(",") if m]
    engines = [e for e in args.engines.split(",") if e]
    for name, known, what in ((traces, TRACES, "--traces"), (models, PRESETS, "--models"),
                              (engines, ENGINES, "--engines")):
        unknown = [x for x in name if x not in known]
        if unknown:
            ap.error(f"{what}: unknown {unknown[0]!r} (choose from {', '.join(known)})")
    seeds = [int(x) for x in args.seeds.split(",") if x]
    world = world_from_objects(cluster(args.nodes), queue_objects(args.teams, args.nodes * 8))
    l2_nodes = dict(level_capacity(world)).get(L2, NODES_PER_L3)
    end = args.hours * 3600
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                               "traces": {}}
    for trace in traces:
        per_seed: dict[str, dict[str, list[dict[str, Any]]]] = {}
        jobs_seen = []
        for seed in seeds:
            drawn = TRACES[trace](seed, world, args.hours, args.load, args.teams)
            fails = failures(seed, world, args.hours, args.failures_per_day)
            jobs_seen.append(len(drawn))
            print(f"\n== trace {trace}, seed {seed}: {len(world.nodes)} nodes, {len(drawn)} jobs over "
                  f"{args.hours:g} h, {len(fails)} node failures", flush=True)
            for model in models:
                runs = []
                for name in engines:
                    t0 = time.perf_counter()
                    result = run_one(world, drawn, fails, ENGINES[name], model, args.preemption_budget,
                                     args.compact_wait)
                    s = measure(result, end, l2_nodes)
                    per_seed.setdefault(model, {}).setdefault(name, []).append(s)
                    runs.append((name, result, s))
                    print(f"  {model:>8} {name}: {time.perf_counter() - t0:.0f} s wall", flush=True)
                (args.out / f"report-{trace}-{model}-seed{seed}.html").write_text(render_report(
                    runs, title=f"toposched beyond Kueue: {trace}, run-time model {model}, seed {seed}",
                    meta=f"{len(world.nodes)} nodes, {len(drawn)} jobs, {args.hours:g} h, seed {seed}, "
                         f"load {args.load}, compact wait {args.compact_wait:g} s; {PRESETS[model].describe()}"))
        by_model = {m: {e: mean_of(per_seed[m][e]) for e in engines} for m in models}
        print(f"\n== trace {trace}: mean over seeds {', '.join(map(str, seeds))} "
              f"({', '.join(map(str, jobs_seen))} jobs)")
        columns = [(f"{m}:{e}", by_model[m][e]) for m in models for e in engines]
        print(table(columns))
        first = by_model[models[0]]
        for line in ceilings(first[engines[0]], first[engines[0]]):
            print("  " + line)
        judged = engines[-1]
        checks = verdict(by_model, judged)
        if judged != "kueue" and checks:
            print(f"goal ({judged} vs kueue, {trace}):")
            for ok, text in checks:
                print(("  met    : " if ok else "  NOT met: ") + text)
        summary["traces"][trace] = {"jobs": jobs_seen, "mean": by_model, "per_seed": per_seed,
                                    "verdict": [{"met": ok, "check": text} for ok, text in checks]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    print(f"\nwrote {args.out / 'summary.json'} and the reports beside it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
