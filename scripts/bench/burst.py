#!/usr/bin/env python3
"""Burst admission: thousands of jobs created at once with ample quota, through the real Kueue
v0.17.0 and through toposched, each on a fresh local control plane of the same shape (issue 34,
item 1).

What a round does, per engine (the order alternates between rounds: kueue, toposched, then
toposched, kueue; benchlib.balanced_order):
- a fresh control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK;
  KWOK node leases of one hour, as the extender bench, so 5,000 nodes do not write 500 leases a
  second on the engines' cores), ``5,000 x --scale`` p5 nodes (8 GPUs each) in layer-3 domains of
  20, ``--teams`` ClusterQueues with nominal quota = cluster GPUs / teams (the burst needs 65 %
  of the cluster: quota is never the limit), one engine;
- then, from t0, ``10,000 x --scale`` single-pod jobs (1 GPU, no topology annotation: implicit
  TAS) and ``1,000 x --scale`` eight-pod jobs (2 GPUs a pod, ``required`` layer-3) created by
  ``--writers`` threads as fast as the API server and the engine's admission webhook take them,
  interleaved 10 : 1, spread round-robin over the teams; each engine's own webhook suspends
  them, as a user would meet it.

Measured from t0: creation span; time until every job's Workload holds its quota (a watch of
Workloads, the first event with QuotaReserved=True and an admission), and until every pod is
bound (a watch of pods); per job, time to admission and to all pods bound from its own
creation (p50 / p99); admitted Workloads per second; the engine's CPU over the burst (from
/proc, between t0 and the end) and its memory (resident at the end, peak): Kueue's one process
(controller and webhook), toposched's controller alone and its three processes (controller,
webhook, extender), each per admitted Workload. Ratios toposched / Kueue are printed per round
(both engines of one round ran back to back), with the load average at each start and end.
The goal (issue 34): admitted/s at least 2x Kueue's at under Kueue's CPU per admission.

``--profile DIR``: py-spy records toposched's controller and webhook during the burst (raw
stacks, ``DIR/round<r>-<component>.txt``) and the report lists where their samples went.

    python scripts/bench/burst.py --scale 0.05 --rounds 2          # 250 nodes, 550 jobs: minutes
    python scripts/bench/burst.py                                  # 5,000 nodes, 11,000 jobs, 2 rounds
    python scripts/bench/burst.py --engines toposched --rounds 1 --profile /tmp/burst-prof
    python scripts/bench/burst.py --engines toposched@/tmp/toposched-base,toposched   # old code vs this
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.devcluster.processes import run_owning_processes  # noqa: E402
from scheduler.k8s.gcpolicy import GcPolicy, start_freezing  # noqa: E402
from scheduler.k8s.informer import CLUSTER_QUEUES, JOBS, Api  # noqa: E402
from scripts.bench.benchlib import (  # noqa: E402
    ProcessUsage,
    balanced_order,
    child_shares,
    code_from,
    load_average,
    pin_process,
    ratio,
    served_lines,
    served_requests,
    served_since,
    split_engine,
    summarize_stacks,
    threads_of,
    total_usage,
)
from scripts.bench.percentiles import percentile  # noqa: E402
from scripts.bench.vs_kueue import VARIANTS, ReservationWatch  # noqa: E402
from scripts.bench.watches import BindWatch  # noqa: E402
from tests.conformance.harness import Run, job_object, start_run  # noqa: E402

NODE_LEASE_S = 3600  # see extender.NODE_LEASE_S
TOPOSCHED_COMPONENTS = ("toposched-controller", "toposched-webhook", "toposched-extender")
PROFILED = ("toposched-controller", "toposched-webhook", "toposched-extender")


# ---------------------------------------------------------------------- the burst


@dataclass(frozen=True)
class BurstShape:
    nodes: int = 5000
    single_jobs: int = 10_000
    gang_jobs: int = 1_000
    gang_pods: int = 8
    single_gpus: int = 1
    gang_gpus: int = 2  # per pod
    nodes_per_domain: int = 20
    teams: int = 4

    def scaled(self, factor: float) -> BurstShape:
        """Nodes and both job counts times ``factor`` (at least one of each); a layer-3 domain
        keeps its 20 nodes."""
        if factor <= 0:
            raise ValueError(f"--scale must be positive, not {factor}")
        return BurstShape(max(self.nodes_per_domain, round(self.nodes * factor)),
                          max(1, round(self.single_jobs * factor)), max(1, round(self.gang_jobs * factor)),
                          self.gang_pods, self.single_gpus, self.gang_gpus, self.nodes_per_domain, self.teams)

    @property
    def jobs(self) -> int:
        return self.single_jobs + self.gang_jobs

    @property
    def pods(self) -> int:
        return self.single_jobs + self.gang_jobs * self.gang_pods

    @property
    def gpus_needed(self) -> int:
        return self.single_jobs * self.single_gpus + self.gang_jobs * self.gang_pods * self.gang_gpus

    def description(self) -> dict[str, Any]:
        # layers 2 x 5 x 25 with 20 nodes a layer-3 domain hold 5,000 nodes; smaller scales fill
        # the first domains only
        return {"name": "burst", "instanceType": "ml.p5.48xlarge", "layers": [2, 5, 25],
                "nodesPerDomain": self.nodes_per_domain, "nodeCount": self.nodes}

    def team_names(self) -> list[str]:
        return [f"team-{chr(ord('a') + i)}" for i in range(self.teams)]

    def queues(self) -> dict[str, Any]:
        """One ClusterQueue a team, nominal = the cluster's GPUs / teams, no cohort, no
        preemption: the burst needs ``gpus_needed`` (65 % of the cluster at every scale)."""
        per_team = 8 * self.nodes // self.teams
        return {"teams": {t: {"gpu": per_team, "withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
                          for t in self.team_names()}}

    def rows(self) -> list[dict[str, Any]]:
        """The jobs in creation order: ten single-pod jobs, then one gang, and so on."""
        teams = self.team_names()
        singles = [{"pods": 1, "gpus": self.single_gpus} for _ in range(self.single_jobs)]
        gangs = [{"pods": self.gang_pods, "gpus": self.gang_gpus, "required": "layer-3"} for _ in range(self.gang_jobs)]
        ordered: list[dict[str, Any]] = []
        every = max(1, len(singles) // max(1, len(gangs)))
        while singles or gangs:
            ordered.extend(singles[:every])
            del singles[:every]
            if gangs:
                ordered.append(gangs.pop())
        return [{**row, "name": f"b{i:05d}", "team": teams[i % len(teams)]} for i, row in enumerate(ordered)]


# ---------------------------------------------------------------------- observation


@dataclass
class Observation:
    """What the driver saw, on its monotonic clock."""

    t0: float
    pods_per_job: dict[str, int]
    created: dict[str, float] = field(default_factory=dict)  # job -> its create call returned
    admitted: dict[str, float] = field(default_factory=dict)  # job -> first seen holding quota
    binds: dict[str, list[float]] = field(default_factory=dict)  # job -> bind time of each pod
    creation_errors: int = 0


@dataclass(frozen=True)
class BurstFigures:
    jobs: int
    pods: int
    created_s: float  # t0 -> the last create returned
    admitted: int
    all_admitted_s: float  # t0 -> the last Workload admitted (NaN if not all were)
    pods_bound: int
    all_bound_s: float  # t0 -> the last pod bound (NaN if not all were)
    admitted_per_s: float  # admitted / all_admitted_s (or / the time observed)
    admission_p50_s: float  # per job, from its own creation
    admission_p99_s: float
    bound_p50_s: float  # per job, from its creation until its last pod is bound
    bound_p99_s: float
    creation_errors: int


def figures(obs: Observation, observed_s: float) -> BurstFigures:
    """The figures of one engine's burst; ``observed_s``: how long the driver watched after t0."""
    jobs = len(obs.pods_per_job)
    pods = sum(obs.pods_per_job.values())
    admitted = [t for job, t in obs.admitted.items() if job in obs.pods_per_job]
    bound = [t for job in obs.pods_per_job for t in obs.binds.get(job, ())]
    all_admitted = max(admitted) - obs.t0 if admitted and len(admitted) == jobs else math.nan
    all_bound = max(bound) - obs.t0 if bound and len(bound) >= pods else math.nan
    to_admission = [obs.admitted[j] - obs.created[j] for j in obs.admitted if j in obs.created]
    to_bound = [max(obs.binds[j]) - obs.created[j] for j in obs.pods_per_job
                if j in obs.created and len(obs.binds.get(j, ())) >= obs.pods_per_job[j]]
    span = all_admitted if not math.isnan(all_admitted) else observed_s
    return BurstFigures(
        jobs=jobs, pods=pods,
        created_s=(max(obs.created.values()) - obs.t0) if obs.created else math.nan,
        admitted=len(admitted), all_admitted_s=all_admitted,
        pods_bound=min(len(bound), pods), all_bound_s=all_bound,
        admitted_per_s=ratio(len(admitted), span),
        admission_p50_s=percentile(to_admission, 0.5), admission_p99_s=percentile(to_admission, 0.99),
        bound_p50_s=percentile(to_bound, 0.5), bound_p99_s=percentile(to_bound, 0.99),
        creation_errors=obs.creation_errors)


