"""Kueue v0.19.2's workload slices as pure functions (adapter/kinds/workload_slicing.py), restating
pkg/workloadslicing/workloadslicing_test.go at v0.19.2 case by case (TestEnabled,
TestPreemptibleSliceKey, TestEnsureWorkloadSlices, TestNormalizeActiveSlices, TestScaledDown,
TestFindNotFinishedWorkloads). Kueue's cases that only test its client's errors (list/update/patch
failures) have no counterpart: the plan is data, the controller writes it. Each fails on main,
where the module did not exist."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.core.config import KUEUE_V019, FeatureGates

ON = FeatureGates(release=KUEUE_V019)
OFF = FeatureGates()
T0, T1, T2, T3 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z"


def wl(name: str, count: int, created: str = T1, *, admitted: bool = False, evicted: bool = False,
       replaces: str | None = None, finished: bool = False, pod_set: str = "main", uid: str = "") -> dict[str, Any]:
    conds = []
    if admitted:
        conds.append({"type": "QuotaReserved", "status": "True"})
    if evicted:
        conds.append({"type": "Evicted", "status": "True"})
    if finished:
        conds.append({"type": "Finished", "status": "True"})
    status: dict[str, Any] = {"conditions": conds}
    if admitted:
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{"name": pod_set, "count": count}]}
    ann = {ws.REPLACEMENT_FOR: replaces} if replaces else {}
    return {"metadata": {"name": name, "namespace": "ns", "creationTimestamp": created, "uid": uid or name,
                         "annotations": ann},
            "spec": {"podSets": [{"name": pod_set, "count": count}]}, "status": status}


# ---------------------------------------------------------------- TestEnabled / TestPreemptibleSliceKey
@pytest.mark.parametrize(("annotations", "gates", "want"), [
    (None, ON, False),  # NilAnnotation
    ({}, ON, False),  # EmptyAnnotation
    ({ws.ELASTIC_ANNOTATION: "true"}, ON, True),  # Enabled
    ({ws.ELASTIC_ANNOTATION: "false"}, ON, False),  # NotEnabled
    ({ws.ELASTIC_ANNOTATION: "True"}, ON, False),  # the value is matched exactly
    ({ws.ELASTIC_ANNOTATION: "true"}, OFF, False),  # the gate off (Kueue v0.17.0's default)
])
def test_enabled(annotations: dict[str, str] | None, gates: FeatureGates, want: bool) -> None:
    assert ws.enabled({"metadata": {"annotations": annotations}}, gates) is want


def test_enabled_of_no_object_is_false() -> None:  # NilObject
    assert ws.enabled(None, ON) is False


@pytest.mark.parametrize(("annotations", "want"), [
    (None, None), ({}, None), ({ws.REPLACEMENT_FOR: "default/test"}, "default/test")])
def test_replacement_for(annotations: dict[str, str] | None, want: str | None) -> None:
    assert ws.replacement_for({"metadata": {"annotations": annotations}}) == want


# ---------------------------------------------------------------- TestScaledDown
@pytest.mark.parametrize(("old", "new", "want"), [
    ({}, {}, False),  # EmptyCounts
    ({"foo": 3, "bar": 5}, {"foo": 3, "bar": 4}, True),  # OnePodSetScaledDown
    ({"foo": 3, "bar": 5}, {"foo": 2, "bar": 4}, True),  # AllPodSetsScaledDown
    ({"foo": 3, "bar": 5}, {"foo": 2, "bar": 6}, False),  # OnePodSetScaledDownAndOnePodSetScaledUp
    ({"foo": 3, "bar": 5}, {"foo": 2, "baz": 6}, True),  # ExtraneousPodSetScaledUp
    ({"foo": 3, "bar": 5}, {"foo": 2, "baz": 1}, True),  # ExtraneousPodSetScaledDown
])
def test_scaled_down(old: dict[str, int], new: dict[str, int], want: bool) -> None:
    assert ws.scaled_down(old, new) is want


# ---------------------------------------------------------------- TestFindNotFinishedWorkloads
def test_not_finished_sorted_and_filtered() -> None:  # SortedAndFiltered
    a, b, c = wl("a", 1, T2), wl("b", 1, T0), wl("c", 1, T1, finished=True)
    assert [w["metadata"]["name"] for w in ws.not_finished([a, b, c])] == ["b", "a"]


def test_not_finished_same_second_breaks_the_tie_by_uid() -> None:  # TwoActiveWorkloads_TimestampCollision
    a, b = wl("a", 1, T1, uid="uid-2"), wl("b", 1, T1, uid="uid-1")
    assert [w["metadata"]["name"] for w in ws.not_finished([a, b])] == ["b", "a"]


# ---------------------------------------------------------------- TestEnsureWorkloadSlices
def names(finish: tuple[ws.Finish, ...]) -> list[tuple[str, str]]:
    return [(f.workload["metadata"]["name"], f.reason) for f in finish]


def test_no_workload_slices_asks_for_a_new_one() -> None:  # NoWorkloadSlices
    assert ws.ensure_slices({"main": 1}, []) == ws.SlicePlan(True)


def test_one_slice_incompatible_with_the_job() -> None:  # OneWorkloadSlice_IncompatibleWithJob
    assert ws.ensure_slices({"other": 1}, [wl("a", 1)]).compatible is False


def test_one_slice_current() -> None:  # OneWorkloadSlice_CurrentWorkload
    a = wl("a", 1, admitted=True)
    assert ws.ensure_slices({"main": 1}, [a]) == ws.SlicePlan(True, a)


def test_one_reserved_slice_scaled_up_asks_for_a_new_slice() -> None:  # OneWorkloadSlice_ReservedQuota_ScaleUp
    assert ws.ensure_slices({"main": 3}, [wl("a", 1, admitted=True)]) == ws.SlicePlan(True)


def test_one_reserved_slice_scaled_up_with_several_pod_sets() -> None:  # ..._ScaleUp_MultiplePodSets
    a = wl("a", 1, admitted=True)
    a["spec"]["podSets"].append({"name": "workers", "count": 2})
    assert ws.ensure_slices({"main": 1, "workers": 3}, [a]) == ws.SlicePlan(True)


def test_one_reserved_slice_scaled_down_is_updated_in_place() -> None:  # OneWorkloadSlice_ReservedQuota_ScaleDown
    a = wl("a", 3, admitted=True)
    assert ws.ensure_slices({"main": 1}, [a]) == ws.SlicePlan(True, a, {"main": 1})


def test_one_reserved_slice_scaled_down_with_several_pod_sets() -> None:  # ..._ScaleDown_MultiplePodSets
    a = wl("a", 3, admitted=True)
    a["spec"]["podSets"].append({"name": "workers", "count": 2})
    assert ws.ensure_slices({"main": 3, "workers": 1}, [a]) == ws.SlicePlan(True, a, {"main": 3, "workers": 1})


@pytest.mark.parametrize("count", [3, 1])  # OneWorkloadSlice_UnreservedQuota_ScaleUp / _ScaleDown
def test_an_unreserved_slice_is_updated_in_place(count: int) -> None:
    a = wl("a", 2)
    assert ws.ensure_slices({"main": count}, [a]) == ws.SlicePlan(True, a, {"main": count})


def test_two_unreserved_the_newest_is_current_and_the_old_out_of_sync() -> None:
    """TwoWorkloads_BothUnreserved_NewIsCurrent."""
    a, b = wl("a", 1, T0), wl("b", 3, T1)
    plan = ws.ensure_slices({"main": 3}, [a, b])
    assert plan.workload is b and plan.counts is None
    assert names(plan.finish) == [("a", ws.REASON_OUT_OF_SYNC)]
    assert plan.finish[0].message == "The workload slice is out of sync with its parent job"


def test_two_slices_the_new_one_incompatible() -> None:  # TwoWorkloads_NewIsIncompatible
    a, b = wl("a", 1, T0, admitted=True), wl("b", 3, T1, replaces="ns/a")
    assert ws.ensure_slices({"different-key": 1}, [a, b]).compatible is False


def test_two_reserved_the_old_is_finished_and_a_new_slice_asked() -> None:  # TwoWorkloads_BothWithReservedQuota
    a, b = wl("a", 1, T0, admitted=True), wl("b", 3, T1, admitted=True)
    plan = ws.ensure_slices({"main": 5}, [a, b])
    assert plan == ws.SlicePlan(True, finish=plan.finish) and names(plan.finish) == [("a", ws.REASON_OUT_OF_SYNC)]


def test_old_evicted_the_new_unreserved_is_rescaled() -> None:  # TwoWorkloads_OldWithReservedQuotaAndEvicted_New...
    a, b = wl("a", 1, T0, admitted=True, evicted=True), wl("b", 3, T1)
    plan = ws.ensure_slices({"main": 5}, [a, b])
    assert plan.workload is b and plan.counts == {"main": 5}
    assert names(plan.finish) == [("a", ws.REASON_OUT_OF_SYNC)]


def test_the_pending_replacement_is_current() -> None:  # TwoWorkloadSlices_NewIsUnreservedAndCurrent
    a, b = wl("a", 1, T0, admitted=True), wl("b", 3, T1, replaces="ns/a")
    assert ws.ensure_slices({"main": 3}, [a, b]) == ws.SlicePlan(True, b)


@pytest.mark.parametrize("count", [5, 2])  # TwoWorkloadSlices_NewIsUnreservedAndOutOfSync_ScaleUp / _ScaleDown
def test_the_pending_replacement_follows_the_job(count: int) -> None:
    a, b = wl("a", 1, T0, admitted=True), wl("b", 3, T1, replaces="ns/a")
    assert ws.ensure_slices({"main": count}, [a, b]) == ws.SlicePlan(True, b, {"main": count})


def test_the_admitted_replacement_finishes_the_old_slice_as_replaced() -> None:
    """TwoWorkloads_OldWithReservedQuota_NewWithReplacementAnnotationAndQuota."""
    a, b = wl("a", 1, T0, admitted=True), wl("b", 3, T1, admitted=True, replaces="ns/a")
    plan = ws.ensure_slices({"main": 3}, [a, b])
    assert plan.workload is b
    assert names(plan.finish) == [("a", ws.REASON_REPLACED)]
    assert plan.finish[0].message == "Replaced to accommodate a new workload slice"


def test_finished_slices_are_not_counted() -> None:
    a, b = wl("a", 1, T0, admitted=True, finished=True), wl("b", 3, T1, admitted=True, replaces="ns/a")
    assert ws.ensure_slices({"main": 3}, [a, b]) == ws.SlicePlan(True, b)


# ---------------------------------------------------------------- TestNormalizeActiveSlices
A = "wl-a"


def survivor(workloads: list[dict[str, Any]]) -> tuple[str, set[str]]:
    chosen, finish = ws.normalize(workloads)
    finished = {f.workload["metadata"]["name"] for f in finish}
    return ("" if chosen is None else chosen["metadata"]["name"]), finished


@pytest.mark.parametrize(("workloads", "want", "kept"), [
    ([wl("wl-a", 1, T0, admitted=True), wl("wl-b", 2, T1, admitted=True)], "wl-b", ""),  # two admitted
    ([wl("wl-a", 1, T0, admitted=True), wl("wl-b", 2, T1, replaces="ns/wl-a")], "wl-b", "wl-a"),
    ([wl("wl-a", 1, T0, admitted=True, evicted=True), wl("wl-b", 2, T1)], "wl-b", ""),
    ([wl("wl-a", 2, T0, admitted=True, replaces="ns/wl-old"),
      wl("wl-b", 3, T1, admitted=True, replaces="ns/wl-old")], "wl-b", ""),  # forked DAG
    ([wl("wl-a", 1, T0), wl("wl-b", 2, T1)], "wl-b", ""),  # all non-admitted non-evicted
    ([wl("wl-a", 1, T0, admitted=True, evicted=True), wl("wl-b", 2, T1, admitted=True, evicted=True)], "", ""),
    ([wl("wl-a", 1, T0, admitted=True), wl("wl-b", 2, T1)], "wl-a", ""),  # pending without annotation
    ([wl("wl-a", 1, T0, admitted=True), wl("wl-b", 2, T1, replaces="ns/wl-old"),
      wl("wl-c", 3, T2, replaces="ns/wl-a")], "wl-c", "wl-a"),  # three workloads
    ([wl("wl-a", 1, T1, admitted=True), wl("wl-b", 2, T1, replaces="ns/wl-a"),
      wl("wl-c", 3, T1, admitted=True, replaces="ns/wl-a"), wl("wl-d", 4, T1, replaces="ns/wl-c")],
     "wl-d", "wl-c"),  # four same-second slices, chained replacements
    ([wl("wl-c", 3, T1, admitted=True, replaces="ns/wl-a"), wl("wl-b", 2, T1, replaces="ns/wl-a"),
      wl("wl-a", 1, T1, admitted=True), wl("wl-d", 4, T1, replaces="ns/wl-c")],
     "wl-d", "wl-c"),  # forked claim in adversarial order, the admitted fork wins
    ([wl("wl-a", 1, T1), wl("wl-b", 1, T1)], "wl-b", ""),  # two pending slices in the same second
])
def test_normalize_active_slices(workloads: list[dict[str, Any]], want: str, kept: str) -> None:
    chosen, finished = survivor(workloads)
    assert chosen == want
    everyone = {w["metadata"]["name"] for w in workloads}
    assert finished == everyone - {want, kept}


# ---------------------------------------------------------------- prepareWorkloadSlice, naming
def test_slice_annotations_of_a_first_slice_and_of_a_scale_up() -> None:
    """jobframework/reconciler.go ``prepareWorkloadSlice``: no slice yet (its own name), one
    (replacement-for it, its slice name carried), more (an error Kueue retries)."""
    assert ws.slice_annotations("new", []) == {ws.ELASTIC_ANNOTATION: "true", ws.SLICE_NAME: "new"}
    old = wl("a", 1)
    old["metadata"]["annotations"][ws.SLICE_NAME] = "origin"
    assert ws.slice_annotations("new", [old]) == {ws.ELASTIC_ANNOTATION: "true", ws.REPLACEMENT_FOR: "ns/a",
                                                  ws.SLICE_NAME: "origin"}
    assert ws.slice_annotations("new", [old, wl("b", 2)]) is None


def test_replacements_are_read_only_between_slices_of_one_job() -> None:
    """TestReplacedWorkloadSlice (ReplacedWorkloadIsFound, CrossNamespaceReplacementIsRejected,
    FeatureNotEnabled) plus toposched's owner check (docs/security.md)."""
    def owned(w: dict[str, Any], uid: str) -> dict[str, Any]:
        w["metadata"]["annotations"][ws.ELASTIC_ANNOTATION] = "true"
        w["metadata"]["ownerReferences"] = [{"controller": True, "uid": uid, "kind": "Job", "name": "j"}]
        return w
    old, new = owned(wl("a", 1, admitted=True), "job-1"), owned(wl("b", 3, replaces="ns/a"), "job-1")
    assert ws.replacements([new], [old], ON) == {"ns/b": "ns/a"}
    assert ws.replacements([new], [old], OFF) == {}
    other = owned(wl("c", 3, replaces="ns/a"), "job-2")
    assert ws.replacements([other], [old], ON) == {}
    moved = owned(wl("d", 3, replaces="ns/a"), "job-1")
    moved["metadata"]["namespace"] = "elsewhere"
    assert ws.replacements([moved], [old], ON) == {}


