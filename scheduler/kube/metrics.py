"""The controller's Prometheus metrics: Kueue v0.17's names, labels, types and buckets for what
toposched does, plus its own ``toposched_*`` (docs/metrics.md lists each with its Kueue source).

Fed three ways, none of which decides anything:

* counters and histograms from the writer's decision observers (:meth:`ControllerMetrics.observe`,
  subscribed like the gRPC WatchDecisions stream): a decision counts once it was written;
* ``kueue_admission_attempts_total`` and its duration around each admission cycle
  (:meth:`ControllerMetrics.admission_attempt`);
* gauges from each pass's snapshot (:meth:`ControllerMetrics.reconciled`, computed by
  :mod:`scheduler.kube.metrics_gauges`), swapped in whole so a scrape never sees half a pass.

Only the leader writes, so ``replica_role`` is ``leader`` on every series; a replica that stops
leading drops its gauges (:meth:`ControllerMetrics.clear_gauges`), as Kueue clears a role's gauges.
"""

from __future__ import annotations

import platform
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import metadata
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler.core.config import KUEUE_DEFAULTS, KUEUE_V019, KueueConfig
from scheduler.core.kueue.decisions import Admit, Decision
from scheduler.core.kueue.failures import EVICTION_REASON as NODE_FAILURES
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.kube.metrics_gauges import GaugeValues, gauge_values
from scheduler.kube.metrics_v019 import (
    BORROWING_LIMIT_HELP,
    EVICTED_ONCE_HELP_V019,
    LENDING_LIMIT_HELP,
    V019Metrics,
    v019_gauge_families,
)

ROLE = "leader"  # the only role that feeds metrics (followers never reconcile)


def kueue_exponential_buckets(count: int) -> tuple[float, ...]:
    """Kueue's wait-time buckets: 1, then ``count - 1`` buckets from 2.5 doubling."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


WAIT_BUCKETS_14 = kueue_exponential_buckets(14)
WAIT_BUCKETS_16 = kueue_exponential_buckets(16)
# client_golang's DefBuckets (Kueue's admission_attempt_duration_seconds sets none); the Python
# client's defaults differ, so they are spelled out.
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DOMAIN_BUCKETS = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0, 128.0)

CQ_PRIORITY = ("cluster_queue", "priority_class", "replica_role")
CQ_RESOURCE = ("cohort", "cluster_queue", "flavor", "resource", "replica_role")
# Gauge families (name, help, labels), values from metrics_gauges.gauge_values.
GAUGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("kueue_pending_workloads", "Pending workloads per cluster_queue; status active (in the queue) or "
     "inadmissible (parked until the cluster changes)", ("cluster_queue", "status", "replica_role")),
    ("kueue_reserving_active_workloads", "Workloads reserving quota, per cluster_queue",
     ("cluster_queue", "replica_role")),
    ("kueue_admitted_active_workloads", "Admitted workloads that are active, per cluster_queue",
     ("cluster_queue", "replica_role")),
    ("kueue_finished_workloads", "Finished workloads still present, per cluster_queue",
     ("cluster_queue", "replica_role")),
    ("kueue_cluster_queue_status", "1 for the cluster_queue's status (pending, active or terminating), 0 for "
     "the others", ("cluster_queue", "status", "replica_role")),
    ("kueue_cluster_queue_resource_reservation", "Resources reserved by the cluster_queue's workloads, per "
     "flavor and resource", CQ_RESOURCE),
    ("kueue_cluster_queue_resource_usage", "Resources used by the cluster_queue's admitted workloads, per "
     "flavor and resource", CQ_RESOURCE),
    ("kueue_cluster_queue_nominal_quota", "Nominal quota per flavor and resource", CQ_RESOURCE),
    ("kueue_cluster_queue_borrowing_limit", "Borrowing limit per flavor and resource (0: none)", CQ_RESOURCE),
    ("kueue_cluster_queue_lending_limit", "Lending limit per flavor and resource (0: none)", CQ_RESOURCE),
    ("kueue_cluster_queue_weighted_share", "The cluster_queue's dominant resource share above nominal quota "
     "divided by its fairSharing weight (fair sharing on; NaN for a zero weight that borrows)",
     ("cluster_queue", "cohort", "replica_role")),
    ("kueue_cohort_weighted_share", "The cohort's dominant resource share above its quota divided by its "
     "fairSharing weight (fair sharing on)", ("cohort", "replica_role")),
    ("toposched_free_domains", "Topology domains with no admitted workload's pod on any of their nodes, per "
     "TAS flavor and level", ("flavor", "level")),
)



def gauge_families(config: KueueConfig) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """The gauge families of the Kueue release toposched behaves as: v0.17.0's, or under v0.19
    the limits' v0.19.2 help (+Inf when unset) and the families v0.18/v0.19 added."""
    if config.release != KUEUE_V019:
        return GAUGES
    v019_help = {"kueue_cluster_queue_borrowing_limit": BORROWING_LIMIT_HELP,
                 "kueue_cluster_queue_lending_limit": LENDING_LIMIT_HELP}
    return (*((name, v019_help.get(name, text), labels) for name, text, labels in GAUGES),
            *v019_gauge_families(config.feature_gates))


