"""The controller's metrics by Kueue release (issue 41, item 2): under ``--kueue-version v0.19``
Kueue v0.19.2's label set of ``kueue_evicted_workloads_once_total`` (``underlying_cause``), +Inf
for an unset borrowing or lending limit, and the families v0.18/v0.19 added with Kueue's names,
help, labels and buckets (``pkg/metrics/metrics.go`` at v0.19.2); under v0.17 none of it."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates, kueue_defaults
from scheduler.http.probes import exposition
from scheduler.k8s.informer import CLUSTER_QUEUES, COHORTS, JOBS, NODES, PODS
from scheduler.kube import metrics as m
from scheduler.kube import metrics_v019 as v
from tests.unit.kube.test_new_kinds_phases import gated_pod
from tests.unit.kube.test_phases import HEALTH, NS, Harness, assigned_hosts, job

LEADER = {"replica_role": "leader"}
QUOTA = {"cohort": "", "cluster_queue": "cq", "flavor": "gpu", "resource": "nvidia.com/gpu", **LEADER}
V019_FAMILIES = {"kueue_workload_eviction_latency_seconds", "kueue_pod_scheduling_gate_removal_seconds",
                 "kueue_workload_creation_latency_seconds", "kueue_cluster_queue_info", "kueue_cohort_info",
                 "kueue_cluster_queue_resource_pending", "kueue_unadmitted_workloads",
                 "kueue_local_queue_admission_fair_sharing_usage"}


class Measured(Harness):
    def __init__(self, release: str) -> None:
        super().__init__()
        self.registry = CollectorRegistry()
        config = kueue_defaults(release)
        self.metrics = m.ControllerMetrics(self.registry, stopwatch=iter(range(1000)).__next__, config=config)
        self.rebuild(metrics=self.metrics, config=config)
        self.controller.observers.append(self.metrics.observe)

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def reconcile(self) -> None:
        self.sync()
        self.controller.reconcile()
        self.sync()


def families(registry: CollectorRegistry) -> dict[str, tuple[str, str]]:
    """name (with the counter's _total) -> (type, help) as a scrape reads them."""
    out = {}
    for f in text_string_to_metric_families(exposition(registry)().decode()):
        out[f.name + ("_total" if f.type == "counter" else "")] = (f.type, f.documentation)
    return out


def labels_of(registry: CollectorRegistry, name: str) -> set[str]:
    """The label names of a counter or histogram family, before it has a series."""
    collectors = registry._collector_to_names  # noqa: SLF001 (no public reader of an empty family's labels)
    for collector, names in collectors.items():
        if name in names:
            return set(getattr(collector, "_labelnames", ()))
    return set()


def test_v017_registers_none_of_v019s_families() -> None:
    registry = CollectorRegistry()
    m.ControllerMetrics(registry, config=kueue_defaults(KUEUE_V017))
    assert not V019_FAMILIES & set(families(registry))
    assert labels_of(registry, "kueue_evicted_workloads_once_total") == {
        "cluster_queue", "reason", "detailed_reason", "priority_class", "replica_role"}


# pkg/metrics/metrics.go at v0.19.2: EvictedWorkloadsOnceTotal's labels cluster_queue, reason,
# underlying_cause, priority_class, replica_role; the new families and their registration (Register).
def test_v019_families_names_help_and_labels() -> None:
    registry = CollectorRegistry()
    m.ControllerMetrics(registry, config=kueue_defaults(KUEUE_V019))
    found = families(registry)
    assert V019_FAMILIES <= set(found)
    assert labels_of(registry, "kueue_evicted_workloads_once_total") == {
        "cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"}
    assert found["kueue_evicted_workloads_once_total"][1] == v.EVICTED_ONCE_HELP_V019
    assert labels_of(registry, "kueue_workload_eviction_latency_seconds") == {"cluster_queue", "reason",
                                                                               "replica_role"}
    assert labels_of(registry, "kueue_pod_scheduling_gate_removal_seconds") == {"name", "cluster_queue", "is_group",
                                                                                 "replica_role"}
    assert labels_of(registry, "kueue_workload_creation_latency_seconds") == {"job_kind", "replica_role"}
    assert found["kueue_cluster_queue_borrowing_limit"][1].endswith("If borrowingLimit is unset, this metric "
                                                                     "reports +Inf.")
    assert found["kueue_cluster_queue_info"] == ("gauge", v.CLUSTER_QUEUE_INFO[1])


# TestGenerateExponentialBuckets (metrics_test.go) and the HistogramOpts of v0.19.2.
def test_v019_buckets_are_kueues() -> None:
    assert v.WAIT_BUCKETS_14 == (1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240)
    assert v.CREATION_BUCKETS == (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24)
    assert v.GO_DEFAULT_BUCKETS == m.GO_DEFAULT_BUCKETS


def test_gated_families_follow_their_gates() -> None:
    registry = CollectorRegistry()
    gates = FeatureGates({"MetricForWorkloadCreationLatency": False, "LocalQueueMetrics": False}, KUEUE_V019)
    m.ControllerMetrics(registry, config=kueue_defaults(KUEUE_V019).__class__(feature_gates=gates))
    found = set(families(registry))
    assert "kueue_workload_creation_latency_seconds" not in found
    assert "kueue_local_queue_admission_fair_sharing_usage" not in found
    assert "kueue_cluster_queue_info" in found


# pkg/cache/scheduler/resource_metrics_test.go TestClusterQueueResourceMetricsReportUnlimitedAsInf
# and metrics_test.go TestReportClusterQueueQuotasUnlimitedBorrowing at v0.19.2: an unset limit
# is +Inf; v0.17.0 reported 0.
@pytest.mark.parametrize(("release", "unset"), [(KUEUE_V017, 0.0), (KUEUE_V019, math.inf)])
def test_an_unset_limit(release: str, unset: float) -> None:
    h = Measured(release)
    h.reconcile()
    assert h.value("kueue_cluster_queue_borrowing_limit", **QUOTA) == unset
    assert h.value("kueue_cluster_queue_lending_limit", **QUOTA) == unset
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                      "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "32",
                                                                 "lendingLimit": "8"}]}]}]}})
    h.reconcile()
    assert h.value("kueue_cluster_queue_lending_limit", **QUOTA) == 8


