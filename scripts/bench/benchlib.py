"""What the peer benchmarks (burst, gang, recovery, extender, kueue_perf) share: the order the
engines run in, the machine's load, a process's CPU and memory, ratios, a confidence interval
and the stopping rule built on it, and a summary of py-spy's raw stacks.

Everything here is pure or reads /proc only, so tests/unit/bench checks it without a cluster.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- order


def balanced_order(items: Sequence[T], round_index: int) -> list[T]:
    """The run order of ``items`` in round ``round_index``: as given in even rounds, reversed in
    odd ones (A B C, C B A, A B C, ...; for two engines A/B, B/A). Over every pair of rounds each
    item takes every position equally often on average, so a drift of the machine (a cluster
    still settling, a neighbour's job starting) cannot favour whichever runs first."""
    return list(items) if round_index % 2 == 0 else list(reversed(items))


def even_rounds(rounds: int) -> int:
    """``rounds`` rounded up to a whole number of forward/reverse pairs (1 stays 1: a quick look)."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    return rounds if rounds == 1 else rounds + rounds % 2


# ---------------------------------------------------------------------- old code against new


def split_engine(spec: str) -> tuple[str, Path | None]:
    """``toposched@/tmp/toposched-base`` -> (``toposched``, that directory): the engine's own
    processes (controller, webhook, extender) import toposched from that tree, so old and new
    code run as two engines of one invocation (an A/B on the same machine, order alternating).
    Without ``@``: the engine on this checkout's code."""
    name, sep, tree = spec.partition("@")
    if not sep:
        return spec, None
    path = Path(tree).expanduser().resolve()
    if not (path / "scheduler" / "cli.py").is_file():
        raise ValueError(f"{spec}: {path} holds no toposched tree (scheduler/cli.py)")
    return name, path


@contextmanager
def code_from(tree: Path | None) -> Iterator[None]:
    """While starting an engine: processes started inherit ``PYTHONPATH=tree`` and
    ``PYTHONSAFEPATH=1`` (so ``python -m`` does not put the working directory first), i.e. run
    the code of ``tree``. ``None``: nothing changes."""
    if tree is None:
        yield
        return
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONSAFEPATH")}
    os.environ["PYTHONPATH"], os.environ["PYTHONSAFEPATH"] = str(tree), "1"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------------- the machine


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg gives them ("?" off Linux)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


@dataclass(frozen=True)
class ProcessUsage:
    """CPU so far and memory of one process; all zero once it is gone."""

    user_ms: int = 0
    sys_ms: int = 0
    rss_mib: float = 0.0  # resident now
    peak_rss_mib: float = 0.0  # VmHWM: the most it was resident
    # Time its threads were runnable but waited for a core (/proc/<pid>/task/*/schedstat, 2nd
    # field): a process that is slow while using little CPU is either starved (this is high) or
    # waits on something else.
    run_wait_ms: int = 0

    @property
    def cpu_ms(self) -> int:
        return self.user_ms + self.sys_ms

    def __add__(self, other: ProcessUsage) -> ProcessUsage:
        return ProcessUsage(self.user_ms + other.user_ms, self.sys_ms + other.sys_ms,
                            self.rss_mib + other.rss_mib, self.peak_rss_mib + other.peak_rss_mib,
                            self.run_wait_ms + other.run_wait_ms)

    def since(self, earlier: ProcessUsage) -> ProcessUsage:
        """CPU spent between ``earlier`` and this reading; memory as read now."""
        return ProcessUsage(self.user_ms - earlier.user_ms, self.sys_ms - earlier.sys_ms, self.rss_mib,
                            self.peak_rss_mib, self.run_wait_ms - earlier.run_wait_ms)


def parse_proc_usage(stat: str, status: str) -> ProcessUsage:
    """A ProcessUsage from the text of /proc/<pid>/stat and /proc/<pid>/status. The command
    name in stat may hold spaces and parentheses, so the fields are counted after its last ')'."""
    fields = stat.rsplit(")", 1)[1].split()
    user, system = int(fields[11]), int(fields[12])
    kib = {line.split(":", 1)[0]: int(line.split()[1]) for line in status.splitlines()
           if line.startswith(("VmRSS:", "VmHWM:"))}
    return ProcessUsage(user * 1000 // TICKS_PER_S, system * 1000 // TICKS_PER_S,
                        kib.get("VmRSS", 0) / 1024, kib.get("VmHWM", 0) / 1024)


def threads_of(pid: int) -> list[Path]:
    """The ``/proc/<pid>/task`` entries of a process's live threads (none when it has gone)."""
    try:
        return list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []


def run_wait_ms(pid: int) -> int:
    """How long the live threads of ``pid`` have waited on a run queue (0 without schedstats)."""
    total_ns = 0
    for task in threads_of(pid):
        try:
            total_ns += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total_ns // 1_000_000


def pin_process(pid: int, cpus: set[int]) -> int:
    """Bind every thread of ``pid`` to ``cpus`` (threads it starts later inherit it); the number
    of threads bound (0 when the process has gone)."""
    bound = 0
    for task in threads_of(pid):
        try:
            os.sched_setaffinity(int(task.name), cpus)
            bound += 1
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return bound


def process_usage(pid: int) -> ProcessUsage:
    """The usage of a running process from /proc; all zero if it has gone."""
    try:
        usage = parse_proc_usage(Path(f"/proc/{pid}/stat").read_text(), Path(f"/proc/{pid}/status").read_text())
    except (OSError, IndexError, ValueError):
        return ProcessUsage()
    return replace(usage, run_wait_ms=run_wait_ms(pid))


def total_usage(pids: Iterable[int]) -> ProcessUsage:
    out = ProcessUsage()
    for pid in pids:
        out = out + process_usage(pid)
    return out


# ---------------------------------------------------------------------- figures


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator; NaN when either is NaN or the denominator is 0 (no figure to
    compare with is not a ratio of infinity)."""
    if denominator == 0 or math.isnan(numerator) or math.isnan(denominator):
        return float("nan")
    return numerator / denominator


# Two-sided 95 % critical values of Student's t for 1..30 degrees of freedom; beyond, the
# normal's 1.96 (the difference is under 2 % from 30 on). No scipy here.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


def t95(degrees_of_freedom: int) -> float:
    if degrees_of_freedom < 1:
        raise ValueError("a t interval needs at least two samples")
    return _T95[degrees_of_freedom - 1] if degrees_of_freedom <= len(_T95) else 1.96


@dataclass(frozen=True)
class Interval:
    """A mean and its two-sided 95 % confidence interval (Student's t over the samples)."""

    mean: float
    half_width: float
    samples: int

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def excludes(self, value: float) -> bool:
        return not self.low <= value <= self.high

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}] (n={self.samples})"


