"""The extender files an elastic job's newest slice under the slice name its pods carry
(scheduler/extender/workload_view.py ``view_names``): Kueue v0.19.2 finds a slice's pods by
``kueue.x-k8s.io/workload-slice-name`` (pkg/controller/core/indexer/indexer.go, the
ElasticJobUngater), and a scale-up's new pods wait until the new slice is admitted (its
elastic scheduling gate). Fails on main, where a scaled job's new pods named a Finished slice
and never bound."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.extender.workload_view import view_names


def wl(name: str, *, elastic: bool = True, slice_name: str | None = None,
       finished_reason: str | None = None) -> dict[str, Any]:
    ann: dict[str, str] = {ws.ELASTIC_ANNOTATION: "true"} if elastic else {}
    if slice_name:
        ann[ws.SLICE_NAME] = slice_name
    conds = [{"type": "Finished", "status": "True", "reason": finished_reason}] if finished_reason else []
    return {"metadata": {"name": name, "namespace": "ns", "annotations": ann}, "status": {"conditions": conds}}


def test_a_plain_workload_is_filed_under_its_name() -> None:
    assert view_names(wl("a", elastic=False, slice_name="x")) == ("a",)


def test_the_first_slice_is_filed_under_its_name() -> None:
    assert view_names(wl("a", slice_name="a")) == ("a",)


def test_a_replacement_slice_is_filed_under_the_chains_name_too() -> None:
    assert view_names(wl("b", slice_name="a")) == ("b", "a")


def test_a_replaced_slice_is_filed_under_none() -> None:
    assert view_names(wl("a", slice_name="a", finished_reason=ws.REASON_REPLACED)) == ()
    assert view_names(wl("a", slice_name="a", finished_reason="Succeeded")) == ("a",)
