#!/usr/bin/env python3
"""Kueue's own scheduler performance test, run against the real Kueue v0.17.0 and against
toposched, one after the other, each on a fresh local control plane (issue 18).

What runs (nothing of Kueue is copied into this repository):

- Kueue's runner and checker, ``test/performance/scheduler/{runner,checker}`` of the
  ``sigs.k8s.io/kueue`` v0.17.0 module in the Go module cache, built once in the wrapper
  module ``scripts/kueueperf`` (``go build`` / ``go test -c``) into
  ``~/.cache/toposched/kueue-perf-v0.17.0/``. The runner, pointed at a cluster by a kubeconfig
  (Kueue's ``run-*-performance-scheduler-in-cluster`` mode), creates the nodes (TAS), flavors,
  topology, cohorts, ClusterQueues, LocalQueues and ownerless Workloads itself, marks each
  Workload Finished after its runtime, and writes ``summary.yaml``. Its test utilities look for
  Kueue's Makefile at start-up: ``PROJECT_DIR`` is set to ``<kueue module>/Makefile``.
- The checker (Kueue's ``TestScalability``) compares the summary and a command-stats file with
  a rangespec. Kueue measures the wall time of its minimal Kueue process; here the wall time is
  the runner's, from its start until its summary is written (its own clean-up excluded), and
  user/sys CPU and max RSS are the engine process's.

The runner's nodes are kept Ready by turning kube-controller-manager's node lifecycle
controller off for this bench (``LocalCluster(node_lifecycle=False)``), and KWOK is not started.
Why: the runner creates its Nodes and writes their status (Ready=True) itself, once; nothing
heartbeats them, so with the lifecycle controller on they turn Ready=Unknown after the monitor
grace and get the unreachable taints, and no engine admits onto them (the first toposched run
stalled with 28 of 30 Workloads pending). Putting them under KWOK instead would need our KWOK
label on every Node, added by a side process racing the runner's own status writes; the runner
makes no pods, so a fake kubelet has nothing else to do. Both engines get the same control plane.

Printed per engine: wall time, per-class average time to admission, ClusterQueue usage (the
checker's formula: cpuUsed / (nominalQuota x elapsed)), evictions, engine CPU and RSS, the
checker's verdict against the rangespec; then the ratios toposched/Kueue. ``--scale`` scales every
workloadsSet's count (quick runs); at a scale other than 1 the rangespec verdict is only
indicative (Kueue's thresholds are for the full configuration).

    python scripts/bench/kueue_perf.py --config tas --scale 0.05
    python scripts/bench/kueue_perf.py --config baseline --engines toposched
    python scripts/bench/kueue_perf.py --config path/to/generator.yaml --rangespec path/to/rangespec.yaml
"""

from __future__ import annotations

import argparse
import copy
import csv
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.devcluster import binaries  # noqa: E402
from scheduler.devcluster.apply import apply_objects  # noqa: E402
from scheduler.devcluster.kueue import KueueCluster, kueue_module_dir, start_kueue  # noqa: E402
from scheduler.devcluster.processes import run_owning_processes  # noqa: E402
from scheduler.devcluster.stack import StackPorts, start_toposched  # noqa: E402
from scripts.bench.benchlib import code_from, load_average, process_usage, ratio, split_engine  # noqa: E402

# toposched-serial: the controller with one API write at a time (before the writes of a phase
# ran side by side), for an A/B of that change in one run.
CONTROLLER_ARGS = {"toposched": (), "toposched-serial": ("--concurrent-writes", "1")}
# A toposched engine may end in @DIR: that tree's code (benchlib.split_engine), old against new.
ENGINES = ("kueue", *CONTROLLER_ARGS)
PERF_PACKAGE = "sigs.k8s.io/kueue/test/performance/scheduler"
CONFIGS_DIR = "test/performance/scheduler/configs"


# ---------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class BenchConfig:
    generator: Path
    rangespec: Path | None
    tas: bool