def mean_interval(samples: Sequence[float]) -> Interval:
    """The mean of ``samples`` with its 95 % t interval; an infinite half-width below two samples."""
    values = [float(s) for s in samples if not math.isnan(s)]
    if not values:
        return Interval(float("nan"), math.inf, 0)
    if len(values) == 1:
        return Interval(values[0], math.inf, 1)
    half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return Interval(statistics.fmean(values), half, len(values))


def resolved(interval: Interval, half_width: float, bounds: Sequence[float] = ()) -> bool:
    """Whether a measured difference is settled: its interval is at most ``half_width`` either
    side of the mean, or it already lies wholly on one side of every value in ``bounds`` (for a
    cost: 0, nothing, and the goal's threshold), so more rounds cannot change the verdict."""
    if interval.samples < 2:
        return False
    return interval.half_width <= half_width or (bool(bounds) and all(interval.excludes(b) for b in bounds))


# ---------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class FrameShare:
    frame: str  # "function (file.py)"
    inclusive: float  # share of samples with this frame anywhere on the stack
    own: float  # share of samples with this frame on top


def _stacks(lines: Iterable[str]) -> Iterable[tuple[list[str], int]]:
    """(frames root first, without line numbers; count) of each line of py-spy's raw output."""
    for line in lines:
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if stack and count_text.isdigit():
            yield [_frame_name(f) for f in stack.split(";") if f], int(count_text)


def summarize_stacks(lines: Iterable[str], top: int = 15, within: str | None = None) -> tuple[int, list[FrameShare]]:
    """(samples, the ``top`` frames by inclusive share) from py-spy's ``--format raw`` output
    (one ``frame;frame;...;frame count`` line per distinct stack, root first). ``within``: keep
    only stacks with a frame whose name contains it (e.g. the controller's pass), so shares are
    of that frame's time. Line numbers are dropped so a function counts once however many lines
    of it were sampled."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for frames, count in _stacks(lines):
        if within is not None and not any(within in f for f in frames):
            continue
        total += count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0) + count
    if not total:
        return 0, []
    ranked = sorted(inclusive.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return total, [FrameShare(f, n / total, own.get(f, 0) / total) for f, n in ranked]


def child_shares(lines: Iterable[str], parent: str) -> tuple[int, list[tuple[str, float]]]:
    """How the samples under the first frame named like ``parent`` split among its direct
    children (``(self)`` when it was on top): (samples under it, [(child, share)] largest first).
    With py-spy ``--idle`` this is where a phase's wall-clock time went, waits included."""
    counts: dict[str, int] = {}
    total = 0
    for frames, count in _stacks(lines):
        at = next((i for i, f in enumerate(frames) if parent in f), None)
        if at is None:
            continue
        total += count
        child = frames[at + 1] if at + 1 < len(frames) else "(self)"
        counts[child] = counts.get(child, 0) + count
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return total, [(c, n / total) for c, n in ranked]


