"""The gauge values of Kueue v0.18/v0.19's metrics for one pass (pure, from the pass's snapshot),
reported only under ``--kueue-version v0.19`` (``metrics_v019`` names the families).

- ``kueue_cluster_queue_info`` / ``kueue_cohort_info`` (gate ``MetricsForCohorts``): 1 for every
  ClusterQueue and every cohort of the trees (implicit ones too), with its parent and root cohort
  ("" when none), as Kueue's cache ``recordCQInfo`` / ``recordCohortInfo``;
- ``kueue_cluster_queue_resource_pending``: the summed requests of the ClusterQueue's pending
  workloads per resource, 0 for every resource its spec covers (Kueue's queue manager
  ``reportCQPendingWorkloads``);
- ``kueue_local_queue_admission_fair_sharing_usage`` (admission fair sharing on): each
  LocalQueue's usage as the admission order reads it (``core/kueue/afs.py``);
- ``kueue_unadmitted_workloads``: registered, no series (its gate is off in v0.19.2; the
  granular reasons under the gate are not fed to it yet).
"""

from __future__ import annotations

from scheduler.core.kueue import afs
from scheduler.core.kueue.quota import QuotaState, cohort_node, cq_node
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.resources import uses_milli_units
from scheduler.kube.metrics_v019 import AFS_USAGE, CLUSTER_QUEUE_INFO, COHORT_INFO, RESOURCE_PENDING

ROLE = "leader"
_COHORT = cohort_node("")
Labels = tuple[str, ...]


def resource_value(resource: str, amount: int) -> float:
    """A canonical amount as Kueue's float (``QuantityToFloat``): cores for cpu, not millicores."""
    return amount / 1000 if uses_milli_units(resource) else float(amount)


def _name(node: str | None) -> str:
    return node.split(":", 1)[1] if node else ""


def _root(quota: QuotaState, node: str) -> str | None:
    """The root cohort above ``node`` (a cohort is its own root), None for a lone ClusterQueue."""
    root = node if node.startswith(_COHORT) else None
    seen = {node}
    parent = quota.parent.get(node)
    while parent is not None and parent not in seen:
        seen.add(parent)
        root, parent = parent, quota.parent.get(parent)
    return root


def _info(snap: Snapshot, quota: QuotaState) -> dict[str, dict[Labels, float]]:
    if not snap.config.feature_gates.enabled("MetricsForCohorts"):
        return {}
    cqs: dict[Labels, float] = {}
    for name in snap.cluster_queues:
        node = cq_node(name)
        cqs[(name, _name(quota.parent.get(node)), _name(_root(quota, node)), ROLE)] = 1.0
    cohorts: dict[Labels, float] = {(_name(node), _name(quota.parent.get(node)), _name(_root(quota, node)), ROLE): 1.0
                                    for node in quota.parent if node.startswith(_COHORT)}
    return {CLUSTER_QUEUE_INFO[0]: cqs, COHORT_INFO[0]: cohorts}


def _pending_resources(snap: Snapshot) -> dict[Labels, float]:
    totals: dict[str, dict[str, int]] = {
        name: {res: 0 for group in cq.resource_groups for flavor in group.flavors for res in flavor.resources}
        for name, cq in snap.cluster_queues.items()}
    for pw in snap.pending:
        lq = snap.local_queues.get(f"{pw.spec.namespace}/{pw.spec.queue_name}")
        if lq is None or lq.cluster_queue not in totals:
            continue  # queued nowhere, in Kueue too
        row = totals[lq.cluster_queue]
        for ps in pw.spec.pod_sets:
            for res, per_pod in ps.requests.items():
                row[res] = row.get(res, 0) + per_pod * ps.count
    return {(cq, res, ROLE): resource_value(res, amount) for cq, row in totals.items() for res, amount in row.items()}


def _afs_usage(snap: Snapshot) -> dict[Labels, float]:
    if not afs.enabled(snap.config) or not snap.config.feature_gates.enabled("LocalQueueMetrics"):
        return {}
    return {(lq.name, lq.namespace, lq.cluster_queue, ROLE): afs.local_queue_usage(snap.lq_usage, key, snap.config)
            for key, lq in snap.local_queues.items()}


def v019_gauge_values(snap: Snapshot, quota: QuotaState) -> dict[str, dict[Labels, float]]:
    return {**_info(snap, quota), RESOURCE_PENDING[0]: _pending_resources(snap), AFS_USAGE[0]: _afs_usage(snap)}
