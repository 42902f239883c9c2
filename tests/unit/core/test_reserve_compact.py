"""reserve-compact (issue 17 items 2 and 6): a workload in its bounded wait for a compact
placement holds the domain it waits for; later workloads that it goes before in Kueue's order
are steered away from it. Off by default.

Two racks of two 4-cpu nodes; the waiter wants 4 pods of 2 cpus in one rack. Plain core data;
one ClusterQueue, so ``run_cycles`` takes the waiter in one cycle and the next job in the next."""

from __future__ import annotations

import json
from dataclasses import replace

from scheduler.core.beyond.compactness import WAITING_REASON
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN, HELD_REASON, parse_reserved
from scheduler.core.kueue.admitted import AdmittedWorkload, TASUsage
from scheduler.core.kueue.cycle import run_cycles
from scheduler.core.kueue.decisions import Admit, Decision, Pending, Preempt
from scheduler.core.kueue.quota import FlavorSpec
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.topology_request import CompactWait
from scheduler.core.workload import WorkloadSpec

from ._admission import admitted, cq, lqs, pending, rq, snapshot, wl
from ._helpers import RACK, node, tree_of

FLAVOR = "tas"
CREATED = 1000.0
WAIT = CompactWait(RACK, 1, 600.0)
RESERVE = PlacementOptions(reserve_compact=True)


def _busy(name: str, hosts: dict[str, int], cpu: int) -> AdmittedWorkload:
    w = admitted(wl(name, cpu, count=sum(hosts.values())), "a", FLAVOR, hosts=hosts)
    return replace(w, tas=tuple(TASUsage(FLAVOR, u.placement, u.per_pod) for u in w.tas))


def _snap(specs: list[WorkloadSpec], busy: list[AdmittedWorkload], *, options: PlacementOptions = RESERVE,
          now: float = CREATED + 10, parked: frozenset[str] = frozenset()):  # type: ignore[no-untyped-def]
    tree = tree_of([node(f"{r}-n{i}", rack=r, cpu=4) for r in ("r1", "r2") for i in range(2)])
    for w in busy:
        for u in w.tas:
            tree.add_usage(u.placement, u.per_pod)
    return snapshot(now=now, cluster_queues={"a": cq("a", {FLAVOR: {"cpu": rq(100)}})}, local_queues=lqs(("lq", "a")),
                    flavors={FLAVOR: FlavorSpec(FLAVOR, topology_name="default")}, trees={FLAVOR: tree},
                    admitted=busy, pending=[pending(s) for s in specs], placement_options=options,
                    inadmissible=parked)


def _waiter(annotations: dict[str, str] | None = None) -> WorkloadSpec:
    spec = wl("x", 2, count=4, preferred=RACK, created=CREATED)
    spec = replace(spec, pod_sets=tuple(replace(ps, compact=WAIT) for ps in spec.pod_sets))
    return replace(spec, annotations=annotations or {})


def _job(name: str, cpu: int = 2, prio: int = 0, after: float = 5) -> WorkloadSpec:
    return wl(name, cpu, prio=prio, created=CREATED + after)


def _by_name(decisions: list[Decision]) -> dict[str, Decision]:
    return {d.workload.split("/", 1)[1]: d for d in decisions}


def _hosts(d: Decision) -> set[str]:
    assert isinstance(d, Admit), d
    topo = d.pod_sets[0].topology
    assert topo is not None
    return {dom.values[-1] for dom in topo.domains}


def _held_rack(d: Decision) -> str:
    assert isinstance(d, Pending) and d.reserved_domain, d
    parsed = parse_reserved({ANN_RESERVED_DOMAIN: d.reserved_domain})
    assert parsed is not None
    return parsed[0].name


# Each rack has 6 of 8 cpus free (one 2-cpu pod on its first node): the waiter spans racks.
SPLIT = [_busy("busy", {"r1-n0": 1, "r2-n0": 1}, cpu=2)]


def test_off_by_default_a_later_job_takes_the_room_the_waiter_waits_for() -> None:
    out = _by_name(run_cycles(_snap([_waiter(), _job("y")], SPLIT, options=PlacementOptions())))
    x = out["x"]
    assert isinstance(x, Pending) and x.reason == WAITING_REASON and x.reserved_domain == ""
    assert _hosts(out["y"]) == {"r1-n0"}  # Kueue's LeastFreeCapacity: the fullest node, first by name


def test_a_later_job_that_fits_elsewhere_is_steered_away_from_the_held_domain() -> None:
    out = _by_name(run_cycles(_snap([_waiter(), _job("y")], SPLIT)))
    assert out["x"].reason == WAITING_REASON
    assert _held_rack(out["x"]) == "r1"  # a tie on free capacity: the first rack by path
    assert _hosts(out["y"]) == {"r2-n0"}


def test_the_held_domain_and_the_wait_end_are_kept_on_the_workload() -> None:
    [x] = run_cycles(_snap([_waiter()], SPLIT))
    assert isinstance(x, Pending) and x.retry_at == CREATED + 600
    data = json.loads(x.reserved_domain)
    assert data["until"] == CREATED + 600 and data["level"] == RACK and data["podSet"] == "main"
    assert data["domain"][RACK] == "r1"