class CycleMetrics(Protocol):
    """What the controller calls around its passes (the no-op default keeps it metric-free)."""

    def admission_attempt(self, cycle: Callable[[], Sequence[Decision]]) -> Sequence[Decision]: ...

    def reconciled(self, snapshot: Snapshot, finished: Mapping[str, int]) -> None:
        """After each pass: its snapshot, and the Finished Workloads per ClusterQueue."""


class NoMetrics:
    def admission_attempt(self, cycle: Callable[[], Sequence[Decision]]) -> Sequence[Decision]:
        return cycle()

    def reconciled(self, snapshot: Snapshot, finished: Mapping[str, int]) -> None:
        return None


class _Gauges(Collector):
    """Renders the last pass's :class:`GaugeValues` (replaced atomically, never half-updated).
    They are computed from the pass's snapshot when scraped, not after every pass: a scrape
    comes every 15-30 s, a pass many times a second in a burst (issue 34: a twentieth of the
    controller's CPU went into gauges nobody read)."""

    def __init__(self, families: tuple[tuple[str, str, tuple[str, ...]], ...] = GAUGES) -> None:
        self.families = families
        self.source: tuple[Snapshot, Mapping[str, int]] | None = None  # the last pass's
        self._computed: tuple[tuple[Snapshot, Mapping[str, int]] | None, GaugeValues] = (None, GaugeValues())
        self._lock = threading.Lock()

    @property
    def current(self) -> GaugeValues:
        source = self.source
        with self._lock:
            if self._computed[0] is not source:
                self._computed = (source, gauge_values(*source) if source is not None else GaugeValues())
            return self._computed[1]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        current = self.current
        for name, help_text, labels in self.families:
            family = GaugeMetricFamily(name, help_text, labels=list(labels))
            for values, value in sorted(current.get(name).items()):
                family.add_metric(list(values), value)
            yield family


def _toposched_version() -> str:
    try:
        return metadata.version("toposched")
    except metadata.PackageNotFoundError:
        return "unknown"


