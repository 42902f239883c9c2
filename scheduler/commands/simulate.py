"""``toposched simulate``: replay a job trace through the admission cycle with virtual time.

No cluster is needed: the nodes come from a cluster description (``examples/clusters/``,
``scheduler.core.fakecluster``) or a Node list, the queues from Kueue objects, the jobs from a
trace (``examples/traces/``) or a seeded synthetic trace (reference section 4 distributions).
Writes ``DIR/summary.json`` and ``DIR/report.html`` (self-contained, offline) and, for
``--synthetic``, the generated ``DIR/trace.yaml`` so the run can be replayed. Exit 0, or 2 on
bad input. See docs/simulate.md.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import yaml

from scheduler.adapter.files import load_data, load_documents, load_node_objects
from scheduler.adapter.placement import check_time_budget_ms
from scheduler.commands._kueue_config import add_kueue_config_argument, kueue_config
from scheduler.commands._numbers import DAY_S, bounded
from scheduler.commands.failure_policy import add_failure_policy_arguments, requeue_backoff, storm_policy
from scheduler.errors import UserError

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).


MAX_SYNTHETIC_JOBS = 1_000_000
# One failure a minute somewhere: far beyond any real cluster, still a finite trace.
MAX_FAILURES_PER_DAY = 1_440


def register(sub: Any) -> None:
    from scheduler.sim.scenario import COMPARE

    p = sub.add_parser("simulate", help="replay a job trace through the admission cycle (virtual time, no cluster)")
    p.add_argument("--cluster", type=Path, required=True, help="cluster description (examples/clusters/*.yaml) "
                                                                "or Nodes (kubectl get nodes -o yaml)")
    p.add_argument("--queues", type=Path, required=True, help="Kueue objects (examples/kueue/hyperpod-queues.yaml)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", type=Path, help="trace YAML (jobs and failures; examples/traces/)")
    src.add_argument("--synthetic", type=int, metavar="N", help="generate N jobs from the reference distributions")
    p.add_argument("--seed", type=int, default=0, help="seed of --synthetic (default 0)")
    p.add_argument("--synthetic-shape", choices=("recipe", "kalos", "seren"), default="recipe",
                   help="with --synthetic: recipe (default: the reference's HyperPod recipe, section 4.6) or the "
                        "shape of an LLM cluster of the Acme trace, kalos or seren (scheduler/sim/acme.py)")
    p.add_argument("--failures-per-day", type=float, default=0.0,
                   help=f"with --synthetic: node failures per simulated day, 0 to {MAX_FAILURES_PER_DAY} (each "
                        "recovers after 1 h)")
    p.add_argument("--solver", choices=("greedy", "cpsat", "auto"), default="greedy")
    add_kueue_config_argument(p)
    p.add_argument("--time-budget-ms", type=int, default=100, help="CP-SAT budget per placement (default 100)")
    p.add_argument("--compare", choices=COMPARE, help="also run the other policy on the same trace: "
                   "solver (greedy vs cpsat), queueing (StrictFIFO vs BestEffortFIFO), borrowing (with/without), "
                   "placement (each --placement-policy: kueue, fragmentation-aware, degraded-last, "
                   "reserve-compact, patient-compact, all)")
    p.add_argument("--placement-policy", default="kueue", metavar="POLICY[,POLICY]",
                   help="placement beyond Kueue, as the controller's flag (docs/beyond-kueue.md; default kueue)")
    p.add_argument("--run-time-model", default="off", metavar="off|moderate|strong|L3,L2,MAX",
                   help="how far a multi-node job's pods spread stretches its run time: off (default: the trace "
                        "durations), moderate, strong, or the fractions per extra layer-3 domain, per extra layer-2 "
                        "domain and the cap, e.g. 0.03,0.08,0.3 (docs/simulate.md)")
    p.add_argument("--eviction-delay", type=float, default=30.0, metavar="SECONDS",
                   help="a preempted workload holds its reservation this long before it is requeued "
                        "(pod termination; default 30, Kubernetes' default grace period)")
    add_failure_policy_arguments(p)  # the controller's, flag for flag
    p.add_argument("--no-eviction-storm-guard", action="store_true",
                   help="decide every node failure at once, however many nodes fail together")
    p.add_argument("--horizon", type=float, metavar="SECONDS", help="stop after this much simulated time")
    p.add_argument("--out", type=Path, required=True, help="output directory (created)")
    p.set_defaults(func=run)


QUEUES_EXPECTED = "Kueue objects (ClusterQueue, LocalQueue, ResourceFlavor, Topology, ...)"


def load_world(cluster: Path, queues: Path) -> Any:
    from scheduler.adapter.manifest.shape import object_errors
    from scheduler.sim.scenario import ClusterError, world_from_objects

    # the reader `place --nodes` and `topology --cluster` use: a description or Node objects
    nodes = [o for _, o in load_node_objects(cluster, "cluster file", object_errors)]
    qdocs = [o for _, o in load_documents(queues, "queues file", QUEUES_EXPECTED)]
    try:
        return world_from_objects(nodes, qdocs)
    except ClusterError as exc:
        raise UserError(f"cluster file {cluster}: {exc}") from exc
    except ValueError as exc:
        raise UserError(f"queues file {queues}: {exc}") from exc


def load_trace(path: Path) -> Any:
    from scheduler.sim.trace import TraceError, trace_from_data

    data = load_data(path, "trace file", "a trace (jobs: [...], failures: [...]; examples/traces/)")
    try:
        return trace_from_data(data)
    except TraceError as exc:
        raise UserError(f"trace file {path}: {exc}") from exc


def synthetic_for(world: Any, n: int, seed: int, failures_per_day: float, shape: str = "recipe") -> Any:
    from scheduler.sim.acme import SHAPES, acme_trace
    from scheduler.sim.model import GPU
    from scheduler.sim.scenario import level_capacity
    from scheduler.sim.trace import TraceError, synthetic_trace

    gpn = max((node.allocatable.get(GPU, 0) for node in world.nodes), default=0)
    queues = sorted((lq.namespace, lq.name) for lq in world.local_queues.values())
    pcs = sorted(world.workload_priority_classes)
    try:
        if shape in SHAPES:
            return acme_trace(SHAPES[shape], seed, count=n, gpus_per_node=gpn, node_count=len(world.nodes),
                              queues=queues, level_capacity=level_capacity(world), priority_classes=pcs,
                              failures_per_day=failures_per_day, node_names=[x.name for x in world.nodes])
        return synthetic_trace(n, seed, gpus_per_node=gpn, node_count=len(world.nodes), queues=queues,
                               level_capacity=level_capacity(world), priority_classes=pcs or (),
                               failures_per_day=failures_per_day, node_names=[x.name for x in world.nodes])
    except TraceError as exc:
        raise UserError(str(exc)) from exc


class ProgressPrinter:
    """A bar redrawn in place on a TTY; otherwise one line every ``every_s`` wall seconds."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 5.0) -> None:
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0.0

    def __call__(self, label: str, idx: int, count: int, p: Any) -> None:
        done = p.finished / p.total_jobs if p.total_jobs else 1.0
        head = f"[{label}{f' {idx + 1}/{count}' if count > 1 else ''}]"
        tail = (f"t={p.time_s:,.0f}s submitted {p.submitted}/{p.total_jobs} admitted {p.admitted} "
                f"finished {p.finished} pending {p.pending} GPU {p.gpu_utilization:.0%}")
        now = time.monotonic()
        state = (label, p.time_s, p.finished, p.pending)
        if state == getattr(self, "_printed", None):
            return
        if self.tty:
            if now - self._last < 0.1 and p.finished < p.total_jobs:
                return
            self._last = now
            self._printed = state
            width = 28
            fill = int(width * done)
            self.stream.write(f"\r{head} |{'#' * fill}{'.' * (width - fill)}| {done:4.0%} {tail}\033[K")
            if p.finished >= p.total_jobs:
                self.stream.write("\n")
        else:
            if now - self._last < self.every_s and p.finished < p.total_jobs:
                return
            self._last = now
            self._printed = state
            self.stream.write(f"{head} {done:.0%} {tail}\n")
        self.stream.flush()


