"""TAS inside the admission cycle: placement, TopologyPlacementFailed, CP-SAT victim choice."""

from __future__ import annotations

from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit, Pending, Preempt
from scheduler.core.kueue.quota import FlavorSpec

from ._admission import admitted, cq, lqs, pending, rq, snapshot, summary, wl
from ._helpers import RACK, node, tree_of

FLAVOR = "tas"


def _tas_snapshot(admitted_wls, pending_wls, racks=("r1", "r2"), hosts_per_rack=2, within="LowerPriority"):  # type: ignore[no-untyped-def]
    nodes = [node(f"{r}-n{i}", rack=r, cpu=4) for r in racks for i in range(hosts_per_rack)]
    tree = tree_of(nodes)
    for w in admitted_wls:
        for u in w.tas:
            tree.add_usage(u.placement, u.per_pod)
    cqs = {"a": cq("a", {FLAVOR: {"cpu": rq(100)}}, within=within)}
    flavors = {FLAVOR: FlavorSpec(FLAVOR, {"pool": "gpu"}, topology_name="default")}
    return snapshot(cluster_queues=cqs, local_queues=lqs(("lq", "a")), flavors=flavors, trees={FLAVOR: tree},
                    admitted=admitted_wls, pending=[pending(w) for w in pending_wls])


def test_required_rack_is_placed_in_one_rack() -> None:
    snap = _tas_snapshot([], [wl("x", 2, count=4, required=RACK)])
    [d] = run_cycle(snap)
    assert isinstance(d, Admit)
    topo = d.pod_sets[0].topology
    assert topo is not None and sum(x.count for x in topo.domains) == 4
    assert len({x.values[0].split("-")[0] for x in topo.domains}) == 1  # one rack


def test_topology_placement_failed_when_never_fits() -> None:
    snap = _tas_snapshot([], [wl("x", 3, count=3, required=RACK)])  # a rack holds 2 such pods
    [d] = run_cycle(snap)
    assert isinstance(d, Pending)
    assert d.reason == "TopologyPlacementFailed"
    assert d.message.startswith("couldn't assign flavors to pod set main: topology \"default\"")


def test_level_missing_from_flavor() -> None:
    snap = _tas_snapshot([], [wl("x", 1, required="no/such-level")])
    [d] = run_cycle(snap)
    assert isinstance(d, Pending)
    assert d.message == 'couldn\'t assign flavors to pod set main: Flavor "tas" does not contain the requested level'


def test_second_workload_sees_first_ones_placement_in_the_same_cycle() -> None:
    cqs_extra = _tas_snapshot([], [wl("x", 4, count=2, required=RACK)])
    from dataclasses import replace

    snap = replace(cqs_extra, cluster_queues={**cqs_extra.cluster_queues, "b": cq("b", {FLAVOR: {"cpu": rq(100)}})},
                   local_queues={**cqs_extra.local_queues, **lqs(("lb", "b"))},
                   pending=[*cqs_extra.pending, pending(wl("y", 4, count=2, required=RACK, queue="lb", created=1))])
    decisions = run_cycle(snap)
    admits = [d for d in decisions if isinstance(d, Admit)]
    assert len(admits) == 2
    racks = [{v.values[0].split("-")[0] for v in a.pod_sets[0].topology.domains} for a in admits]  # type: ignore[union-attr]
    assert racks[0] != racks[1]


def test_tas_victim_in_the_right_rack_not_the_cheaper_one_elsewhere() -> None:
    # r1: "cheap" (prio 0) uses half of r1-n0; the rest of r1 is held by "vip" (prio 100, not preemptable).
    # r2: "target" (prio 1) holds r2-n0 fully; r2-n1 is free. The preemptor needs 2 full hosts in one rack.
    cheap = admitted(wl("cheap", 2, prio=0), "a", FLAVOR, at=5, hosts={"r1-n0": 1})
    vip = admitted(wl("vip", 2, count=3, prio=100), "a", FLAVOR, at=1, hosts={"r1-n0": 1, "r1-n1": 2})
    target = admitted(wl("target", 4, prio=1), "a", FLAVOR, at=2, hosts={"r2-n0": 1})
    snap = _tas_snapshot([cheap, vip, target], [wl("x", 4, count=2, prio=50, required=RACK, created=9)])
    decisions = run_cycle(snap)
    assert summary(decisions) == [("preempt", "target", "InClusterQueue"),
                                  ("pending", "x", "WaitingForPreemptedWorkloads")]
    pend = decisions[-1]
    assert isinstance(pend, Pending) and pend.message.endswith("Pending the preemption of 1 workload(s)")


def test_tas_fewest_victims_beats_kueue_greedy_order() -> None:
    # r1 holds two low-priority halves (prio 0, 0); r2 one full-rack workload (prio 1).
    # Kueue's ordering would evict both r1 workloads; one victim (r2) frees a rack.
    a1 = admitted(wl("a1", 4, count=1, prio=0), "a", FLAVOR, at=3, hosts={"r1-n0": 1})
    a2 = admitted(wl("a2", 4, count=1, prio=0), "a", FLAVOR, at=4, hosts={"r1-n1": 1})
    b = admitted(wl("b", 4, count=2, prio=1), "a", FLAVOR, at=1, hosts={"r2-n0": 1, "r2-n1": 1})
    snap = _tas_snapshot([a1, a2, b], [wl("x", 4, count=2, prio=50, required=RACK, created=9)])
    victims = [d.workload for d in run_cycle(snap) if isinstance(d, Preempt)]
    assert victims == ["team/b"]


def test_tas_never_evicts_more_than_needed() -> None:
    # Every host is half used by its own low-priority workload; the preemptor needs 2 pods of 2 cpu
    # in one rack: two victims in one rack suffice, the most recently admitted pair (r2).
    adm = [admitted(wl(f"w{i}", 2, prio=0), "a", FLAVOR, at=i, hosts={h: 1})
           for i, h in enumerate(["r1-n0", "r1-n1", "r2-n0", "r2-n1"])]
    adm += [admitted(wl(f"v{i}", 2, prio=100), "a", FLAVOR, at=0, hosts={h: 1})
            for i, h in enumerate(["r1-n0", "r1-n1", "r2-n0", "r2-n1"])]
    snap = _tas_snapshot(adm, [wl("x", 2, count=2, prio=50, required=RACK, created=9)])
    decisions = run_cycle(snap)
    victims = sorted(d.workload for d in decisions if isinstance(d, Preempt))
    assert victims == ["team/w2", "team/w3"], decisions


def test_tas_cycle_is_deterministic() -> None:
    a1 = admitted(wl("a1", 4, prio=0), "a", FLAVOR, at=3, hosts={"r1-n0": 1})
    b = admitted(wl("b", 4, count=2, prio=1), "a", FLAVOR, at=1, hosts={"r2-n0": 1, "r2-n1": 1})
    snap = _tas_snapshot([a1, b], [wl("x", 4, count=2, prio=50, required=RACK), wl("y", 1, preferred=RACK,
                                                                                     created=3)])
    assert run_cycle(snap) == run_cycle(snap)