def test_the_reservation_is_sticky_across_cycles() -> None:
    """Held before: rack r2, although r1 would be chosen now; the waiter keeps r2, the job avoids it."""
    [first] = run_cycles(_snap([_waiter()], SPLIT))
    assert isinstance(first, Pending)
    held_r2 = first.reserved_domain.replace('"r1"', '"r2"')
    out = _by_name(run_cycles(_snap([_waiter({ANN_RESERVED_DOMAIN: held_r2}), _job("y")], SPLIT)))
    assert _held_rack(out["x"]) == "r2"
    assert _hosts(out["y"]) == {"r1-n0"}


def test_a_higher_priority_job_ignores_the_reservation() -> None:
    """The waiter parked holding r1 (an earlier cycle): a later job of higher priority takes
    Kueue's node in r1; one of equal priority is steered to r2."""
    [first] = run_cycles(_snap([_waiter()], SPLIT))
    assert isinstance(first, Pending)
    x = _waiter({ANN_RESERVED_DOMAIN: first.reserved_domain})
    parked = frozenset({"team/x"})
    higher = _by_name(run_cycles(_snap([x, _job("y", prio=10)], SPLIT, parked=parked)))
    assert _hosts(higher["y"]) == {"r1-n0"}
    equal = _by_name(run_cycles(_snap([x, _job("y")], SPLIT, parked=parked)))
    assert _hosts(equal["y"]) == {"r2-n0"}


# r1: 3 free cpus on n0 (one 1-cpu pod), 4 on n1: the waiter's 3 pods and a 1-cpu fragment.
# r2: n0 full, 2 free cpus on n1 (one waiter pod). The waiter spans racks and holds r1.
TIGHT = [_busy("small", {"r1-n0": 1}, cpu=1), _busy("big", {"r2-n0": 2, "r2-n1": 1}, cpu=2)]


def test_when_nothing_else_fits_only_what_the_waiter_cannot_use_is_given() -> None:
    jobs = [_waiter(), _job("y"), _job("tiny", cpu=1, after=6), _job("z", after=7)]
    out = _by_name(run_cycles(_snap(jobs, TIGHT)))
    assert _held_rack(out["x"]) == "r1"
    assert _hosts(out["y"]) == {"r2-n1"}  # steered to the last room outside r1
    assert _hosts(out["tiny"]) == {"r1-n0"}  # the fragment no pod of the waiter fits in
    z = out["z"]  # fits only in the waiter's share: pending, and nobody is preempted for it
    assert isinstance(z, Pending) and z.reason == HELD_REASON and z.retry_at == CREATED + 600
    assert "(team/x (priority 0) in cloud.com/topology-rack=r1)" in z.message
    assert not any(isinstance(d, Preempt) for d in out.values())


def test_the_reservation_ends_with_the_wait() -> None:
    """The waiter parked with a reservation whose wait is over: the job is placed as by Kueue."""
    [first] = run_cycles(_snap([_waiter()], SPLIT))
    assert isinstance(first, Pending)
    x = _waiter({ANN_RESERVED_DOMAIN: first.reserved_domain})
    out = _by_name(run_cycles(_snap([x, _job("y")], SPLIT, now=CREATED + 600, parked=frozenset({"team/x"}))))
    assert _hosts(out["y"]) == {"r1-n0"}
    still = _by_name(run_cycles(_snap([x, _job("y")], SPLIT, now=CREATED + 599, parked=frozenset({"team/x"}))))
    assert _hosts(still["y"]) == {"r2-n0"}


def test_the_waiter_is_admitted_into_its_held_domain_once_it_fits_and_the_hold_ends() -> None:
    """The busy pod on r1 is gone: the waiter fits its held rack and is admitted there."""
    [first] = run_cycles(_snap([_waiter()], SPLIT))
    assert isinstance(first, Pending)
    x = _waiter({ANN_RESERVED_DOMAIN: first.reserved_domain})
    only_r2 = [_busy("busy", {"r2-n0": 1}, cpu=2)]
    out = _by_name(run_cycles(_snap([x, _job("y")], only_r2)))
    assert _hosts(out["x"]) == {"r1-n0", "r1-n1"}
    assert isinstance(out["y"], Admit)  # no reservation left to hold it back


def test_a_waiter_with_the_policy_off_ignores_a_stale_annotation() -> None:
    [first] = run_cycles(_snap([_waiter()], SPLIT))
    assert isinstance(first, Pending)
    x = _waiter({ANN_RESERVED_DOMAIN: first.reserved_domain})
    out = _by_name(run_cycles(_snap([x, _job("y")], SPLIT, options=PlacementOptions())))
    assert _hosts(out["y"]) == {"r1-n0"} and out["x"].reserved_domain == ""  # type: ignore[union-attr]


def test_placement_policy_names_include_reserve_compact() -> None:
    assert PlacementOptions.from_names("reserve-compact") == RESERVE
    assert PlacementOptions.from_names("all").reserve_compact
    assert not PlacementOptions.from_names("reserve-compact").kueue_equivalent
