"""ClusterQueue and LocalQueue status, computed the way Kueue v0.17 writes it.

What ``kubectl get clusterqueues,localqueues`` shows (the PENDING / ADMITTED WORKLOADS columns),
the ``Active`` condition with Kueue's reasons and messages, and the per-flavor usage tables.
Pure: a :class:`~scheduler.core.kueue.cycle.Snapshot` in, plain data out; ``scheduler.kube.queues``
writes it.

Kueue's sources, restated:

* ``Active`` of a ClusterQueue (``pkg/cache/scheduler/clusterqueue.go`` ``inactiveReason``):
  ``Terminating`` wins; otherwise every reason that applies, in the order stopped, missing
  flavors, missing topologies; the first one is the condition's reason and the message lists
  them all: ``Can't admit new workloads: is stopped, references missing ResourceFlavor(s): a,b.``
* ``Active`` of a LocalQueue (``pkg/controller/core/localqueue_controller.go``): ``Stopped``,
  ``ClusterQueueDoesNotExist``, ``ClusterQueueIsInactive`` or ``Ready``; a stopped LocalQueue
  reports 0 pending workloads.
* Counts: ``pendingWorkloads`` = queued workloads without a reservation; ``reservingWorkloads``
  = workloads holding quota; ``admittedWorkloads`` = of those, the admitted ones (the same set
  here: toposched has no admission checks, so reserving is admitting).
* Usage tables (``getUsage``, ``filterLocalQueueUsage``): every flavor of every resource group
  in spec order, its covered resources sorted by name, ``total`` as a Kubernetes quantity and,
  for a ClusterQueue, ``borrowed`` = total above the nominal quota (always ``"0"`` outside a
  cohort; Kueue writes the field anyway). LocalQueues have no ``borrowed``.
* ``fairSharing.weightedShare`` of a ClusterQueue and of a Cohort object
  (``clusterqueue_controller.go``, ``cohort_controller.go``, ``core/helpers.go``): written
  only while ``fairSharing`` is enabled in the Configuration (else the field is removed):
  the share (``core.fairsharing``) rounded up, MaxInt64 for a zero weight that borrows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.fairsharing import node_weights, status_shares
from scheduler.core.kueue.queueing import (
    CQ_READY,
    LQ_CLUSTER_QUEUE_INACTIVE,
    LQ_NO_CLUSTER_QUEUE,
    LQ_READY,
    LQ_STOPPED,
    ActiveCondition,
    cluster_queue_readiness,
    local_queue_of,
)
from scheduler.core.kueue.quota import STOP_NONE, ClusterQueueSpec, FlavorResource, QuotaState
from scheduler.core.kueue.snapshot import Snapshot, quota_in_use
from scheduler.core.resources import format_quantity


@dataclass(frozen=True)
class ResourceUsage:
    name: str
    total: str
    borrowed: str | None = None  # ClusterQueues only (LocalQueue tables have no such column)


@dataclass(frozen=True)
class FlavorUsage:
    name: str
    resources: tuple[ResourceUsage, ...]


@dataclass(frozen=True)
class QueueStatus:
    """The status fields Kueue writes on a ClusterQueue or LocalQueue (same shape for both)."""

    active: ActiveCondition
    pending_workloads: int
    reserving_workloads: int
    admitted_workloads: int
    flavors_reservation: tuple[FlavorUsage, ...]
    flavors_usage: tuple[FlavorUsage, ...]
    weighted_share: int | None = None  # ClusterQueues with fair sharing on; None = no fairSharing


def _usage_table(cq: ClusterQueueSpec, used: Mapping[FlavorResource, int],
                 borrowed: Mapping[FlavorResource, int] | None) -> tuple[FlavorUsage, ...]:
    """One row per flavor in resource-group order; ``borrowed`` given = a ClusterQueue's table."""
    rows = []
    for group in cq.resource_groups:
        for flavor in group.flavors:
            cells = []
            for res in sorted(group.covered_resources):
                fr = (flavor.name, res)
                cells.append(ResourceUsage(res, format_quantity(used.get(fr, 0), res),
                                           None if borrowed is None else format_quantity(borrowed.get(fr, 0), res)))
            rows.append(FlavorUsage(flavor.name, tuple(cells)))
    return tuple(rows)


def _sum_usage(workloads: Iterable[AdmittedWorkload]) -> dict[FlavorResource, int]:
    out: dict[FlavorResource, int] = {}
    for w in workloads:
        for fr, amount in w.usage.items():
            out[fr] = out.get(fr, 0) + amount
    return out


# Kueue v0.17 under a cohort cycle: the ClusterQueue fails to join its cache ("cohort has a
# cycle"), its status is never set to active, and the condition reads False with the Ready
# reason and words (``inactiveReason`` of a queue in neither state). Matched as observed live.
CQ_UNDER_CYCLE = ActiveCondition(False, *CQ_READY)