def _cluster_queue(workload: Mapping[str, Any]) -> str:
    return str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def priority_class(workload: Mapping[str, Any]) -> str:
    """Kueue's ``priority_class`` label: the Workload's priority class name, "" without one."""
    spec = workload.get("spec") or {}
    return str((spec.get("priorityClassRef") or {}).get("name") or spec.get("priorityClassName") or "")


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, *,
                 stopwatch: Callable[[], float] = time.perf_counter, config: KueueConfig = KUEUE_DEFAULTS) -> None:
        """``config``: the Kueue release (and gates) whose metric families are registered."""
        # Kueue (client_golang) exposes no *_created series; neither do we.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry()
        self.stopwatch = stopwatch
        self._lock = threading.Lock()
        r = self.registry
        self.build_info = Gauge("kueue_build_info", "Build information of the toposched controller (1), labelled "
                                "as Kueue's: git_version is toposched's version, go_version the Python version",
                                ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform"),
                                registry=r)
        self.build_info.labels(_toposched_version(), "", "", f"python{platform.python_version()}",
                               platform.python_implementation().lower(),
                               f"{sys.platform}/{platform.machine()}").set(1)
        self.attempts = Counter("kueue_admission_attempts_total", "Admission cycles; result success when at "
                                "least one workload was admitted, else inadmissible", ("result", "replica_role"),
                                registry=r)
        self.attempt_seconds = Histogram("kueue_admission_attempt_duration_seconds", "Duration of an admission "
                                         "cycle, by result", ("result", "replica_role"), buckets=GO_DEFAULT_BUCKETS,
                                         registry=r)
        self.quota_reserved = Counter("kueue_quota_reserved_workloads_total", "Workloads that got a quota "
                                      "reservation, per cluster_queue", CQ_PRIORITY, registry=r)
        self.quota_reserved_wait = Histogram("kueue_quota_reserved_wait_time_seconds", "Time from creation or "
                                             "requeue to quota reservation", CQ_PRIORITY, buckets=WAIT_BUCKETS_14,
                                             registry=r)
        self.admitted = Counter("kueue_admitted_workloads_total", "Admitted workloads, per cluster_queue",
                                CQ_PRIORITY, registry=r)
        self.admission_wait = Histogram("kueue_admission_wait_time_seconds", "Time from creation or requeue to "
                                        "admission", CQ_PRIORITY, buckets=WAIT_BUCKETS_16, registry=r)
        self.finished = Counter("kueue_finished_workloads_total", "Finished workloads, per cluster_queue",
                                CQ_PRIORITY, registry=r)
        self.evicted = Counter("kueue_evicted_workloads_total", "Evicted workloads, per cluster_queue and reason",
                               ("cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"),
                               registry=r)
        v019 = config.release == KUEUE_V019
        # v0.19 renamed detailed_reason to underlying_cause (pkg/metrics/metrics.go at v0.17.0 / v0.19.2)
        cause = "underlying_cause" if v019 else "detailed_reason"
        self.evicted_once = Counter("kueue_evicted_workloads_once_total", EVICTED_ONCE_HELP_V019 if v019 else
                                    "Unique workload evictions, per cluster_queue and reason",
                                    ("cluster_queue", "reason", cause, "priority_class", "replica_role"),
                                    registry=r)
        self.preempted = Counter("kueue_preempted_workloads_total", "Workloads preempted, per preempting "
                                 "cluster_queue and reason", ("preempting_cluster_queue", "reason", "replica_role"),
                                 registry=r)
        self.domains_spanned = Histogram("toposched_admission_domains_spanned", "Topology domains an admitted "
                                         "pod set spans, per level from the requested one down",
                                         ("cluster_queue", "level"), buckets=DOMAIN_BUCKETS, registry=r)
        self.domains_fewest = Histogram("toposched_admission_domains_fewest_possible", "The fewest domains of "
                                        "that level whose free capacity could hold the pod set (a lower bound)",
                                        ("cluster_queue", "level"), buckets=DOMAIN_BUCKETS, registry=r)
        self.cpsat_improvements = Counter("toposched_cpsat_improvements_total", "Admitted pod sets CP-SAT placed "
                                          "in fewer domains (or less fragmented) than greedy", ("cluster_queue",),
                                          registry=r)
        self.recoveries = Counter("toposched_node_failure_recoveries_total", "Workloads recovered from failed "
                                  "nodes: replaced (hot swap in the domain) or evicted (NodeFailures)",
                                  ("outcome",), registry=r)
        self.v019 = V019Metrics(r, config.feature_gates) if v019 else None
        self._gauges = _Gauges(gauge_families(config))
        r.register(self._gauges)

    # ------------------------------------------------------------------ decisions
    def observe(self, kind: str, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        """A writer decision observer (``Writer.observers``)."""
        handler = {"admitted": self._admitted, "preempted": self._preempted, "evicted": self._evicted,
                   "finished": self._finished, "replaced": self._replaced}.get(kind)
        if handler is not None:
            handler(workload, detail)
        if self.v019 is not None:
            self.v019.observe(kind, workload, detail)

    def _admitted(self, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        cq = str(detail.get("clusterQueue") or _cluster_queue(workload))
        labels = (cq, priority_class(workload), ROLE)
        wait = float(detail.get("waitSeconds") or 0.0)
        self.quota_reserved.labels(*labels).inc()
        self.quota_reserved_wait.labels(*labels).observe(wait)
        # No admission checks: the reservation is the admission (same instant, same wait).
        self.admitted.labels(*labels).inc()
        self.admission_wait.labels(*labels).observe(wait)
        for span in detail.get("domainSpans") or ():
            self.domains_spanned.labels(cq, span["level"]).observe(span["spanned"])
            self.domains_fewest.labels(cq, span["level"]).observe(span["fewest"])
        improved = len(detail.get("improvedByCpsat") or ())
        if improved:
            self.cpsat_improvements.labels(cq).inc(improved)

    def _preempted(self, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        preemptor_cq = str(detail.get("preemptorClusterQueue") or "")
        self.preempted.labels(preemptor_cq, str(detail.get("reason") or ""), ROLE).inc()
        self._count_eviction(workload, "Preempted")

    def _evicted(self, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        reason = str(detail.get("reason") or "")
        self._count_eviction(workload, reason)
        if reason == NODE_FAILURES:
            self.recoveries.labels("evicted").inc()

    def _count_eviction(self, workload: Mapping[str, Any], reason: str) -> None:
        cq, pc = _cluster_queue(workload), priority_class(workload)
        self.evicted.labels(cq, reason, "", pc, ROLE).inc()
        self.evicted_once.labels(cq, reason, "", pc, ROLE).inc()

    def _finished(self, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        cq = _cluster_queue(workload)
        if cq:  # Kueue counts finished workloads of a ClusterQueue (ones that held its quota)
            self.finished.labels(cq, priority_class(workload), ROLE).inc()

    def _replaced(self, workload: Mapping[str, Any], detail: Mapping[str, Any]) -> None:
        self.recoveries.labels("replaced").inc()

    # ------------------------------------------------------------------ passes
    def admission_attempt(self, cycle: Callable[[], Sequence[Decision]]) -> Sequence[Decision]:
        """Run one admission cycle, timing it as Kueue's admission attempt."""
        started = self.stopwatch()
        decisions = cycle()
        result = "success" if any(isinstance(d, Admit) for d in decisions) else "inadmissible"
        self.attempts.labels(result, ROLE).inc()
        self.attempt_seconds.labels(result, ROLE).observe(max(0.0, self.stopwatch() - started))
        return decisions

    def reconciled(self, snapshot: Snapshot, finished: Mapping[str, int]) -> None:
        """The gauges of this pass (from its snapshot, when scraped), replacing the last pass's."""
        with self._lock:
            self._gauges.source = (snapshot, dict(finished))

    def clear_gauges(self) -> None:
        """Stopped leading: the gauges describe a cluster this replica no longer watches over."""
        with self._lock:
            self._gauges.source = None
