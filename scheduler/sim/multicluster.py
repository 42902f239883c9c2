"""MultiKueue in the simulator: one job stream on a manager, several workers, a dispatcher
(issue 43 item 3; scripts/bench/multicluster.py).

Each worker is a :class:`~scheduler.sim.engine.Simulator` (toposched's admission cycle in
virtual time) with its own nodes, queues and local load; all share one clock. The manager's part
is MultiKueue's: a job nominated to a worker gets a copy there (a "remote copy"); the first
worker whose copy is admitted wins (workers in the MultiKueueConfig's order break a tie at the
same instant) and every other copy is withdrawn, as MultiKueue deletes the losing copies. The
manager's own quota is not modelled (taken as ample): the figures are about where jobs go.

Dispatchers (the same stream each): ``all-at-once`` and ``incremental`` are Kueue v0.17.0's
(``core/kueue/mk_dispatch.py``); ``toposched`` is ``core/beyond/dispatch.py`` asking each worker
what its ``Place`` would answer now (the same placement library, on the worker's live tree).
Passes run at every arrival and every ``pass_interval_s`` while a job waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.adapter.backlog import spec_demand
from scheduler.adapter.mk_dispatch import answer, demand, requested_level, with_whole_capacity
from scheduler.adapter.placement import compute_placement, touched_domains
from scheduler.core.beyond.dispatch import DispatchInput, WorkerAnswer, dispatch_pass
from scheduler.core.kueue.mk_dispatch import ROUND_TIMEOUT_S, all_at_once, incremental_round
from scheduler.core.topology import TopologyTree
from scheduler.sim.engine import Simulator
from scheduler.sim.model import GPU, SimJob, World
from scheduler.sim.outcomes import percentile

DISPATCHERS = ("all-at-once", "incremental", "toposched")
MAX_SETTLE_ROUNDS = 16  # copies made at an instant are settled at that instant
_KQ = "kueue.x-k8s.io/v1beta2"


def worker_queue_objects(gpus: int, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """A simulated worker's Kueue objects: the HyperPod layers as a Topology, one TAS flavor, one
    ClusterQueue ``cq`` holding the worker's ``gpus``, a LocalQueue ``q`` in each namespace."""
    return [
        {"apiVersion": _KQ, "kind": "Topology", "metadata": {"name": "hp"}, "spec": {"levels": [
            {"nodeLabel": f"topology.k8s.aws/network-node-layer-{i}"} for i in (1, 2, 3)]
            + [{"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": _KQ, "kind": "ResourceFlavor", "metadata": {"name": "p5"}, "spec": {"topologyName": "hp"}},
        {"apiVersion": _KQ, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "p5", "resources": [
                {"name": GPU, "nominalQuota": str(gpus)}]}]}]}},
        *({"apiVersion": _KQ, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": ns},
           "spec": {"clusterQueue": "cq"}} for ns in namespaces),
    ]


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    world: World
    local_jobs: Sequence[SimJob] = ()  # the worker's own load, submitted to it directly


@dataclass
class Routed:
    """One stream job's outcome."""

    job: SimJob
    copies: list[str] = field(default_factory=list)  # workers that got a copy, in order
    cluster: str | None = None
    admitted_at: float | None = None
    domains: dict[str, int] = field(default_factory=dict)
    round_start: float | None = None


def _copy(job: SimJob, at: float) -> SimJob:
    return SimJob(job.spec, job.duration, at, job.label)


