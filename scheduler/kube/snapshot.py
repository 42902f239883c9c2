"""Cache -> core snapshot, and core decisions -> API writes.

The immutable-snapshot / pure-cycle / writer split of Kueue: :func:`build_snapshot` copies the
informer caches into ``scheduler.adapter.objects.ClusterObjects`` and lets the adapter convert
them (``scheduler.adapter.snapshot.build_snapshot``), ``scheduler.core.cycle.run_cycle``
decides, and :func:`apply_decisions` writes the results. Nothing here decides anything.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from scheduler.adapter import snapshot as adapter_snapshot
from scheduler.adapter.cluster import admitted_placements, core_nodes, core_pods, flavor_trees  # re-exported
from scheduler.adapter.objects import ClusterObjects
from scheduler.core.cycle import Snapshot
from scheduler.core.health import HealthPolicy

__all__ = ["admitted_placements", "apply_decisions", "build_snapshot", "cluster_objects", "core_nodes", "core_pods",
           "flavor_trees", "pod_set_assignment"]

log = logging.getLogger(__name__)
Obj = dict[str, Any]


# ---------------------------------------------------------------------- decisions -> API


def pod_set_assignment(psa: Any) -> dict[str, Any]:
    """A core ``PodSetAdmission`` as Kueue's ``status.admission.podSetAssignments[]`` entry."""
    from scheduler.core.assignment import encode_v1beta2
    from scheduler.core.resources import format_quantity

    out: dict[str, Any] = {
        "name": psa.name,
        "flavors": dict(psa.flavors),
        "resourceUsage": {res: format_quantity(amount, res) for res, amount in sorted(psa.resource_usage.items())},
        "count": psa.count,
    }
    if psa.topology is not None:
        out["topologyAssignment"] = encode_v1beta2(psa.topology)
    return out


def apply_decisions(controller: Any, snapshot: Any, decisions: Iterable[Any]) -> None:
    """Write each decision: Admit -> admission + QuotaReserved/Admitted; Preempt/Evict ->
    Evicted (+Preempted) — the eviction phase then stops the job; Pending -> QuotaReserved=False
    with the reason, only when it changed (routing failures repeat every cycle)."""
    from scheduler.core.cycle import Admit, Evict, Pending, Preempt
    from scheduler.kube import status as st

    now = controller.clock()
    waited: dict[str, float] = {p.key: p.timestamp for p in snapshot.pending}
    for decision in decisions:
        wl = controller.cache.workloads.get(decision.workload)
        if wl is None or (wl.get("metadata") or {}).get("uid") != decision.uid:
            continue
        if isinstance(decision, Admit):
            psas = [pod_set_assignment(p) for p in decision.pod_sets]
            updated = controller._patch_status(wl, st.admit_status(wl, decision.cluster_queue, psas, now))
            if updated:
                controller.queue_state.forget(decision.workload)
                wait_s = max(0.0, snapshot.now - waited.get(decision.workload, snapshot.now))
                controller.events.record(updated, "Normal", "QuotaReserved",
                                         f"Quota reserved in ClusterQueue {decision.cluster_queue}, "
                                         f"wait time since queued was {wait_s:.0f}s")
                controller.events.record(updated, "Normal", "Admitted",
                                         f"Admitted by ClusterQueue {decision.cluster_queue}, "
                                         "wait time since reservation was 0s")
                controller._notify("admitted", updated, {"clusterQueue": decision.cluster_queue,
                                                         "podSetAssignments": psas})
        elif isinstance(decision, Preempt):
            updated = controller.evict(wl, "Preempted", decision.message, preempted_reason=decision.reason)
            if updated:
                controller.events.record(updated, "Normal", "EvictedDueToPreempted", decision.message)
                controller.events.record(updated, "Normal", "Preempted", decision.message)
                preemptor = controller.cache.workloads.get(decision.preemptor)
                if preemptor:
                    controller.events.record(preemptor, "Normal", "PreemptedWorkload",
                                             f"Preempted {decision.workload} ({decision.reason})")
                controller._notify("preempted", updated, {"reason": decision.reason, "message": decision.message,
                                                          "preemptor": decision.preemptor})
        elif isinstance(decision, Evict):
            updated = controller.evict(wl, decision.reason, decision.message)
            if updated:
                controller.events.record(updated, "Normal", f"EvictedDue{decision.reason}", decision.message)
                controller._notify("evicted", updated, {"reason": decision.reason, "message": decision.message})
        elif isinstance(decision, Pending):
            current = st.find_condition(wl, st.QUOTA_RESERVED) or {}
            if decision.requeue == "inadmissible" and decision.cluster_queue:
                cq = snapshot.cluster_queues.get(decision.cluster_queue)
                if cq is not None and cq.queueing_strategy == "BestEffortFIFO":
                    controller.queue_state.park(decision.workload, decision.cluster_queue)
            if (current.get("status"), current.get("reason"), current.get("message")) == (
                    "False", decision.reason, decision.message):
                continue
            updated = controller._patch_status(wl, st.pending_status(wl, decision.reason, decision.message, now))
            if updated:
                controller.events.record(updated, "Warning" if decision.reason != "Pending" else "Normal",
                                         decision.reason, decision.message)
                controller._notify("pending", updated, {"reason": decision.reason, "message": decision.message})


# ---------------------------------------------------------------------- cache -> Snapshot


def cluster_objects(cache: Any) -> ClusterObjects:
    """What the informers hold right now (``ClusterCache``: ``.items()`` per resource)."""
    return ClusterObjects(
        nodes=cache.nodes.items(), pods=cache.pods.items(), workloads=cache.workloads.items(),
        cluster_queues=cache.cluster_queues.items(), cohorts=cache.cohorts.items(),
        local_queues=cache.local_queues.items(), flavors=cache.flavors.items(), topologies=cache.topologies.items(),
        namespaces=cache.namespaces.items(), workload_priority_classes=cache.workload_priority_classes.items(),
        priority_classes=cache.priority_classes.items())


def build_snapshot(cache: Any, now: Any, *, solver: str = "auto", time_budget_s: float = 0.1,
                   inadmissible: frozenset[str] = frozenset(), health_policy: HealthPolicy | None = None) -> Snapshot:
    """The informer caches as one immutable core ``Snapshot`` (converted by ``scheduler.adapter``)."""
    return adapter_snapshot.build_snapshot(cluster_objects(cache), now, solver=solver, time_budget_s=time_budget_s,
                                           inadmissible=inadmissible, health_policy=health_policy)
