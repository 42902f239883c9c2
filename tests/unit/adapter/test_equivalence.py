"""Kueue's ``EquivalentToWorkload`` / ``ComparePodSetSlices`` on dicts (adapter/kinds/equivalence.py)."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.adapter.kinds.base import PodSetSource
from scheduler.adapter.kinds.equivalence import equivalent, job_pod_sets, only_counts_differ

GPU = "nvidia.com/gpu"


def template(gpus: str, **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}],
                                     "resources": {"requests": {GPU: gpus, "cpu": "1"}}}], **spec}}


def workload(count: int, gpus: str, admitted_count: int | None = None, min_count: int | None = None,
             **spec: Any) -> dict[str, Any]:
    ps: dict[str, Any] = {"name": "main", "count": count, "template": template(gpus, **spec)}
    if min_count is not None:
        ps["minCount"] = min_count
    wl: dict[str, Any] = {"spec": {"podSets": [ps]}}
    if admitted_count is not None:
        wl["status"] = {"conditions": [{"type": t, "status": "True"} for t in ("QuotaReserved", "Admitted")],
                        "admission": {"clusterQueue": "cq", "podSetAssignments": [
                            {"name": "main", "count": admitted_count}]}}
    return wl


def job(count: int, gpus: str, min_count: int | None = None, **spec: Any) -> list[dict[str, Any]]:
    return job_pod_sets([PodSetSource("main", count, template(gpus, **spec), ("spec", "template"),
                                      min_count=min_count)])


def test_quantities_compare_by_amount_and_schema_defaults_equal_their_absence() -> None:
    wl = workload(2, "8")
    c = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
    c["resources"]["requests"]["cpu"] = "1000m"
    c["ports"][0]["protocol"] = "TCP"  # the Workload CRD's default
    c["env"] = []
    assert equivalent(job(2, "8"), wl, job_suspended=False)
    assert not equivalent(job(2, "1"), wl, job_suspended=False)
    assert not equivalent(job(3, "8"), wl, job_suspended=False)


def test_a_partially_admitted_pod_set_runs_its_admitted_count() -> None:
    wl = workload(6, "8", admitted_count=2, min_count=1)
    assert equivalent(job(2, "8", min_count=1), wl, job_suspended=False)  # started with parallelism 2
    assert not equivalent(job(1, "8", min_count=1), wl, job_suspended=False)
    assert equivalent(job(6, "8", min_count=1), wl, job_suspended=True)  # suspended: its spec matches too
    assert not equivalent(job(6, "8", min_count=1), wl, job_suspended=False)


def test_tolerations_count_until_admitted_and_names_always() -> None:
    tolerated = {"tolerations": [{"key": "gpu", "operator": "Exists"}]}
    assert not equivalent(job(1, "8", **tolerated), workload(1, "8"), job_suspended=True)
    assert equivalent(job(1, "8", **tolerated), workload(1, "8", admitted_count=1), job_suspended=False)
    renamed = copy.deepcopy(workload(1, "8"))
    renamed["spec"]["podSets"][0]["name"] = "other"
    assert not equivalent(job(1, "8"), renamed, job_suspended=True)


def test_a_maximum_execution_time_the_job_does_not_ask_for_is_a_mismatch() -> None:
    wl = workload(1, "8")
    wl["spec"]["maximumExecutionTimeSeconds"] = 60
    assert not equivalent(job(1, "8"), wl, job_suspended=True)


def test_only_counts_differ_is_the_elastic_hooks_test() -> None:
    assert only_counts_differ(job(4, "8"), workload(2, "8"))
    assert not only_counts_differ(job(4, "1"), workload(2, "8"))