class MultiClusterSim:
    def __init__(self, workers: Sequence[WorkerSpec], stream: Sequence[SimJob], dispatcher: str, *,
                 round_timeout_s: float = ROUND_TIMEOUT_S, pass_interval_s: float = 2.0,
                 horizon_s: float | None = None, solver: str = "greedy") -> None:
        if dispatcher not in DISPATCHERS:
            raise ValueError(f"dispatcher must be one of {', '.join(DISPATCHERS)}, got {dispatcher!r}")
        self.order = tuple(w.name for w in workers)
        self.sims = {w.name: Simulator(w.world, list(w.local_jobs), solver=solver) for w in workers}
        for w in workers:
            for job in w.local_jobs:
                self.sims[w.name].cluster.push(job.submit_at, "arrive", job.key)
        self.stream = sorted(stream, key=lambda j: (j.submit_at, j.key))
        self.dispatcher = dispatcher
        self.round_timeout_s = round_timeout_s
        self.pass_interval_s = pass_interval_s
        self.horizon_s = horizon_s
        self.routed: dict[str, Routed] = {}
        self.waiting: list[str] = []  # arrived, no worker has admitted yet (manager order)
        self.now = 0.0

    # ------------------------------------------------------------------ what a worker answers
    def _answer(self, name: str, job: SimJob) -> WorkerAnswer:
        c = self.sims[name].cluster
        tree = next(iter(c.trees.values()))
        uses_gpu = any(GPU in ps.requests for ps in job.spec.pod_sets)
        free = c.gpus_healthy - c.gpus_used() if uses_gpu else len(c.nodes)
        queued = self._backlog(name, uses_gpu)
        now = self._place(name, tree, job, free, queued)
        if now.fits:
            return now
        whole = tree.clone()
        whole.free = whole.allocatable.copy()  # the healthy nodes with nothing admitted
        return with_whole_capacity(now, self._place(name, whole, job, free, queued),
                                   c.gpus_healthy if uses_gpu else len(c.nodes))

    def _backlog(self, name: str, uses_gpu: bool) -> int:
        """What the worker's Place reports as its backlog (``adapter/backlog.py``): its own
        queued jobs; the manager's copies (the stream's) are not counted."""
        asks = [spec_demand(p.spec) for key, p in self.sims[name].cluster.pending.items() if key not in self.routed]
        return sum(a.gpus if uses_gpu else a.pods for a in asks)

    @staticmethod
    def _place(name: str, tree: TopologyTree, job: SimJob, free: int, queued: int) -> WorkerAnswer:
        placement = compute_placement(tree, job.spec, "greedy", 100.0)
        per_ps = [{lv: tuple(v) for lv, v in touched_domains(tree, ps).items()} for ps in placement.pod_sets]
        return answer(name, placement.fits, per_ps, requested_level(job.spec, tree.levels), free, queued)

    # ------------------------------------------------------------------ dispatch
    def _nominations(self) -> dict[str, tuple[str, ...]]:
        if self.dispatcher == "all-at-once":
            return {k: all_at_once(self.order) for k in self.waiting}
        if self.dispatcher == "incremental":
            out = {}
            for k in self.waiting:
                r = self.routed[k]
                rnd = incremental_round(r.copies, self.order, r.round_start, self.now, self.round_timeout_s)
                if rnd.changed:
                    r.round_start = rnd.round_start
                out[k] = rnd.nominated
            return out
        inputs = []
        for k in self.waiting:
            r = self.routed[k]
            due = r.round_start is None or self.now - r.round_start > self.round_timeout_s
            answers = {n: self._answer(n, r.job) for n in self.order} if due else {}
            inputs.append(DispatchInput(k, self.order, answers, tuple(r.copies), r.round_start, demand(r.job.spec),
                                        self.round_timeout_s))
        rounds = dispatch_pass(inputs, self.now).rounds
        for k, rnd in rounds.items():
            if rnd.changed:
                self.routed[k].round_start = rnd.round_start
        return {k: rnd.nominated for k, rnd in rounds.items()}

    def _dispatch(self) -> bool:
        """Copies for new nominations; whether any was made."""
        made = False
        for key, nominated in self._nominations().items():
            r = self.routed[key]
            for name in nominated:
                if name not in r.copies:
                    r.copies.append(name)
                    sim = self.sims[name]
                    sim.jobs[key] = _copy(r.job, self.now)
                    sim.cluster.push(self.now, "arrive", key)
                    made = True
        return made

    def _collect(self) -> None:
        """First admission wins; the other copies are withdrawn."""
        for key in list(self.waiting):
            r = self.routed[key]
            winner = next((n for n in self.order if n in r.copies
                           and self.sims[n].jobs[key].first_admitted is not None), None)
            if winner is None:
                continue
            copy = self.sims[winner].jobs[key]
            r.cluster, r.admitted_at, r.domains = winner, copy.first_admitted, dict(copy.domains)
            for other in r.copies:
                if other != winner:
                    self.sims[other].cluster.withdraw(key)
            self.waiting.remove(key)

    # ------------------------------------------------------------------ run
    def _next_time(self, i: int) -> float | None:
        times = [c.events[0][0] for c in (s.cluster for s in self.sims.values()) if c.events]
        if i < len(self.stream):
            times.append(self.stream[i].submit_at)
        if self.waiting:
            times.append(self.now + self.pass_interval_s)
        return min(times) if times else None

    def run(self, stop: Callable[[], bool] | None = None) -> list[Routed]:
        i = 0
        while True:
            for sim in self.sims.values():
                sim.advance(self.now)
            while i < len(self.stream) and self.stream[i].submit_at <= self.now:
                job = self.stream[i]
                self.routed[job.key] = Routed(job)
                self.waiting.append(job.key)
                i += 1
            for _ in range(MAX_SETTLE_ROUNDS):
                for sim in self.sims.values():
                    sim.settle()
                self._collect()
                if not self.waiting or not self._dispatch():
                    break
            if (i >= len(self.stream) and not self.waiting) or (stop is not None and stop()):
                break
            nxt = self._next_time(i)
            if nxt is None or (self.horizon_s is not None and nxt > self.horizon_s):
                break
            self.now = max(nxt, self.now)
        return [self.routed[j.key] for j in self.stream if j.key in self.routed]


def outcome(routed: Sequence[Routed], level: str) -> Mapping[str, float]:
    """The comparison's figures: share of multi-node jobs in one domain of ``level``, time to
    admission p50/p99 (s), remote copies per job, jobs admitted."""
    admitted = [r for r in routed if r.admitted_at is not None]
    multi = [r for r in admitted if sum(ps.count for ps in r.job.spec.pod_sets) > 1]
    waits = sorted(r.admitted_at - r.job.submit_at for r in admitted if r.admitted_at is not None)
    return {
        "jobs": float(len(routed)), "admitted": float(len(admitted)),
        "multi_node": float(len(multi)),
        "one_domain_share": (sum(1 for r in multi if r.domains.get(level) == 1) / len(multi)) if multi else 0.0,
        "wait_p50_s": percentile(waits, 50) if waits else 0.0,
        "wait_p99_s": percentile(waits, 99) if waits else 0.0,
        "copies_per_job": (sum(len(r.copies) for r in routed) / len(routed)) if routed else 0.0,
    }
