"""toposched beyond Kueue (issue 17): the bounded wait for a compact placement, fragmentation-
aware placement, degraded domains ranked last, domain drain, UltraServer / layer-4 levels.

Plain core data; the cycle's clock is ``Snapshot.now``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.adapter.manifest.annotations import validate_topology_annotations
from scheduler.core.beyond.compactness import RELAXED_REASON, WAITING_REASON
from scheduler.core.kueue.admitted import AdmittedWorkload, TASUsage
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit, Pending
from scheduler.core.kueue.queueing import QueueState
from scheduler.core.kueue.quota import FlavorSpec
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.placement.planner import place_workload
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.core.topology import DRAIN_LABEL, ULTRASERVER_LABEL, TopologyTree, default_levels_for
from scheduler.core.topology_request import (
    ANN_COMPACT_LEVEL,
    ANN_COMPACT_MAX_DOMAINS,
    ANN_COMPACT_WAIT,
    CompactWait,
    TopologyRequest,
    TopologyRequestError,
    compact_wait_from_annotations,
)
from scheduler.core.workload import PodSetSpec, WorkloadSpec, workload_from_job

from ._admission import cq, lqs, pending, rq, snapshot, wl
from ._helpers import HOST, LEVELS3, RACK, node, per_node, tree_of

FLAVOR = "tas"
CREATED = 1000.0
COMPACT_RACK = CompactWait(RACK, 1, 600.0)


def _busy(name: str, hosts: dict[str, int], cpu: int = 2) -> AdmittedWorkload:
    """An admitted one-cpu-shape workload holding ``hosts`` (host -> pods of ``cpu`` cpus)."""
    spec = wl(name, cpu, count=sum(hosts.values()))
    doms = tuple(DomainAssignment((h,), n) for h, n in sorted(hosts.items()))
    placement = PodSetPlacement("main", sum(hosts.values()), (HOST,), doms)
    usage = {(FLAVOR, "cpu"): cpu * 1000 * sum(hosts.values())}
    return AdmittedWorkload(spec, "a", usage, tas=(TASUsage(FLAVOR, placement, spec.pod_sets[0].requests),))


def _snap(pending_specs: list[WorkloadSpec], busy: list[AdmittedWorkload], *, now: float = CREATED,
          defaults: dict[str, CompactWait] | None = None, options: PlacementOptions | None = None):  # type: ignore[no-untyped-def]
    nodes = [node(f"{r}-n{i}", rack=r, cpu=4) for r in ("r1", "r2") for i in range(2)]
    tree = tree_of(nodes)
    for w in busy:
        for u in w.tas:
            tree.add_usage(u.placement, u.per_pod)
    return snapshot(now=now, cluster_queues={"a": cq("a", {FLAVOR: {"cpu": rq(100)}})},
                    local_queues=lqs(("lq", "a")), flavors={FLAVOR: FlavorSpec(FLAVOR, topology_name="default")},
                    trees={FLAVOR: tree}, admitted=busy, pending=[pending(s) for s in pending_specs],
                    compact_defaults=defaults or {}, placement_options=options or PlacementOptions())


def _with_compact(spec: WorkloadSpec, wanted: CompactWait) -> WorkloadSpec:
    return replace(spec, pod_sets=tuple(replace(ps, compact=wanted) for ps in spec.pod_sets))


def _racks(decision: Admit) -> set[str]:
    topo = decision.pod_sets[0].topology
    assert topo is not None
    return {d.values[0].split("-")[0] for d in topo.domains}


# Each rack has 6 of 8 cpus free (2 used on its first node): 4 pods of 2 cpus fit only across racks.
SPLIT = [_busy("busy", {"r1-n0": 1, "r2-n0": 1})]


def test_without_the_annotation_the_job_spans_racks_as_today() -> None:
    [d] = run_cycle(_snap([wl("x", 2, count=4, preferred=RACK, created=CREATED)], SPLIT))
    assert isinstance(d, Admit) and _racks(d) == {"r1", "r2"} and d.relaxed == ""


def test_compact_wait_keeps_the_job_pending_with_a_reason_until_the_deadline() -> None:
    spec = _with_compact(wl("x", 2, count=4, preferred=RACK, created=CREATED), COMPACT_RACK)
    [d] = run_cycle(_snap([spec], SPLIT, now=CREATED + 599))
    assert isinstance(d, Pending)
    assert d.reason == WAITING_REASON and d.retry_at == CREATED + 600
    assert "at most 1 cloud.com/topology-rack domain(s)" in d.message and "spans 2" in d.message
    assert d.requeue == "inadmissible"


def test_compact_wait_relaxes_at_the_deadline_with_a_note_for_the_event() -> None:
    spec = _with_compact(wl("x", 2, count=4, preferred=RACK, created=CREATED), COMPACT_RACK)
    [d] = run_cycle(_snap([spec], SPLIT, now=CREATED + 600))
    assert isinstance(d, Admit) and _racks(d) == {"r1", "r2"}
    assert "admitted in 2 domain(s)" in d.relaxed
    assert RELAXED_REASON == "CompactPlacementRelaxed"


def test_compact_wait_is_met_at_once_when_a_compact_placement_exists() -> None:
    """Unconstrained pods are spread by LeastFreeCapacity; the wish re-places them in one rack."""
    spec = WorkloadSpec("team", "x", (PodSetSpec("main", 3, {"cpu": 2000}, TopologyRequest(unconstrained=True)),),
                        uid="uid-x", queue_name="lq", created_at=CREATED)
    [plain] = run_cycle(_snap([spec], SPLIT))
    assert isinstance(plain, Admit) and _racks(plain) == {"r1", "r2"}
    [d] = run_cycle(_snap([_with_compact(spec, COMPACT_RACK)], SPLIT))
    assert isinstance(d, Admit) and len(_racks(d)) == 1 and d.relaxed == ""


def test_cluster_queue_default_applies_to_pod_sets_without_their_own() -> None:
    spec = wl("x", 2, count=4, preferred=RACK, created=CREATED)
    [d] = run_cycle(_snap([spec], SPLIT, defaults={"a": COMPACT_RACK}))
    assert isinstance(d, Pending) and d.reason == WAITING_REASON
    own = _with_compact(spec, CompactWait(RACK, 2, 600.0))  # the pod set's own wish wins
    [d2] = run_cycle(_snap([own], SPLIT, defaults={"a": COMPACT_RACK}))
    assert isinstance(d2, Admit)


def _full_cluster_preemptible(now: float, options: PlacementOptions):  # type: ignore[no-untyped-def]
    """Every node full with a priority-0 workload; ``x`` (priority 100, 2 whole nodes, a
    10-minute compact wait for one rack) can only run by preempting it."""
    nodes = [node(f"{r}-n{i}", rack=r, cpu=4) for r in ("r1", "r2") for i in range(2)]
    tree = tree_of(nodes)
    low = _busy("low", {n.name: 1 for n in nodes}, cpu=4)
    for u in low.tas:
        tree.add_usage(u.placement, u.per_pod)
    x = _with_compact(wl("x", 4, count=2, preferred=RACK, created=CREATED, prio=100), COMPACT_RACK)
    return snapshot(now=now, cluster_queues={"a": cq("a", {FLAVOR: {"cpu": rq(100)}}, within="LowerPriority")},
                    local_queues=lqs(("lq", "a")), flavors={FLAVOR: FlavorSpec(FLAVOR, topology_name="default")},
                    trees={FLAVOR: tree}, admitted=[low], pending=[pending(x)], placement_options=options)


def test_patient_compact_does_not_preempt_during_the_wait() -> None:
    kueue = run_cycle(_full_cluster_preemptible(CREATED + 10, PlacementOptions()))
    assert [type(d).__name__ for d in kueue] == ["Preempt", "Pending"]  # Kueue preempts at once
    patient = PlacementOptions(patient_compact=True)
    [d] = run_cycle(_full_cluster_preemptible(CREATED + 10, patient))
    assert isinstance(d, Pending) and d.reason == WAITING_REASON and d.retry_at == CREATED + 600
    assert d.requeue == "inadmissible"
    assert "does not preempt for 10m from queueing" in d.message and "patient-compact" in d.message
    after = run_cycle(_full_cluster_preemptible(CREATED + 600, patient))  # the wait is over
    assert [type(dd).__name__ for dd in after] == ["Preempt", "Pending"]


def test_queue_state_wakes_a_parked_compact_wait_at_its_deadline() -> None:
    state = QueueState()
    state.park("team/x", "a", wake_at=1600.0)
    state.park("team/y", "a")
    assert state.release_due(1599.0) == 0
    assert state.release_due(1600.0) == 1
    assert state.inadmissible() == frozenset({"team/y"})


# ---------------------------------------------------------------- codec and webhook


def test_compact_annotations_read_through_the_codec() -> None:
    job = {"kind": "Job", "metadata": {"name": "j", "namespace": "team"},
           "spec": {"parallelism": 2, "template": {"metadata": {"annotations": {
               ANN_COMPACT_LEVEL: RACK, ANN_COMPACT_MAX_DOMAINS: "2", ANN_COMPACT_WAIT: "1h30m"}},
               "spec": {"containers": [{"name": "c"}]}}}}
    assert workload_from_job(job).pod_sets[0].compact == CompactWait(RACK, 2, 5400.0)
    assert compact_wait_from_annotations({ANN_COMPACT_LEVEL: RACK}) == CompactWait(RACK, 1, 0.0)
    assert compact_wait_from_annotations({}) is None


@pytest.mark.parametrize(("annotations", "field", "words"), [
    ({ANN_COMPACT_WAIT: "10m"}, ANN_COMPACT_LEVEL, "must be set"),
    ({ANN_COMPACT_LEVEL: RACK, ANN_COMPACT_MAX_DOMAINS: "0"}, ANN_COMPACT_MAX_DOMAINS, "at least 1"),
    ({ANN_COMPACT_LEVEL: RACK, ANN_COMPACT_WAIT: "ten minutes"}, ANN_COMPACT_WAIT, "duration"),
    ({ANN_COMPACT_LEVEL: RACK, ANN_COMPACT_WAIT: "200h"}, ANN_COMPACT_WAIT, "at most 168h"),
])
def test_bad_compact_annotations_are_denied_naming_the_field_and_the_fix(
        annotations: dict[str, str], field: str, words: str) -> None:
    with pytest.raises(TopologyRequestError) as err:
        compact_wait_from_annotations(annotations)
    assert err.value.field == field
    [e] = validate_topology_annotations(annotations, 4)
    assert field in e.path and words in e.detail and e.fix


def test_compact_level_must_be_a_label_key() -> None:
    errs = validate_topology_annotations({ANN_COMPACT_LEVEL: "not a key!"}, 4)
    assert errs and ANN_COMPACT_LEVEL in errs[0].path


# ---------------------------------------------------------------- fragmentation-aware placement


def _rack_tree_with_r2_partly_used() -> TopologyTree:
    tree = tree_of([node(f"{r}-n{i}", rack=r, cpu=4) for r in ("r1", "r2") for i in range(2)])
    tree.add_usage(PodSetPlacement("m", 1, (HOST,), (DomainAssignment(("r2-n0",), 1),)), {"cpu": 2000})
    return tree


SMALL = [PodSetSpec("main", 1, {"cpu": 4000}, TopologyRequest(unconstrained=True))]


def test_kueue_least_free_capacity_breaks_the_whole_free_rack() -> None:
    assert per_node(place_workload(_rack_tree_with_r2_partly_used(), SMALL, solver="greedy")) == {"r1-n0": 1}


def test_fragmentation_aware_fills_the_partly_used_rack_first() -> None:
    opts = PlacementOptions(fragmentation_aware=True)
    got = place_workload(_rack_tree_with_r2_partly_used(), SMALL, solver="greedy", options=opts)
    assert per_node(got) == {"r2-n1": 1}


def test_fragmentation_aware_spreads_only_when_it_must() -> None:
    opts = PlacementOptions(fragmentation_aware=True)
    three = [PodSetSpec("main", 3, {"cpu": 4000}, TopologyRequest(unconstrained=True))]
    got = per_node(place_workload(_rack_tree_with_r2_partly_used(), three, solver="greedy", options=opts))
    assert sum(got.values()) == 3 and "r2-n0" not in got


def _used(tree: TopologyTree, host: str, cpu: int) -> None:
    tree.add_usage(PodSetPlacement("m", 1, (HOST,), (DomainAssignment((host,), 1),)), {"cpu": cpu * 1000})


def test_fragmentation_aware_keeps_whole_nodes_for_multi_node_jobs() -> None:
    # r1: n0 partly used, n1 whole; r2: n0 full, n1 whole. A 1-cpu pod goes to the partly used
    # node (r2 is the fuller rack, but its free node is whole: a multi-node pod needs it).
    tree = tree_of([node(f"{r}-n{i}", rack=r, cpu=4) for r in ("r1", "r2") for i in range(2)])
    _used(tree, "r1-n0", 1)
    _used(tree, "r2-n0", 4)
    one = [PodSetSpec("main", 1, {"cpu": 1000}, TopologyRequest(unconstrained=True))]
    got = place_workload(tree, one, solver="greedy", options=PlacementOptions(fragmentation_aware=True))
    assert per_node(got) == {"r1-n0": 1}


def test_fragmentation_aware_fills_the_smallest_rack_hole_first() -> None:
    # Block b1: r1 has 2 free nodes, r2 none; block b2: r3 has 1, r4 has 2. The fuller block is
    # b1, but the best fit for one node is r3's single free node: r1 and r4 keep 2 each.
    racks = {"r1": "b1", "r2": "b1", "r3": "b2", "r4": "b2"}
    tree = tree_of([node(f"{r}-n{i}", block=b, rack=r, cpu=4) for r, b in racks.items() for i in range(3)])
    for host in ("r1-n0", "r2-n0", "r2-n1", "r2-n2", "r3-n0", "r3-n1", "r4-n0"):
        _used(tree, host, 4)
    got = place_workload(tree, SMALL, solver="greedy", options=PlacementOptions(fragmentation_aware=True))
    assert per_node(got) == {"r3-n2": 1}


def test_placement_policy_names() -> None:
    assert PlacementOptions.from_names("kueue").kueue_equivalent
    assert PlacementOptions.from_names("all") == PlacementOptions(True, True, True, True)
    assert PlacementOptions.from_names("patient-compact") == PlacementOptions(patient_compact=True)
    assert not PlacementOptions(patient_compact=True).kueue_equivalent
    assert PlacementOptions.from_names("degraded-last") == PlacementOptions(False, True)
    with pytest.raises(ValueError, match="unknown placement policy 'nope'"):
        PlacementOptions.from_names("kueue,nope")


# ---------------------------------------------------------------- HyperPod shapes


def test_degraded_rack_is_ranked_below_a_healthy_one_for_multi_node_jobs() -> None:
    nodes = [node("r1-n0", rack="r1", cpu=4), node("r1-n1", rack="r1", cpu=4),
             node("r1-n2", rack="r1", cpu=4, ready=False),
             node("r2-n0", rack="r2", cpu=4), node("r2-n1", rack="r2", cpu=4)]
    tree = tree_of(nodes)
    assert tree.impaired == {("b1", "r1", "r1-n2"): 1}
    job = [PodSetSpec("main", 2, {"cpu": 4000}, TopologyRequest(required=RACK))]
    kueue = per_node(place_workload(tree, job, solver="greedy"))
    assert {h.split("-")[0] for h in kueue} == {"r1"}  # BestFit tie: by name
    ranked = per_node(place_workload(tree, job, solver="greedy", options=PlacementOptions(degraded_last=True)))
    assert {h.split("-")[0] for h in ranked} == {"r2"}
    big = [PodSetSpec("main", 4, {"cpu": 4000}, TopologyRequest(preferred=RACK))]  # needs both racks
    assert sum(per_node(place_workload(tree, big, solver="greedy",
                                       options=PlacementOptions(degraded_last=True))).values()) == 4


def test_drained_nodes_take_nothing_new_and_degrade_their_domain() -> None:
    nodes = [node("r1-n0", rack="r1", cpu=4, labels={DRAIN_LABEL: "true"}), node("r1-n1", rack="r1", cpu=4),
             node("r2-n0", rack="r2", cpu=4, labels={DRAIN_LABEL: "false"})]
    tree = TopologyTree.build("default", LEVELS3, nodes)
    assert tree.leaf_of_node("r1-n0") is None and tree.leaf_of_node("r2-n0") is not None
    assert tree.build_exclusions == {"drained for maintenance (toposched.io/drain)": 1}
    assert tree.impaired == {("b1", "r1", "r1-n0"): 1}


def test_ultraserver_and_layer_4_levels_are_discovered_from_labels() -> None:
    def hp(name: str, **extra: str) -> object:
        labels = {f"topology.k8s.aws/network-node-layer-{i}": f"nn-{i}" for i in (1, 2, 3)}
        return node(name, labels={**labels, **extra})

    layer4 = "topology.k8s.aws/network-node-layer-4"
    both = [hp("a", **{layer4: "l4", ULTRASERVER_LABEL: "us-1"}), hp("b", **{layer4: "l4", ULTRASERVER_LABEL: "us-2"})]
    levels = default_levels_for(both)  # type: ignore[arg-type]
    assert levels[3:] == (layer4, ULTRASERVER_LABEL, HOST)
    only_us = [hp("a", **{ULTRASERVER_LABEL: "us-1"}), hp("b", **{ULTRASERVER_LABEL: "us-1"})]
    assert default_levels_for(only_us)[3:] == (ULTRASERVER_LABEL, HOST)  # type: ignore[arg-type]
    mixed = [hp("a", **{ULTRASERVER_LABEL: "us-1"}), hp("b")]
    assert default_levels_for(mixed)[3:] == (HOST,)  # type: ignore[arg-type]
