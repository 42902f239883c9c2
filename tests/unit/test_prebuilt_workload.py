"""A job naming a prebuilt Workload (scheduler/kube/prebuilt.py), restating Kueue v0.17.0's
``ensureOneWorkload`` prebuilt path (pkg/controller/jobframework/reconciler.go) and its
``EnsurePrebuiltWorkloadOwnership``; cases after Kueue's reconciler_test.go / job_controller_test.go
"prebuilt workload" cases (adopted when ownerless, left alone when another object controls it,
nothing created while it is missing)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.identifiers import Identifiers
from scheduler.kube.prebuilt import Prebuilt, adoption_patch

JOB = BATCH_JOB


def job(**labels: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "uid": "uid-1", "labels": dict(labels)}}


def workload(owner_uid: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "wl", "namespace": "ns", "labels": {"kueue.x-k8s.io/multikueue-origin": "m"}}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "other", "uid": owner_uid,
                                    "controller": True}]
    return {"metadata": meta, "spec": {}}


class FakeWriter:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def patch(self, _resource: Any, obj: dict[str, Any], patch: dict[str, Any], _into: Any) -> dict[str, Any]:
        self.patches.append((obj["metadata"]["name"], patch))
        return obj


def prebuilt(workloads: dict[str, dict[str, Any]]) -> tuple[Prebuilt, FakeWriter]:
    writer = FakeWriter()
    cache = SimpleNamespace(workloads=SimpleNamespace(get=workloads.get))
    shared = SimpleNamespace(cache=cache, writer=writer)
    return Prebuilt(shared, Identifiers(False)), writer  # type: ignore[arg-type]


PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def test_a_job_without_the_label_is_not_handled() -> None:
    handler, writer = prebuilt({"ns/wl": workload()})
    assert handler.handles(JOB, job()) is False and writer.patches == []


def test_the_job_adopts_its_ownerless_prebuilt_workload() -> None:
    handler, writer = prebuilt({"ns/wl": workload()})
    assert handler.handles(JOB, job(**{PREBUILT: "wl"})) is True
    [(name, patch)] = writer.patches
    assert name == "wl"
    assert patch == {"metadata": {
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "uid-1",
                             "controller": True, "blockOwnerDeletion": True}],
        "labels": {"kueue.x-k8s.io/job-uid": "uid-1"}}}


def test_nothing_is_created_while_the_prebuilt_workload_is_missing() -> None:
    handler, writer = prebuilt({})
    assert handler.handles(JOB, job(**{PREBUILT: "wl"})) is True and writer.patches == []


def test_a_workload_another_object_controls_is_left_alone() -> None:
    handler, writer = prebuilt({"ns/wl": workload(owner_uid="someone-else")})
    assert handler.handles(JOB, job(**{PREBUILT: "wl"})) is True and writer.patches == []


def test_adoption_keeps_other_owner_references() -> None:
    wl = workload()
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u"}]
    refs = adoption_patch(JOB, job(), wl)["metadata"]["ownerReferences"]
    assert [r["kind"] for r in refs] == ["ConfigMap", "Job"]
