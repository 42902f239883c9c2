"""Domain-clearing preemption and sticky preemption targets (core/domain_preemption.py)."""

from __future__ import annotations

from dataclasses import replace

from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET, DomainTarget, parse_target
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Pending, Preempt
from scheduler.core.kueue.quota import FlavorSpec
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.preemption.cost import victim_cost
from scheduler.core.workload import WorkloadSpec

from ._admission import admitted, cq, lqs, pending, rq, snapshot, summary, wl
from ._helpers import BLOCK, RACK, node, tree_of

FLAVOR = "tas"
GPU = "nvidia.com/gpu"


def _gpu(name: str, *, prio: int = 0, count: int = 1, created: float = 0.0, required: str | None = RACK,
         preferred: str | None = None) -> WorkloadSpec:
    """Pods of 8 GPUs and 1 CPU (a whole node's GPUs, a quarter of its CPU)."""
    return wl(name, 1, count, prio=prio, created=created, required=None if preferred else required,
              preferred=preferred, extra={GPU: 8})


def _cpu(name: str, *, prio: int = 0) -> WorkloadSpec:
    """A CPU-only pod taking all 4 CPUs of a node: it blocks GPU pods without using a GPU."""
    return wl(name, 4, prio=prio)


def _snap(adm: list[AdmittedWorkload], pend: list[WorkloadSpec], gpu_quota: int = 24,
          extra_cqs: dict[str, object] | None = None) -> Snapshot:
    nodes = [node(f"{r}-n{i}", rack=r, cpu=4, extra={GPU: 8}) for r in ("r1", "r2") for i in range(2)]
    tree = tree_of(nodes)
    for w in adm:
        for u in w.tas:
            tree.add_usage(u.placement, u.per_pod)
    cqs = {"a": cq("a", {FLAVOR: {"cpu": rq(100), GPU: rq(gpu_quota)}}, within="LowerPriority"),
           **(extra_cqs or {})}
    flavors = {FLAVOR: FlavorSpec(FLAVOR, {"pool": "gpu"}, topology_name="default")}
    return snapshot(cluster_queues=cqs, local_queues=lqs(("lq", "a"), ("lb", "b")), flavors=flavors,
                    trees={FLAVOR: tree}, admitted=adm, pending=[pending(w) for w in pend])


def _blocked_racks(c2_prio: int = 0, evicted_g1: bool = False) -> list[AdmittedWorkload]:
    """Every rack: one GPU workload on one node, one CPU-only workload on the other."""
    return [
        admitted(_gpu("g1"), "a", FLAVOR, at=1, hosts={"r1-n0": 1}, evicted=evicted_g1),
        admitted(_cpu("c1"), "a", FLAVOR, at=2, hosts={"r1-n1": 1}),
        admitted(_gpu("g2"), "a", FLAVOR, at=3, hosts={"r2-n0": 1}),
        admitted(_cpu("c2", prio=c2_prio), "a", FLAVOR, at=4, hosts={"r2-n1": 1}),
    ]


def _preemptor(**kw: object) -> WorkloadSpec:
    return _gpu("x", prio=50, count=2, created=9, **kw)  # type: ignore[arg-type]


def _with_target(spec: WorkloadSpec, rack: str) -> WorkloadSpec:
    target = DomainTarget("main", FLAVOR, RACK, {BLOCK: "b1", RACK: rack})
    return replace(spec, annotations={ANN_PREEMPTION_TARGET: target.encode()})


def test_cpu_only_blockers_count_as_kueue_017_does() -> None:
    # Kueue #10497 shape. Kueue v0.17's flavor assigner marks every resource of a TAS pod set as
    # needing preemption, so the CPU-only pods are candidates too: the newer rack is cleared.
    for on in (True, False):
        decisions = run_cycle(replace(_snap(_blocked_racks(), [_preemptor()]), domain_preemption=on))
        assert summary(decisions) == [("preempt", "c2", "InClusterQueue"), ("preempt", "g2", "InClusterQueue"),
                                      ("pending", "x", "WaitingForPreemptedWorkloads")]
        waiting = decisions[-1]
        assert isinstance(waiting, Pending)
        assert waiting.message.endswith("Pending the preemption of 2 workload(s)")
        target = parse_target({ANN_PREEMPTION_TARGET: waiting.preemption_target})
        assert target == (DomainTarget("main", FLAVOR, RACK, {BLOCK: "b1", RACK: "r2"}) if on else None)


