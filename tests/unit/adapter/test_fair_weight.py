"""``spec.fairSharing.weight`` of ClusterQueues and Cohorts, v1beta2 and v1beta1, into the core."""

from __future__ import annotations

import pytest

from scheduler.adapter.kueue_config import parse_kueue_config
from scheduler.adapter.queues import cluster_queue_spec, cohort_spec


@pytest.mark.parametrize("version,cohort_key", [("v1beta2", "cohortName"), ("v1beta1", "cohort")])
@pytest.mark.parametrize("fair_sharing,weight", [(None, 1.0), ({}, 1.0), ({"weight": "2"}, 2.0),
                                                 ({"weight": "500m"}, 0.5), ({"weight": 0}, 0.0)])
def test_weight(version: str, cohort_key: str, fair_sharing: dict[str, object] | None, weight: float) -> None:
    spec: dict[str, object] = {cohort_key: "pool", "resourceGroups": []}
    if fair_sharing is not None:
        spec["fairSharing"] = fair_sharing
    cq = cluster_queue_spec({"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue",
                             "metadata": {"name": "a"}, "spec": spec})
    assert cq.fair_weight == weight and cq.cohort == "pool"
    co_spec: dict[str, object] = {"parentName": "root"}
    if fair_sharing is not None:
        co_spec["fairSharing"] = fair_sharing
    co = cohort_spec({"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Cohort",
                      "metadata": {"name": "pool"}, "spec": co_spec})
    assert co.fair_weight == weight and co.parent == "root"


def test_admission_fair_sharing_is_honoured() -> None:
    loaded = parse_kueue_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                 "admissionFairSharing": {"usageHalfLifeTime": "168h"}})
    assert loaded.config.admission_fair_sharing.enabled
    assert "admissionFairSharing" not in loaded.not_supported
    assert not any("NOT honoured" in line and "admissionFairSharing" in line for line in loaded.report())
    fs = parse_kueue_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                             "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}})
    assert fs.not_supported == () and fs.config.fair_sharing.enabled