@dataclass(frozen=True)
class EngineRun:
    round: int
    engine: str
    figures: BurstFigures
    cpu: dict[str, ProcessUsage]  # "kueue" | "toposched-controller" | "toposched (3 processes)" -> usage
    load_start: str
    load_end: str
    profile: dict[str, list[str]] = field(default_factory=dict)  # component -> report lines
    served: list[str] = field(default_factory=list)  # the API server's writes and webhook calls (served_lines)

    def cpu_per_admission_ms(self, process: str) -> float:
        return ratio(self.cpu[process].cpu_ms, self.figures.admitted)


def headline_process(engine: str) -> str:
    """The process whose CPU is compared: Kueue's one process, toposched's three (controller,
    webhook, extender: what Kueue's process does, its webhook and its pod ungating included)."""
    return "kueue" if engine.partition("@")[0] == "kueue" else "toposched (3 processes)"


# ---------------------------------------------------------------------- one engine


SHARED_PROCESSES = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")


def engine_pids(engine: str, run: Run) -> dict[str, list[int]]:
    """Process label -> pids whose CPU and memory are reported."""
    procs = run.cluster.state.processes
    # The API server's own CPU, for both engines: its time per call depends on it (issue 42).
    # etcd, the controller manager, the scheduler and KWOK too: where the machine's cores went.
    shared = {name: [procs[name].pid] for name in SHARED_PROCESSES if name in procs}
    shared["the bench's own process (writers and watches)"] = [os.getpid()]
    if engine == "kueue":
        return {"kueue": [run.extra.process.pid], **shared}
    pids = {"toposched-controller": [procs["toposched-controller"].pid]}
    # The webhook's HTTPS front is its child process (admission/front.py): counted with it.
    pids["toposched (3 processes)"] = [pid for name in TOPOSCHED_COMPONENTS if name in procs
                                       for pid in (procs[name].pid, *_children(procs[name].pid))]
    # each door on its own too (issue 42 item 3: what each loads)
    for name in TOPOSCHED_COMPONENTS[1:]:
        if name in procs:
            children = _children(procs[name].pid)
            pids[name] = [procs[name].pid, *children]
            if children:  # the webhook's Go front apart from its Python decider
                pids[f"{name}'s child processes"] = children
    return {**pids, **shared}


