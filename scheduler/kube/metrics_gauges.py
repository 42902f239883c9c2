"""The gauge values of one controller pass, from its snapshot (pure: plain data in and out).

What Kueue's cache reports as gauges, computed from the same :class:`~scheduler.core.kueue.cycle.Snapshot`
the admission cycle and the queue status (``core.queue_status``) use, so ``/metrics`` and
``kubectl get clusterqueues`` never disagree. ``scheduler.kube.metrics`` renders them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.core.config import KUEUE_V019
from scheduler.core.kueue.fairsharing import Shares, node_weights
from scheduler.core.kueue.queue_status import queue_statuses
from scheduler.core.kueue.queueing import cluster_queue_readiness
from scheduler.core.kueue.quota import ClusterQueueSpec, QuotaState, cohort_node
from scheduler.core.kueue.snapshot import Snapshot, quota_in_use
from scheduler.core.placement.quality import free_whole_domains, leaves_of
from scheduler.kube.metrics_gauges_v019 import Labels, resource_value, v019_gauge_values

# Kueue's ClusterQueue states for kueue_cluster_queue_status (exactly one is 1).
CQ_STATES = ("pending", "active", "terminating")
PENDING_STATES = ("active", "inadmissible")


@dataclass(frozen=True)
class GaugeValues:
    """Metric name -> {label values (in the family's label order) -> value}."""

    values: Mapping[str, Mapping[Labels, float]] = field(default_factory=dict)

    def get(self, name: str) -> Mapping[Labels, float]:
        return self.values.get(name, {})


def _pending(snap: Snapshot) -> dict[Labels, float]:
    """Per ClusterQueue: pending workloads active in the queue, or parked as inadmissible
    (all of them inadmissible while the ClusterQueue is not active, as Kueue reports)."""
    counts = {(cq, state): 0.0 for cq in snap.cluster_queues for state in PENDING_STATES}
    tas_flavors = frozenset(snap.trees)
    active = {name: cluster_queue_readiness(cq, snap.flavors, tas_flavors).active
              for name, cq in snap.cluster_queues.items()}
    for pw in snap.pending:
        lq = snap.local_queues.get(f"{pw.spec.namespace}/{pw.spec.queue_name}")
        if lq is None or lq.cluster_queue not in snap.cluster_queues:
            continue  # Kueue does not queue it anywhere either
        parked = pw.key in snap.inadmissible or not active[lq.cluster_queue]
        counts[(lq.cluster_queue, "inadmissible" if parked else "active")] += 1
    return {(cq, state, "leader"): n for (cq, state), n in counts.items()}


def _quotas(cq: ClusterQueueSpec, unset: float) -> dict[str, dict[Labels, float]]:
    """Nominal quota and limits per flavor and resource; an unset limit is ``unset``: 0 in Kueue
    v0.17.0, +Inf in v0.19.2 (``pkg/cache/scheduler/clusterqueue.go``: ``math.Inf(1)``)."""
    out: dict[str, dict[Labels, float]] = {"kueue_cluster_queue_nominal_quota": {},
                                           "kueue_cluster_queue_borrowing_limit": {},
                                           "kueue_cluster_queue_lending_limit": {}}
    for group in cq.resource_groups:
        for flavor in group.flavors:
            for resource, quota in flavor.resources.items():
                key = (cq.cohort or "", cq.name, flavor.name, resource, "leader")
                out["kueue_cluster_queue_nominal_quota"][key] = resource_value(resource, quota.nominal)
                out["kueue_cluster_queue_borrowing_limit"][key] = (
                    unset if quota.borrowing_limit is None else resource_value(resource, quota.borrowing_limit))
                out["kueue_cluster_queue_lending_limit"][key] = (
                    unset if quota.lending_limit is None else resource_value(resource, quota.lending_limit))
    return out


def _free_domains(snap: Snapshot) -> dict[Labels, float]:
    out: dict[Labels, float] = {}
    for flavor, tree in snap.trees.items():
        placements = [u.placement for w in snap.admitted for u in w.tas if u.flavor == flavor]
        for level, count in free_whole_domains(tree, leaves_of(tree, placements)).items():
            out[(flavor, level)] = float(count)
    return out


def _finished(finished: Mapping[str, int]) -> dict[Labels, float]:
    return {(cq, "leader"): float(count) for cq, count in finished.items()}


def _weighted_shares(snap: Snapshot, quota: QuotaState) -> dict[str, dict[Labels, float]]:
    """Kueue's fair-sharing gauges (reported only while fair sharing is on): every ClusterQueue
    (NaN for an infinite share, as Kueue) and every cohort of the tree, implicit ones too."""
    if not snap.config.fair_sharing.enabled:
        return {}
    shares = Shares(quota, node_weights(snap.cluster_queues, snap.cohorts))
    cqs: dict[Labels, float] = {}
    for name, cq in snap.cluster_queues.items():
        value = shares.cluster_queue(name).weighted_share()
        cqs[(name, cq.cohort or "", "leader")] = math.nan if math.isinf(value) else value
    cohorts: dict[Labels, float] = {(node.split(":", 1)[1], "leader"): shares.drs(node).weighted_share()
                                    for node in quota.parent if node.startswith(cohort_node(""))}
    return {"kueue_cluster_queue_weighted_share": cqs, "kueue_cohort_weighted_share": cohorts}


def gauge_values(snap: Snapshot, finished: Mapping[str, int]) -> GaugeValues:
    """Every gauge toposched reports, from one pass's snapshot (and the count of Finished
    Workloads per ClusterQueue, which the snapshot leaves out)."""
    cq_status, _lq_status = queue_statuses(snap)
    quota = quota_in_use(snap)
    v019 = snap.config.release == KUEUE_V019
    unset_limit = math.inf if v019 else 0.0
    values: dict[str, dict[Labels, float]] = {
        "kueue_pending_workloads": _pending(snap),
        "kueue_reserving_active_workloads": {},
        "kueue_admitted_active_workloads": {},
        "kueue_cluster_queue_status": {},
        "kueue_cluster_queue_resource_reservation": {},
        "kueue_cluster_queue_resource_usage": {},
        "kueue_finished_workloads": _finished(finished),
        "toposched_free_domains": _free_domains(snap),
        **_weighted_shares(snap, quota),
    }
    for name, cq in snap.cluster_queues.items():
        status = cq_status[name]
        values["kueue_reserving_active_workloads"][(name, "leader")] = status.reserving_workloads
        values["kueue_admitted_active_workloads"][(name, "leader")] = status.admitted_workloads
        state = "active" if status.active.active else "terminating" if cq.terminating else "pending"
        for candidate in CQ_STATES:
            values["kueue_cluster_queue_status"][(name, candidate, "leader")] = float(candidate == state)
        for family, rows in _quotas(cq, unset_limit).items():
            values.setdefault(family, {}).update(rows)
        # Reservation = usage here (no admission checks: reserving is admitting); Kueue reports
        # both for every flavor and resource of the spec, 0 when unused.
        for group in cq.resource_groups:
            for flavor in group.flavors:
                for resource in flavor.resources:
                    amount = resource_value(resource, quota.used(name, (flavor.name, resource)))
                    key = (cq.cohort or "", name, flavor.name, resource, "leader")
                    values["kueue_cluster_queue_resource_reservation"][key] = amount
                    values["kueue_cluster_queue_resource_usage"][key] = amount
    if v019:  # the families Kueue v0.18/v0.19 added
        values.update(v019_gauge_values(snap, quota))
    return GaugeValues(values)