def _frame_name(frame: str) -> str:
    """``run_cycle (scheduler/core/kueue/cycle.py:120)`` -> ``run_cycle (scheduler/core/kueue/cycle.py)``."""
    head, sep, tail = frame.rpartition(":")
    if sep and tail.rstrip(")").isdigit():
        return head + ")"
    return frame


# ---------------------------------------------------------------------- the API server's view


@dataclass(frozen=True)
class ServedRequests:
    """One series of kube-apiserver's latency histograms: how many and their total seconds."""

    count: float
    seconds: float

    @property
    def mean_ms(self) -> float:
        return ratio(1000 * self.seconds, self.count)


# The histograms read from kube-apiserver's /metrics: requests it served (by verb, resource,
# subresource) and the admission webhooks it called (by webhook name), each its _sum and _count.
REQUEST_SERIES = "apiserver_request_duration_seconds"
WEBHOOK_SERIES = "apiserver_admission_webhook_admission_duration_seconds"
# Where a slow request waits when the API server is not busy: its turn in API Priority and
# Fairness (per priority level), and etcd (per operation and type).
APF_WAIT_SERIES = "apiserver_flowcontrol_request_wait_duration_seconds"
ETCD_SERIES = "etcd_request_duration_seconds"


def _labels(text: str) -> dict[str, str]:
    out = {}
    for part in text.split('",'):
        key, _, value = part.partition('="')
        if key:
            out[key.strip(", ")] = value.rstrip('"')
    return out


def served_requests(exposition: str) -> dict[tuple[str, ...], ServedRequests]:
    """From kube-apiserver's Prometheus text: ("request", verb, resource, subresource) and
    ("webhook", name, operation) -> totals so far (the histogram's _sum and _count)."""
    sums: dict[tuple[str, ...], float] = {}
    counts: dict[tuple[str, ...], float] = {}
    for line in exposition.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        name, _, rest = line.partition("{")
        labels_text, _, value_text = rest.rpartition("}")
        try:
            value = float(value_text.split()[0])
        except (IndexError, ValueError):
            continue
        base, _, part = name.rpartition("_")
        if part not in ("sum", "count") or base not in (REQUEST_SERIES, WEBHOOK_SERIES, APF_WAIT_SERIES, ETCD_SERIES):
            continue
        labels = _labels(labels_text)
        if base == REQUEST_SERIES:
            if labels.get("verb") in ("WATCH", "CONNECT"):
                continue
            key: tuple[str, ...] = ("request", labels.get("verb", ""), labels.get("resource", ""),
                                    labels.get("subresource", ""))
        elif base == WEBHOOK_SERIES:
            key = ("webhook", labels.get("name", ""), labels.get("operation", ""))
        elif base == APF_WAIT_SERIES:
            key = ("apf-wait", labels.get("priority_level", ""), labels.get("flow_schema", ""))
        else:
            key = ("etcd", labels.get("operation", ""), labels.get("type", ""))
        target = sums if part == "sum" else counts
        target[key] = target.get(key, 0.0) + value
    return {key: ServedRequests(counts.get(key, 0.0), sums.get(key, 0.0)) for key in counts}


def served_since(after: dict[tuple[str, ...], ServedRequests],
                 before: dict[tuple[str, ...], ServedRequests]) -> dict[tuple[str, ...], ServedRequests]:
    """The requests served between two scrapes (series that did not move are left out)."""
    out = {}
    for key, now in after.items():
        then = before.get(key, ServedRequests(0.0, 0.0))
        if now.count > then.count:
            out[key] = ServedRequests(now.count - then.count, now.seconds - then.seconds)
    return out


def served_lines(served: dict[tuple[str, ...], ServedRequests], top: int = 12) -> list[str]:
    """The busiest writes and every webhook, one line each: count, mean latency, total seconds."""
    writes = sorted(((k, v) for k, v in served.items() if k[0] == "request" and k[1] not in ("GET", "LIST")),
                    key=lambda kv: -kv[1].seconds)[:top]
    hooks = sorted(((k, v) for k, v in served.items() if k[0] == "webhook"), key=lambda kv: -kv[1].seconds)
    lines = [f"{' '.join(p for p in k[1:] if p):40s} {v.count:7.0f} x {v.mean_ms:7.1f} ms = {v.seconds:7.1f} s"
             for k, v in writes]
    lines += [f"webhook {' '.join(k[1:]):32s} {v.count:7.0f} x {v.mean_ms:7.1f} ms = {v.seconds:7.1f} s"
              for k, v in hooks]
    for kind, label in (("apf-wait", "APF wait"), ("etcd", "etcd")):
        busiest = sorted(((k, v) for k, v in served.items() if k[0] == kind), key=lambda kv: -kv[1].seconds)[:8]
        lines += [f"{label} {' '.join(p for p in k[1:] if p):31s} {v.count:7.0f} x {v.mean_ms:7.1f} ms "
                  f"= {v.seconds:7.1f} s" for k, v in busiest]
    return lines
