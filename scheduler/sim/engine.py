"""The simulator: virtual time around ``run_cycle``, driven as the controller drives it.

Events (arrival, completion, node failure, node recovery) are processed in time order; at
each instant the loop runs admission cycles until one makes no progress (nothing admitted,
preempted, evicted or newly parked), then jumps to the next event. Between cycles it keeps a
``queueing.QueueState`` like the controller: ``park`` every Pending with requeue
"inadmissible" on a BestEffortFIFO ClusterQueue, ``forget`` on Admit, ``release`` of the cohort
tree when a workload there finishes or is evicted/preempted, ``release`` of everything when a
node recovers (capacity appeared).

Preempted (and HoldAndDrain-evicted) workloads keep their reservation, marked evicted, for
``eviction_delay_s`` (default 30 s, Kubernetes' default terminationGracePeriodSeconds) — the
controller also waits until the victim's pods are gone — and are then released and requeued.
With 0 they are released at once.

Node failures flip ``sagemaker.amazonaws.com/node-health-status`` to
``UnschedulablePendingReboot`` (so ``node_health`` excludes the node when the trees are
rebuilt) and, through the controller's own decision (``core.failures.node_failure_decisions``
and ``apply_replacement``): a workload with a failed node in a hostname-level assignment is
hot-swapped when a slot in the required domain takes its pods; otherwise it is evicted with
reason ``NodeFailures`` and requeued (keeping its creation-time queue position, as Kueue
does) after the controller's requeue backoff (``core.failures.RequeueBackoff``: a workload's
first NodeFailures requeue is at once, as Kueue's; the n-th after it waits
``base * 2^(n-2)`` seconds, capped; Kueue's ``requeueState``). The controller's
eviction-storm guard applies too (``core.failures.storms`` over ``storm_groups``,
``StormPolicy``): while more than the threshold of a group's nodes failed within the window,
workloads on failed nodes are held (neither replaced nor evicted; event ``held``) and decided
again when a node recovers. A requeued job restarts from the beginning (no checkpoint
model). Preempted victims are released at once (their pods' termination takes no virtual time).

By default a cycle takes no virtual time (``cycle_cost="zero"``); ``"measured"`` advances the
clock by each cycle's wall time (scripts/bench/admission.py).
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.core.admitted import AdmittedWorkload, TASUsage
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.cycle import run_cycle
from scheduler.core.decisions import Admit, Evict, Pending, Preempt
from scheduler.core.domain_target import ANN_PREEMPTION_TARGET
from scheduler.core.failures import (
    EVICTION_REASON,
    FailureTracker,
    HoldForNodeStorm,
    PlacedWorkload,
    ReplaceNodes,
    RequeueBackoff,
    Storm,
    StormPolicy,
    apply_replacement,
    held_nodes,
    node_failure_decisions,
    pods_per_node,
    storm_groups,
    storms,
)
from scheduler.core.fakecluster import HEALTH_STATUS_LABEL
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy, node_health
from scheduler.core.nodes import NodeInfo
from scheduler.core.placement.fragmentation import whole_free_leaves
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.queueing import REQUEUE_INADMISSIBLE, LocalQueueSpec, PendingWorkload, QueueState
from scheduler.core.quota import STRICT_FIFO, ClusterQueueSpec, CohortSpec, FlavorSpec, QuotaState
from scheduler.core.reservation import ANN_RESERVED_DOMAIN
from scheduler.core.snapshot import Snapshot, admitted_from_decision
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import CompactWait
from scheduler.core.workload import WorkloadSpec

GPU = "nvidia.com/gpu"
FAILED_STATUS = "UnschedulablePendingReboot"
MAX_CYCLES_PER_INSTANT = 10_000


@dataclass(frozen=True)
class World:
    """The static configuration: nodes, queues, flavors, topologies (core specs)."""

    nodes: tuple[NodeInfo, ...]
    cluster_queues: Mapping[str, ClusterQueueSpec]
    local_queues: Mapping[str, LocalQueueSpec]
    flavors: Mapping[str, FlavorSpec]
    topologies: Mapping[str, tuple[str, ...]]  # Topology name -> levels
    cohorts: Mapping[str, CohortSpec] = field(default_factory=dict)
    workload_priority_classes: Mapping[str, int] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    health_policy: HealthPolicy = DEFAULT_POLICY
    config: KueueConfig = KUEUE_DEFAULTS  # the admin's Kueue Configuration (--kueue-config)
    # toposched beyond Kueue (docs/beyond-kueue.md): placement policies (off = Kueue's) and the
    # ClusterQueues' default bounded wait for a compact placement (their toposched.io/compact-*).
    placement_options: PlacementOptions = PlacementOptions()
    compact_defaults: Mapping[str, CompactWait] = field(default_factory=dict)


@dataclass
class SimJob:
    spec: WorkloadSpec
    duration: float
    submit_at: float
    label: str = ""  # free-form class name (bench)
    first_admitted: float | None = None
    admitted_at: float | None = None
    finished_at: float | None = None
    preemptions: int = 0
    evictions: int = 0
    domains: dict[str, int] = field(default_factory=dict)  # level -> domains spanned (first admission)

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def gpus(self) -> int:
        return sum(ps.count * ps.requests.get(GPU, 0) for ps in self.spec.pod_sets)


@dataclass(frozen=True)
class SimFailure:
    at: float
    node: str
    recover_after: float | None = None


@dataclass(frozen=True)
class Progress:
    time_s: float
    submitted: int
    admitted: int
    finished: int
    pending: int
    preemptions: int
    gpu_utilization: float
    total_jobs: int


@dataclass
class SimResult:
    jobs: list[SimJob]
    makespan: float
    cycles: int
    wall_s: float
    preemptions: int
    evictions: int
    replacements: int
    samples: list[tuple[float, int, int, int]]  # (t, GPUs used, GPUs healthy, pending)
    events: list[dict[str, Any]]  # failures, recoveries, evictions, preemptions, replacements
    gpu_seconds_used: float
    gpu_seconds_available: float
    cq_usage_integral: dict[str, float]
    levels: tuple[str, ...]
    # GPU time of runs cut short by preemption or eviction (no checkpoint model: all of it).
    gpu_seconds_lost: float = 0.0
    # (t, whole-free domains per level, widest first, hostname excluded) at every sample
    free_domains: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)

    @property
    def gpu_utilization(self) -> float:
        return self.gpu_seconds_used / self.gpu_seconds_available if self.gpu_seconds_available else 0.0


def _with_health(node: NodeInfo, status: str) -> NodeInfo:
    return dataclasses.replace(node, labels={**node.labels, HEALTH_STATUS_LABEL: status})


class Simulator:
    def __init__(self, world: World, jobs: Sequence[SimJob], failures: Sequence[SimFailure] = (), *,
                 solver: str = "greedy", time_budget_s: float = 0.1, cycle_cost: str = "zero",
                 horizon_s: float | None = None, progress: Callable[[Progress], None] | None = None,
                 progress_every_s: float = 0.0, eviction_delay_s: float = 30.0,
                 requeue_backoff: RequeueBackoff | None = None, storm_policy: StormPolicy | None = None,
                 storm_guard: bool = True, domain_preemption: bool = True,
                 preemption_budget_s: float = 0.5) -> None:
        """``requeue_backoff`` and ``storm_policy`` default to the controller's defaults (its
        ``--node-failure-requeue-*`` and ``--eviction-storm-*`` flags); ``storm_guard=False``
        turns the guard off. ``preemption_budget_s``: CP-SAT's budget per victim search (the
        cycle's default)."""
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
        self.solver, self.time_budget_s, self.cycle_cost = solver, time_budget_s, cycle_cost
        self.preemption_budget_s = preemption_budget_s
        self.horizon_s = horizon_s
        self.domain_preemption = domain_preemption  # Snapshot.domain_preemption (core/domain_preemption.py)
        self.eviction_delay_s = eviction_delay_s
        self.requeue_backoff = requeue_backoff if requeue_backoff is not None else RequeueBackoff()
        self.storm_policy = (storm_policy if storm_policy is not None else StormPolicy()) if storm_guard else None
        # The controller's record of unhealthy nodes (no grace: failures are instants here).
        self.tracker = FailureTracker(grace_s=0.0)
        self.storms: dict[str, Storm] = {}
        self.held: set[str] = set()  # workloads whose node failure is held by a storm
        self.requeue_counts: dict[str, int] = defaultdict(int)  # Kueue's requeueState.count
        self._health_changed = False
        self.progress_cb, self.progress_every_s = progress, progress_every_s
        self.nodes = {n.name: n for n in world.nodes}
        self.quota_shape = QuotaState(world.cluster_queues.values(), world.cohorts.values())
        self.state = QueueState()
        self.pending: dict[str, PendingWorkload] = {}
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.generation: dict[str, int] = defaultdict(int)
        self.events: list[tuple[float, int, str, str]] = []
        self._seq = 0
        self.trees: dict[str, TopologyTree] = {}
        self.gpus_healthy = 0
        self.log: list[dict[str, Any]] = []
        self.preemptions = self.evictions = self.replacements = self.cycles = 0
        self.submitted = self.finished = self.ever_admitted = 0
        self.now = 0.0
        self._last_progress = float("-inf")
        self.gpu_used_s = self.gpu_avail_s = 0.0
        self.cq_integral: dict[str, float] = defaultdict(float)
        self.samples: list[tuple[float, int, int, int]] = []
        self.gpu_lost_s = 0.0
        self.free_domains: list[tuple[float, tuple[int, ...]]] = []
        for name, info in self.nodes.items():
            self.tracker.observe(name, node_health(info, world.health_policy).healthy, 0.0)
        self._rebuild()

    # ------------------------------------------------------------------ state helpers
    def _push(self, t: float, kind: str, key: str) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, self._seq, kind, key))

    def _rebuild(self) -> None:
        """Trees from the current node health, with every admitted workload's usage."""
        nodes = list(self.nodes.values())
        self.trees = {}
        for name, flavor in sorted(self.world.flavors.items()):
            levels = self.world.topologies.get(flavor.topology_name or "")
            if not levels:
                continue
            self.trees[name] = TopologyTree.build(flavor.topology_name or "", levels, nodes,
                                                  flavor_node_labels=flavor.node_labels,
                                                  health_policy=self.world.health_policy)
        for w in self.admitted.values():
            self._tas(w, +1)
        self.gpus_healthy = sum(n.allocatable.get(GPU, 0) for n in nodes
                                if node_health(n, self.world.health_policy).healthy)

    def _tas(self, w: AdmittedWorkload, sign: int) -> None:
        for u in w.tas:
            tree = self.trees.get(u.flavor)
            if tree is not None:
                (tree.add_usage if sign > 0 else tree.remove_usage)(u.placement, u.per_pod)

    def _release(self, w: AdmittedWorkload) -> None:
        self._tas(w, -1)
        self.state.release(self.quota_shape.cluster_queues_in_tree(w.cluster_queue))

    def _requeue(self, key: str, kind: str, detail: str, backoff_s: float = 0.0) -> None:
        """Release and requeue; ``backoff_s`` > 0: not admitted again before now + backoff."""
        w = self.admitted.pop(key)
        self._release(w)
        self.generation[key] += 1  # its completion event is now stale
        requeue_at = self.now + backoff_s if backoff_s > 0 else None
        # Kueue: Preempted/NodeFailures keep creation order
        self.pending[key] = PendingWorkload(w.spec, requeue_at=requeue_at)
        job = self.jobs[key]
        job.admitted_at = None
        entry: dict[str, Any] = {"t": self.now, "kind": kind, "workload": key, "detail": detail}
        if requeue_at is not None:
            entry["requeue_at"] = requeue_at
            self._push(requeue_at, "backoff-over", key)  # wake the loop when the backoff ends
        self.log.append(entry)

    def _lose(self, key: str) -> None:
        """The GPU time the run being cut short had used (it restarts from the beginning)."""
        job = self.jobs[key]
        if job.admitted_at is not None:
            self.gpu_lost_s += (self.now - job.admitted_at) * job.gpus

    def _evict_later(self, key: str, kind: str, detail: str) -> None:
        """Preempt/Evict decision: the reservation is held (evicted) until the pods are gone."""
        self._lose(key)
        if self.eviction_delay_s <= 0:
            self._requeue(key, kind, detail)
            return
        self.admitted[key] = dataclasses.replace(self.admitted[key], evicted=True)
        self.generation[key] += 1  # its completion event is now stale
        job = self.jobs[key]
        lost = job.gpus * (self.now - job.admitted_at) if job.admitted_at is not None else 0.0
        job.admitted_at = None
        self.log.append({"t": self.now, "kind": kind, "workload": key, "detail": detail, "gpu_s_lost": lost})
        self._push(self.now + self.eviction_delay_s, "released", f"{key}#{self.generation[key]}")

    def _released(self, key: str, gen: int) -> None:
        w = self.admitted.get(key)
        if w is None or not w.evicted or self.generation[key] != gen:
            return
        del self.admitted[key]
        self._release(w)
        self.pending[key] = PendingWorkload(w.spec)

    def gpus_used(self) -> int:
        return sum(v for w in self.admitted.values() for (_f, res), v in w.usage.items() if res == GPU)

    # ------------------------------------------------------------------ events
    def _arrive(self, key: str) -> None:
        job = self.jobs[key]
        self.pending[key] = PendingWorkload(job.spec)
        self.submitted += 1

    def _complete(self, key: str, gen: int) -> None:
        w = self.admitted.get(key)
        if w is None or self.generation[key] != gen:
            return
        del self.admitted[key]
        self._release(w)
        self.jobs[key].finished_at = self.now
        self.finished += 1

    def _fail(self, node: str) -> None:
        self.nodes[node] = _with_health(self.nodes[node], FAILED_STATUS)
        self.tracker.observe(node, False, self.now)
        self.log.append({"t": self.now, "kind": "failure", "node": node})
        self._rebuild()
        self._health_changed = True  # decided once every change of this instant is recorded

    def _watch_storms(self) -> dict[str, Storm]:
        """The controller's storm guard over the same groups; node -> the storm holding it."""
        if self.storm_policy is None:
            return {}
        labels = {name: info.labels for name, info in self.nodes.items()}
        selectors = {name: flavor.node_labels for name, flavor in self.world.flavors.items()}
        current = storms(storm_groups(labels, selectors), self.tracker, self.now, self.storm_policy, self.storms)
        for group in sorted(set(current) - set(self.storms)):
            self.log.append({"t": self.now, "kind": "storm", "group": group, "detail": current[group].message})
        for group in sorted(set(self.storms) - set(current)):
            self.log.append({"t": self.now, "kind": "storm-over", "group": group})
        self.storms = current
        return held_nodes(current)

    def _node_failures(self) -> None:
        """The controller's decision for every workload on a failed node, with no grace
        (virtual time) and evictions freeing their capacity at once (pods terminate in no time
        here); a held workload is decided again at the next failure or recovery."""
        held = self._watch_storms()
        on_failed = [self.admitted[key] for key in sorted(self.admitted)
                     if not self.admitted[key].evicted
                     and self.tracker.failed_among({h for u in self.admitted[key].tas
                                                    for h in pods_per_node(u.placement)}, self.now)]
        placed = [PlacedWorkload(w.spec.key, w.tas, {ps.name: ps.topology for ps in w.spec.pod_sets})
                  for w in on_failed]
        labels = {name: info.labels for name, info in self.nodes.items()}
        decisions = node_failure_decisions(placed, self.tracker, self.trees, self.now, labels,
                                           release_evicted=True, held=held)
        self.held &= {d.workload for d in decisions if isinstance(d, HoldForNodeStorm)}
        for decision in decisions:
            if isinstance(decision, HoldForNodeStorm):
                if decision.workload not in self.held:
                    self.held.add(decision.workload)
                    self.log.append({"t": self.now, "kind": "held", "workload": decision.workload,
                                     "detail": decision.message})
            elif isinstance(decision, ReplaceNodes):
                self._replace(decision)
            else:
                self._evict_for_node_failure(decision.workload, decision.failed_nodes)

    def _replace(self, decision: ReplaceNodes) -> None:
        key = decision.workload
        w = self.admitted[key]
        self._tas(w, -1)
        w = dataclasses.replace(w, tas=tuple(TASUsage(u.flavor, apply_replacement(u.placement, decision),
                                                       u.per_pod) for u in w.tas))
        self.admitted[key] = w
        self._tas(w, +1)
        self.replacements += 1
        self.log.append({"t": self.now, "kind": "replacement", "workload": key,
                         "node": ",".join(decision.failed_nodes)})

    def _evict_for_node_failure(self, key: str, failed_nodes: Sequence[str]) -> None:
        """NodeFailures eviction, requeued after the controller's backoff (requeueState)."""
        self._lose(key)
        self.evictions += 1
        self.jobs[key].evictions += 1
        self.requeue_counts[key] += 1
        self._requeue(key, "eviction", f"{EVICTION_REASON}: {','.join(failed_nodes)}",
                      backoff_s=self.requeue_backoff.delay_s(self.requeue_counts[key]))

    def _recover(self, node: str) -> None:
        self.nodes[node] = _with_health(self.nodes[node], "Schedulable")
        self.tracker.observe(node, True, self.now)
        self.log.append({"t": self.now, "kind": "recovery", "node": node})
        self._rebuild()
        self._health_changed = True  # a storm may be over: held workloads are decided again
        self.state.release(None)

    # ------------------------------------------------------------------ cycle
    def _cycle(self) -> bool:
        snap = Snapshot(now=self.now, cluster_queues=self.world.cluster_queues, cohorts=self.world.cohorts,
                        local_queues=self.world.local_queues, flavors=self.world.flavors, trees=self.trees,
                        pending=[self.pending[k] for k in sorted(self.pending)],
                        admitted=[self.admitted[k] for k in sorted(self.admitted)],
                        workload_priority_classes=self.world.workload_priority_classes,
                        inadmissible=self.state.inadmissible(), namespace_labels=self.world.namespace_labels,
                        solver=self.solver, time_budget_s=self.time_budget_s, config=self.world.config,
                        domain_preemption=self.domain_preemption,
                        preemption_budget_s=self.preemption_budget_s,
                        placement_options=self.world.placement_options,
                        compact_defaults=self.world.compact_defaults)
        t0 = time.perf_counter()
        decisions = run_cycle(snap)
        spent = time.perf_counter() - t0
        self.cycles += 1
        if self.cycle_cost == "measured":
            self._advance(self.now + spent)
        progress = False
        parked = self.state.inadmissible()
        for d in decisions:
            if isinstance(d, Pending) and d.workload in self.pending:  # as the controller's writer does
                self._annotate(d.workload, ANN_RESERVED_DOMAIN, d.reserved_domain or None)
            if isinstance(d, Admit):
                # landed: the preemption target and the held domain have served
                self._annotate(d.workload, ANN_PREEMPTION_TARGET, None)
                self._annotate(d.workload, ANN_RESERVED_DOMAIN, None)
                pw = self.pending.pop(d.workload)
                w = admitted_from_decision(d, pw, self.now)
                self.admitted[d.workload] = w
                self._tas(w, +1)
                job = self.jobs[d.workload]
                job.admitted_at = self.now
                if job.first_admitted is None:
                    job.first_admitted = self.now
                    job.domains = self._domains(w)
                    self.ever_admitted += 1
                self.generation[d.workload] += 1
                self._push(self.now + job.duration, "complete", f"{d.workload}#{self.generation[d.workload]}")
                self.state.forget(d.workload)
                if d.relaxed:  # the controller's Event CompactPlacementRelaxed
                    self.log.append({"t": self.now, "kind": "relaxed", "workload": d.workload, "detail": d.relaxed})
                progress = True
            elif isinstance(d, Preempt):
                if d.workload in self.admitted and not self.admitted[d.workload].evicted:
                    self.preemptions += 1
                    self.jobs[d.workload].preemptions += 1
                    self._evict_later(d.workload, "preemption", f"{d.reason} by {d.preemptor}")
                    progress = True
            elif isinstance(d, Evict):
                if d.workload in self.admitted and not self.admitted[d.workload].evicted:
                    self.evictions += 1
                    self.jobs[d.workload].evictions += 1
                    self._evict_later(d.workload, "eviction", d.reason)
                    progress = True
            elif isinstance(d, Pending) and d.preemption_target and d.workload in self.pending:
                self._annotate(d.workload, ANN_PREEMPTION_TARGET, d.preemption_target)  # as the controller does
            elif isinstance(d, Pending) and d.requeue == REQUEUE_INADMISSIBLE and d.cluster_queue:
                cq = self.world.cluster_queues.get(d.cluster_queue)
                if cq is not None and cq.queueing_strategy != STRICT_FIFO:
                    self.state.park(d.workload, d.cluster_queue, d.retry_at)
                    if d.retry_at is not None and d.workload not in parked:
                        self._push(d.retry_at, "wake", d.workload)  # the compact wait's end
                    progress = progress or d.workload not in parked
        return progress

    def _annotate(self, key: str, annotation: str, value: str | None) -> None:
        """Set (``None``: remove) toposched's annotation on the pending workload, as the controller
        writes it (kube/apply.py): the sticky preemption target and the domain a compact wait
        holds stay with the job's spec until the job is admitted."""
        pw = self.pending[key]
        if pw.spec.annotations.get(annotation) == value:
            return
        annotations = {k: v for k, v in pw.spec.annotations.items() if k != annotation}
        if value is not None:
            annotations[annotation] = value
        spec = dataclasses.replace(pw.spec, annotations=annotations)
        self.pending[key] = dataclasses.replace(pw, spec=spec)
        self.jobs[key].spec = spec

    def _domains(self, w: AdmittedWorkload) -> dict[str, int]:
        out: dict[str, int] = {}
        for u in w.tas:
            tree = self.trees.get(u.flavor)
            if tree is None:
                continue
            for li, level in enumerate(tree.levels):
                seen = set()
                for dom in u.placement.domains:
                    leaf = tree.leaf_for_values(u.placement.levels, dom.values)
                    if leaf is not None:
                        seen.add(tree.ancestor(leaf, li))
                out[level] = out.get(level, 0) + len(seen)
        return out

    # ------------------------------------------------------------------ accounting
    def _advance(self, to: float) -> None:
        dt = to - self.now
        if dt > 0:
            self.gpu_used_s += self.gpus_used() * dt
            self.gpu_avail_s += self.gpus_healthy * dt
            for w in self.admitted.values():
                self.cq_integral[w.cluster_queue] += sum(w.usage.values()) * dt
        self.now = max(self.now, to)

    def _sample(self) -> None:
        point = (self.now, self.gpus_used(), self.gpus_healthy, len(self.pending))
        free = (self.now, self._whole_free_domains())
        if self.samples and self.samples[-1][0] == self.now:
            self.samples[-1] = point
            self.free_domains[-1] = free
        else:
            self.samples.append(point)
            self.free_domains.append(free)

    def _whole_free_domains(self) -> tuple[int, ...]:
        """Domains of the first TAS tree with nothing in use, per level above the leaves."""
        tree = next(iter(self.trees.values()), None)
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
        self.progress_cb(Progress(self.now, self.submitted, self.ever_admitted, self.finished, len(self.pending),
                                  self.preemptions,
                                  self.gpus_used() / self.gpus_healthy if self.gpus_healthy else 0.0,
                                  len(self.jobs)))

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        wall0 = time.perf_counter()
        for job in sorted(self.jobs.values(), key=lambda j: (j.submit_at, j.key)):
            self._push(job.submit_at, "arrive", job.key)
        for f in self.failures:
            self._push(f.at, "fail", f.node)
            if f.recover_after is not None:
                self._push(f.at + f.recover_after, "recover", f.node)
        self._sample()
        while self.events or self.pending:
            if self.events and self.events[0][0] <= self.now:
                while self.events and self.events[0][0] <= self.now:
                    _t, _s, kind, key = heapq.heappop(self.events)
                    if kind == "arrive":
                        self._arrive(key)
                    elif kind == "complete":
                        k, gen = key.rsplit("#", 1)
                        self._complete(k, int(gen))
                    elif kind == "released":
                        k, gen = key.rsplit("#", 1)
                        self._released(k, int(gen))
                    elif kind == "fail":
                        self._fail(key)
                    elif kind == "recover":
                        self._recover(key)
                    elif kind == "backoff-over":
                        self.state.release(None)
                    elif kind == "wake":
                        self.state.release_due(self.now)
                if self._health_changed:
                    # As one controller pass sees every node that failed together (a rack),
                    # the failures of one instant are decided together.
                    self._health_changed = False
                    self._node_failures()
            for _ in range(MAX_CYCLES_PER_INSTANT):
                if not self.pending or not self._cycle():
                    break
            self._sample()
            self._report()
            if self.horizon_s is not None and self.now >= self.horizon_s:
                break
            if not self.events:
                break  # pending jobs that can never be admitted: stop, they stay pending
            nxt = self.events[0][0]
            if self.horizon_s is not None:
                nxt = min(nxt, self.horizon_s)
            self._advance(max(nxt, self.now))
            self._sample()
        self._report(force=True)
        levels: tuple[str, ...] = next(iter(self.trees.values())).levels if self.trees else ()
        return SimResult(
            jobs=sorted(self.jobs.values(), key=lambda j: (j.submit_at, j.key)), makespan=self.now,
            cycles=self.cycles, wall_s=time.perf_counter() - wall0, preemptions=self.preemptions,
            evictions=self.evictions, replacements=self.replacements, samples=self.samples, events=self.log,
            gpu_seconds_used=self.gpu_used_s, gpu_seconds_available=self.gpu_avail_s,
            cq_usage_integral=dict(self.cq_integral), levels=levels, gpu_seconds_lost=self.gpu_lost_s,
            free_domains=self.free_domains)


def simulate(world: World, jobs: Iterable[SimJob], failures: Sequence[SimFailure] = (), **kwargs: Any) -> SimResult:
    """Build a :class:`Simulator` and run it."""
    return Simulator(world, list(jobs), failures, **kwargs).run()
