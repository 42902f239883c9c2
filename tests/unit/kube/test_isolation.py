"""Per-object isolation (issue 13, reproduction 1): one malformed Job or Workload is reported
with its name and every other object proceeds in the same reconcile pass."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.events import EVENTS
from tests.unit.kube.test_phases import NS, Harness, job

SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
# Copying a template nested DEEP levels takes about 2 * DEEP frames: more than the reconcile
# pass is allowed (LOW_LIMIT), fewer than the test's in-memory API server and cache copies need.
DEEP = 400
LOW_LIMIT = 600


@contextlib.contextmanager
def recursion_limit(limit: int) -> Iterator[None]:
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


def bad_jobs() -> list[dict[str, Any]]:
    deep_annotation = job("deep-annotation", 1)  # ~2 KB of nested JSON in the annotation
    deep_annotation["spec"]["template"]["metadata"]["annotations"][SLICE_CONSTRAINTS] = "[" * 1000 + "]" * 1000
    wrong_type = job("wrong-type", 1)
    wrong_type["spec"]["parallelism"] = "many"  # int() raises ValueError
    deep_template = job("deep-template", 1)
    deep_template["spec"]["template"]["spec"]["extra"] = nested(DEEP)  # copying it raises RecursionError
    no_template = job("no-template", 1)
    no_template["spec"]["template"] = ["not", "a", "template"]  # .get() raises AttributeError
    return [deep_annotation, wrong_type, deep_template, no_template]


def events_about(harness: Harness, name: str) -> list[dict[str, Any]]:
    harness.events.flush()
    return [e for e in harness.api.objects(EVENTS) if e["involvedObject"]["name"] == name]


def test_bad_jobs_do_not_stop_the_others_in_the_same_pass(harness: Harness) -> None:
    for body in bad_jobs():
        harness.api.create(JOBS, body, NS)
    harness.api.create(JOBS, job("good", 1), NS)
    harness.api.create(JOBS, job("also-good", 1), NS)
    harness.sync()
    with recursion_limit(LOW_LIMIT):
        harness.controller.reconcile()  # one pass; must not raise
    workloads = {w["metadata"]["ownerReferences"][0]["name"]: w for w in harness.api.objects(WORKLOADS, NS)}
    assert set(workloads) == {"good", "also-good"}
    # Kueue admits one head per ClusterQueue per cycle; a pass runs cycles back to back
    # (core.cycle.run_cycles), so both heads are admitted in this one pass.
    assert all(st.condition_true(w, st.ADMITTED) for w in workloads.values())
    for name in ("wrong-type", "deep-template", "no-template"):
        (event,) = [e for e in events_about(harness, name) if e["reason"] == "ReconcileFailed"]
        assert event["type"] == "Warning" and "ensure_workloads" in event["message"]
    assert "nested too deeply" in events_about(harness, "deep-template")[0]["message"]
    assert [e["reason"] for e in events_about(harness, "deep-annotation")] == ["CreatedWorkloadFailed"]
    assert SLICE_CONSTRAINTS in events_about(harness, "deep-annotation")[0]["message"]


def test_the_same_failure_is_reported_once(harness: Harness) -> None:
    harness.api.create(JOBS, bad_jobs()[1], NS)
    harness.sync()
    for _ in range(3):
        harness.controller.reconcile()
    (event,) = events_about(harness, "wrong-type")
    assert event.get("count", 1) == 1
    assert harness.controller.isolation.failures == 3


def test_an_unreadable_pending_workload_is_marked_and_the_others_admitted(harness: Harness) -> None:
    harness.api.create(JOBS, job("good", 1), NS)
    harness.api.create(JOBS, job("broken", 1), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    broken = next(w for w in harness.api.objects(WORKLOADS, NS) if w["metadata"]["ownerReferences"][0]["name"]
                  == "broken")
    pod_sets = broken["spec"]["podSets"]
    pod_sets[0]["count"] = {"not": "a number"}
    harness.api.merge_patch(WORKLOADS, broken["metadata"]["name"], {"spec": {"podSets": pod_sets}}, NS)
    harness.sync()
    # The admission phase alone: a whole pass would first rewrite it from its job (the
    # equivalence phase, tests/unit/kube/test_equivalence.py).
    harness.controller.admit()
    harness.sync()
    by_owner = {w["metadata"]["ownerReferences"][0]["name"]: w for w in harness.api.objects(WORKLOADS, NS)}
    assert st.condition_true(by_owner["good"], st.ADMITTED)
    cond = st.find_condition(by_owner["broken"], st.QUOTA_RESERVED)
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "Inadmissible"
    # Caught by the Workload checks before the adapter reads it: the field is named.
    assert "spec.podSets[0].count" in cond["message"] and "must be of type integer" in cond["message"]
    assert [e["reason"] for e in events_about(harness, broken["metadata"]["name"])] == ["InvalidWorkload"]


def test_an_unreadable_workload_holding_quota_holds_admission(harness: Harness) -> None:
    held = harness.admitted("first", 1)
    pod_sets = held["spec"]["podSets"]
    pod_sets[0]["count"] = "x"
    harness.api.merge_patch(WORKLOADS, held["metadata"]["name"], {"spec": {"podSets": pod_sets}}, NS)
    harness.api.create(JOBS, job("second", 1), NS)
    harness.sync()
    harness.controller.reconcile()  # its usage is unknown: nothing is admitted (fail closed)
    harness.sync()
    second = next(w for w in harness.api.objects(WORKLOADS, NS) if w["metadata"]["name"] != held["metadata"]["name"])
    assert not st.condition_true(second, st.ADMITTED)
    assert st.condition_true(harness.api.get(WORKLOADS, held["metadata"]["name"], NS), st.ADMITTED)  # untouched
    pod_sets[0]["count"] = 1  # fixed: admission resumes
    harness.api.merge_patch(WORKLOADS, held["metadata"]["name"], {"spec": {"podSets": pod_sets}}, NS)
    harness.sync()
    harness.controller.reconcile()
    assert st.condition_true(harness.api.get(WORKLOADS, second["metadata"]["name"], NS), st.ADMITTED)


def test_only_wanted_objects_reach_the_step_and_a_failing_test_is_the_objects_failure(harness: Harness) -> None:
    # Most objects of a pass have nothing to write: the pure test runs in the pass's thread and
    # only the rest are handed to the writer's pool; a test that raises is reported like a step.
    stepped: list[str] = []

    def wanted(wl: dict[str, Any]) -> bool:
        name = wl["metadata"]["name"]
        if name == "unreadable":
            raise KeyError("spec")
        return name.startswith("write-")

    objects = [{"kind": "Workload", "metadata": {"name": n, "namespace": NS}}
               for n in ("skip-1", "write-1", "unreadable", "write-2", "skip-2")]
    failed = harness.controller.isolation.for_each("test phase", objects,
                                                   lambda wl: stepped.append(wl["metadata"]["name"]),
                                                   concurrent=True, wanted=wanted)
    assert sorted(stepped) == ["write-1", "write-2"]
    assert [wl["metadata"]["name"] for wl in failed] == ["unreadable"]
    (event,) = events_about(harness, "unreadable")
    assert "test phase" in event["message"] and "missing field 'spec'" in event["message"]
