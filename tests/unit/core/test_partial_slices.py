"""Partial slices (``TASPartialSlices``, Kueue's v0.20 cycle): a count the slice size does not
divide is whole slices plus one partial slice that a single slice-level domain holds. The
cases follow Kueue main's ``tas_partial_slices.go`` (no Kueue test table for them was found to
restate); each also runs with the gate off (Kueue's default here), where the last slice is
trimmed instead."""

from __future__ import annotations

import pytest

from scheduler.core.placement.planner import PlacementGates, place_workload
from scheduler.core.topology_request import SliceConstraint, TopologyRequest
from scheduler.core.workload import PodSetSpec

from ._helpers import HOST, RACK, node, per_node, tree_of

PARTIAL = PlacementGates(partial_slices=True)


def _ps(count: int, size: int, **topo: object) -> PodSetSpec:
    return PodSetSpec("main", count, {"cpu": 1000},
                      TopologyRequest(slice_constraints=(SliceConstraint(HOST, size),), **topo))  # type: ignore[arg-type]


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "auto"])
def test_tail_fits_next_to_the_whole_slices(solver: str) -> None:
    """Rack r1: h1 with 4 free pods (2 slices of 2), h2 with 1 (no whole slice). 5 pods = 2 slices
    + a partial slice of 1: r1 holds them (h1 4, h2 1). Counting 3 whole slices it does not."""
    tree = tree_of([node("h1", rack="r1", cpu=4), node("h2", rack="r1", cpu=1)])
    on = place_workload(tree, [_ps(5, 2, required=RACK)], solver=solver, gates=PARTIAL)
    assert per_node(on) == {"h1": 4, "h2": 1}
    off = place_workload(tree, [_ps(5, 2, required=RACK)], solver=solver)
    assert not off.fits
    assert off.reason == 'topology "default" allows to fit only 2 out of 3 slice(s)'


def test_no_fit_counts_the_partial_slice_as_a_slice() -> None:
    tree = tree_of([node("h1", rack="r1", cpu=4)])
    placement = place_workload(tree, [_ps(7, 2, required=RACK)], solver="greedy", gates=PARTIAL)
    assert placement.reason == 'topology "default" allows to fit only 2 out of 4 slice(s)'


def test_tail_goes_to_a_used_domain_with_room_first() -> None:
    """h1 5 free, h2 4 free: 5 pods (2 slices + 1): BestFit closes both whole slices and the
    tail in the tightest host that holds them together (h1: 2 slices next to the tail)."""
    tree = tree_of([node("h1", rack="r1", cpu=5), node("h2", rack="r1", cpu=4)])
    placement = place_workload(tree, [_ps(5, 2, required=RACK)], solver="greedy", gates=PARTIAL)
    assert per_node(placement) == {"h1": 5}


def test_only_a_partial_slice() -> None:
    """1 pod with slices of 2: no whole slice, one partial slice of 1 on one host."""
    tree = tree_of([node("h1", rack="r1", cpu=3), node("h2", rack="r2", cpu=1)])
    placement = place_workload(tree, [_ps(1, 2, required=RACK)], solver="greedy", gates=PARTIAL)
    assert sum(per_node(placement).values()) == 1 and len(per_node(placement)) == 1


def test_preferred_spreads_whole_slices_and_adds_a_domain_for_the_tail() -> None:
    """Racks of one host with 2, 2 and 1 free pods: 5 pods (2 slices + 1) fit no single rack, so
    the block is chosen; one whole slice goes to each of r1 and r2, neither has room for the
    tail next to it, so the first rack that can hold it (r3) is added."""
    tree = tree_of([node("a", rack="r1", cpu=2), node("b", rack="r2", cpu=2), node("c", rack="r3", cpu=1)])
    placement = place_workload(tree, [_ps(5, 2, preferred=RACK)], solver="greedy", gates=PARTIAL)
    assert per_node(placement) == {"a": 2, "b": 2, "c": 1}