def resolve_config(choice: str, rangespec: str | None, module_dir: Path) -> BenchConfig:
    """``tas`` / ``baseline``: Kueue's own files in the module cache; else a generator file
    (its rangespec: ``--rangespec``, else a ``rangespec.yaml`` beside it, else none)."""
    if choice in ("tas", "baseline"):
        base = module_dir / CONFIGS_DIR / choice
        generator, default_range = base / "generator.yaml", base / "rangespec.yaml"
    else:
        generator = Path(choice)
        default_range = generator.with_name("rangespec.yaml")
    if not generator.is_file():
        raise SystemExit(f"no generator config at {generator}")
    spec = Path(rangespec) if rangespec else (default_range if default_range.is_file() else None)
    tas = bool((yaml.safe_load(generator.read_text()) or {}).get("topology"))
    return BenchConfig(generator, spec, tas)


def scaled(config: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """The generator config with every workloadsSet's ``count`` times ``factor`` (at least 1)."""
    out = copy.deepcopy(dict(config))
    for cohort in out.get("cohorts") or ():
        for queue_set in cohort.get("queuesSets") or ():
            for workload_set in queue_set.get("workloadsSets") or ():
                workload_set["count"] = max(1, round(int(workload_set["count"]) * factor))
    return out


def workload_total(config: Mapping[str, Any]) -> int:
    return sum(int(c.get("count", 1)) * int(q.get("count", 1)) * int(w["count"])
               for c in config.get("cohorts") or () for q in c.get("queuesSets") or ()
               for w in q.get("workloadsSets") or ())


# ---------------------------------------------------------------------- binaries


@dataclass(frozen=True)
class PerfBinaries:
    runner: Path
    checker: Path


def ensure_perf_binaries() -> PerfBinaries:
    """Kueue's runner and checker, built from the module cache the first time only."""
    bin_dir = binaries.cache_root() / f"kueue-perf-{binaries.KUEUE_VERSION}" / "bin"
    module = binaries.repo_root() / "scripts" / "kueueperf"
    runner, checker = bin_dir / "runner", bin_dir / "checker.test"
    if not runner.is_file():
        binaries.go_build(module, [f"{PERF_PACKAGE}/runner"], bin_dir,
                          f"Kueue {binaries.KUEUE_VERSION} performance runner")
    if not checker.is_file():
        binaries.go_test_build(module, f"{PERF_PACKAGE}/checker", checker,
                               f"Kueue {binaries.KUEUE_VERSION} performance checker")
    return PerfBinaries(runner, checker)


# ---------------------------------------------------------------------- one engine


@dataclass
class EngineResult:
    engine: str
    ok: bool
    wall_ms: int = 0
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)  # workload class -> summary
    cq_usage: dict[str, float] = field(default_factory=dict)  # CQ class -> usage %
    cpu_user_ms: int = 0
    cpu_sys_ms: int = 0
    max_rss_mib: float = 0.0
    verdict: str = "not checked"
    failures: list[str] = field(default_factory=list)
    load: str = ""
    out_dir: str = ""
    # The runner's own delay: from its seeing Admitted to its Finished write, less the runtime
    # (class -> (p50, p90) ms). Quota is held that long, so it bounds every engine's throughput.
    finish_lag: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Write requests the API server served during the run, "resource[/subresource] VERB" -> count
    # (runner and engine together; the runner's share is the same for both engines).
    api_writes: dict[str, int] = field(default_factory=dict)


def kueue_env() -> dict[str, str]:
    """Kueue's test utilities (imported by the runner and the checker) look for Kueue's
    Makefile at start-up: ``PROJECT_DIR`` names a file in the module directory."""
    return dict(os.environ, PROJECT_DIR=str(kueue_module_dir() / "Makefile"))


def cq_usage(summary: Mapping[str, Any]) -> dict[str, float]:
    """Per ClusterQueue class, usage % as the checker computes it."""
    out = {}
    for name, group in (summary.get("clusterQueueClasses") or {}).items():
        first, last = _parse_time(group["firstEventTime"]), _parse_time(group["lastEventTime"])
        elapsed_ms = (last - first) * 1000
        quota = int(group.get("nominalQuota") or 0)
        out[name] = float(group.get("cpuUsed") or 0) * 100 / (quota * elapsed_ms) if quota and elapsed_ms else 0.0
    return out


def runtimes_ms(config: Mapping[str, Any]) -> dict[str, int]:
    """Workload class -> its runtime, from the generator config."""
    return {str(wl["className"]): int(wl.get("runtimeMs") or 0)
            for cohort in config.get("cohorts") or () for queue_set in cohort.get("queuesSets") or ()
            for workload_set in queue_set.get("workloadsSets") or () for wl in workload_set.get("workloads") or ()}


