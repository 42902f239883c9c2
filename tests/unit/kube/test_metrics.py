"""The controller's Prometheus metrics: Kueue's names, labels and buckets, fed by the decision
observers and each pass's snapshot (phases driven by hand against the in-memory API)."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from scheduler.core.placement.quality import fewest_domains
from scheduler.http.probes import exposition, serve_health, serve_metrics
from scheduler.http.request_metrics import ExtenderMetrics, WebhookMetrics
from scheduler.k8s.informer import JOBS, NODES
from scheduler.kube import metrics as m
from tests.unit.kube.test_phases import BLOCK, HEALTH, HOST, NS, Harness, assigned_hosts, job

LEADER = {"replica_role": "leader"}


class Measured(Harness):
    def __init__(self) -> None:
        super().__init__()
        self.registry = CollectorRegistry()
        self.metrics = m.ControllerMetrics(self.registry, stopwatch=iter(range(1000)).__next__)
        self.rebuild(metrics=self.metrics)
        self.controller.observers.append(self.metrics.observe)

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def reconcile(self) -> None:
        self.sync()
        self.controller.reconcile()
        self.sync()


@pytest.fixture
def measured() -> Measured:
    return Measured()


def test_an_admission_counts_as_kueue_counts_it(measured: Measured) -> None:
    measured.admitted("train", 2)
    cq = {"cluster_queue": "cq", "priority_class": "", **LEADER}
    assert measured.value("kueue_admitted_workloads_total", **cq) == 1
    assert measured.value("kueue_quota_reserved_workloads_total", **cq) == 1
    assert measured.value("kueue_admission_wait_time_seconds_count", **cq) == 1
    assert measured.value("kueue_quota_reserved_wait_time_seconds_count", **cq) == 1
    assert measured.value("kueue_admission_attempts_total", result="success", **LEADER) == 1
    # the injected stopwatch ticks once per reading: the cycle took 1 "second"
    assert measured.value("kueue_admission_attempt_duration_seconds_sum", result="success", **LEADER) == 1
    # 2 pods of 8 GPUs: one block and two hosts, the fewest possible
    spans = {"cluster_queue": "cq"}
    assert measured.value("toposched_admission_domains_spanned_sum", level=BLOCK, **spans) == 1
    assert measured.value("toposched_admission_domains_fewest_possible_sum", level=BLOCK, **spans) == 1
    assert measured.value("toposched_admission_domains_spanned_sum", level=HOST, **spans) == 2


def test_the_gauges_follow_the_snapshot(measured: Measured) -> None:
    measured.admitted("train", 2)
    measured.api.create(JOBS, job("big", 5), NS)  # 40 GPUs > the nominal 32: never fits
    measured.reconcile()
    measured.reconcile()  # the second pass sees the first one's writes (as the status does)
    cq = {"cluster_queue": "cq", **LEADER}
    assert measured.value("kueue_pending_workloads", status="inadmissible", **cq) == 1
    assert measured.value("kueue_pending_workloads", status="active", **cq) == 0
    assert measured.value("kueue_reserving_active_workloads", **cq) == 1
    assert measured.value("kueue_admitted_active_workloads", **cq) == 1
    assert measured.value("kueue_cluster_queue_status", status="active", **cq) == 1
    assert measured.value("kueue_cluster_queue_status", status="pending", **cq) == 0
    quota = {"cohort": "", "cluster_queue": "cq", "flavor": "gpu", "resource": "nvidia.com/gpu", **LEADER}
    assert measured.value("kueue_cluster_queue_nominal_quota", **quota) == 32
    assert measured.value("kueue_cluster_queue_borrowing_limit", **quota) == 0
    assert measured.value("kueue_cluster_queue_resource_reservation", **quota) == 16
    assert measured.value("kueue_cluster_queue_resource_usage", **quota) == 16
    assert measured.value("kueue_admission_attempts_total", result="inadmissible", **LEADER) >= 1
    # "train" took one whole block of two: one block and two hosts are still free
    assert measured.value("toposched_free_domains", flavor="gpu", level=BLOCK) == 1
    assert measured.value("toposched_free_domains", flavor="gpu", level=HOST) == 2
    measured.metrics.clear_gauges()
    assert measured.value("kueue_pending_workloads", status="inadmissible", **cq) is None


def test_node_failures_count_replacements_and_evictions(measured: Measured) -> None:
    wl = measured.admitted("train", 1)
    (failed,) = assigned_hosts(wl)
    measured.api.merge_patch(NODES, failed, {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}}})
    measured.sync()
    measured.controller.node_failures.run()
    measured.clock.advance(5)
    measured.controller.node_failures.run()
    assert measured.value("toposched_node_failure_recoveries_total", outcome="replaced") == 1
    assert measured.value("toposched_node_failure_recoveries_total", outcome="evicted") is None


def test_an_eviction_for_node_failures_is_a_kueue_eviction(measured: Measured) -> None:
    wl = measured.admitted("train", 2)
    hosts = sorted(assigned_hosts(wl))
    measured.api.merge_patch(NODES, hosts[0], {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}}})
    measured.sync()
    measured.controller.node_failures.run()
    measured.clock.advance(5)
    measured.controller.node_failures.run()
    labels = {"cluster_queue": "cq", "reason": "NodeFailures", "underlying_cause": "", "priority_class": ""}
    assert measured.value("kueue_evicted_workloads_total", **labels, **LEADER) == 1
    assert measured.value("toposched_node_failure_recoveries_total", outcome="evicted") == 1


def test_buckets_are_kueues() -> None:
    assert m.WAIT_BUCKETS_14 == (1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240)
    assert m.WAIT_BUCKETS_16[-1] == 2.5 * 2**14 and len(m.WAIT_BUCKETS_16) == 16


def test_exposition_has_kueue_names_and_no_created_series() -> None:
    registry = CollectorRegistry()
    m.ControllerMetrics(registry)
    text = exposition(registry)().decode()
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert families["kueue_admitted_workloads"] == "counter"  # the parser drops the _total suffix
    assert "kueue_admitted_workloads_total{" not in text  # no series before the first admission
    assert "# TYPE kueue_admitted_workloads_total counter" in text
    assert families["kueue_pending_workloads"] == "gauge"
    assert families["kueue_build_info"] == "gauge"
    assert "_created" not in text


def test_metrics_share_the_health_port_or_have_their_own() -> None:
    registry = CollectorRegistry()
    m.ControllerMetrics(registry)
    shared = serve_health("127.0.0.1", 0, lambda: True, exposition(registry))
    alone = serve_metrics("127.0.0.1", 0, exposition(registry))
    try:
        for server in (shared, alone):
            with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/metrics") as resp:
                assert b"kueue_build_info{" in resp.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{shared.server_address[1]}/readyz") as resp:
            assert resp.status == 200
        with pytest.raises(urllib.error.HTTPError):  # the metrics-only port has no probes
            urllib.request.urlopen(f"http://127.0.0.1:{alone.server_address[1]}/healthz")
    finally:
        for server in (shared, alone):
            server.shutdown()
            server.server_close()


def test_fewest_domains_is_the_largest_first_count() -> None:
    assert fewest_domains(np.array([4, 1, 3, 0]), 6) == 2
    assert fewest_domains(np.array([4, 1, 3, 0]), 4) == 1
    assert fewest_domains(np.array([1, 1]), 5) == 2  # short: all of them
    assert fewest_domains(np.array([], dtype=np.int64), 0) == 0


def test_extender_and_webhook_latency_histograms() -> None:
    extender, webhook = ExtenderMetrics(), WebhookMetrics()
    extender.observe("filter", 0.002)
    extender.observe("/not-a-verb", 1.0)  # unbounded paths never become label values
    webhook.observe(True, 0.004)
    assert extender.registry.get_sample_value("toposched_extender_request_duration_seconds_count",
                                              {"verb": "filter"}) == 1
    assert extender.registry.get_sample_value("toposched_extender_request_duration_seconds_count",
                                              {"verb": "/not-a-verb"}) is None
    assert webhook.registry.get_sample_value("toposched_webhook_request_duration_seconds_bucket",
                                             {"allowed": "true", "le": "0.005"}) == 1
