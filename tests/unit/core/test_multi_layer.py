"""Multi-layer slices (``podset-slice-required-topology-constraints``) as Kueue places them, with
``TASMultiLayerTopology`` on (Kueue v0.19's default) and off (v0.17's). Cases restated from
Kueue v0.19.2 ``pkg/cache/scheduler/tas_cache_test.go`` ("multi-layer topology: ..."; the same
cases exist in v0.17.0), names kept."""

from __future__ import annotations

import pytest

from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates
from scheduler.core.placement.planner import place_workload
from scheduler.core.placement.types import PlacementGates
from scheduler.core.topology_request import SliceConstraint, TopologyRequest, without_inner_layers
from scheduler.core.workload import PodSetSpec
from tests.unit.core._helpers import BLOCK, HOST, LEVELS3, MULTI_LAYER, RACK, node, per_node, tree_of

GATE_OFF = PlacementGates(multi_layer=False)
DC, AZ = "cloud.com/topology-datacenter", "cloud.com/topology-aizone"

# b1 -> r1 (x1: 1 cpu, x2: 4) and r2 (x3: 3, x4: 4)
FOUR_HOSTS = [node("x1", "b1", "r1", 1), node("x2", "b1", "r1", 4), node("x3", "b1", "r2", 3),
              node("x4", "b1", "r2", 4)]
RACK4_HOST2 = (SliceConstraint(RACK, 4), SliceConstraint(HOST, 2))


def _pod_set(count: int, request: TopologyRequest, per_pod: dict[str, int] | None = None) -> PodSetSpec:
    return PodSetSpec("main", count, per_pod or {"cpu": 1000}, request)


@pytest.mark.parametrize("solver", ["greedy", "auto"])
def test_block_required_rack_slices_of_4_host_slices_of_2(solver: str) -> None:
    """Below the rack (the outermost slice level) Kueue takes a rack's hosts smallest first:
    r2 gives one host slice to x3 (3 free) and one to x4 (4 free), not both to x4."""
    request = TopologyRequest(required=BLOCK, slice_constraints=RACK4_HOST2, layered_slices=True)
    placement = place_workload(tree_of(FOUR_HOSTS), [_pod_set(8, request)], solver=solver, gates=MULTI_LAYER)
    assert per_node(placement) == {"x2": 4, "x3": 2, "x4": 2}


def test_no_feature_gate_additional_layers_ignored() -> None:
    """Without the gate only the outermost layer counts: rack slices of 4, hosts filled smallest
    first with single pods (Kueue's case uses the two-level fields; the constraints list gives
    the same answer here because its inner layer is dropped)."""
    want = {"x1": 1, "x2": 3, "x3": 3, "x4": 1}
    two_level = TopologyRequest(required=BLOCK, slice_constraints=(SliceConstraint(RACK, 4),))
    layered = TopologyRequest(required=BLOCK, slice_constraints=RACK4_HOST2, layered_slices=True)
    for request in (two_level, layered):
        placement = place_workload(tree_of(FOUR_HOSTS), [_pod_set(8, request)], solver="greedy", gates=GATE_OFF)
        assert per_node(placement) == want
    # the same Workload under v0.19's gates keeps its host slices
    gates = PlacementGates.from_gates(FeatureGates(release=KUEUE_V019).enabled)
    assert per_node(place_workload(tree_of(FOUR_HOSTS), [_pod_set(8, layered)], solver="greedy", gates=gates)) \
        == {"x2": 4, "x3": 2, "x4": 2}
    assert not PlacementGates.from_gates(FeatureGates(release=KUEUE_V017).enabled).multi_layer


def test_gb200_nvl36_dc_required_aizone_slices_of_48_rack_slices_of_16() -> None:
    """1 dc x 2 aizones x 2 blocks x 2 racks of 18 two-GPU nodes; 96 two-GPU pods in aizone
    slices of 48 made of rack slices of 16: three racks of 16 in each aizone, the lowest-named
    first (equal blocks tie on their path)."""
    levels = (DC, AZ, BLOCK, RACK)
    racks = [("aizone0", "block0", "r0"), ("aizone0", "block0", "r1"), ("aizone0", "block1", "r2"),
             ("aizone0", "block1", "r3"), ("aizone1", "block2", "r4"), ("aizone1", "block2", "r5"),
             ("aizone1", "block3", "r6"), ("aizone1", "block3", "r7")]
    nodes = [node(f"{b}-{r}-{az}-n{i}", b, r, 0, extra={"nvidia.com/gpu": 2}, labels={DC: "dc0", AZ: az})
             for az, b, r in racks for i in range(18)]
    request = TopologyRequest(required=DC, slice_constraints=(SliceConstraint(AZ, 48), SliceConstraint(RACK, 16)),
                              layered_slices=True)
    placement = place_workload(tree_of(nodes, levels), [_pod_set(96, request, {"nvidia.com/gpu": 2})],
                               solver="greedy", gates=MULTI_LAYER)
    assert per_node(placement) == {f"dc0/{az}/{b}/{r}": 16 for az, b, r in racks if r not in ("r3", "r7")}


def test_the_multi_layer_no_fit_message_needs_the_gate() -> None:
    """Kueue's "host slice rounding makes rack slice impossible": with the gate the host layer
    makes it fail; without it the rack slice of 6 fits on x1 + x2."""
    hosts = [node("x1", "b1", "r1", 3), node("x2", "b1", "r1", 3), node("x3", "b1", "r1", 0)]
    request = TopologyRequest(required=BLOCK, slice_constraints=(SliceConstraint(RACK, 6), SliceConstraint(HOST, 2)),
                              layered_slices=True)
    on = place_workload(tree_of(hosts), [_pod_set(6, request)], solver="greedy", gates=MULTI_LAYER)
    assert on.reason == ('topology "default" doesn\'t allow to fit; 0/1 slice(s) fit on level '
                         'cloud.com/topology-rack; 2/3 slice(s) fit on level kubernetes.io/hostname. '
                         'Total nodes: 3; excluded: resource "cpu": 1')
    assert per_node(place_workload(tree_of(hosts), [_pod_set(6, request)], solver="greedy", gates=GATE_OFF)) \
        == {"x1": 3, "x2": 3}


def test_without_inner_layers() -> None:
    layered = TopologyRequest(required=BLOCK, slice_constraints=RACK4_HOST2, layered_slices=True)
    assert without_inner_layers(layered) == TopologyRequest(required=BLOCK, slice_constraints=RACK4_HOST2[:1],
                                                            layered_slices=True)
    single = TopologyRequest(required=BLOCK, slice_constraints=RACK4_HOST2[:1])
    assert without_inner_layers(single) is single and without_inner_layers(None) is None
    assert LEVELS3 == (BLOCK, RACK, HOST)


def test_hosts_are_ordered_by_their_own_free_pods_not_rounded_to_the_inner_layer() -> None:
    """Kueue rounds a host's pods to the inner slice size only where they add up into the rack;
    its order among siblings uses the host's own count: xb (2 free) before xa (3 free), so the
    one host slice goes to xb although both hold one slice and xa sorts first by name."""
    hosts = [node("xa", "b1", "r1", 3), node("xb", "b1", "r1", 2)]
    request = TopologyRequest(required=BLOCK, slice_constraints=(SliceConstraint(RACK, 2), SliceConstraint(HOST, 2)),
                              layered_slices=True)
    assert per_node(place_workload(tree_of(hosts), [_pod_set(2, request)], solver="greedy", gates=MULTI_LAYER)) \
        == {"xb": 2}