def finish_lag(wl_states: Path, runtimes: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Per class, p50 and p90 of (ms to finish - ms to admitted - runtime) from the runner's
    ``wlStates.csv``."""
    lags: dict[str, list[int]] = {}
    if not wl_states.exists():
        return {}
    with wl_states.open() as f:
        for row in csv.DictReader(f):
            admitted, finished = int(row["ms to admitted"] or 0), int(row["ms to finish"] or 0)
            if admitted > 0 and finished > 0:
                name = row["class name"]
                lags.setdefault(name, []).append(finished - admitted - runtimes.get(name, 0))
    for v in lags.values():
        v.sort()
    return {name: (v[len(v) // 2], v[9 * len(v) // 10]) for name, v in lags.items()}


def api_writes(cluster: KueueCluster) -> dict[str, int]:
    """The API server's write requests so far, from its ``apiserver_request_total`` metric."""
    text = cluster.api_client().call_api("/metrics", "GET", auth_settings=["BearerToken"],
                                         _preload_content=False)[0].data.decode()
    out: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.rindex("}")].split(","))
        labels = {k: v.strip('"') for k, v in labels.items()}
        if labels.get("verb") not in ("POST", "PUT", "PATCH", "DELETE", "APPLY"):
            continue
        key = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
        key = f"{key} {labels['verb']}"
        out[key] = out.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


def admitted_counts(classes: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """(Workloads admitted, admissions) from the summary's classes: every recorded Workload was
    admitted at least once, and each eviction is followed by one more admission (the runner's
    Workloads are requeued, never deactivated)."""
    workloads = sum(int(c.get("count") or 0) for c in classes.values())
    return workloads, workloads + sum(int(c.get("totalEvictions") or 0) for c in classes.values())


def cpu_per_admitted_ms(result: EngineResult) -> float:
    """The engine's CPU (user + sys) per admitted Workload, in ms; NaN without admissions."""
    return ratio(result.cpu_user_ms + result.cpu_sys_ms, admitted_counts(result.classes)[0])


def _parse_time(value: Any) -> float:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    text = str(value).replace("Z", "+00:00")
    head, _, rest = text.partition(".")
    if rest:  # Go writes nanoseconds; Python parses at most microseconds
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits):]
        text = f"{head}.{digits[:6]}{zone}"
    return dt.datetime.fromisoformat(text).timestamp()


def start_engine(engine: str, cluster: KueueCluster) -> int:
    """Start ``engine`` on ``cluster``; the pid whose CPU and memory are reported."""
    if engine == "kueue":
        return start_kueue(cluster).process.pid
    name, tree = split_engine(engine)
    # Only the controller: the runner makes Workloads, never Jobs or pods, so toposched's
    # webhook and extender would have nothing to do (Kueue's own webhooks do run on its side).
    apply_objects(cluster.api_client(), [{"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": "toposched-system"}}])
    with code_from(tree):
        start_toposched(cluster, StackPorts.dynamic(), components=("toposched-controller",),
                        controller_args=CONTROLLER_ARGS[name])
    return cluster.state.processes["toposched-controller"].pid