# ---------------------------------------------------------------- elastic_job_ungater_test.go (podsToUngate)
def pod(name: str, *, gated: bool = True, pod_set: str | None = "main", phase: str = "Pending") -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/podset": pod_set} if pod_set else {}
    gates = [{"name": "kueue.x-k8s.io/topology"}] + ([{"name": ws.SCHEDULING_GATE}] if gated else [])
    return {"metadata": {"name": name, "labels": labels}, "spec": {"schedulingGates": gates},
            "status": {"phase": phase}}


def ungated(granted: dict[str, int], pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in ws.pods_to_ungate(granted, pods)]


def test_ungate_single_and_multiple_pods() -> None:  # "ungate single pod", "ungate multiple pods"
    assert ungated({"main": 1}, [pod("p0")]) == ["p0"]
    assert ungated({"main": 3}, [pod("p2"), pod("p0"), pod("p1")]) == ["p0", "p1", "p2"]


def test_ungate_pods_independently_per_pod_set_without_sharing_spare_capacity() -> None:
    """"ungate pods independently per podset", "do not share spare capacity between podsets"."""
    pods = [pod("a0", pod_set="a"), pod("a1", pod_set="a"), pod("b0", pod_set="b")]
    assert ungated({"a": 1, "b": 3}, pods) == ["a0", "b0"]


def test_pods_without_a_pod_set_label_stay_gated() -> None:  # "do not ungate pod without podset label"
    assert ungated({"main": 2}, [pod("p0", pod_set=None)]) == []


def test_running_pods_consume_and_finished_pods_free_the_granted_count() -> None:
    """"skip already ungated pods", "running pod consumes granted count", "succeeded / failed pod
    does not consume granted count", "skip surplus pods over quota during scale-up"."""
    assert ungated({"main": 2}, [pod("r0", gated=False), pod("p0"), pod("p1")]) == ["p0"]
    assert ungated({"main": 2}, [pod("s0", gated=False, phase="Succeeded"),
                                 pod("f0", gated=False, phase="Failed"), pod("p0"), pod("p1")]) == ["p0", "p1"]
    assert ungated({"main": 1}, [pod("r0", gated=False), pod("p0")]) == []
