#!/usr/bin/env python3
"""Gang placement: a stream of 2- to 32-pod gangs that each require one layer-3 domain, through
kube-scheduler's own topology-aware workload scheduling (KEP-5732), the real Kueue v0.17.0 and
toposched, each on a fresh control plane of the same shape (issue 34, item 2).

The control plane (all three engines): Kubernetes v1.37.2 with the feature gates
``GenericWorkload`` (beta, off by default) and ``TopologyAwareWorkloadScheduling`` (alpha) on
kube-apiserver, kube-controller-manager and kube-scheduler, and ``--runtime-config
scheduling.k8s.io/v1beta1=true`` (beta APIs are not served by default). v1.37.2 serves
``scheduling.k8s.io/v1beta1`` ``Workload`` and ``PodGroup``; with the gates the default
scheduler profile gains the plugins ``GangScheduling``, ``TopologyPlacementGenerator`` and
``PodGroupPodsCount`` (pkg/scheduler/apis/config/v1/default_plugins.go).

A gang, per engine:
- ``kube-scheduler``: a ``Workload`` (``podGroupTemplates: [{name: workers, schedulingPolicy:
  {gang: {minCount: N}}, schedulingConstraints: {topology: [{key: <layer-3 label>}]}}]``, its
  ``controllerRef`` the Job), a ``PodGroup`` copying the template (``workloadRef``), then an
  Indexed Job of N pods whose template sets ``spec.schedulingGroup.podGroupName`` (the field
  that replaced ``workloadRef`` on the pod in v1.36). No queue, no quota: the Job starts at once
  and kube-scheduler places the group as a whole in one layer-3 domain or not at all.
- ``kueue`` / ``toposched``: the same Indexed Job with ``kueue.x-k8s.io/queue-name`` and the pod
  template annotation ``kueue.x-k8s.io/podset-required-topology: <layer-3 label>``; ``--teams``
  ClusterQueues in one cohort, nominal = cluster GPUs / teams, borrowing allowed, no
  preemption, so quota never binds before capacity does.
Each pod asks for a whole p5 node (8 GPUs). Layer-3 domains hold 32 nodes.

The stream (deterministic, ``--seed``): ``--gangs`` gangs, sizes 2/4/8/16/32 pods with weights
30/25/20/15/10 %; the driver keeps the pods of created-but-not-deleted gangs at about ``--load``
times the nodes (1.2: more demand than capacity, so gangs queue and fragmentation matters), and
deletes a gang ``--min-s``..``--max-s`` seconds after its last pod is bound. A gang that is
never wholly bound is never deleted: if an engine binds part of a gang and stalls, those nodes
stay taken, as they would in a real cluster.

Measured per gang, from its creation (the driver's clock; binds from a watch of pods): time
until all its pods are bound (p50 / p99), whether they are all in one layer-3 domain, and at
the end: gangs partly bound (some pods bound, not all), gangs never bound, gangs that spent
more than ``--stuck-s`` partly bound (first to last bind). Ratios toposched / each peer from the
same round. Goal (issue 34): toposched at least as compact and at most 0.5x the p99 of the better
peer.

    python scripts/bench/gang.py --nodes 256 --gangs 60 --rounds 1           # validation, minutes
    python scripts/bench/gang.py --nodes 1300,5000 --gangs 600 --rounds 2    # the issue's runs
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kubernetes import client  # noqa: E402

from scheduler.core.fakecluster import generate_nodes  # noqa: E402
from scheduler.devcluster.apply import apply_objects  # noqa: E402
from scheduler.devcluster.processes import run_owning_processes  # noqa: E402
from scheduler.k8s.informer import JOBS, Api, Resource  # noqa: E402
from scripts.bench.benchlib import balanced_order, load_average, ratio  # noqa: E402
from scripts.bench.percentiles import percentile  # noqa: E402
from scripts.bench.watches import BindWatch  # noqa: E402
from tests.conformance.harness import (  # noqa: E402
    LAYER,
    Run,
    create_nodes_in_parallel,
    job_object,
    queue_objects,
    start_run,
    team_namespace,
)

ENGINES = ("kube-scheduler", "kueue", "toposched")
PEERS = ("kube-scheduler", "kueue")
L3 = LAYER + "3"
NODES_PER_DOMAIN = 32
SIZES = (2, 4, 8, 16, 32)
SIZE_WEIGHTS = (30, 25, 20, 15, 10)
WORKLOADS_V1BETA1 = Resource("scheduling.k8s.io", "v1beta1", "workloads")
PODGROUPS_V1BETA1 = Resource("scheduling.k8s.io", "v1beta1", "podgroups")
GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
RUNTIME_CONFIG = {"scheduling.k8s.io/v1beta1": "true"}
NODE_LEASE_S = 3600  # see extender.NODE_LEASE_S


# ---------------------------------------------------------------------- stream and cluster


@dataclass(frozen=True)
class Gang:
    name: str
    team: str
    pods: int
    run_s: float


def stream(count: int, teams: Sequence[str], seed: int, min_s: float, max_s: float) -> list[Gang]:
    rng = random.Random(seed)
    return [Gang(f"g{i:05d}", teams[i % len(teams)], rng.choices(SIZES, SIZE_WEIGHTS)[0], rng.uniform(min_s, max_s))
            for i in range(count)]


def description(nodes: int) -> dict[str, Any]:
    """``nodes`` p5 nodes in layer-3 domains of 32 (the last one partial), four layer-3 domains a
    layer-2 domain."""
    domains = -(-nodes // NODES_PER_DOMAIN)
    return {"name": f"gang-{nodes}", "instanceType": "ml.p5.48xlarge", "layers": [1, 4, -(-domains // 4)],
            "nodesPerDomain": NODES_PER_DOMAIN, "nodeCount": nodes}


def queues(nodes: int, teams: Sequence[str]) -> dict[str, Any]:
    return {"teams": {t: {"gpu": 8 * nodes // len(teams), "cohort": "gangs", "withinClusterQueue": "Never",
                          "reclaimWithinCohort": "Never"} for t in teams}}


def job_for(engine: str, gang: Gang) -> dict[str, Any]:
    """The gang's Job: Kueue-queued with a required layer-3 annotation, or (kube-scheduler) not
    queued, its pods in the PodGroup named after the Job."""
    if engine == "kube-scheduler":
        job = job_object({"name": gang.name, "team": gang.team, "pods": gang.pods, "gpus": 8})
        job["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name")
        job["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": gang.name}
        return job
    return job_object({"name": gang.name, "team": gang.team, "pods": gang.pods, "gpus": 8, "required": "layer-3"})


def workload_api_objects(gang: Gang) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``Workload`` and ``PodGroup`` (scheduling.k8s.io/v1beta1) of a gang, as KEP-5732 and
    the v1.37.2 types document them: a gang policy of minCount = every pod, one topology
    constraint on the layer-3 label; the PodGroup copies the template, as a controller would."""
    ns = team_namespace(gang.team)
    policy = {"gang": {"minCount": gang.pods}}
    constraints = {"topology": [{"key": L3}]}
    workload = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                "metadata": {"name": gang.name, "namespace": ns},
                "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": gang.name},
                         "podGroupTemplates": [{"name": "workers", "schedulingPolicy": policy,
                                                "schedulingConstraints": constraints}]}}
    pod_group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": gang.name, "namespace": ns},
                 "spec": {"workloadRef": {"workloadName": gang.name, "templateName": "workers"},
                          "schedulingPolicy": policy, "schedulingConstraints": constraints}}
    return workload, pod_group


