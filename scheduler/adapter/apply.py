"""One function applies a cycle's decisions to a view of the cluster (:func:`apply_decision`).

The controller's writer (``kube/apply.py``: API writes) and the simulator (``sim/cluster.py``:
its in-memory cluster) are two :class:`ClusterView` s of one protocol, so what a decision does is
said once and the simulator cannot drift from the controller:

* Admit: the workload gets its admission; its sticky preemption target and the domain its
  compact wait held have served and are removed; its parked queue entry is forgotten; the
  old slice an elastic job's new slice replaces is finished.
* Preempt, Evict: the workload is evicted (step one: the view finishes the eviction once its
  pods are gone).
* Pending: the preemption target is kept on the workload (sticky across cycles and restarts),
  the held domain set or removed (reserve-compact); a BestEffortFIFO head requeued as
  inadmissible is parked until capacity is released (or, for a compact wait, ``retry_at``); the
  view records why it is pending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN
from scheduler.core.kueue.decisions import Admit, Decision, Evict, Pending, Preempt
from scheduler.core.kueue.queueing import REQUEUE_INADMISSIBLE, QueueState
from scheduler.core.kueue.quota import BEST_EFFORT_FIFO, ClusterQueueSpec

# What a workload carries only until it is admitted.
LANDED = (ANN_PREEMPTION_TARGET, ANN_RESERVED_DOMAIN)


class ClusterView(Protocol):
    def current(self, decision: Decision) -> bool:
        """The decision's workload is still the one decided about (else it is skipped)."""

    def admit(self, decision: Admit) -> bool:
        """Reserve quota and record the admission; False when it was not written (stale, gone)."""

    def evict(self, decision: Preempt | Evict) -> None:
        """Step one of the eviction (Evicted=True, and Preempted=True for a preemption)."""

    def replace_slice(self, decision: Admit) -> None:
        """An elastic job's new slice is admitted: finish the slice it replaces
        (``decision.replaces``) as Kueue's scheduler does (``WorkloadSliceReplaced``)."""

    def annotate(self, workload: str, annotation: str, value: str | None) -> None:
        """Set (None: remove) one of toposched's annotations on the workload."""

    def still_pending(self, decision: Pending, parked: bool) -> None:
        """Record why the workload is pending; ``parked``: it was just parked as inadmissible."""


def apply_decision(view: ClusterView, queue_state: QueueState, cluster_queues: Mapping[str, ClusterQueueSpec],
                   decision: Decision) -> None:
    if not view.current(decision):
        return
    if isinstance(decision, Admit):
        if view.admit(decision):
            if decision.replaces:
                view.replace_slice(decision)
            for annotation in LANDED:
                view.annotate(decision.workload, annotation, None)
            queue_state.forget(decision.workload)
    elif isinstance(decision, Preempt | Evict):
        view.evict(decision)
    else:
        if decision.preemption_target:
            view.annotate(decision.workload, ANN_PREEMPTION_TARGET, decision.preemption_target)
        view.annotate(decision.workload, ANN_RESERVED_DOMAIN, decision.reserved_domain or None)
        parked = False
        if decision.requeue == REQUEUE_INADMISSIBLE and decision.cluster_queue:
            cq = cluster_queues.get(decision.cluster_queue)
            if cq is not None and cq.queueing_strategy == BEST_EFFORT_FIFO:
                queue_state.park(decision.workload, decision.cluster_queue, decision.retry_at)
                parked = True
        view.still_pending(decision, parked)


def apply_decisions(view: ClusterView, queue_state: QueueState, cluster_queues: Mapping[str, ClusterQueueSpec],
                    decisions: Iterable[Decision]) -> None:
    """Every decision, in the cycle's order."""
    for decision in decisions:
        apply_decision(view, queue_state, cluster_queues, decision)