def _wide(adm_hosts: dict[str, tuple[int, float]]) -> Snapshot:
    """2 blocks x 2 racks x 2 nodes; every rack's n0 holds a "vip" (priority 100)."""
    nodes = [node(f"{r}-n{i}", block=b, rack=r, cpu=4, extra={GPU: 8})
             for b, racks in (("b1", ("r1", "r2")), ("b2", ("r3", "r4"))) for r in racks for i in range(2)]
    tree = tree_of(nodes)
    adm = [admitted(_gpu(f"vip{r}", prio=100), "a", FLAVOR, at=0, hosts={f"{r}-n0": 1})
           for r in ("r1", "r2", "r3", "r4")]
    adm += [admitted(_gpu(name, prio=p), "a", FLAVOR, at=at, hosts={h: 1}) for name, (h, (p, at)) in
            {n: (f"r{n[1]}-n1", v) for n, v in adm_hosts.items()}.items()]
    for w in adm:
        for u in w.tas:
            tree.add_usage(u.placement, u.per_pod)
    cqs = {"a": cq("a", {FLAVOR: {"cpu": rq(100), GPU: rq(128)}}, within="LowerPriority")}
    flavors = {FLAVOR: FlavorSpec(FLAVOR, {"pool": "gpu"}, topology_name="default")}
    return snapshot(cluster_queues=cqs, local_queues=lqs(("lq", "a")), flavors=flavors, trees={FLAVOR: tree},
                    admitted=adm, pending=[pending(_preemptor(preferred=RACK))])


def test_preferred_falls_back_to_one_block_instead_of_scattered_nodes() -> None:
    # No rack can be cleared (a vip in each). Kueue's heuristic takes the two cheapest (L3, L1):
    # one node in each block, and the preferred-rack job would span both blocks. Domain clearing
    # frees one block with as many victims (L3, L4: the cheaper block by Kueue's ordering).
    snap = _wide({"L1": (0, 1.0), "L2": (5, 2.0), "L3": (0, 3.0), "L4": (5, 4.0)})
    decisions = run_cycle(snap)
    assert summary(decisions) == [("preempt", "L3", "InClusterQueue"), ("preempt", "L4", "InClusterQueue"),
                                  ("pending", "x", "WaitingForPreemptedWorkloads")]
    target = parse_target({ANN_PREEMPTION_TARGET: decisions[-1].preemption_target})  # type: ignore[union-attr]
    assert target is not None and (target.level, target.name) == (BLOCK, "b2")
    off = run_cycle(replace(snap, domain_preemption=False))
    assert summary(off)[:2] == [("preempt", "L1", "InClusterQueue"), ("preempt", "L3", "InClusterQueue")]


def test_a_blocker_the_policy_protects_keeps_its_rack() -> None:
    # c2 outranks the preemptor: r2 cannot be cleared, r1 can (older victims, but allowed).
    decisions = run_cycle(_snap(_blocked_racks(c2_prio=100), [_preemptor()]))
    assert summary(decisions)[:2] == [("preempt", "c1", "InClusterQueue"), ("preempt", "g1", "InClusterQueue")]


def test_nothing_clearable_stays_pending_without_evictions() -> None:
    adm = _blocked_racks(c2_prio=100)
    adm[1] = admitted(_cpu("c1", prio=100), "a", FLAVOR, at=2, hosts={"r1-n1": 1})
    decisions = run_cycle(_snap(adm, [_preemptor()]))
    assert [d for d in decisions if isinstance(d, Preempt)] == []


def test_sticky_target_keeps_the_rack_chosen_earlier() -> None:
    # Without the target r2 is cheaper (more recent victims); the preemptor preempted for r1
    # in an earlier cycle, so it keeps clearing r1 and its evictions are not wasted.
    decisions = run_cycle(_snap(_blocked_racks(), [_with_target(_preemptor(), "r1")]))
    assert summary(decisions)[:2] == [("preempt", "c1", "InClusterQueue"), ("preempt", "g1", "InClusterQueue")]
    waiting = decisions[-1]
    assert isinstance(waiting, Pending)
    assert parse_target({ANN_PREEMPTION_TARGET: waiting.preemption_target}).name == "r1"  # type: ignore[union-attr]