def _cluster_queue_status(cq: ClusterQueueSpec, quota: QuotaState, active: ActiveCondition, pending: int,
                          holding: list[AdmittedWorkload]) -> QueueStatus:
    used = {fr: quota.used(cq.name, fr) for g in cq.resource_groups for f in g.flavors
            for fr in ((f.name, r) for r in g.covered_resources)}
    # Kueue enforces borrowed = 0 outside a cohort (and still writes the field).
    in_cohort = quota.has_cohort(cq.name)
    borrowed = {fr: max(0, amount - quota.nominal(cq.name, fr)) if in_cohort else 0 for fr, amount in used.items()}
    table = _usage_table(cq, used, borrowed)
    return QueueStatus(active, pending, len(holding), len(holding), table, table)


def queue_statuses(snap: Snapshot) -> tuple[dict[str, QueueStatus], dict[str, QueueStatus]]:
    """(ClusterQueue name -> status, LocalQueue "namespace/name" -> status) for every queue in
    the snapshot."""
    quota = quota_in_use(snap)
    tas_flavors = frozenset(snap.trees)
    pending_in_lq: dict[str, int] = {}
    if snap.queues is not None and snap.queues.pending is snap.pending:
        # The pass's queues already group the pending Workloads by LocalQueue (counting them
        # one by one was most of this function with 15,000 pending, issue 18).
        pending_in_lq = {lq: len(items) for lq, items in snap.queues.by_local_queue.items()}
    else:
        for pw in snap.pending:
            key = local_queue_of(pw)
            pending_in_lq[key] = pending_in_lq.get(key, 0) + 1
    holding_in_cq: dict[str, list[AdmittedWorkload]] = {}
    holding_in_lq: dict[str, list[AdmittedWorkload]] = {}
    for w in snap.admitted:
        holding_in_cq.setdefault(w.cluster_queue, []).append(w)
        holding_in_lq.setdefault(f"{w.spec.namespace}/{w.spec.queue_name}", []).append(w)

    readiness = {name: CQ_UNDER_CYCLE if quota.under_cycle(name) else cluster_queue_readiness(cq, snap.flavors,
                                                                                                 tas_flavors)
                 for name, cq in snap.cluster_queues.items()}
    pending_in_cq: dict[str, int] = {}
    for key, lq in snap.local_queues.items():
        pending_in_cq[lq.cluster_queue] = pending_in_cq.get(lq.cluster_queue, 0) + pending_in_lq.get(key, 0)

    cq_status = {name: _cluster_queue_status(cq, quota, readiness[name], pending_in_cq.get(name, 0),
                                             holding_in_cq.get(name, []))
                 for name, cq in snap.cluster_queues.items()}
    if snap.config.fair_sharing.enabled:
        shares, _ = status_shares(quota, node_weights(snap.cluster_queues, snap.cohorts), list(cq_status), [])
        cq_status = {name: replace(qs, weighted_share=shares[name]) for name, qs in cq_status.items()}
    lq_status: dict[str, QueueStatus] = {}
    for key, lq in snap.local_queues.items():
        cq = snap.cluster_queues.get(lq.cluster_queue)
        holding = holding_in_lq.get(key, [])
        if lq.stop_policy != STOP_NONE:
            active = ActiveCondition(False, *LQ_STOPPED)
        elif cq is None:
            active = ActiveCondition(False, *LQ_NO_CLUSTER_QUEUE)
        elif readiness[cq.name].active:
            active = ActiveCondition(True, *LQ_READY)
        else:
            active = ActiveCondition(False, *LQ_CLUSTER_QUEUE_INACTIVE)
        pending = 0 if lq.stop_policy != STOP_NONE else pending_in_lq.get(key, 0)
        if cq is None:  # Kueue reports empty usage for a LocalQueue whose ClusterQueue is gone
            lq_status[key] = QueueStatus(active, pending, 0, 0, (), ())
            continue
        table = _usage_table(cq, _sum_usage(holding), None)
        lq_status[key] = QueueStatus(active, pending, len(holding), len(holding), table, table)
    return cq_status, lq_status


def cohort_shares(snap: Snapshot) -> dict[str, int | None]:
    """Cohort name -> ``status.fairSharing.weightedShare`` for every Cohort object of the
    snapshot; None (no ``fairSharing`` in the status) while fair sharing is off."""
    if not snap.config.fair_sharing.enabled:
        return dict.fromkeys(snap.cohorts)
    quota = quota_in_use(snap)
    _, shares = status_shares(quota, node_weights(snap.cluster_queues, snap.cohorts), [], list(snap.cohorts))
    return {name: shares.get(name, 0) for name in snap.cohorts}
