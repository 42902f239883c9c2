#!/usr/bin/env python3
"""The same generated workload stream through the real Kueue v0.17.0 and through toposched,
each on a fresh local control plane (real kube-apiserver, Job controller, kube-scheduler,
KWOK nodes), one after the other in one run.

Stream (deterministic, ``--seed``): ``--jobs`` batch Jobs from ``--teams`` teams (one
namespace/LocalQueue/ClusterQueue each, nominal = cluster GPUs / teams, one cohort, borrowing
allowed, no preemption unless ``--preemption``). Job shapes: 60 % single-node (1, 2, 4 or 8 GPUs, no
annotation = implicit TAS), 40 % multi-node of whole nodes (2, 4, 8 or 16 pods x 8 GPUs,
half ``required`` layer-3 when it fits in one layer-3 domain else layer-2, half ``preferred``
layer-3). Each job "runs" ``--min-s``..``--max-s`` seconds after its admission is observed,
then the driver deletes it (quota and topology are released exactly as when it finishes).
Submission is bounded: at most ``--max-outstanding`` created-but-unfinished jobs. With
``--arrival-rate`` the stream is open-loop instead: each job arrives at its own seeded Poisson
time, the same for every engine, so both run the same offered load (a closed loop lets the
faster engine keep the cluster fuller, and a fuller cluster has fewer compact placements).

Printed per engine: wall time, admissions/s, time to admission p50/p99 (driver clock: job
created -> the watch event that shows its Workload's quota reserved; a watch, not the 0.2 s
poll, so the burst of creations at the start does not delay the observation), GPU
utilisation (time-average of admitted GPUs / cluster GPUs over the run), mean layer-3 domains
spanned per multi-node job; then ratios toposched/Kueue.

    python scripts/bench/vs_kueue.py                       # 2,000 jobs, 128 nodes (~10 min)
    python scripts/bench/vs_kueue.py --jobs 300 --layers 2,2,4 --nodes-per-domain 4
    python scripts/bench/vs_kueue.py --engine kueue        # one side only
    python scripts/bench/vs_kueue.py --jobs 2000 --arrival-rate 0.9 --min-s 20 --max-s 60   # compactness
    python scripts/bench/vs_kueue.py --fair-sharing --weights team-a=2 --jobs 300 --layers 2,2,4

``--fair-sharing``: both engines run with Kueue's Configuration ``fairSharing`` (default
strategies) and ClusterQueues weighted by ``--weights``; every ``--share-every-s`` the driver
reads each team's ``status.fairSharing.weightedShare`` and counts its admitted GPUs, and prints
the per-team share over time for both engines (``--json`` keeps the series).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kubernetes import client  # noqa: E402

from scheduler.core.topology_request import ANN_COMPACT_LEVEL, ANN_COMPACT_MAX_DOMAINS, ANN_COMPACT_WAIT  # noqa: E402
from scheduler.devcluster.processes import run_owning_processes  # noqa: E402
from scheduler.k8s.informer import CLUSTER_QUEUES, JOBS, WORKLOADS, Informer  # noqa: E402
from tests.conformance.harness import (  # noqa: E402
    LAYER,
    assignment_hosts,
    job_object,
    level,
    start_run,
    team_namespace,
)


@dataclass
class JobRow:
    name: str
    team: str
    pods: int
    gpus: int
    mode: str  # "required" | "preferred" | "implicit"
    duration_s: float

    def row(self) -> dict[str, Any]:
        r: dict[str, Any] = {"name": self.name, "team": self.team, "pods": self.pods, "gpus": self.gpus}
        if self.mode != "implicit":
            r[self.mode] = self.level
        return r

    level: str = "layer-3"


def generate(n: int, teams: list[str], nodes_per_l3: int, seed: int, min_s: float, max_s: float) -> list[JobRow]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        team = teams[i % len(teams)] if rng.random() < 0.5 else rng.choice(teams)
        dur = rng.uniform(min_s, max_s)
        if rng.random() < 0.6:
            out.append(JobRow(f"j{i:05d}", team, 1, rng.choice([1, 2, 4, 8]), "implicit", dur))
        else:
            pods = rng.choice([2, 4, 8, 16])
            mode = "required" if rng.random() < 0.5 else "preferred"
            row = JobRow(f"j{i:05d}", team, pods, 8, mode, dur)
            if mode == "required" and pods > nodes_per_l3:
                row.level = "layer-2"
            out.append(row)
    return out


@dataclass
class Track:
    row: JobRow
    created: float
    admitted: float | None = None
    deleted: float | None = None
    l3_spanned: int = 0


@dataclass
class Result:
    engine: str
    wall_s: float
    admitted: int
    tta: list[float] = field(default_factory=list)
    gpu_seconds: float = 0.0
    total_gpus: int = 0
    l3: list[int] = field(default_factory=list)
    # multi-node jobs small enough for one layer-3 domain (a pod per node): in exactly one?
    l3_one: list[bool] = field(default_factory=list)
    preempted: int = 0
    # --fair-sharing: (seconds since start, {team: [weightedShare, admitted GPUs]})
    shares: list[tuple[float, dict[str, list[float]]]] = field(default_factory=list)
    by_job: dict[str, float] = field(default_factory=dict)  # job name -> time to admission (s)
    spans: dict[str, int] = field(default_factory=dict)  # multi-node job name -> layer-3 domains spanned

    def figures(self) -> dict[str, float]:
        q = sorted(self.tta) or [0.0]
        return {
            "wall_s": self.wall_s,
            "admissions_per_s": self.admitted / self.wall_s if self.wall_s else 0.0,
            "tta_p50_s": q[int(0.50 * (len(q) - 1))],
            "tta_p99_s": q[int(0.99 * (len(q) - 1))],
            "gpu_utilisation": self.gpu_seconds / (self.total_gpus * self.wall_s) if self.wall_s else 0.0,
            "mean_l3_domains_multinode": statistics.fmean(self.l3) if self.l3 else 0.0,
            "share_in_one_l3_of_fitting": statistics.fmean(self.l3_one) if self.l3_one else 0.0,
        }


class ReservationWatch:
    """When each Job's Workload was first seen holding quota, on the driver's clock, from a
    watch of Workloads: the driver's own loop creates up to ``--max-outstanding`` Jobs before
    it polls, so a poll-time admission would count the creation burst (and the admission
    webhook's latency on it) as time to admission."""

    def __init__(self, api: Any) -> None:
        self.first: dict[str, float] = {}
        self.informer = Informer(api, WORKLOADS)
        self.informer.add_handler(self._seen)

    def _seen(self, _kind: str, wl: dict[str, Any], _old: dict[str, Any] | None) -> None:
        owner = next((r["name"] for r in wl["metadata"].get("ownerReferences") or [] if r.get("kind") == "Job"), None)
        if owner is None or owner in self.first:
            return
        conds = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
        if (conds.get("QuotaReserved") or {}).get("status") == "True" and (wl.get("status") or {}).get("admission"):
            self.first[owner] = time.monotonic()

    def start(self) -> ReservationWatch:
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()


def run_engine(engine: str, args: argparse.Namespace, rows: list[JobRow]) -> Result:
    layers = [int(x) for x in args.layers.split(",")]
    description = {"name": "bench", "instanceType": "ml.p5.48xlarge", "layers": layers,
                   "nodesPerDomain": args.nodes_per_domain}
    nodes_total = args.nodes_per_domain
    for f in layers:
        nodes_total *= f
    total_gpus = 8 * nodes_total
    teams = [f"team-{chr(ord('a') + i)}" for i in range(args.teams)]
    policy = "LowerPriority" if args.preemption else "Never"
    queues = {"teams": {t: {"gpu": total_gpus // len(teams), "cohort": "bench", "withinClusterQueue": policy,
                            "reclaimWithinCohort": "Any" if args.preemption else "Never"} for t in teams}}
    weights = dict(w.split("=", 1) for w in (args.weights.split(",") if args.weights else ()))
    for team, weight in weights.items():
        queues["teams"][team]["fairWeight"] = weight
    fair = {"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}
    directory = Path(tempfile.mkdtemp(prefix=f"vs-kueue-{engine}-"))
    base, controller_args = VARIANTS.get(engine, (engine, ()))
    run = start_run(base, directory, description, queues, controller_args=controller_args,
                    kueue_config=fair if args.fair_sharing else None)
    labels = run.node_labels
    api = run.api
    tracks: dict[str, Track] = {}
    pending_rows = list(rows)
    result = Result(engine, 0.0, 0, total_gpus=total_gpus)
    outstanding = 0
    running_gpus = 0
    watch = ReservationWatch(api).start()
    arrivals = arrival_times(len(rows), args.arrival_rate, args.seed) if args.arrival_rate else None
    last_t = t0 = last_progress = last_share = time.monotonic()
    try:
        while pending_rows or any(t.deleted is None for t in tracks.values()):
            now = time.monotonic()
            if now - t0 > args.timeout_s:
                print(f"[{engine}] timeout after {args.timeout_s}s", file=sys.stderr)
                break
            # submit: closed loop (at most --max-outstanding unfinished jobs) or, with
            # --arrival-rate, open loop (each job at its own arrival time)
            while pending_rows and outstanding < args.max_outstanding and (
                    arrivals is None or time.monotonic() - t0 >= arrivals[len(tracks)]):
                row = pending_rows.pop(0)
                obj = job_object(row.row())
                if engine in COMPACT_VARIANTS and row.pods > 1:
                    obj["spec"]["template"]["metadata"]["annotations"].update(compact_wish(row, args))
                api.create(JOBS, obj, obj["metadata"]["namespace"])
                tracks[row.name] = Track(row, time.monotonic())
                outstanding += 1
            # observe
            now = time.monotonic()
            result.gpu_seconds += running_gpus * (now - last_t)
            last_t = now
            if now - last_progress >= 15:
                last_progress = now
                done = sum(1 for t in tracks.values() if t.admitted is not None)
                print(f"[{engine}] {now - t0:.0f}s: created {len(tracks)}, admitted {done}, "
                      f"GPUs in use {running_gpus}/{total_gpus}", file=sys.stderr, flush=True)
            for wl in api.list(WORKLOADS).get("items", []):
                owner = next((r["name"] for r in wl["metadata"].get("ownerReferences") or []
                              if r.get("kind") == "Job"), None)
                tr = tracks.get(owner or "")
                if tr is None or tr.admitted is not None or tr.deleted is not None:
                    continue
                conds = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
                if (conds.get("QuotaReserved") or {}).get("status") == "True" and \
                        (wl.get("status") or {}).get("admission"):
                    tr.admitted = max(tr.created, min(now, watch.first.get(owner or "", now)))
                    result.gpu_seconds += tr.row.pods * tr.row.gpus * (now - tr.admitted)
                    running_gpus += tr.row.pods * tr.row.gpus
                    if tr.row.pods > 1:
                        hosts = assignment_hosts(wl, labels)
                        tr.l3_spanned = len({labels[h][f"{LAYER}3"] for h in hosts if h in labels})
            if args.fair_sharing and now - last_share >= args.share_every_s:
                last_share = now
                result.shares.append((round(now - t0, 1), _sample_shares(api, teams, tracks)))
            # finish
            for tr in tracks.values():
                if tr.admitted is not None and tr.deleted is None and now - tr.admitted >= tr.row.duration_s:
                    try:
                        api.delete(JOBS, tr.row.name, team_namespace(tr.row.team), propagationPolicy="Background")
                    except client.ApiException as exc:
                        if exc.status != 404:
                            raise
                    tr.deleted = now
                    running_gpus -= tr.row.pods * tr.row.gpus
                    outstanding -= 1
            time.sleep(args.poll_s)
        end = max((t.admitted or 0.0) for t in tracks.values()) if tracks else time.monotonic()
        result.wall_s = end - t0
        for tr in tracks.values():
            if tr.admitted is not None:
                result.admitted += 1
                result.tta.append(tr.admitted - tr.created)
                result.by_job[tr.row.name] = tr.admitted - tr.created
                if tr.row.pods > 1:
                    result.l3.append(tr.l3_spanned)
                    result.spans[tr.row.name] = tr.l3_spanned
                    if tr.row.pods <= args.nodes_per_domain:
                        result.l3_one.append(tr.l3_spanned == 1)
    finally:
        watch.stop()
        run.stop()
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    return result


def arrival_times(n: int, rate: float, seed: int) -> list[float]:
    """Open-loop arrivals: Poisson at ``rate`` jobs/s (seeded, the same for every engine), so
    both engines run the same offered load whatever their admission speed; a closed loop lets
    the faster engine run the cluster fuller, which makes compact placement harder for it."""
    rng = random.Random(seed + 1)
    out, t = [], 0.0
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


def _sample_shares(api: Any, teams: list[str], tracks: dict[str, Track]) -> dict[str, list[float]]:
    """Per team: the ClusterQueue's status.fairSharing.weightedShare and its admitted GPUs now."""
    out: dict[str, list[float]] = {}
    for team in teams:
        cq = api.get(CLUSTER_QUEUES, f"{team_namespace(team)}-clusterqueue")
        share = ((cq.get("status") or {}).get("fairSharing") or {}).get("weightedShare", 0)
        gpus = sum(t.row.pods * t.row.gpus for t in tracks.values()
                   if t.row.team == team and t.admitted is not None and t.deleted is None)
        out[team] = [float(share), float(gpus)]
    return out


def _print_shares(engine: str, res: Result, teams: list[str]) -> None:
    print(f"{engine}: per-team weightedShare / admitted GPUs over time")
    print("  t(s)    " + "  ".join(f"{t:>14s}" for t in teams))
    for at, row in res.shares:
        print(f"  {at:6.1f}  " + "  ".join(f"{int(row[t][0]):>6d} / {int(row[t][1]):>5d}" for t in teams))
    if res.shares:
        means = {t: statistics.fmean(r[t][1] for _, r in res.shares) for t in teams}
        print("  mean GPUs: " + ", ".join(f"{t} {v:.1f}" for t, v in means.items()))


# Engine variants (name -> harness engine, controller arguments): the controller before
# back-to-back cycles (issue 18 item 5), for A/B runs of the change; and toposched with every
# issue-17 placement policy on (docs/beyond-kueue.md), whose multi-node jobs also carry the
# bounded compact wait (COMPACT_VARIANTS: one domain of their level, ``--compact-wait`` s); and
# fragmentation-aware placement alone, without the wait (does packing the small jobs keep the
# multi-node ones compact at no cost in time to admission?).
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "toposched-1cycle": ("toposched", ("--cycles-per-pass", "1", "--cycle-budget-ms", "0")),
    # exactly 8 cycles a pass (the controller's default before the cycle budget, issue 34)
    "toposched-8cycles": ("toposched", ("--cycle-budget-ms", "0")),
    "toposched-serial": ("toposched", ("--concurrent-writes", "1")),
    # 8 writes in flight (the default before issue 34) and 32 (the default since)
    "toposched-writes8": ("toposched", ("--concurrent-writes", "8")),
    "toposched-writes32": ("toposched", ("--concurrent-writes", "32")),
    "toposched-beyond": ("toposched", ("--placement-policy", "all")),
    "toposched-fragmentation": ("toposched", ("--placement-policy", "fragmentation-aware")),
    # issue 35: the compact wait without preemption during it (patient-compact), and with
    # fragmentation-aware placement of the small jobs; greedy placement only (no CP-SAT).
    "toposched-patient": ("toposched", ("--placement-policy", "patient-compact")),
    "toposched-patient-frag": ("toposched", ("--placement-policy", "patient-compact,fragmentation-aware")),
    "toposched-greedy": ("toposched", ("--solver", "greedy")),
}
COMPACT_VARIANTS = frozenset({"toposched-beyond", "toposched-patient", "toposched-patient-frag"})


def compact_wish(row: JobRow, args: argparse.Namespace) -> dict[str, str]:
    """toposched's bounded wait for a compact placement (``toposched.io/compact-*``): one
    layer-3 domain, or one layer-2 domain for a job larger than a layer-3 domain (a pod per node)."""
    wanted = "layer-3" if row.pods <= args.nodes_per_domain else "layer-2"
    return {ANN_COMPACT_LEVEL: level(wanted), ANN_COMPACT_MAX_DOMAINS: "1",
            ANN_COMPACT_WAIT: f"{args.compact_wait:g}s"}


def job_class(row: JobRow) -> str:
    """The breakdown key of a job: its size and topology mode."""
    if row.pods == 1:
        return f"1 pod x {row.gpus} GPU"
    return f"{row.pods} pods {row.mode}"


def breakdown(rows: list[JobRow], results: dict[str, Result]) -> list[str]:
    """Median time to admission per job class and per team, for each engine, and the ratio."""
    engines = list(results)
    keys: dict[str, list[JobRow]] = {}
    for row in rows:
        keys.setdefault(f"class {job_class(row)}", []).append(row)
        keys.setdefault(f"team {row.team}", []).append(row)
    lines = [f"  {'jobs':28} {'n':>4} " + " ".join(f"{e + ' p50':>18}" for e in engines)
             + "".join(f"  {e}/{engines[0]}" for e in engines[1:])]
    for key in sorted(keys, key=lambda k: (k.split()[0], -len(keys[k]), k)):
        medians = []
        for e in engines:
            vals = [results[e].by_job[r.name] for r in keys[key] if r.name in results[e].by_job]
            medians.append(statistics.median(vals) if vals else float("nan"))
        ratios = "".join(f"  {m / medians[0]:{len(e) + len(engines[0]) + 1}.2f}" if medians[0] else ""
                         for e, m in zip(engines[1:], medians[1:], strict=True))
        lines.append(f"  {key:28} {len(keys[key]):4} " + " ".join(f"{m:17.2f}s" for m in medians) + ratios)
    return lines


def compactness(rows: list[JobRow], results: dict[str, Result], nodes_per_l3: int) -> list[str]:
    """Per multi-pod class small enough for one layer-3 domain: the share placed in one, for each
    engine (the counts, so a reader sees how many jobs a difference is)."""
    engines = list(results)
    lines = [f"  {'jobs':28} {'n':>4} " + " ".join(f"{e + ' in one L3':>26}" for e in engines)]
    classes: dict[str, list[JobRow]] = {}
    for row in rows:
        if 1 < row.pods <= nodes_per_l3:
            classes.setdefault(f"class {job_class(row)}", []).append(row)
    for key in sorted(classes, key=lambda k: (-len(classes[k]), k)):
        cells = []
        for e in engines:
            spans = [results[e].spans[r.name] for r in classes[key] if r.name in results[e].spans]
            one = sum(1 for x in spans if x == 1)
            cells.append(f"{one:>5}/{len(spans):<5} ({100 * one / len(spans) if spans else 0:5.1f}%)".rjust(26))
        lines.append(f"  {key:28} {len(classes[key]):4} " + " ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--teams", type=int, default=4)
    ap.add_argument("--layers", default="2,4,4", help="fan-out per network layer (3 layers)")
    ap.add_argument("--nodes-per-domain", type=int, default=4)
    ap.add_argument("--min-s", type=float, default=2.0)
    ap.add_argument("--max-s", type=float, default=8.0)
    ap.add_argument("--max-outstanding", type=int, default=150)
    ap.add_argument("--arrival-rate", type=float, default=0.0, metavar="JOBS_PER_S",
                    help="open loop: jobs arrive at this Poisson rate whatever the engine admits (the same "
                         "arrival times for every engine; --max-outstanding still bounds them); 0 (default): "
                         "closed loop")
    ap.add_argument("--poll-s", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout-s", type=float, default=1800)
    ap.add_argument("--engine", action="append", choices=("kueue", "toposched", *VARIANTS),
                    help="engines in run order (default kueue, toposched); toposched-1cycle: one "
                         "admission cycle per pass, the controller before issue 18 item 5; toposched-serial: "
                         "one API write at a time (before concurrent writes); toposched-beyond: "
                         "every issue-17 placement policy and the compact wait (--compact-wait); "
                         "toposched-fragmentation: fragmentation-aware placement only, no wait; "
                         "toposched-patient(-frag): the compact wait without preemption during it (and "
                         "fragmentation-aware placement); toposched-greedy: --solver greedy")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--preemption", action="store_true",
                    help="ClusterQueues preempt (withinClusterQueue LowerPriority, reclaimWithinCohort Any); "
                         "off by default so the stream measures admission and placement only")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--fair-sharing", action="store_true",
                    help="Kueue's fairSharing in both engines; print per-team weightedShare over time")
    ap.add_argument("--weights", default="", help="ClusterQueue fairSharing weights, e.g. team-a=2,team-b=0.5")
    ap.add_argument("--share-every-s", type=float, default=5.0)
    ap.add_argument("--compact-wait", type=float, default=30.0, metavar="SECONDS",
                    help="toposched-beyond: how long a multi-node job waits for one domain of its level")
    args = ap.parse_args(argv)

    teams = [f"team-{chr(ord('a') + i)}" for i in range(args.teams)]
    rows = generate(args.jobs, teams, args.nodes_per_domain, args.seed, args.min_s, args.max_s)
    engines = args.engine or ["kueue", "toposched"]
    figures: dict[str, dict[str, float]] = {}
    series: dict[str, Any] = {}
    results: dict[str, Result] = {}
    for engine in engines:
        res = results[engine] = run_engine(engine, args, rows)
        figures[engine] = res.figures()
        if args.fair_sharing:
            _print_shares(engine, res, teams)
            series[engine] = res.shares
        f = figures[engine]
        print(f"{engine:10s} jobs={args.jobs} admitted={res.admitted} wall={f['wall_s']:.1f}s "
              f"admissions/s={f['admissions_per_s']:.2f} tta_p50={f['tta_p50_s']:.2f}s tta_p99={f['tta_p99_s']:.2f}s "
              f"gpu_util={100 * f['gpu_utilisation']:.1f}% mean_l3_domains={f['mean_l3_domains_multinode']:.2f} "
              f"in_one_l3={100 * f['share_in_one_l3_of_fitting']:.1f}%",
              flush=True)
    if "kueue" in figures:
        k = figures["kueue"]
        for name in [e for e in figures if e != "kueue"]:
            t = figures[name]
            ratios = {key: (t[key] / k[key] if k[key] else float("nan")) for key in k}
            print(f"ratio {name}/kueue: " + " ".join(f"{key}={val:.2f}" for key, val in ratios.items()))
            figures[f"ratio {name}"] = ratios
    print("time to admission by job class and team (median):")
    print("\n".join(breakdown(rows, results)))
    print("multi-node jobs that fit one layer-3 domain, placed in one:")
    print("\n".join(compactness(rows, results, args.nodes_per_domain)))
    if args.json:
        out: dict[str, Any] = dict(figures)
        out["by_job"] = {e: r.by_job for e, r in results.items()}
        out["spans"] = {e: r.spans for e, r in results.items()}
        if series:
            out["shares"] = series
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    # Its control planes never outlive it: stopped on SIGTERM/SIGINT/SIGHUP, ended with it on SIGKILL.
    sys.exit(run_owning_processes(main))