def run_engine(engine: str, bins: PerfBinaries, config: BenchConfig, generator: Path, work: Path,
               timeout: str, qps: int, profile: str | None) -> EngineResult:
    out_dir = work / engine.replace("/", "_")
    out_dir.mkdir(parents=True, exist_ok=True)
    cluster = KueueCluster(work / f"{engine.replace('/', '_')}-cluster", with_kwok=False,
                           node_lifecycle=False).start()
    result = EngineResult(engine, ok=False, out_dir=str(out_dir))
    profiler: subprocess.Popen[bytes] | None = None
    try:
        pid = start_engine(engine, cluster)
        if profile and engine != "kueue":
            profiler = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--rate", "50", "--format", "raw",
                                         "--output", str(out_dir / "pyspy.txt"), "--nonblocking"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env = dict(kueue_env(), KUBECONFIG=str(cluster.kubeconfig))
        argv = [str(bins.runner), f"--o={out_dir}", f"--generatorConfig={generator}", f"--qps={qps}",
                f"--burst={qps * 2}", f"--timeout={timeout}", "--zap-log-level=info"]
        summary_path = out_dir / "summary.yaml"
        started = time.time()
        with (out_dir / "runner.log").open("wb") as log:
            runner = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
            while runner.poll() is None and not summary_path.exists():
                time.sleep(0.2)
            usage = process_usage(pid)
            result.cpu_user_ms, result.cpu_sys_ms, result.max_rss_mib = usage.user_ms, usage.sys_ms, usage.peak_rss_mib
            result.load = load_average()
            try:
                result.api_writes = api_writes(cluster)
            except Exception as exc:  # noqa: BLE001 - a diagnostic; the run's figures stand without it
                print(f"   (API server metrics not read: {exc})", flush=True)
            runner.wait()
        if not summary_path.exists():
            result.failures.append(f"runner exited {runner.returncode} without a summary (see {out_dir}/runner.log)")
            return result
        result.wall_ms = int((summary_path.stat().st_mtime - started) * 1000)
        summary = yaml.safe_load(summary_path.read_text()) or {}
        result.classes = dict(summary.get("workloadClasses") or {})
        result.cq_usage = cq_usage(summary)
        result.finish_lag = finish_lag(out_dir / "wlStates.csv", runtimes_ms(yaml.safe_load(generator.read_text())))
        result.ok = True
        (out_dir / "cmdStats.yaml").write_text(yaml.safe_dump({
            "wallMs": result.wall_ms, "userMs": result.cpu_user_ms, "sysMs": result.cpu_sys_ms,
            "maxrss": int(result.max_rss_mib * 1024)}))
        if config.rangespec is not None:
            result.verdict, result.failures = check(bins, out_dir, config.rangespec)
        return result
    finally:
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT, not SIGTERM
            profiler.wait(timeout=60)
        cluster.stop()


def check(bins: PerfBinaries, out_dir: Path, rangespec: Path) -> tuple[str, list[str]]:
    """Kueue's checker on the run's summary: PASS or FAIL and its failure lines."""
    proc = subprocess.run([str(bins.checker), "-test.v", f"-summary={out_dir / 'summary.yaml'}",
                           f"-cmdStats={out_dir / 'cmdStats.yaml'}", f"-range={rangespec}"],
                          capture_output=True, text=True, check=False, env=kueue_env())
    (out_dir / "checker.log").write_text(proc.stdout + proc.stderr)
    failures = [line.strip() for line in proc.stdout.splitlines()
                if "checker_test.go" in line and ("greater" in line or "less" in line or "more" in line
                                                  or "Unexpected" in line or "Invalid" in line)]
    return ("PASS" if proc.returncode == 0 else "FAIL"), failures


# ---------------------------------------------------------------------- report


