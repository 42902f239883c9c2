"""deploy/grafana/toposched-dashboard.json asks only for series toposched exports: every metric
name in every PromQL expression (panels and variables) is one the controller, the extender or
the webhook registers."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry

from scheduler.devcluster.binaries import repo_root
from scheduler.http.request_metrics import ExtenderMetrics, WebhookMetrics
from scheduler.kube.metrics import ControllerMetrics

DASHBOARD = repo_root() / "deploy" / "grafana" / "toposched-dashboard.json"
METRIC_NAME = re.compile(r"\b(?:kueue|toposched)_[a-zA-Z0-9_]+")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported_series() -> set[str]:
    """Every sample name the three processes can expose (counters as *_total, histograms as
    *_bucket/_sum/_count), whether or not a series exists yet."""
    names: set[str] = set()
    for registry in (ControllerMetrics(CollectorRegistry()).registry, ExtenderMetrics().registry,
                     WebhookMetrics().registry):
        for family in registry.collect():
            names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def expressions(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["query"]["query"]


def test_every_promql_expression_names_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = exported_series()
    found = list(expressions(dashboard))
    assert found
    for expr in found:
        names = set(METRIC_NAME.findall(expr))
        assert names, f"no toposched/Kueue metric in {expr!r}"
        assert names <= exported, f"{expr!r} names {sorted(names - exported)}, which nothing exports"


def test_the_kueue_names_of_the_issue_are_exported() -> None:
    exported = exported_series()
    for name in ("kueue_pending_workloads", "kueue_admitted_workloads_total",
                 "kueue_admission_wait_time_seconds_bucket", "kueue_admission_attempts_total",
                 "kueue_evicted_workloads_total", "kueue_preempted_workloads_total",
                 "kueue_cluster_queue_resource_usage", "kueue_cluster_queue_nominal_quota",
                 "kueue_cluster_queue_status", "kueue_build_info"):
        assert name in exported


def test_panels_have_unique_ids_and_a_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert any(v["type"] == "datasource" for v in dashboard["templating"]["list"])