def start_plain_run(directory: Path, desc: Mapping[str, Any], teams: Mapping[str, Any]) -> Run:
    """The control plane and nodes with no queueing engine: kube-scheduler alone."""
    from scheduler.devcluster.kueue import KueueCluster

    cluster = KueueCluster(directory, node_lease_s=NODE_LEASE_S, feature_gates=GATES,
                           runtime_config=RUNTIME_CONFIG).start()
    try:
        kube = cluster.api_client()
        nodes = generate_nodes(desc)
        create_nodes_in_parallel(cluster, nodes)
        apply_objects(kube, [o for o in queue_objects(teams) if o["kind"] == "Namespace"])
        run = Run("kube-scheduler", cluster, Api(kube), kube, nodes, [team_namespace(t) for t in teams["teams"]])
        run._wait_nodes_ready()
    except BaseException:
        cluster.stop()
        raise
    return run


def start_engine(engine: str, directory: Path, desc: Mapping[str, Any], teams: Mapping[str, Any]) -> Run:
    if engine == "kube-scheduler":
        return start_plain_run(directory, desc, teams)
    return start_run(engine, directory, desc, teams, cluster_options={
        "node_lease_s": NODE_LEASE_S, "feature_gates": GATES, "runtime_config": RUNTIME_CONFIG})


# ---------------------------------------------------------------------- figures


@dataclass
class Track:
    gang: Gang
    created: float
    binds: list[tuple[float, str]] = field(default_factory=list)  # (time, node)
    deleted: float | None = None

    @property
    def complete(self) -> bool:
        return len(self.binds) >= self.gang.pods