def test_sticky_target_counts_victims_already_evicting_and_adds_only_what_is_missing() -> None:
    decisions = run_cycle(_snap(_blocked_racks(evicted_g1=True), [_with_target(_preemptor(), "r1")]))
    assert summary(decisions) == [("preempt", "c1", "InClusterQueue"),
                                  ("pending", "x", "WaitingForPreemptedWorkloads")]
    assert decisions[-1].message.endswith("Pending the preemption of 2 workload(s)")


def test_sticky_target_is_where_the_preemptor_lands_once_free() -> None:
    # Both racks free now: without the target the placement takes r1; with it, r2.
    free_snap = _snap([], [_preemptor()], gpu_quota=32)
    [plain] = run_cycle(free_snap)
    sticky = replace(free_snap, pending=[pending(_with_target(_preemptor(), "r2"))])
    [landed] = run_cycle(sticky)
    racks = {d.values[0].split("-")[0] for d in landed.pod_sets[0].topology.domains}  # type: ignore[union-attr]
    plain_racks = {d.values[0].split("-")[0] for d in plain.pod_sets[0].topology.domains}  # type: ignore[union-attr]
    assert plain_racks == {"r1"} and racks == {"r2"}


def test_sticky_target_that_no_longer_can_be_cleared_is_replaced() -> None:
    adm = _blocked_racks()
    adm[1] = admitted(_cpu("c1", prio=100), "a", FLAVOR, at=2, hosts={"r1-n1": 1})  # r1 now protected
    decisions = run_cycle(_snap(adm, [_with_target(_preemptor(), "r1")]))
    waiting = decisions[-1]
    assert isinstance(waiting, Pending)
    assert parse_target({ANN_PREEMPTION_TARGET: waiting.preemption_target}).name == "r2"  # type: ignore[union-attr]


def test_other_queue_within_nominal_is_not_preempted() -> None:
    adm = _blocked_racks()
    for i in (1, 3):  # the CPU-only blockers belong to ClusterQueue b, which is not borrowing
        adm[i] = replace(adm[i], cluster_queue="b")
    b = cq("b", {FLAVOR: {"cpu": rq(100), GPU: rq(16)}}, cohort="co", within="LowerPriority")
    snap = _snap(adm, [_preemptor()], extra_cqs={"b": b})
    snap = replace(snap, cluster_queues={**snap.cluster_queues, "a": replace(
        snap.cluster_queues["a"], cohort="co", preemption=replace(snap.cluster_queues["a"].preemption,
                                                                  reclaim_within_cohort="Any"))})
    assert [d for d in run_cycle(snap) if isinstance(d, Preempt)] == []


def test_cost_prefers_lower_priority_then_more_recent_then_fewer() -> None:
    def w(name: str, prio: int, at: float, evicted: bool = False) -> AdmittedWorkload:
        return admitted(_gpu(name, prio=prio), "a", FLAVOR, at=at, hosts={"r1-n0": 1}, evicted=evicted)

    def prio(x: AdmittedWorkload) -> int:
        return x.spec.priority

    low_old, low_new, mid = w("lo", 1, 1), w("ln", 1, 5), w("m", 5, 9)
    assert victim_cost([low_old, low_new], prio) < victim_cost([mid], prio)  # priority first
    assert victim_cost([low_new], prio) < victim_cost([low_old], prio)  # then recency
    assert victim_cost([low_new], prio) < victim_cost([low_new, low_old], prio)  # then fewer
    assert victim_cost([w("e", 9, 1, evicted=True)], prio) == ([], 0)  # already evicting: free
    assert victim_cost([low_new], prio)[1] == 8  # GPUs lost


def test_malformed_target_annotation_is_ignored() -> None:
    for raw in ("", "{", "[]", '{"domain": 1}', '{"podSet": "main", "flavor": "f", "level": "", "domain": {}}'):
        assert parse_target({ANN_PREEMPTION_TARGET: raw}) is None
    t = DomainTarget("main", FLAVOR, RACK, {BLOCK: "b1", RACK: "r2"})
    assert parse_target({ANN_PREEMPTION_TARGET: t.encode()}) == t
