"""Phase 5 of the controller's pass: admission. The snapshot of the informer caches (the
Workloads the adapter cannot read left out, each reported), Kueue's cycles back to back on it
(``core.cycle.run_cycles``), their decisions written (``kube/apply.py``), and the queue objects'
status with this pass's admissions before the pending reasons; the PreemptionConfigs and
PreemptionLimits the cycle honours read, and the limits' counts written
(``kube/preemption_limits.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.snapshot import Invalid
from scheduler.core.beyond.healthy_capacity import ANN_FOLLOW_HEALTHY
from scheduler.core.kueue.cycle import run_cycles
from scheduler.core.kueue.decisions import Pending
from scheduler.core.kueue.queueing import QueueState
from scheduler.core.kueue.snapshot import Snapshot, after_decisions, draining
from scheduler.k8s.informer import object_key
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.apply import apply_decisions
from scheduler.kube.cycle_budget import CycleBudget
from scheduler.kube.invalid import InvalidWorkloads
from scheduler.kube.isolation import UnreadableWorkloads
from scheduler.kube.metrics import CycleMetrics
from scheduler.kube.phase import PassState, Shared
from scheduler.kube.preemption_limits import PreemptionRules
from scheduler.kube.queues import QueueObjectsWriter
from scheduler.kube.settings import ControllerSettings
from scheduler.kube.snapshot import build_snapshot


@dataclass(frozen=True)
class AdmissionParts:
    """What the admission phase reads and writes besides the shared parts: the queues' state
    between passes (inadmissible, compact waits), the queue objects' status writer, the
    Workloads it cannot read or that are invalid, the conversions reused between snapshots,
    the preemption rules and the metrics of each attempt."""

    queue_state: QueueState
    queue_objects: QueueObjectsWriter
    unreadable: UnreadableWorkloads
    invalid: InvalidWorkloads
    snapshot_caches: SnapshotCaches
    preemption_rules: PreemptionRules
    metrics: CycleMetrics


class AdmitPhase:
    def __init__(self, shared: Shared, settings: ControllerSettings, parts: AdmissionParts,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        """``timer``: measures how long the cycles took (kube/cycle_budget.py)."""
        self.s = shared
        self.settings = settings
        self.parts = parts
        self._fingerprint = 0
        self.budget = CycleBudget()
        self.timer = timer

    def capacity_fingerprint(self) -> int:
        """Changes whenever capacity or queue configuration may have changed: then workloads
        parked as inadmissible (BestEffortFIFO) get another chance (Kueue requeues them when
        a workload finishes or is evicted, or queue objects change; and when a pod that took a
        node's capacity goes)."""
        cache = self.s.cache
        # A Workload that finishes leaves the holding set: that changes the fingerprint too.
        holding = frozenset((object_key(w), st.condition_true(w, st.EVICTED)) for w in wi.holding(cache.workloads))
        # Queue objects by spec generation (and deletion), not resourceVersion: our own status
        # and finalizer writes (kube.queues) must not count as a configuration change.
        config = frozenset((inf.resource.plural, object_key(o), o["metadata"].get("generation"),
                            bool(o["metadata"].get("deletionTimestamp")))
                           for inf in (cache.cluster_queues, cache.local_queues, cache.flavors,
                                       cache.topologies, cache.cohorts)
                           for o in inf.items())
        nodes = frozenset((object_key(o), o["metadata"].get("resourceVersion")) for o in cache.nodes.items())
        # Bound pods (the informer leaves finished ones out): a pod that goes frees its node's
        # capacity for placement (adapter.pod_ownership counts every pod no admitted Workload owns).
        pods = frozenset((p["metadata"].get("uid"), (p.get("spec") or {}).get("nodeName"))
                         for p in cache.pods.items() if (p.get("spec") or {}).get("nodeName"))
        # Opting in or out of quota that follows healthy capacity (an annotation: no generation
        # bump), and the preemption rules and limits.
        follow = frozenset((object_key(o), (o["metadata"].get("annotations") or {}).get(ANN_FOLLOW_HEALTHY))
                           for o in cache.cluster_queues.items())
        return hash((holding, config, nodes, pods, follow, self.parts.preemption_rules.fingerprint()))

    def run(self, state: PassState | None = None) -> Snapshot:
        """One admission cycle; returns the snapshot it decided on (the queue status is
        computed from it too), and keeps it in the pass's ``state``."""
        s, p, settings = self.s, self.parts, self.settings
        fingerprint = self.capacity_fingerprint()
        if fingerprint != self._fingerprint:
            p.queue_state.release()
            self._fingerprint = fingerprint
        p.queue_state.release_due(s.clock().timestamp())  # compact waits that ran out
        invalid: list[Invalid] = []
        snapshot = self.snapshot(invalid)
        p.invalid.report(invalid)
        decided, reasons = snapshot, []
        if (snapshot.pending or draining(snapshot)) and not p.unreadable.holds_admission():
            p.queue_objects.announce_work(snapshot, s.isolation)
            budget = self.budget
            budget.minimum, budget.budget_s = settings.cycles_per_pass, settings.cycle_budget_s
            cycles = budget.cycles()
            started = self.timer()
            decisions = p.metrics.admission_attempt(lambda: run_cycles(snapshot, cycles))
            budget.observe(self.timer() - started, decisions)
            reasons = [d for d in decisions if isinstance(d, Pending)]
            actions = [d for d in decisions if not isinstance(d, Pending)]
            apply_decisions(s.writer, p.queue_state, snapshot, actions, s.clock(), s.isolation)
            decided = after_decisions(snapshot, decisions)
        # Queue status with this pass's admissions, before the pending reasons: a ClusterQueue
        # reports an admission (and its pending count) in the pass that made it, as Kueue's
        # cache does, even when hundreds of new Workloads each get a first pending reason
        # (issue 18: Kueue's perf recorder reads usage and "work left" from ClusterQueue status).
        p.queue_objects.sync(decided, s.isolation)
        if reasons:
            apply_decisions(s.writer, p.queue_state, snapshot, reasons, s.clock(), s.isolation)
        p.preemption_rules.write_status(snapshot.preemption_rules)
        if state is not None:
            state.snapshot = snapshot
        return snapshot

    def snapshot(self, invalid: list[Invalid] | None = None) -> Snapshot:
        """The cycle's snapshot without the Workloads the adapter cannot read (each reported,
        and skipped until it changes) nor the invalid ones (into ``invalid``); the rest of the
        cluster is admitted as usual."""
        s, p, settings = self.s, self.parts, self.settings
        rules = p.preemption_rules.read()

        def build() -> Snapshot:
            if invalid is not None:
                invalid.clear()  # a second build after a probe fills it again
            return build_snapshot(s.cache, s.clock(), solver=settings.solver, time_budget_s=settings.time_budget_s,
                                  inadmissible=p.queue_state.inadmissible(),
                                  placement_options=settings.placement_options,
                                  domain_preemption=settings.domain_preemption,
                                  exclude=p.unreadable.current(wi.live(s.cache.workloads)),
                                  config=settings.config, signer=s.writer.signer, invalid=invalid,
                                  caches=p.snapshot_caches, preemption_rules=rules)
        try:
            return build()
        except Exception:
            if not p.unreadable.probe(s.cache.workloads.items(), s.cache.flavors.items(),
                                      lambda wl, exc: s.isolation.report("admit", wl, exc, wl),
                                      s.cache.workloads.get):
                raise  # no Workload is to blame: something else is broken (reconcile logs it)
            return build()