def report(results: Sequence[EngineResult], rangespec: Mapping[str, Any]) -> str:
    lines = []
    limits = rangespec.get("wlClassesMaxAvgTimeToAdmissionMs") or {}
    for r in results:
        lines.append(f"== {r.engine}: {'ok' if r.ok else 'FAILED'}  wall {r.wall_ms / 1000:.1f} s  "
                     f"(limit {((rangespec.get('cmd') or {}).get('maxWallMs') or 0) / 1000:.0f} s)  "
                     f"engine CPU user {r.cpu_user_ms / 1000:.1f} s sys {r.cpu_sys_ms / 1000:.1f} s  "
                     f"RSS {r.max_rss_mib:.0f} MiB  load {r.load}")
        for name in sorted(r.classes):
            c = r.classes[name]
            admission = c.get("averageTimeToAdmissionMs", 0)
            lag = r.finish_lag.get(name)
            lines.append(f"   {name:24s} n={c.get('count', 0):5d}  avg admission {admission:7d} ms"
                         f" (limit {limits.get(name, '-')})  evictions {c.get('totalEvictions', 0)}"
                         + (f"  runner finish lag p50 {lag[0]} p90 {lag[1]} ms" if lag else ""))
        for name, usage in sorted(r.cq_usage.items()):
            lines.append(f"   CQ class {name}: usage {usage:.2f} % (min "
                         f"{(rangespec.get('clusterQueueClassesMinUsage') or {}).get(name, '-')})")
        workloads, admissions = admitted_counts(r.classes)
        if workloads:
            lines.append(f"   engine CPU per admitted Workload {cpu_per_admitted_ms(r):.1f} ms "
                         f"({workloads} Workloads, {admissions} admissions with re-admissions after evictions)")
        if r.api_writes:
            top = sorted(r.api_writes.items(), key=lambda kv: -kv[1])[:8]
            lines.append(f"   API writes {sum(r.api_writes.values())}: " + ", ".join(f"{k} {v}" for k, v in top))
        lines.append(f"   checker: {r.verdict}" + "".join(f"\n     {f}" for f in r.failures))
    by_engine = {r.engine: r for r in results if r.ok}
    for variant in (e for e in by_engine if "kueue" in by_engine and e != "kueue"):
        k, t = by_engine["kueue"], by_engine[variant]
        lines.append(f"== {variant} / Kueue")
        lines.append(f"   wall {t.wall_ms / max(k.wall_ms, 1):.2f}x  engine CPU "
                     f"{(t.cpu_user_ms + t.cpu_sys_ms) / max(k.cpu_user_ms + k.cpu_sys_ms, 1):.2f}x  "
                     f"CPU per admitted Workload {ratio(cpu_per_admitted_ms(t), cpu_per_admitted_ms(k)):.2f}x")
        for name in sorted(set(k.classes) & set(t.classes)):
            ka = k.classes[name].get("averageTimeToAdmissionMs", 0)
            ta = t.classes[name].get("averageTimeToAdmissionMs", 0)
            lines.append(f"   {name:24s} admission {ta / max(ka, 1):.2f}x ({ta} vs {ka} ms)")
        for name in sorted(set(k.cq_usage) & set(t.cq_usage)):
            lines.append(f"   CQ class {name}: usage {t.cq_usage[name]:.2f} % vs {k.cq_usage[name]:.2f} %")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="tas", help="tas | baseline | PATH to a runner generator config")
    p.add_argument("--rangespec", help="rangespec for the checker (default: Kueue's, or one beside PATH)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every workloadsSet count (quick runs: 0.05)")
    p.add_argument("--engines", default="kueue,toposched", help="comma-separated, run in this order")
    p.add_argument("--timeout", default="20m", help="the runner's maximum record time (Go duration)")
    p.add_argument("--qps", type=int, default=1000, help="the runner's client QPS (burst: twice)")
    p.add_argument("--profile", action="store_true", help="py-spy record the toposched controller (raw stacks)")
    p.add_argument("--out", help="keep artifacts here (default: a temporary directory, removed)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    args = p.parse_args(argv)
    if args.scale <= 0:
        p.error("--scale must be positive")
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    try:
        names = [split_engine(e)[0] for e in engines]
    except ValueError as exc:
        p.error(f"--engines: {exc}")
    if not engines or any(n not in ENGINES for n in names):
        p.error(f"--engines: choose from {', '.join(ENGINES)} (toposched ones may end in @DIR: that tree's code)")
    args.engines = engines
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    config = resolve_config(args.config, args.rangespec, kueue_module_dir())
    bins = ensure_perf_binaries()
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="kueue-perf-"))
    work.mkdir(parents=True, exist_ok=True)
    generator_config = scaled(yaml.safe_load(config.generator.read_text()), args.scale)
    generator = work / "generator.yaml"
    generator.write_text(yaml.safe_dump(generator_config, sort_keys=False))
    rangespec = yaml.safe_load(config.rangespec.read_text()) if config.rangespec else {}
    print(f"config {config.generator} x{args.scale}: {workload_total(generator_config)} workloads; "
          f"rangespec {config.rangespec}; artifacts {work}", flush=True)
    try:
        results = []
        for engine in args.engines:
            print(f"-- running {engine} (load {load_average()})", flush=True)
            results.append(run_engine(engine, bins, config, generator, work, args.timeout, args.qps,
                                      "pyspy" if args.profile else None))
        print(report(results, rangespec))
        if args.json:
            Path(args.json).write_text(json.dumps([r.__dict__ for r in results], indent=1))
        return 0 if all(r.ok for r in results) else 1
    finally:
        if not args.out:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    # Its control planes never outlive it: stopped on SIGTERM/SIGINT/SIGHUP, ended with it on SIGKILL.
    sys.exit(run_owning_processes(main))