CONTROL_PLANE_CPU = {0}  # --pin: the control plane's processes
ENGINE_CPU = {1}  # --pin: the engine's processes and the bench's own (the users' side)


def pin_sides(pids: dict[str, list[int]]) -> None:
    """--pin: the control plane on one core, the engine and the bench's writers on the other, so
    neither side's work waits for a core the other holds (issue 42: does sharing two cores
    explain the slower creation through toposched?)."""
    control_plane = {pid for name in SHARED_PROCESSES for pid in pids.get(name, ())}
    engine = {pid for ps in pids.values() for pid in ps} - control_plane
    threads = sum(pin_process(pid, CONTROL_PLANE_CPU) for pid in control_plane)
    threads += sum(pin_process(pid, ENGINE_CPU) for pid in engine)
    print(f"   pinned {threads} threads: control plane on CPU {sorted(CONTROL_PLANE_CPU)}, engine and bench on "
          f"CPU {sorted(ENGINE_CPU)}", flush=True)


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in threads_of(pid):
        try:
            children += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue  # a thread that ended meanwhile
    return children


def refusal(exc: Exception) -> str:
    """One line: the API server's status code and message (e.g. a webhook that timed out)."""
    body = getattr(exc, "body", None)
    try:
        message = json.loads(body).get("message", "") if body else ""
    except (ValueError, TypeError, AttributeError):
        message = str(body)
    return f"{getattr(exc, 'status', '')} {message or str(exc)}"[:400]