@dataclass(frozen=True)
class GangFigures:
    gangs: int
    complete: int
    p50_s: float  # creation -> all pods bound, complete gangs
    p99_s: float
    one_domain: float  # share of complete gangs whose pods are all in one layer-3 domain
    partly_bound: int  # at the end: some pods bound, not all
    never_bound: int
    stuck: int  # spent more than stuck_s between first and last bind (or until the end)
    wall_s: float
    by_size: dict[int, float]  # gang size -> p50 s


def gang_figures(tracks: Sequence[Track], domain_of: Mapping[str, str], end: float, stuck_s: float,
                 t0: float) -> GangFigures:
    complete = [t for t in tracks if t.complete]
    times = [max(b for b, _ in t.binds[: t.gang.pods]) - t.created for t in complete]
    one = [len({domain_of.get(n, n) for _, n in t.binds[: t.gang.pods]}) == 1 for t in complete]
    partly = [t for t in tracks if 0 < len(t.binds) < t.gang.pods]
    stuck = 0
    for t in tracks:
        if not t.binds:
            continue
        first = min(b for b, _ in t.binds)
        last = max(b for b, _ in t.binds[: t.gang.pods]) if t.complete else end
        stuck += last - first > stuck_s
    by_size: dict[int, list[float]] = {}
    for t, s in zip(complete, times, strict=True):
        by_size.setdefault(t.gang.pods, []).append(s)
    return GangFigures(len(tracks), len(complete), percentile(times, 0.5), percentile(times, 0.99),
                       statistics.fmean(one) if one else math.nan, len(partly),
                       sum(1 for t in tracks if not t.binds), stuck,
                       (max((max(b for b, _ in t.binds) for t in complete), default=end) - t0),
                       {size: statistics.median(v) for size, v in sorted(by_size.items())})


# ---------------------------------------------------------------------- one engine


def run_engine(engine: str, nodes: int, gangs: Sequence[Gang], args: argparse.Namespace,
               round_index: int) -> tuple[GangFigures, str, str]:
    directory = Path(tempfile.mkdtemp(prefix=f"gang-{engine}-"))
    teams = queues(nodes, sorted({g.team for g in gangs}))
    print(f"-- {nodes} nodes, round {round_index + 1}: {engine} (load {load_average()})", flush=True)
    started = time.monotonic()
    run = start_engine(engine, directory, description(nodes), teams)
    domain_of = {n["metadata"]["name"]: n["metadata"]["labels"][L3] for n in run.nodes}
    names = {g.name for g in gangs}
    watch = BindWatch(run.api, names.__contains__).start()
    print(f"   up in {time.monotonic() - started:.0f}s", flush=True)
    load_start = load_average()
    pending = list(gangs)
    tracks: dict[str, Track] = {}
    budget = args.load * nodes
    t0 = last_print = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            binds = watch.snapshot()
            for name, track in tracks.items():
                track.binds = binds.get(name, [])
            outstanding = sum(t.gang.pods for t in tracks.values() if t.deleted is None)
            while pending and (outstanding + pending[0].pods <= budget or outstanding == 0):
                gang = pending.pop(0)
                create_gang(run, engine, gang)
                tracks[gang.name] = Track(gang, time.monotonic())
                outstanding += gang.pods
            for track in tracks.values():
                if track.deleted is None and track.complete and \
                        now - max(b for b, _ in track.binds[: track.gang.pods]) >= track.gang.run_s:
                    delete_gang(run, engine, track.gang)
                    track.deleted = now
            if not pending and all(t.deleted is not None for t in tracks.values()):
                break
            if now - t0 > args.timeout_s:
                print(f"   timeout after {args.timeout_s:.0f}s", file=sys.stderr, flush=True)
                break
            if now - last_print >= 15:
                last_print = now
                done = sum(t.complete for t in tracks.values())
                print(f"   {now - t0:5.0f}s: created {len(tracks)}/{len(gangs)}, wholly bound {done}, "
                      f"pods outstanding {outstanding} (load {load_average()})", flush=True)
            time.sleep(0.2)
        end = time.monotonic()
        binds = watch.snapshot()
        for name, track in tracks.items():
            track.binds = binds.get(name, [])
        return gang_figures(list(tracks.values()), domain_of, end, args.stuck_s, t0), load_start, load_average()
    finally:
        watch.stop()
        run.stop()
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


def create_gang(run: Run, engine: str, gang: Gang) -> None:
    ns = team_namespace(gang.team)
    if engine == "kube-scheduler":
        workload, pod_group = workload_api_objects(gang)
        run.api.create(WORKLOADS_V1BETA1, workload, ns)
        run.api.create(PODGROUPS_V1BETA1, pod_group, ns)
    run.api.create(JOBS, job_for(engine, gang), ns)


