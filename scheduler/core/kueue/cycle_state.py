"""What one cycle works on while it decides: the snapshot, the quota tree and the topology
trees charged as its entries settle, the priorities of the admitted workloads, and the domains
compact waiters hold. Made once per cycle (``cycle._one_cycle``); the nominator reads it, the
settling steps charge it."""

from __future__ import annotations

from scheduler.core.beyond.domain_holds import Holds
from scheduler.core.kueue import afs
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.fairsharing import node_weights
from scheduler.core.kueue.queueing import cluster_queue_readiness, resolve_priority
from scheduler.core.kueue.snapshot import Snapshot, quota_in_use
from scheduler.core.kueue.topologies import Topologies
from scheduler.core.preemption.cost import LqUsage


class CycleState:
    def __init__(self, snap: Snapshot, *, own_trees: bool = False) -> None:
        """``own_trees``: the snapshot's trees are this cycle's to change (as ``Topologies``)."""
        self.snap = snap
        self.quota = quota_in_use(snap)
        self.prio = {w.key: resolve_priority(w.spec, snap.workload_priority_classes, snap.priority_classes,
                                             w.priority) for w in snap.admitted}
        self.topologies = Topologies(snap, own_trees=own_trees)
        self.admitted = sorted(snap.admitted, key=lambda w: w.key)
        # Not Active (stopped, terminating, missing flavor or topology: the condition
        # ``queue_status`` reports), or in a cohort cycle (Kueue's scheduler skips those too).
        self.inactive = {name for name, cq in snap.cluster_queues.items()
                         if not cluster_queue_readiness(cq, snap.flavors, self.topologies.trees).active
                         or self.quota.under_cycle(name)}
        # waitForPodsReady: every workload holding quota has PodsReady=True (blockAdmission).
        self.all_ready = all(w.pods_ready for w in snap.admitted)
        self.fair = snap.config.fair_sharing.enabled
        self.weights = node_weights(snap.cluster_queues, snap.cohorts) if self.fair else {}
        self.holds = Holds(snap, self.topologies)  # reserve-compact

    def priority_of(self, w: AdmittedWorkload) -> int:
        return self.prio[w.key]

    def lq_usage(self) -> LqUsage | None:
        """Admission Fair Sharing's candidate tie-break (core/kueue/afs.py): None when AFS is off."""
        snap = self.snap
        if not afs.enabled(snap.config):
            return None

        def usage(w: AdmittedWorkload) -> float | None:
            cq = snap.cluster_queues.get(w.cluster_queue)
            if cq is None or not afs.orders_by_usage(snap.config, cq.admission_mode):
                return None
            return afs.local_queue_usage(snap.lq_usage, f"{w.spec.namespace}/{w.spec.queue_name}", snap.config)
        return usage