# Who submits the burst: a user, as a team would (the dev stack's controller has a user of its own,
# whose writes skip toposched's job webhooks, so the admin would do too; a named user keeps the
# bench independent of that); impersonated by the admin, in system:masters.
SUBMITTER = "burst-submitter"


def as_user(run: Run) -> Any:
    client = run.cluster.api_client()
    client.set_default_header("Impersonate-User", SUBMITTER)
    client.set_default_header("Impersonate-Group", "system:masters")
    return client


def create_all(run: Run, rows: Sequence[Mapping[str, Any]], obs: Observation, writers: int) -> None:
    """Create every job, ``writers`` at a time (one API client each, as :data:`SUBMITTER`),
    recording when each create returned; a refused create is counted, not retried."""
    lock = threading.Lock()

    def write(chunk: Sequence[Mapping[str, Any]]) -> None:
        api = Api(as_user(run))
        for row in chunk:
            obj = job_object(row)
            try:
                api.create(JOBS, obj, obj["metadata"]["namespace"])
                done = time.monotonic()
                with lock:
                    obs.created[row["name"]] = done
            except Exception as exc:  # noqa: BLE001 - one refused job must not stop the burst
                with lock:
                    obs.creation_errors += 1
                    if obs.creation_errors <= 5:
                        print(f"   create {row['name']} failed: {refusal(exc)}", file=sys.stderr, flush=True)

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, [rows[i::writers] for i in range(writers)]))


def set_stop_policy(run: Run, policy: str) -> None:
    """Every ClusterQueue's ``spec.stopPolicy`` (``Hold``: no new admission, in Kueue and in
    toposched alike; ``None``: admit again)."""
    api = Api(run.kube)
    for cq in api.list(CLUSTER_QUEUES)["items"]:
        api.merge_patch(CLUSTER_QUEUES, cq["metadata"]["name"], {"spec": {"stopPolicy": policy}})


def create_then_release(run: Run, rows: Sequence[Mapping[str, Any]], obs: Observation, writers: int,
                        held: bool) -> None:
    """:func:`create_all`; with admission ``held``, the queues are released once every job exists
    (``--hold-admission``: job creation measured without the engine's admissions beside it)."""
    create_all(run, rows, obs, writers)
    if held:
        set_stop_policy(run, "None")


# Where each profiled component's work happens: the controller's reconcile pass and the phase
# that admits; the webhook's request handler. (py-spy --idle: waits on the API server count.)
PROFILE_FOCUS = {"toposched-controller": ("Controller.reconcile", "Controller.admit"),
                 "toposched-webhook": ("Decider._one",)}