def delete_gang(run: Run, engine: str, gang: Gang) -> None:
    ns = team_namespace(gang.team)
    targets = [(JOBS, {"propagationPolicy": "Background"})]
    if engine == "kube-scheduler":
        targets += [(PODGROUPS_V1BETA1, {}), (WORKLOADS_V1BETA1, {})]
    for resource, query in targets:
        try:
            run.api.delete(resource, gang.name, ns, **query)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


# ---------------------------------------------------------------------- report


def row(engine: str, f: GangFigures) -> str:
    sizes = " ".join(f"{k}:{v:.1f}" for k, v in f.by_size.items())
    return (f"{engine:15s} gangs {f.complete}/{f.gangs} wholly bound, p50 {f.p50_s:6.2f}s p99 {f.p99_s:6.2f}s, "
            f"one layer-3 domain {100 * f.one_domain:5.1f} %, partly bound at the end {f.partly_bound}, never bound "
            f"{f.never_bound}, stuck > stuck_s {f.stuck}, wall {f.wall_s:.0f}s; p50 by size {sizes}")


def ratio_line(results: Mapping[str, GangFigures]) -> str:
    t = results.get("toposched")
    if t is None:
        return ""
    peers = {p: results[p] for p in PEERS if p in results}
    parts = [f"vs {p}: p50 {ratio(t.p50_s, f.p50_s):.2f}x p99 {ratio(t.p99_s, f.p99_s):.2f}x, one domain "
             f"{100 * t.one_domain:.1f} % vs {100 * f.one_domain:.1f} %" for p, f in peers.items()]
    finite = [f.p99_s for f in peers.values() if not math.isnan(f.p99_s)]
    if finite:
        parts.append(f"p99 vs the better peer {ratio(t.p99_s, min(finite)):.2f}x (goal <= 0.5x)")
    return "toposched " + "; ".join(parts)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1300,5000", help="comma-separated cluster sizes, a fresh control plane each")
    ap.add_argument("--gangs", type=int, default=600)
    ap.add_argument("--engines", default=",".join(ENGINES), help="round 1 in this order, round 2 reversed, ...")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--teams", type=int, default=4)
    ap.add_argument("--load", type=float, default=1.2, help="outstanding gang pods per node the driver keeps")
    ap.add_argument("--min-s", type=float, default=10.0)
    ap.add_argument("--max-s", type=float, default=40.0)
    ap.add_argument("--stuck-s", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout-s", type=float, default=3600)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not args.engines or any(e not in ENGINES for e in args.engines):
        ap.error(f"--engines: choose from {', '.join(ENGINES)}")
    try:
        args.nodes = [int(n) for n in args.nodes.split(",")]
    except ValueError:
        ap.error("--nodes: comma-separated node counts, e.g. 1300,5000")
    if any(n < NODES_PER_DOMAIN for n in args.nodes):
        ap.error(f"--nodes: at least {NODES_PER_DOMAIN} (one layer-3 domain holds a 32-pod gang)")
    if args.load <= 0 or args.rounds < 1 or args.gangs < 1 or args.teams < 1:
        ap.error("--load, --rounds, --gangs and --teams must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    teams = [f"team-{chr(ord('a') + i)}" for i in range(args.teams)]
    gangs = stream(args.gangs, teams, args.seed, args.min_s, args.max_s)
    print(f"gang stream: {len(gangs)} gangs, {sum(g.pods for g in gangs)} pods, sizes "
          f"{ {s: sum(g.pods == s for g in gangs) for s in SIZES} }; load {args.load}", flush=True)
    out: list[dict[str, Any]] = []
    lines: list[str] = []
    for nodes in args.nodes:
        for round_index in range(args.rounds):
            results: dict[str, GangFigures] = {}
            for engine in balanced_order(args.engines, round_index):
                figures, load_start, load_end = run_engine(engine, nodes, gangs, args, round_index)
                results[engine] = figures
                line = (f"{nodes} nodes, round {round_index + 1}: {row(engine, figures)}; "
                        f"load {load_start} -> {load_end}")
                print(line, flush=True)
                lines.append(line)
                out.append({"nodes": nodes, "round": round_index + 1, "engine": engine, **asdict(figures),
                            "load": [load_start, load_end]})
            if ratio_line(results):
                lines.append(f"{nodes} nodes, round {round_index + 1}: {ratio_line(results)}")
                print(lines[-1], flush=True)
    print("\n== summary\n" + "\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    # Its control planes never outlive it: stopped on SIGTERM/SIGINT/SIGHUP, ended with it on SIGKILL.
    sys.exit(run_owning_processes(main))