def test_v019_gauges_from_the_snapshot() -> None:
    h = Measured(KUEUE_V019)
    h.api.create(COHORTS, {"metadata": {"name": "team"}, "spec": {"parentName": "org"}})
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"cohortName": "team"}})
    h.api.create(JOBS, job("big", 5), NS)  # 40 GPUs > the nominal 32: pending
    h.reconcile()
    h.reconcile()
    assert h.value("kueue_cluster_queue_info", cluster_queue="cq", parent_cohort="team", root_cohort="org",
                   **LEADER) == 1
    assert h.value("kueue_cohort_info", cohort="team", parent_cohort="org", root_cohort="org", **LEADER) == 1
    assert h.value("kueue_cohort_info", cohort="org", parent_cohort="", root_cohort="org", **LEADER) == 1
    assert h.value("kueue_cluster_queue_resource_pending", cluster_queue="cq", resource="nvidia.com/gpu",
                   **LEADER) == 40
    created = h.value("kueue_workload_creation_latency_seconds_count", job_kind="Job", **LEADER)
    assert created == 1


def test_eviction_latency_from_eviction_to_quota_released() -> None:
    h = Measured(KUEUE_V019)
    wl = h.admitted("train", 2)
    hosts = sorted(assigned_hosts(wl))
    h.api.merge_patch(NODES, hosts[0], {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}}})
    h.sync()
    h.controller.node_failures.run()
    h.clock.advance(5)
    h.controller.node_failures.run()
    labels = {"cluster_queue": "cq", "reason": "NodeFailures", "underlying_cause": "", "priority_class": ""}
    assert h.value("kueue_evicted_workloads_once_total", **labels, **LEADER) == 1
    for _ in range(4):
        h.clock.advance(3)
        h.reconcile()
    assert h.value("kueue_workload_eviction_latency_seconds_count", cluster_queue="cq", reason="NodeFailures",
                   **LEADER) == 1


def test_pod_scheduling_gate_removal() -> None:
    h = Measured(KUEUE_V019)
    h.api.create(PODS, gated_pod("solo", {"kueue.x-k8s.io/queue-name": "lq"}), NS)
    for _ in range(3):
        h.reconcile()
    labels = {"name": "kueue.x-k8s.io/admission", "cluster_queue": "cq", "is_group": "false", **LEADER}
    assert h.registry.get_sample_value("kueue_pod_scheduling_gate_removal_seconds_count", labels) == 1
