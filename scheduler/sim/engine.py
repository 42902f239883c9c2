"""The simulator: virtual time around ``run_cycle``, driven as the controller drives it.

Events (arrival, completion, node failure, node recovery) are processed in time order; at
each instant the loop runs admission cycles until one makes no progress (nothing admitted,
preempted, evicted or newly parked), then jumps to the next event. Between cycles it keeps a
``queueing.QueueState`` like the controller: ``park`` every Pending with requeue
"inadmissible" on a BestEffortFIFO ClusterQueue, ``forget`` on Admit, ``release`` of the cohort
tree when a workload there finishes or is evicted/preempted, ``release`` of everything when a
node recovers (capacity appeared).

The cluster it runs on is ``sim/cluster.py`` (the decisions are applied to it by the
controller's own ``adapter.apply.apply_decision``, evictions hold their reservation for
``eviction_delay_s``); node failures are decided by the controller's own pure functions
(``sim/node_failures.py``).

By default a cycle takes no virtual time (``cycle_cost="zero"``); ``"measured"`` advances the
clock by each cycle's wall time (scripts/bench/admission.py).
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from scheduler.adapter.apply import apply_decisions
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.failures import RequeueBackoff, StormPolicy
from scheduler.core.placement.fragmentation import whole_free_leaves
from scheduler.sim.cluster import SimCluster
from scheduler.sim.model import Progress, SimFailure, SimJob, SimResult, World
from scheduler.sim.node_failures import SimNodeFailures
from scheduler.sim.runtime import PRESETS, RunTimeModel

MAX_CYCLES_PER_INSTANT = 10_000


class SimulationStopped(Exception):
    """``should_stop`` said so (the gRPC call that asked for the simulation was cancelled)."""


class Simulator:
    def __init__(self, world: World, jobs: Sequence[SimJob], failures: Sequence[SimFailure] = (), *,
                 solver: str = "greedy", time_budget_s: float = 0.1, cycle_cost: str = "zero",
                 horizon_s: float | None = None, progress: Callable[[Progress], None] | None = None,
                 progress_every_s: float = 0.0, eviction_delay_s: float = 30.0,
                 requeue_backoff: RequeueBackoff | None = None, storm_policy: StormPolicy | None = None,
                 storm_guard: bool = True, domain_preemption: bool = True,
                 preemption_budget_s: float = 0.5, should_stop: Callable[[], bool] | None = None,
                 run_time: RunTimeModel = PRESETS["off"]) -> None:
        """``requeue_backoff`` and ``storm_policy`` default to the controller's defaults (its
        ``--node-failure-requeue-*`` and ``--eviction-storm-*`` flags); ``storm_guard=False``
        turns the guard off. ``preemption_budget_s``: CP-SAT's budget per victim search (the
        cycle's default). ``should_stop`` is asked before every simulated instant and cycle;
        True ends :meth:`run` with :class:`SimulationStopped`. ``run_time``: how a multi-node
        job's placement stretches its run time (sim/runtime.py; off: the trace durations)."""
        if cycle_cost not in ("zero", "measured"):
            raise ValueError(f"cycle_cost must be 'zero' or 'measured', got {cycle_cost!r}")
        self.world = world
        self.jobs = {j.key: j for j in jobs}
        if len(self.jobs) != len(jobs):
            raise ValueError("two jobs have the same namespace/name")
        self.failures = sorted(failures, key=lambda f: (f.at, f.node))
        known = {n.name for n in world.nodes}
        for f in self.failures:
            if f.node not in known:
                raise ValueError(f"failure at {f.at:g}s: no node named {f.node!r} in the cluster")
        self.cycle_cost = cycle_cost
        # The Snapshot fields of this run (domain_preemption: preemption/strategies.py).
        self.settings: dict[str, Any] = {"solver": solver, "time_budget_s": time_budget_s,
                                         "domain_preemption": domain_preemption,
                                         "preemption_budget_s": preemption_budget_s}
        self.should_stop = should_stop
        self.horizon_s = horizon_s
        self.cluster = SimCluster(world, self.jobs, eviction_delay_s, run_time)
        self.node_failures = SimNodeFailures(
            self.cluster, requeue_backoff if requeue_backoff is not None else RequeueBackoff(),
            (storm_policy if storm_policy is not None else StormPolicy()) if storm_guard else None)
        self.progress_cb, self.progress_every_s = progress, progress_every_s
        self.cycles = 0
        self._last_progress = float("-inf")
        self.gpu_used_s = self.gpu_avail_s = 0.0
        self.cq_integral: dict[str, float] = defaultdict(float)
        self.samples: list[tuple[float, int, int, int]] = []
        self.free_domains: list[tuple[float, tuple[int, ...]]] = []

    @property
    def now(self) -> float:
        return self.cluster.now

    # ------------------------------------------------------------------ cycle
    def _cycle(self) -> bool:
        """One admission cycle on the cluster as it is now, its decisions applied as the
        controller applies them; whether anything changed."""
        c = self.cluster
        t0 = time.perf_counter()
        decisions = run_cycle(c.snapshot(**self.settings))
        spent = time.perf_counter() - t0
        self.cycles += 1
        if self.cycle_cost == "measured":
            self._advance(self.now + spent)
        c.applying()
        apply_decisions(c, c.state, self.world.cluster_queues, decisions)
        return c.progress

    # ------------------------------------------------------------------ accounting
    def _advance(self, to: float) -> None:
        c = self.cluster
        dt = to - c.now
        if dt > 0:
            self.gpu_used_s += c.gpus_used() * dt
            self.gpu_avail_s += c.gpus_healthy * dt
            for w in c.admitted.values():
                self.cq_integral[w.cluster_queue] += sum(w.usage.values()) * dt
        c.now = max(c.now, to)

    def _sample(self) -> None:
        c = self.cluster
        point = (c.now, c.gpus_used(), c.gpus_healthy, len(c.pending))
        free = (c.now, self._whole_free_domains())
        if self.samples and self.samples[-1][0] == c.now:
            self.samples[-1] = point
            self.free_domains[-1] = free
        else:
            self.samples.append(point)
            self.free_domains.append(free)

    def _whole_free_domains(self) -> tuple[int, ...]:
        """Domains of the first TAS tree with nothing in use, per level above the leaves."""
        tree = next(iter(self.cluster.trees.values()), None)
        if tree is None or tree.n_leaves == 0:
            return ()
        whole = whole_free_leaves(tree, tree.free)
        sizes = tree.subtree_sums(np.ones(tree.n_leaves, dtype=np.int64))
        sums = tree.subtree_sums(whole)
        return tuple(int((sums[lv] == sizes[lv]).sum()) for lv in range(len(tree.levels) - 1))

    def _report(self, force: bool = False) -> None:
        if self.progress_cb is None:
            return
        if not force and self.progress_every_s and self.now - self._last_progress < self.progress_every_s:
            return
        self._last_progress = self.now
        c = self.cluster
        self.progress_cb(Progress(c.now, c.submitted, c.ever_admitted, c.finished, len(c.pending), c.preemptions,
                                  c.gpus_used() / c.gpus_healthy if c.gpus_healthy else 0.0, len(self.jobs)))

    # ------------------------------------------------------------------ run
    def _check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise SimulationStopped(f"stopped at simulated time {self.cluster.now:g}s after {self.cycles} cycles")

    def _handle(self, kind: str, key: str) -> None:
        """One event of the queue."""
        c = self.cluster
        if kind == "arrive":
            c.arrive(key)
        elif kind in ("complete", "released"):
            k, gen = key.rsplit("#", 1)
            (c.complete if kind == "complete" else c.released)(k, int(gen))
        elif kind == "fail":
            self.node_failures.fail(key)
        elif kind == "recover":
            self.node_failures.recover(key)
        elif kind == "backoff-over":
            c.state.release(None)
        elif kind == "wake":
            c.state.release_due(c.now)

    def settle(self) -> None:
        """One instant: every event due now, then cycles until one makes no progress. The
        multi-cluster co-simulation (sim/multicluster.py) drives several clusters by it."""
        c = self.cluster
        self._check_stop()
        if c.events and c.events[0][0] <= c.now:
            while c.events and c.events[0][0] <= c.now:
                _t, _s, kind, key = heapq.heappop(c.events)
                self._handle(kind, key)
            if self.node_failures.changed:
                self.node_failures.decide()
        for _ in range(MAX_CYCLES_PER_INSTANT):
            self._check_stop()
            if not c.pending or not self._cycle():
                break

    def advance(self, to: float) -> None:
        """Move the clock to ``to`` (accounting GPU time on the way)."""
        self._advance(to)

    def run(self) -> SimResult:
        wall0 = time.perf_counter()
        c = self.cluster
        for job in sorted(self.jobs.values(), key=lambda j: (j.submit_at, j.key)):
            c.push(job.submit_at, "arrive", job.key)
        for f in self.failures:
            c.push(f.at, "fail", f.node)
            if f.recover_after is not None:
                c.push(f.at + f.recover_after, "recover", f.node)
        self._sample()
        while c.events or c.pending:
            self.settle()
            self._sample()
            self._report()
            if self.horizon_s is not None and c.now >= self.horizon_s:
                break
            if not c.events:
                break  # pending jobs that can never be admitted: stop, they stay pending
            nxt = c.events[0][0]
            if self.horizon_s is not None:
                nxt = min(nxt, self.horizon_s)
            self._advance(max(nxt, c.now))
            self._sample()
        self._report(force=True)
        levels: tuple[str, ...] = next(iter(c.trees.values())).levels if c.trees else ()
        return SimResult(
            jobs=sorted(self.jobs.values(), key=lambda j: (j.submit_at, j.key)), makespan=c.now,
            cycles=self.cycles, wall_s=time.perf_counter() - wall0, preemptions=c.preemptions,
            evictions=c.evictions, replacements=c.replacements, samples=self.samples, events=c.log,
            gpu_seconds_used=self.gpu_used_s, gpu_seconds_available=self.gpu_avail_s,
            cq_usage_integral=dict(self.cq_integral), levels=levels, gpu_seconds_lost=c.gpu_lost_s,
            free_domains=self.free_domains, run_time=c.run_time)

def simulate(world: World, jobs: Iterable[SimJob], failures: Sequence[SimFailure] = (), **kwargs: Any) -> SimResult:
    """Build a :class:`Simulator` and run it."""
    return Simulator(world, list(jobs), failures, **kwargs).run()
