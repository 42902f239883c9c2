"""Defragmentation planning (core/beyond/defrag.py) on plain data: 2 racks of 2 nodes (8 GPUs each)."""

from __future__ import annotations

from dataclasses import replace

from scheduler.core.beyond.defrag import (
    ANN_AUTO_RESUME,
    ANN_CHECKPOINTABLE,
    ANN_DEFRAG,
    ANN_LAST_CHECKPOINT,
    plan_defrag,
)
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.quota import FlavorSpec
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.workload import WorkloadSpec

from ._admission import admitted, cq, lqs, pending, rq, snapshot, wl
from ._helpers import BLOCK, RACK, node, tree_of

FLAVOR = "tas"
GPU = "nvidia.com/gpu"
RESUMES = {ANN_AUTO_RESUME: "true"}


def _one_node(name: str, ann: dict[str, str] | None = None, prio: int = 0) -> WorkloadSpec:
    spec = wl(name, 1, prio=prio, required=RACK, extra={GPU: 8})
    return replace(spec, annotations=ann or {})


def _snap(adm: list[AdmittedWorkload], pend: list[WorkloadSpec], racks: tuple[str, ...] = ("r1", "r2")) -> Snapshot:
    nodes = [node(f"{r}-n{i}", rack=r, cpu=4, extra={GPU: 8}) for r in racks for i in range(2)]
    tree = tree_of(nodes)
    for w in adm:
        for u in w.tas:
            tree.add_usage(u.placement, u.per_pod)
    cqs = {"a": cq("a", {FLAVOR: {"cpu": rq(100), GPU: rq(64)}}, within="LowerPriority")}
    flavors = {FLAVOR: FlavorSpec(FLAVOR, {"pool": "gpu"}, topology_name="default")}
    return snapshot(cluster_queues=cqs, local_queues=lqs(("lq", "a")), flavors=flavors, trees={FLAVOR: tree},
                    admitted=adm, pending=[pending(w) for w in pend], now=1000.0)


def _big(prio: int = 50) -> WorkloadSpec:
    return wl("big", 1, 2, prio=prio, required=RACK, extra={GPU: 8})


def _fragmented(ann1: dict[str, str] | None = RESUMES, ann2: dict[str, str] | None = RESUMES,
                at1: float = 100.0, at2: float = 900.0) -> list[AdmittedWorkload]:
    """r1 and r2 each hold one 1-node job: 2 nodes free, no rack free."""
    return [admitted(_one_node("w1", ann1), "a", FLAVOR, at=at1, hosts={"r1-n0": 1}),
            admitted(_one_node("w2", ann2), "a", FLAVOR, at=at2, hosts={"r2-n0": 1})]


def test_moves_the_workload_that_loses_least_since_its_checkpoint() -> None:
    # w1 ran 900 s since admission, w2 100 s: moving w2 (to r1's free node) opens r2.
    [plan] = plan_defrag(_snap(_fragmented(), [_big()]))
    assert plan.for_workload == "team/big" and plan.level == RACK and plan.domain == "r2"
    assert plan.selector == {BLOCK: "b1", RACK: "r2"}
    [move] = plan.moves
    assert (move.workload, move.gpus, move.lost_gpu_s, move.resumes) == ("team/w2", 8, 800.0, "hyperpod-auto-resume")


def test_last_checkpoint_annotation_sets_the_cost() -> None:
    # w1 checkpointed 10 s ago: moving it loses 80 GPU-seconds, cheaper than w2's 800.
    ann1 = {ANN_CHECKPOINTABLE: "true", ANN_LAST_CHECKPOINT: "1970-01-01T00:16:30Z"}  # epoch 990
    [plan] = plan_defrag(_snap(_fragmented(ann1=ann1), [_big()]))
    assert plan.domain == "r1" and [(m.workload, m.lost_gpu_s, m.resumes) for m in plan.moves] == [
        ("team/w1", 80.0, "checkpointable")]


def test_only_checkpointable_workloads_move() -> None:
    [plan] = plan_defrag(_snap(_fragmented(ann2={}), [_big()]))
    assert [m.workload for m in plan.moves] == ["team/w1"]
    assert plan_defrag(_snap(_fragmented(ann1={}, ann2={}), [_big()])) == []
    opted_out = {**RESUMES, ANN_DEFRAG: "false"}
    assert plan_defrag(_snap(_fragmented(ann1=opted_out, ann2=opted_out), [_big()])) == []


def test_higher_priority_workloads_are_not_moved_for_a_lower_one() -> None:
    adm = _fragmented()
    assert plan_defrag(_snap(adm, [_big(prio=-1)])) == []


def test_a_move_needs_room_elsewhere() -> None:
    # Three 1-node jobs, one free node: opening a rack would need a move with nowhere to go.
    adm = [*_fragmented(), admitted(_one_node("w3", RESUMES), "a", FLAVOR, at=500, hosts={"r1-n1": 1})]
    assert plan_defrag(_snap(adm, [_big()])) == []


def test_nothing_to_do_when_a_domain_is_free_or_the_job_is_small() -> None:
    free = [admitted(_one_node("w1", RESUMES), "a", FLAVOR, at=1, hosts={"r1-n0": 1})]
    assert plan_defrag(_snap(free, [_big()])) == []  # r2 is free: no fragmentation
    assert plan_defrag(_snap(_fragmented(), [wl("one", 1, 1, prio=50, required=RACK, extra={GPU: 8})])) == []


def test_two_pending_jobs_are_planned_around_each_other() -> None:
    # 4 racks, each with one movable 1-node job (8 of 8 nodes once all run): big (prio 50) and
    # big2 (prio 40) each need a rack; the plans open different racks, move different workloads.
    adm = [admitted(_one_node(f"w{i}", RESUMES), "a", FLAVOR, at=100 * i, hosts={f"r{i}-n0": 1})
           for i in (1, 2, 3, 4)]
    big2 = replace(_big(prio=40), name="big2", uid="uid-big2")
    plans = plan_defrag(_snap(adm, [_big(), big2], racks=("r1", "r2", "r3", "r4")))
    assert [p.for_workload for p in plans] == ["team/big", "team/big2"]
    assert plans[0].domain != plans[1].domain
    assert not {m.workload for m in plans[0].moves} & {m.workload for m in plans[1].moves}
