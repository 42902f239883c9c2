"""A Workload that breaks Kueue's schema never stops admission (issue 30, finding 3): on the
in-memory API (no CRD schema, as on a cluster with an older CRD) a Workload with a negative pod
count was admitted and then made every later snapshot fail, and duplicate pod-set names
double-counted usage. Now each is left out of admission and told why, and the others go on."""

from __future__ import annotations

from typing import Any

from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.events import EVENTS
from tests.unit.kube.test_ownerless_workloads import ownerless, reconcile, workload
from tests.unit.kube.test_phases import NS, Harness, job


def _events(harness: Harness) -> list[dict[str, Any]]:
    harness.events.flush()
    return harness.api.objects(EVENTS)


def reasons_about(harness: Harness, name: str) -> list[str]:
    return [e["reason"] for e in _events(harness) if e["involvedObject"]["name"] == name]


def test_a_negative_pod_count_is_never_admitted_and_never_stops_the_others(harness: Harness) -> None:
    harness.api.create(WORKLOADS, ownerless("negative", -1), NS)
    harness.sync()
    reconcile(harness, 2)
    bad = workload(harness, "negative")
    assert not st.has_reservation(bad)
    cond = st.find_condition(bad, st.QUOTA_RESERVED) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", "Inadmissible")
    assert ("spec.podSets[0].count: Invalid value: -1: spec.podSets[0].count in body should be greater than or "
            "equal to 0") in cond["message"]
    assert "InvalidWorkload" in reasons_about(harness, "negative")
    harness.api.create(WORKLOADS, ownerless("good", 2), NS)
    harness.sync()
    reconcile(harness)
    assert st.condition_true(workload(harness, "good"), st.ADMITTED)


def test_duplicate_pod_set_names_are_never_admitted(harness: Harness) -> None:
    body = ownerless("twice", 1)
    body["spec"]["podSets"].append(dict(body["spec"]["podSets"][0]))
    harness.api.create(WORKLOADS, body, NS)
    harness.api.create(WORKLOADS, ownerless("good", 2), NS)
    harness.sync()
    reconcile(harness, 2)
    twice = workload(harness, "twice")
    assert not st.has_reservation(twice)
    assert 'spec.podSets[1]: Duplicate value: {"name":"main"}' in st.find_condition(twice, st.QUOTA_RESERVED)["message"]
    assert st.condition_true(workload(harness, "good"), st.ADMITTED)


def test_an_invalid_workload_is_told_once_and_admitted_once_fixed(harness: Harness) -> None:
    harness.api.create(WORKLOADS, ownerless("negative", -1), NS)
    harness.sync()
    reconcile(harness, 3)
    assert reasons_about(harness, "negative").count("InvalidWorkload") == 1
    spec = workload(harness, "negative")["spec"]
    spec["podSets"][0]["count"] = 2
    harness.api.merge_patch(WORKLOADS, "negative", {"spec": spec}, NS)
    harness.sync()
    reconcile(harness)
    assert st.condition_true(workload(harness, "negative"), st.ADMITTED)


def test_a_job_whose_workload_would_be_invalid_gets_no_workload(harness: Harness) -> None:
    """The API server refuses a Job with negative parallelism; the in-memory API does not: the
    controller checks the Workload it would create and never writes it."""
    body = job("negative", 2)
    body["spec"]["parallelism"] = -1
    harness.api.create(JOBS, body, NS)
    harness.sync()
    reconcile(harness)
    assert harness.api.objects(WORKLOADS, NS) == []
    [message] = [e["message"] for e in _events(harness) if e["reason"] == "CreatedWorkloadFailed"]
    assert "spec.podSets[0].count: Invalid value: -1" in message
