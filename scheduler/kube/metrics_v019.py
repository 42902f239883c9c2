"""The metrics Kueue v0.18/v0.19 added, registered only under ``--kueue-version v0.19``: Kueue
v0.19.2's names, help texts, label names and buckets (``pkg/metrics/metrics.go`` at the tag), and
Kueue's registration rules (``Register``: ``workload_creation_latency_seconds`` only with the
``MetricForWorkloadCreationLatency`` gate, ``local_queue_admission_fair_sharing_usage`` only with
``LocalQueueMetrics``). Counters and histograms are fed by the writer's decision observers
(:meth:`V019Metrics.observe`); the gauges by each pass's snapshot
(``metrics_gauges_v019.v019_gauge_values``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

from scheduler.core.config import FeatureGates
from scheduler.k8s.clock import parse_timestamp

ROLE = "leader"
Family = tuple[str, str, tuple[str, ...]]

_REASONS = """The label 'reason' can have the following values:
- "Preempted" means that the workload was evicted in order to free resources for a workload with a higher priority or reclamation of nominal quota.
- "PodsReadyTimeout" means that the eviction took place due to a PodsReady timeout.
- "AdmissionCheck" means that the workload was evicted because at least one admission check transitioned to False.
- "ClusterQueueStopped" means that the workload was evicted because the ClusterQueue is stopped.
- "LocalQueueStopped" means that the workload was evicted because the LocalQueue is stopped.
- "NodeFailures" means that the workload was evicted due to node failures when using TopologyAwareScheduling.
- "Deactivated" means that the workload was evicted because spec.active is set to false."""  # noqa: E501

EVICTED_ONCE_HELP_V019 = "The number of unique workload evictions per 'cluster_queue',\n" + _REASONS + """
The label 'underlying_cause' can have the following values:
- "" means that the value in 'reason' label is the root cause for eviction.
- "WaitForStart" means that the pods have not been ready since admission, or the workload is not admitted.
- "WaitForRecovery" means that the Pods were ready since the workload admission, but some pod has failed.
- "AdmissionCheck" means that the workload was evicted by Kueue due to a rejected admission check.
- "MaximumExecutionTimeExceeded" means that the workload was evicted by Kueue due to maximum execution time exceeded.
- "RequeuingLimitExceeded" means that the workload was evicted by Kueue due to requeuing limit exceeded."""  # noqa: E501

EVICTION_LATENCY_HELP = """The time from workload eviction (WorkloadEvicted condition becomes True) until the workload returns to Pending (quota released).
Observed on status transition from admitted or quota-reserved to pending while WorkloadEvicted remains True.
Each matching update observes one latency sample (seconds) into this histogram; Prometheus aggregates samples across workloads.
Uses the eviction condition LastTransitionTime on the updated object as the start time; cluster_queue is taken from status.admission.cluster_queue on the pre-update object when set and non-empty (otherwise no sample is recorded for that update).
""" + _REASONS  # noqa: E501

# Kueue's generateExponentialBuckets(14): 1, then 2.5 doubling.
WAIT_BUCKETS_14 = (1.0, *(2.5 * 2**i for i in range(13)))
# prometheus.ExponentialBuckets(0.01, 2, 11)
CREATION_BUCKETS = tuple(0.01 * 2**i for i in range(11))
# client_golang's DefBuckets (pod_scheduling_gate_removal_seconds sets none)
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

BORROWING_LIMIT_HELP = ("Reports the cluster_queue's resource borrowing limit within all the flavors. "
                        "If borrowingLimit is unset, this metric reports +Inf.")
LENDING_LIMIT_HELP = ("Reports the cluster_queue's resource lending limit within all the flavors. If lendingLimit is "
                      "unset, this metric reports +Inf.")

# Gauge families new in v0.18/v0.19 (name, Kueue's help, labels); values: metrics_gauges_v019.
CLUSTER_QUEUE_INFO: Family = (
    "kueue_cluster_queue_info",
    "Reports ClusterQueue hierarchy information. The metric has value 1 and can be joined using labels.",
    ("cluster_queue", "parent_cohort", "root_cohort", "replica_role"))
COHORT_INFO: Family = (
    "kueue_cohort_info",
    "Reports Cohort hierarchy information. The metric has value 1 and can be joined using labels.",
    ("cohort", "parent_cohort", "root_cohort", "replica_role"))
RESOURCE_PENDING: Family = (
    "kueue_cluster_queue_resource_pending",
    "Reports the cluster_queue's total pending resource requests. Unlike resource_reservation, pending workloads "
    "have not yet been assigned to flavors.",
    ("cluster_queue", "resource", "replica_role"))
UNADMITTED: Family = (
    "kueue_unadmitted_workloads",
    "The number of unadmitted workloads, per 'cluster_queue', 'reason', and 'underlying_cause'. This metric is only "
    "emitted when UnadmittedWorkloadsObservability feature gate is enabled.",
    ("cluster_queue", "reason", "underlying_cause", "replica_role"))
AFS_USAGE: Family = (
    "kueue_local_queue_admission_fair_sharing_usage",
    "Reports a value representing the LocalQueue's Admission Fair Sharing usage,\ncalculated from the "
    "resource-weighted sum of consumed resources and pending\nadmission penalties, divided by the LocalQueue's fair "
    "sharing weight",
    ("name", "namespace", "cluster_queue", "replica_role"))


def v019_gauge_families(gates: FeatureGates) -> tuple[Family, ...]:
    """The v0.19 gauge families Kueue registers under ``gates``."""
    lq_metrics = (AFS_USAGE,) if gates.enabled("LocalQueueMetrics") else ()
    return (CLUSTER_QUEUE_INFO, COHORT_INFO, RESOURCE_PENDING, UNADMITTED, *lq_metrics)


def _condition(workload: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for cond in (workload.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return {}


def _cluster_queue(workload: Mapping[str, Any]) -> str:
    return str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


class V019Metrics:
    """The v0.19 histograms, on ``registry``."""

    def __init__(self, registry: CollectorRegistry, gates: FeatureGates) -> None:
        self.eviction_latency = Histogram("kueue_workload_eviction_latency_seconds", EVICTION_LATENCY_HELP,
                                          ("cluster_queue", "reason", "replica_role"), buckets=WAIT_BUCKETS_14,
                                          registry=registry)
        self.gate_removal = Histogram("kueue_pod_scheduling_gate_removal_seconds",
                                      "Duration from Workload admission to removal of a Pod scheduling gate.",
                                      ("name", "cluster_queue", "is_group", "replica_role"),
                                      buckets=GO_DEFAULT_BUCKETS, registry=registry)
        self.creation_latency = Histogram(
            "kueue_workload_creation_latency_seconds", "The time between a job was created until its workload was "
            "created, per 'job_kind'. Entries are only recorded for objects with generation 1.",
            ("job_kind", "replica_role"), buckets=CREATION_BUCKETS,
            registry=registry) if gates.enabled("MetricForWorkloadCreationLatency") else None

    def observe(self, kind: str, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        if kind == "requeued":
            self._requeued(workload, detail)
        elif kind == "created":
            self._created(workload, detail)
        elif kind == "gate_removed":
            self._gate_removed(workload, detail)

    def _requeued(self, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        """Kueue's workload controller (``EvictionPendingLatency``): quota released while
        Evicted is True; from the Evicted condition's transition, clamped at 0; no sample
        without the pre-update object's ClusterQueue."""
        evicted, cq, at = _condition(workload, "Evicted"), _cluster_queue(workload), parse_timestamp(detail.get("at"))
        since = parse_timestamp(evicted.get("lastTransitionTime"))
        if not evicted or not cq or at is None or since is None:
            return
        self.eviction_latency.labels(cq, str(evicted.get("reason") or ""), ROLE).observe(
            max(0.0, (at - since).total_seconds()))

    def _created(self, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        """jobframework ``RecordWorkloadCreationLatency``: a job of generation 1 only."""
        if self.creation_latency is None or int(detail.get("jobGeneration") or 1) > 1:
            return
        job_at = parse_timestamp(detail.get("jobCreated"))
        wl_at = parse_timestamp((workload.get("metadata") or {}).get("creationTimestamp"))
        if job_at is None or wl_at is None:
            return
        self.creation_latency.labels(str(detail.get("jobKind") or ""), ROLE).observe((wl_at - job_at).total_seconds())

    def _gate_removed(self, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        """``utilpod.RecordPodSchedulingGateRemovalSeconds``: from the Admitted condition's
        transition, per pod released."""
        admitted, at = _condition(workload, "Admitted"), parse_timestamp(detail.get("at"))
        since = parse_timestamp(admitted.get("lastTransitionTime"))
        if not admitted or at is None or since is None:
            return
        self.gate_removal.labels(str(detail.get("gate") or ""), _cluster_queue(workload),
                                 "true" if detail.get("isGroup") else "false", ROLE).observe(
            (at - since).total_seconds())
