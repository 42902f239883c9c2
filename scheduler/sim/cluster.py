"""The simulated cluster, as the controller would see it: nodes with their health, one topology
tree per TAS flavor, the pending and the admitted workloads, the queue state, and the events
its changes schedule (completions, releases, wake-ups) on the simulator's clock.

It is the simulator's :class:`~scheduler.adapter.apply.ClusterView`: a cycle's decisions are
applied to it by the controller's own ``apply_decision``. Preempted (and HoldAndDrain-evicted)
workloads keep their reservation, marked evicted, for ``eviction_delay_s`` (the controller also
waits until the victim's pods are gone), then are released and requeued; with 0 at once.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from scheduler.core.beyond.healthy_capacity import quotas_following_health
from scheduler.core.fakecluster import HEALTH_STATUS_LABEL
from scheduler.core.health import node_health
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.decisions import Admit, Decision, Evict, Pending, Preempt
from scheduler.core.kueue.queueing import PendingWorkload, QueueState
from scheduler.core.kueue.quota import QuotaState
from scheduler.core.kueue.snapshot import Snapshot, admitted_from_decision
from scheduler.core.resources import GPU
from scheduler.core.topology import TopologyTree
from scheduler.sim.model import SimJob, World
from scheduler.sim.runtime import PRESETS, RunTimeModel, slowdown


class SimCluster:
    def __init__(self, world: World, jobs: Mapping[str, SimJob], eviction_delay_s: float,
                 run_time: RunTimeModel = PRESETS["off"]) -> None:
        self.world = world
        self.jobs = jobs
        self.eviction_delay_s = eviction_delay_s
        self.run_time = run_time  # how a run's placement stretches its duration (sim/runtime.py)
        self.nodes = {n.name: n for n in world.nodes}
        self.quota_shape = QuotaState(world.cluster_queues.values(), world.cohorts.values())
        self.state = QueueState()
        self.pending: dict[str, PendingWorkload] = {}
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.generation: dict[str, int] = defaultdict(int)  # a workload's run: older events are stale
        self.events: list[tuple[float, int, str, str]] = []
        self._seq = 0
        self.trees: dict[str, TopologyTree] = {}
        self.gpus_healthy = 0
        self.log: list[dict[str, Any]] = []
        self.preemptions = self.evictions = self.replacements = 0
        self.submitted = self.finished = self.ever_admitted = 0
        self.now = 0.0
        self.gpu_lost_s = 0.0
        # Set while a cycle's decisions are applied: whether any changed the cluster.
        self.progress = False
        self._parked_before: frozenset[str] = frozenset()
        self.rebuild()

    # ------------------------------------------------------------------ state
    def push(self, t: float, kind: str, key: str) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, self._seq, kind, key))

    def rebuild(self) -> None:
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
            self.tas(w, +1)
        self.gpus_healthy = sum(n.allocatable.get(GPU, 0) for n in nodes
                                if node_health(n, self.world.health_policy).healthy)

    def set_health(self, node: str, status: str) -> None:
        info = self.nodes[node]
        self.nodes[node] = dataclasses.replace(info, labels={**info.labels, HEALTH_STATUS_LABEL: status})
        self.rebuild()

    def tas(self, w: AdmittedWorkload, sign: int) -> None:
        for u in w.tas:
            tree = self.trees.get(u.flavor)
            if tree is not None:
                (tree.add_usage if sign > 0 else tree.remove_usage)(u.placement, u.per_pod)

    def _release(self, w: AdmittedWorkload) -> None:
        self.tas(w, -1)
        self.state.release(self.quota_shape.cluster_queues_in_tree(w.cluster_queue))

    def requeue(self, key: str, kind: str, detail: str, backoff_s: float = 0.0) -> None:
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
            self.push(requeue_at, "backoff-over", key)  # wake the loop when the backoff ends
        self.log.append(entry)

    def lose(self, key: str) -> None:
        """The GPU time the run being cut short had used (it restarts from the beginning)."""
        job = self.jobs[key]
        if job.admitted_at is not None:
            self.gpu_lost_s += (self.now - job.admitted_at) * job.gpus

    def _evict_later(self, key: str, kind: str, detail: str) -> None:
        """Preempt/Evict decision: the reservation is held (evicted) until the pods are gone."""
        self.lose(key)
        if self.eviction_delay_s <= 0:
            self.requeue(key, kind, detail)
            return
        self.admitted[key] = dataclasses.replace(self.admitted[key], evicted=True)
        self.generation[key] += 1  # its completion event is now stale
        job = self.jobs[key]
        lost = job.gpus * (self.now - job.admitted_at) if job.admitted_at is not None else 0.0
        job.admitted_at = None
        self.log.append({"t": self.now, "kind": kind, "workload": key, "detail": detail, "gpu_s_lost": lost})
        self.push(self.now + self.eviction_delay_s, "released", f"{key}#{self.generation[key]}")

    def released(self, key: str, gen: int) -> None:
        w = self.admitted.get(key)
        if w is None or not w.evicted or self.generation[key] != gen:
            return
        del self.admitted[key]
        self._release(w)
        self.pending[key] = PendingWorkload(w.spec)

    def gpus_used(self) -> int:
        return sum(v for w in self.admitted.values() for (_f, res), v in w.usage.items() if res == GPU)

    def arrive(self, key: str) -> None:
        self.pending[key] = PendingWorkload(self.jobs[key].spec)
        self.submitted += 1

    def withdraw(self, key: str) -> None:
        """MultiKueue deletes this worker's copy (another worker admitted the job first): a
        pending copy leaves the queue; one admitted in the same instant gives its capacity back."""
        if self.pending.pop(key, None) is not None:
            self.state.forget(key)
            return
        w = self.admitted.pop(key, None)
        if w is not None:
            self._release(w)
            self.generation[key] += 1  # its completion event is now stale

    def complete(self, key: str, gen: int) -> None:
        w = self.admitted.get(key)
        if w is None or self.generation[key] != gen:
            return
        del self.admitted[key]
        self._release(w)
        self.jobs[key].finished_at = self.now
        self.finished += 1

    def snapshot(self, **settings: Any) -> Snapshot:
        """What the controller's cycle would see now; ``settings``: the run's Snapshot fields
        (solver, budgets, domain preemption)."""
        world = self.world
        # Opted-in ClusterQueues' quota follows the nodes' health now, as in the controller's snapshot.
        cluster_queues, effective = quotas_following_health(world.cluster_queues, world.follow_healthy,
                                                            world.flavors, self.nodes.values(), world.health_policy)
        return Snapshot(now=self.now, cluster_queues=cluster_queues, effective_quotas=effective, cohorts=world.cohorts,
                        local_queues=world.local_queues, flavors=world.flavors, trees=self.trees,
                        pending=[self.pending[k] for k in sorted(self.pending)],
                        admitted=[self.admitted[k] for k in sorted(self.admitted)],
                        workload_priority_classes=world.workload_priority_classes,
                        inadmissible=self.state.inadmissible(), namespace_labels=world.namespace_labels,
                        config=world.config, placement_options=world.placement_options,
                        compact_defaults=world.compact_defaults, **settings)

    def applying(self) -> None:
        """A cycle's decisions are about to be applied: nothing changed yet."""
        self.progress = False
        self._parked_before = self.state.inadmissible()

    # ------------------------------------------------------------------ ClusterView
    def current(self, decision: Decision) -> bool:
        if isinstance(decision, Preempt | Evict):
            w = self.admitted.get(decision.workload)
            return w is not None and not w.evicted
        return decision.workload in self.pending

    def admit(self, decision: Admit) -> bool:
        key = decision.workload
        w = admitted_from_decision(decision, self.pending.pop(key), self.now)
        self.admitted[key] = w
        self.tas(w, +1)
        job = self.jobs[key]
        job.admitted_at = self.now
        if job.first_admitted is None:
            job.first_admitted = self.now
            job.domains = self._domains(w)
            self.ever_admitted += 1
        self.generation[key] += 1
        job.slowdown = slowdown(self.run_time, self.trees, w.tas)
        self.push(self.now + job.duration * job.slowdown, "complete", f"{key}#{self.generation[key]}")
        if decision.relaxed:  # the controller's Event CompactPlacementRelaxed
            self.log.append({"t": self.now, "kind": "relaxed", "workload": key, "detail": decision.relaxed})
        self.progress = True
        return True

    def replace_slice(self, decision: Admit) -> None:
        """The simulator's jobs never scale: an old slice is only dropped if one is there."""
        old = self.admitted.pop(decision.replaces, None)
        if old is not None:
            self.tas(old, -1)

    def evict(self, decision: Preempt | Evict) -> None:
        job = self.jobs[decision.workload]
        if isinstance(decision, Preempt):
            self.preemptions += 1
            job.preemptions += 1
            self._evict_later(decision.workload, "preemption", f"{decision.reason} by {decision.preemptor}")
        else:
            self.evictions += 1
            job.evictions += 1
            self._evict_later(decision.workload, "eviction", decision.reason)
        self.progress = True

    def annotate(self, workload: str, annotation: str, value: str | None) -> None:
        """Set (``None``: remove) toposched's annotation on the workload's spec, as the controller
        writes it on the Workload: it stays with the job's spec until it is removed."""
        held: PendingWorkload | AdmittedWorkload | None = self.pending.get(workload) or self.admitted.get(workload)
        if held is None or held.spec.annotations.get(annotation) == value:
            return
        annotations = {k: v for k, v in held.spec.annotations.items() if k != annotation}
        if value is not None:
            annotations[annotation] = value
        spec = dataclasses.replace(held.spec, annotations=annotations)
        if isinstance(held, PendingWorkload):
            self.pending[workload] = dataclasses.replace(held, spec=spec)
        else:
            self.admitted[workload] = dataclasses.replace(held, spec=spec)
        self.jobs[workload].spec = spec

    def still_pending(self, decision: Pending, parked: bool) -> None:
        if not parked:
            return
        new = decision.workload not in self._parked_before
        if decision.retry_at is not None and new:
            self.push(decision.retry_at, "wake", decision.workload)  # the compact wait's end
        self.progress = self.progress or new

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

