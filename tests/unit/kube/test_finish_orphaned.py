"""Kueue's FinishOrphanedWorkloads (``scheduler/kube/orphans.py``; beta on since v0.18, so under
``--kueue-version v0.19``): a Workload whose job was deleted with ``--cascade=orphan`` (the
garbage collector drops the owner reference, the job-uid label stays) is finished with reason
``OwnerNotFound``, "The workload's owner no longer exists", and its quota is free.

Restates Kueue v0.19.2 ``pkg/controller/core/workload_controller_test.go`` (``TestReconcile``):
"should handle finished workload logic for orphaned workloads when FinishOrphanedWorkloads
enabled", "remove finalizer for orphaned workload with JobUID label and FinishOrphanedWorkloads
disabled" (not finished with the gate off) and "workload with existing controller owner should
not be finished"; a Workload created without the label is not an orphan (``isOrphanedWorkload``).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.adapter.objects import find_condition, has_reservation
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates, KueueConfig
from scheduler.k8s.informer import JOBS, WORKLOADS
from tests.unit.kube.test_ownerless_workloads import ownerless
from tests.unit.kube.test_phases import NS, Harness


def admitted(release: str, **gates: bool) -> tuple[Harness, dict[str, Any]]:
    h = Harness()
    h.rebuild(config=KueueConfig(feature_gates=FeatureGates(gates, release)))
    wl = h.admitted("train", 1)
    assert has_reservation(wl)
    return h, wl


def orphan(h: Harness, wl: dict[str, Any], delete_job: bool = True) -> dict[str, Any]:
    """``kubectl delete job --cascade=orphan``: the job goes, the garbage collector drops the
    Workload's owner reference (the in-memory API has no garbage collector: done by hand)."""
    if delete_job:
        h.api.delete(JOBS, "train", NS)
    h.api.merge_patch(WORKLOADS, wl["metadata"]["name"], {"metadata": {"ownerReferences": None}}, NS)
    h.sync()
    h.controller.reconcile()
    h.sync()
    return h.workload()


def finished(wl: dict[str, Any]) -> tuple[str, str, str] | None:
    cond = find_condition(wl, "Finished")
    return (cond["status"], cond["reason"], cond["message"]) if cond else None


def test_an_orphaned_workload_is_finished_with_owner_not_found() -> None:
    h, wl = admitted(KUEUE_V019)
    wl = orphan(h, wl)
    assert finished(wl) == ("True", "OwnerNotFound", "The workload's owner no longer exists")


@pytest.mark.parametrize(("release", "gates"), [(KUEUE_V017, {}), (KUEUE_V019, {"FinishOrphanedWorkloads": False})])
def test_with_the_gate_off_an_orphan_is_left_as_it_is(release: str, gates: dict[str, bool]) -> None:
    h, wl = admitted(release, **gates)
    wl = orphan(h, wl)
    assert finished(wl) is None and has_reservation(wl)


def test_a_workload_whose_owner_exists_is_not_finished() -> None:
    h, wl = admitted(KUEUE_V019)
    h.sync()
    h.controller.reconcile()
    h.sync()
    assert finished(h.workload()) is None


def test_stripping_the_owner_reference_of_a_running_jobs_workload_does_not_free_its_quota() -> None:
    """Stricter than Kueue: the job the label names still exists, so the Workload is not an orphan."""
    h, wl = admitted(KUEUE_V019)
    wl = orphan(h, wl, delete_job=False)
    assert finished(wl) is None and has_reservation(wl)


def test_a_workload_created_without_a_job_uid_label_is_not_an_orphan() -> None:
    h = Harness()
    h.rebuild(config=KueueConfig(feature_gates=FeatureGates(release=KUEUE_V019)))
    h.api.create(WORKLOADS, ownerless("direct", 1), NS)
    h.sync()
    h.controller.reconcile()
    h.sync()
    assert finished(h.api.get(WORKLOADS, "direct", NS)) is None