def write_outputs(out: Path, runs: list[tuple[str, Any, dict[str, Any]]], meta: dict[str, Any]) -> None:
    from scheduler.sim.report import describe_run, render_report

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot create ({exc.strerror or exc})") from exc
    summary = {**meta, "variants": {label: s for label, _, s in runs},
               "events": {label: r.events for label, r, _ in runs}}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    (out / "report.html").write_text(render_report(runs, meta=describe_run(meta)))


def run_time_model(text: str) -> Any:
    from scheduler.sim.runtime import parse_model

    try:
        return parse_model(text)
    except ValueError as exc:
        raise UserError(f"--run-time-model: {exc}") from exc


def run(args: Any) -> int:
    from scheduler.core.placement.options import PlacementOptions
    from scheduler.sim.scenario import run_variants
    from scheduler.sim.trace import TraceError

    if args.synthetic is not None:
        bounded(args.synthetic, "--synthetic", 1, MAX_SYNTHETIC_JOBS, "jobs")
    bounded(args.failures_per_day, "--failures-per-day", 0, MAX_FAILURES_PER_DAY)
    if args.trace is not None and (args.seed or args.failures_per_day or args.synthetic_shape != "recipe"):
        raise UserError("--seed/--failures-per-day/--synthetic-shape only apply to --synthetic")
    bounded(args.eviction_delay, "--eviction-delay", 0, DAY_S, "seconds")
    if args.horizon is not None:
        bounded(args.horizon, "--horizon", 1, 3650 * DAY_S, "seconds")
    check_time_budget_ms(args.time_budget_ms)
    run_time = run_time_model(args.run_time_model)
    config = kueue_config(args)
    world = dataclasses.replace(load_world(args.cluster, args.queues), config=config)
    try:
        world = dataclasses.replace(world, placement_options=PlacementOptions.from_names(args.placement_policy))
    except ValueError as exc:
        raise UserError(f"--placement-policy: {exc}") from exc
    if args.trace is not None:
        trace, source = load_trace(args.trace), str(args.trace)
    else:
        trace, source = synthetic_for(world, args.synthetic, args.seed, args.failures_per_day, args.synthetic_shape), (
            f"synthetic N={args.synthetic} seed={args.seed}"
            + (f" shape={args.synthetic_shape}" if args.synthetic_shape != "recipe" else ""))
    try:
        runs = run_variants(world, trace, solver=args.solver, compare=args.compare,
                            time_budget_s=args.time_budget_ms / 1000, horizon_s=args.horizon,
                            progress=ProgressPrinter(), progress_every_s=0.0,
                            eviction_delay_s=args.eviction_delay, requeue_backoff=requeue_backoff(args),
                            storm_policy=None if args.no_eviction_storm_guard else storm_policy(args),
                            run_time=run_time)
    except TraceError as exc:
        raise UserError(f"trace {source}: {exc}") from exc
    meta = {"cluster": str(args.cluster), "queues": str(args.queues), "trace": source, "solver": args.solver,
            "eviction_delay_s": args.eviction_delay,
            "requeue_backoff_s": {"base": args.node_failure_requeue_base_seconds,
                                  "max": args.node_failure_requeue_max_seconds},
            "eviction_storm_guard": None if args.no_eviction_storm_guard else {
                "threshold": args.eviction_storm_threshold, "window_s": args.eviction_storm_window_seconds,
                "min_nodes": args.eviction_storm_min_nodes},
            "compare": args.compare, "nodes": len(world.nodes), "jobs": len(trace.jobs),
            "run_time_model": run_time.as_dict()}
    write_outputs(args.out, runs, meta)
    if args.synthetic is not None:
        (args.out / "trace.yaml").write_text(yaml.safe_dump(trace.to_dict(), sort_keys=False))
    for label, _r, s in runs:
        print(f"{label}: {s['admitted']}/{s['submitted']} admitted, {s['finished']} finished, "
              f"wait p50 {s['wait_s']['p50']:.0f}s p99 {s['wait_s']['p99']:.0f}s, "
              f"GPU utilisation {s['gpu_utilization']:.1%}, {s['domains_level'].rsplit('/', 1)[-1] or 'domains'} "
              f"per multi-pod job {s['mean_domains_multi_pod']:.2f}, preemptions {s['preemptions']}, "
              f"NodeFailures evictions {s['evictions_node_failures']}, makespan {s['makespan_s']:.0f}s")
        if run_time.on:
            print("  job completion time p50/p95: " + ", ".join(
                f"{cls} {v['p50']:.0f}/{v['p95']:.0f}s" for cls, v in s["jct_s"].items()))
    print(f"wrote {args.out / 'summary.json'} and {args.out / 'report.html'}")
    return 0