class Profiler:
    """py-spy on toposched's controller and webhook for the burst (raw stacks, idle samples
    included, so a phase waiting on API writes shows up as wall-clock time)."""

    def __init__(self, directory: Path | None, pids: Mapping[str, int], label: str, idle: bool = True) -> None:
        """``idle``: sample waiting threads too (where the pass's wall time goes); without,
        only threads on a CPU (where the CPU goes)."""
        self.files = {name: directory / f"{label}-{name}.txt" for name in pids} if directory else {}
        self.procs: list[subprocess.Popen[bytes]] = []
        if directory is None:
            return
        directory.mkdir(parents=True, exist_ok=True)
        for name, pid in pids.items():
            self.procs.append(subprocess.Popen(
                ["py-spy", "record", "--pid", str(pid), "--rate", "50", "--format", "raw", "--nonblocking",
                 *(("--idle",) if idle else ()), "--output", str(self.files[name])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self) -> dict[str, list[str]]:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        return {name: profile_lines(path.read_text().splitlines(), PROFILE_FOCUS.get(name, ()))
                for name, path in self.files.items() if path.exists()}


def profile_lines(stacks: Sequence[str], focus: Sequence[str], top: int = 12) -> list[str]:
    """For each focus frame: the wall-clock seconds sampled under it (50 Hz) and how they split
    among its direct callees, then its top frames by inclusive share."""
    lines = []
    for frame in focus:
        total, children = child_shares(stacks, frame)
        if not total:
            lines.append(f"{frame}: no samples")
            continue
        lines.append(f"{frame}: {total / 50:.1f}s sampled; by callee: "
                     + ", ".join(f"{name} {100 * share:.0f} %" for name, share in children[:8]))
    if focus:
        total, frames = summarize_stacks(stacks, top=top, within=focus[0])
        lines += [f"  {100 * f.inclusive:5.1f} % incl {100 * f.own:5.1f} % own  {f.frame}" for f in frames]
    return lines


# etcd's own view of the burst (issue 42: its requests took 6x longer in toposched's cluster):
# Prometheus series read from its /metrics, summed over labels.
ETCD_OWN_SERIES = ("etcd_disk_backend_commit_duration_seconds_sum", "etcd_disk_backend_commit_duration_seconds_count",
                   "etcd_server_proposals_committed_total", "etcd_debugging_mvcc_watcher_total",
                   "etcd_debugging_mvcc_slow_watcher_total", "etcd_debugging_mvcc_pending_events_total",
                   "etcd_mvcc_db_total_size_in_bytes", "etcd_network_client_grpc_sent_bytes_total",
                   "etcd_network_client_grpc_received_bytes_total", "etcd_debugging_mvcc_events_total",
                   "etcd_mvcc_put_total", "etcd_mvcc_range_total", "etcd_mvcc_txn_total")


def etcd_counters(run: Run) -> dict[str, float]:
    """Totals of ETCD_OWN_SERIES now; {} when etcd's /metrics cannot be read."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{run.cluster.ports.etcd_client}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    except OSError as exc:
        print(f"   cannot read etcd's metrics: {exc}", file=sys.stderr, flush=True)
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in ETCD_OWN_SERIES:
            try:
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
            except ValueError:
                continue
    return out


def etcd_lines(before: Mapping[str, float], after: Mapping[str, float]) -> list[str]:
    """etcd's counters over the burst, gauges at its end."""
    gauges = ("etcd_debugging_mvcc_watcher_total", "etcd_debugging_mvcc_slow_watcher_total",
              "etcd_mvcc_db_total_size_in_bytes")
    lines = []
    for name in ETCD_OWN_SERIES:
        if name in after:
            value = after[name] if name in gauges else after[name] - before.get(name, 0.0)
            lines.append(f"etcd's own {name.removeprefix('etcd_'):60s} {value:14.1f}")
    commits = after.get(ETCD_OWN_SERIES[1], 0.0) - before.get(ETCD_OWN_SERIES[1], 0.0)
    if commits:
        mean = 1000 * (after[ETCD_OWN_SERIES[0]] - before.get(ETCD_OWN_SERIES[0], 0.0)) / commits
        lines.append(f"etcd's own backend commit mean {mean:.2f} ms over {commits:.0f} commits")
    return lines


def apiserver_metrics(run: Run) -> str:
    """kube-apiserver's /metrics (Prometheus text); "" when it cannot be read."""
    try:
        resp = run.kube.call_api("/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False,
                                 _request_timeout=30)[0]
        return str(resp.data.decode())
    except Exception as exc:  # noqa: BLE001 - a figure missing, not a failed run
        print(f"   cannot read the API server's metrics: {exc}", file=sys.stderr, flush=True)
        return ""


def run_engine(engine: str, shape: BurstShape, args: argparse.Namespace, round_index: int) -> EngineRun:
    directory = Path(tempfile.mkdtemp(prefix=f"burst-{engine.replace('/', '_')}-"))
    name, tree = split_engine(engine)
    base, controller_args = VARIANTS.get(name, (name, ()))
    print(f"-- round {round_index + 1}: {engine} (load {load_average()}), {shape.nodes} nodes, {shape.jobs} jobs, "
          f"{shape.pods} pods", flush=True)
    started = time.monotonic()
    with code_from(tree):
        run = start_run(base, directory, shape.description(), shape.queues(), controller_args=controller_args,
                        cluster_options={"node_lease_s": NODE_LEASE_S})
    rows = shape.rows()
    obs = Observation(0.0, {r["name"]: int(r["pods"]) for r in rows})
    reservations = ReservationWatch(run.api).start()
    binds = BindWatch(run.api, obs.pods_per_job.__contains__).start()
    print(f"   control plane, {shape.nodes} nodes and the engine up in {time.monotonic() - started:.0f}s", flush=True)
    pids = engine_pids(base, run)
    if args.pin:
        pin_sides(pids)
    profiler = Profiler(args.profile if base == "toposched" else None,
                        {name: run.cluster.state.processes[name].pid for name in PROFILED
                         if base == "toposched"}, f"round{round_index + 1}-{engine.replace('/', '_')}",
                        idle=not args.profile_cpu)
    try:
        load_start = load_average()
        before = {label: total_usage(ps) for label, ps in pids.items()}
        served_before = served_requests(apiserver_metrics(run))
        etcd_before = etcd_counters(run)
        if args.hold_admission:
            set_stop_policy(run, "Hold")
        obs.t0 = time.monotonic()
        creator = threading.Thread(target=create_then_release, args=(run, rows, obs, args.writers, args.hold_admission),
                                   daemon=True)
        creator.start()
        last_print = obs.t0
        while True:
            now = time.monotonic()
            obs.admitted = {j: t for j, t in dict(reservations.first).items() if j in obs.pods_per_job}
            bound = binds.bound()
            created = dict(obs.created)
            if (not creator.is_alive() and len(obs.admitted) >= len(created)
                    and bound >= sum(obs.pods_per_job[j] for j in created)):
                break
            if now - obs.t0 > args.timeout_s:
                print(f"   timeout after {args.timeout_s:.0f}s", file=sys.stderr, flush=True)
                break
            if now - last_print >= 15:
                last_print = now
                print(f"   {now - obs.t0:5.0f}s: created {len(obs.created)}, admitted {len(obs.admitted)}, "
                      f"pods bound {bound}/{shape.pods} (load {load_average()})", flush=True)
            time.sleep(0.5)
        observed = time.monotonic() - obs.t0
        after = {label: total_usage(ps) for label, ps in pids.items()}
        served = served_lines(served_since(served_requests(apiserver_metrics(run)), served_before))
        served += etcd_lines(etcd_before, etcd_counters(run))
        load_end = load_average()
        profile = profiler.stop()
        creator.join(timeout=5)
    finally:
        reservations.stop()
        binds.stop()
        run.stop()
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    obs.admitted = {j: t for j, t in dict(reservations.first).items() if j in obs.pods_per_job}
    obs.binds = {job: [t for t, _node in v] for job, v in binds.snapshot().items()}
    cpu = {label: after[label].since(before[label]) for label in pids}
    return EngineRun(round_index, engine, figures(obs, observed), cpu, load_start, load_end, profile, served)


# ---------------------------------------------------------------------- report


def secs(value: float) -> str:
    return "not all" if math.isnan(value) else f"{value:.1f}s"


def report(runs: Sequence[EngineRun], reference: str = "kueue") -> list[str]:
    lines = []
    for r in runs:
        f = r.figures
        lines.append(f"round {r.round + 1} {r.engine}: {f.jobs} jobs / {f.pods} pods created in {f.created_s:.1f}s "
                     f"({f.creation_errors} refused); admitted {f.admitted} (all in {secs(f.all_admitted_s)}, "
                     f"{f.admitted_per_s:.1f}/s), pods bound {f.pods_bound} (all in {secs(f.all_bound_s)}); per job "
                     f"admission p50 {f.admission_p50_s:.1f}s p99 {f.admission_p99_s:.1f}s, all pods bound p50 "
                     f"{f.bound_p50_s:.1f}s p99 {f.bound_p99_s:.1f}s; load {r.load_start} -> {r.load_end}")
        for label, usage in r.cpu.items():
            lines.append(f"   {label}: CPU {usage.cpu_ms / 1000:.1f}s ({r.cpu_per_admission_ms(label):.1f} ms per "
                         f"admitted Workload), RSS {usage.rss_mib:.0f} MiB at the end, "
                         f"peak {usage.peak_rss_mib:.0f} MiB, waited for a core {usage.run_wait_ms / 1000:.1f}s")
        if r.served:
            lines.append("   the API server's writes and webhook calls during the burst (count x mean = total):")
            lines += [f"     {line}" for line in r.served]
        for name, profile in r.profile.items():
            lines.append(f"   profile of {name} (py-spy --idle, 50 Hz):")
            lines += [f"     {line}" for line in profile]
    lines += ratio_lines(runs, reference)
    return lines


def ratio_lines(runs: Sequence[EngineRun], reference: str = "kueue") -> list[str]:
    """Every other engine / ``reference`` within each round (they ran back to back): toposched
    against Kueue, or new code against old (``--engines toposched@OLD,toposched``: the first)."""
    lines = []
    for round_index in sorted({r.round for r in runs}):
        same = {r.engine: r for r in runs if r.round == round_index}
        peer = same.get(reference)
        if peer is None:
            continue
        peer_process = headline_process(reference)
        for engine, r in same.items():
            if engine == reference:
                continue
            k, t = peer.figures, r.figures
            process = headline_process(engine)
            peer_cpu = peer.cpu_per_admission_ms(peer_process)
            alone = ""
            if "toposched-controller" in r.cpu:
                alone = f"; controller alone {ratio(r.cpu_per_admission_ms('toposched-controller'), peer_cpu):.2f}x"
            lines.append(
                f"round {round_index + 1} {engine}/{reference}: admitted/s "
                f"{ratio(t.admitted_per_s, k.admitted_per_s):.2f}x, "
                f"all admitted {ratio(t.all_admitted_s, k.all_admitted_s):.2f}x, all bound "
                f"{ratio(t.all_bound_s, k.all_bound_s):.2f}x, admission p50 "
                f"{ratio(t.admission_p50_s, k.admission_p50_s):.2f}x "
                f"p99 {ratio(t.admission_p99_s, k.admission_p99_s):.2f}x; created in "
                f"{ratio(t.created_s, k.created_s):.2f}x; CPU per admission "
                f"{ratio(r.cpu_per_admission_ms(process), peer_cpu):.2f}x "
                f"({process}{alone}); "
                f"peak RSS {ratio(r.cpu[process].peak_rss_mib, peer.cpu[peer_process].peak_rss_mib):.2f}x")
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="nodes and jobs times this (0.05: 250 nodes, 550 jobs)")
    ap.add_argument("--engines", default="kueue,toposched",
                    help="comma-separated; round 1 runs them in this order, round 2 reversed, ...")
    ap.add_argument("--rounds", type=int, default=2, help="rounds (each runs every engine once)")
    ap.add_argument("--teams", type=int, default=4, help="ClusterQueues (Kueue admits one head per queue a cycle)")
    ap.add_argument("--writers", type=int, default=16, help="threads creating the jobs")
    ap.add_argument("--timeout-s", type=float, default=3600, help="per engine, from the first create")
    ap.add_argument("--profile", type=Path, help="py-spy record toposched's controller and webhook into this directory")
    ap.add_argument("--profile-cpu", action="store_true",
                    help="with --profile: sample only threads on a CPU (where the CPU goes, not the wall time)")
    ap.add_argument("--json", type=Path, help="also write every run's figures here")
    ap.add_argument("--hold-admission", action="store_true",
                    help="every ClusterQueue on stopPolicy Hold until all jobs exist: creation through each engine's "
                         "webhook measured without its admissions and pods beside it (admission times then include "
                         "the hold)")
    ap.add_argument("--keep", action="store_true", help="keep each control plane's directory (logs)")
    ap.add_argument("--pin", action="store_true",
                    help="the control plane's processes on CPU 0, the engine's and the bench's own on CPU 1 "
                         "(needs 2 or more cores): creation without the two sides sharing cores")
    args = ap.parse_args(argv)
    if args.scale <= 0:
        ap.error("--scale must be positive")
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    allowed = ("kueue", "toposched", *VARIANTS)
    try:
        names = [split_engine(e)[0] for e in engines]
    except ValueError as exc:
        ap.error(f"--engines: {exc}")
    if not engines or any(n not in allowed for n in names):
        ap.error(f"--engines: choose from {', '.join(allowed)} (toposched ones may end in @DIR: that tree's code)")
    if args.rounds < 1 or args.teams < 1 or args.writers < 1:
        ap.error("--rounds, --teams and --writers must be at least 1")
    if args.pin and len(os.sched_getaffinity(0)) < 2:
        ap.error("--pin needs at least 2 cores")
    args.engines = engines
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # The driver's own watches hold every pod and Workload of the burst: a full collection here
    # would stall them and make the API server's watch cache wait on this process (k8s/gcpolicy.py).
    start_freezing(GcPolicy())

    shape = BurstShape(teams=args.teams).scaled(args.scale)
    print(f"burst x{args.scale:g}: {shape.nodes} nodes, {shape.single_jobs} single-pod + {shape.gang_jobs} "
          f"{shape.gang_pods}-pod jobs ({shape.pods} pods, {shape.gpus_needed} of {8 * shape.nodes} GPUs), "
          f"{shape.teams} teams; engines {', '.join(args.engines)}, {args.rounds} round(s)", flush=True)
    # Ratios against Kueue when it runs; else against the first engine (old code in an A/B).
    reference = "kueue" if "kueue" in args.engines else args.engines[0]
    runs = []
    for round_index in range(args.rounds):
        for engine in balanced_order(args.engines, round_index):
            runs.append(run_engine(engine, shape, args, round_index))
            print("\n".join(report(runs[-1:], reference)), flush=True)
    print("\n== summary")
    print("\n".join(report(runs, reference)))
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "cpu": {k: asdict(v) for k, v in r.cpu.items()}} for r in runs],
                                        indent=1))
    return 0


if __name__ == "__main__":
    # Its control planes never outlive it: stopped on SIGTERM/SIGINT/SIGHUP, ended with it on SIGKILL.
    sys.exit(run_owning_processes(main))
