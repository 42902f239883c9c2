"""The named steps of the cycle, the flavor assigner, preemption and CP-SAT, on their own."""

from __future__ import annotations

import time

import pytest
from ortools.sat.python import cp_model

from scheduler.core.kueue import cycle, flavorassigner, quota
from scheduler.core.kueue.flavorassigner import Mode
from scheduler.core.kueue.queueing import LocalQueueSpec
from scheduler.core.kueue.quota import (
    MAY_STOP_SEARCH,
    TRY_NEXT_FLAVOR,
    FlavorFungibility,
    FlavorSpec,
    QuotaState,
    ResourceGroup,
)
from scheduler.core.placement import cpsat, greedy
from scheduler.core.preemption.classical import classical_targets
from scheduler.core.preemption.plan import preemption_plan
from scheduler.core.preemption.targets import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    target_reason,
)
from scheduler.core.reasons import (
    FlavorRejection,
    NotAdmitted,
    PendingReason,
    Rejection,
    not_admitted_message,
)
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec

from ._admission import admitted, cq, lqs, pending, rq, snapshot, wl
from ._helpers import BLOCK, node, tree_of

# ---------------------------------------------------------------------- reasons


def test_messages_are_rendered_from_codes_in_kueues_words() -> None:
    over = Rejection.of(
        FlavorRejection.EXCEEDS_MAX_CAPACITY, resource="cpu", flavor="f", assumed="0", request="12", capacity="10"
    )
    assert over.message == (
        "insufficient quota for cpu in flavor f, previously considered podsets requests (0) + "
        "current podset request (12) > maximum capacity (10)"
    )
    short = Rejection.of(FlavorRejection.INSUFFICIENT_UNUSED_QUOTA, resource="cpu", flavor="f", missing="2")
    assert short.message == "insufficient unused quota for cpu in flavor f, 2 more needed"
    assert not_admitted_message(NotAdmitted.LOCAL_QUEUE_MISSING, queue="q") == "LocalQueue q doesn't exist"


# ---------------------------------------------------------------------- flavor assigner


@pytest.mark.parametrize(
    ("mode", "borrows", "when_borrow", "when_preempt", "stop"),
    [
        (Mode.FIT, False, TRY_NEXT_FLAVOR, TRY_NEXT_FLAVOR, True),
        (Mode.FIT, True, TRY_NEXT_FLAVOR, MAY_STOP_SEARCH, False),
        (Mode.FIT, True, MAY_STOP_SEARCH, TRY_NEXT_FLAVOR, True),
        (Mode.PREEMPT, False, MAY_STOP_SEARCH, TRY_NEXT_FLAVOR, False),
        (Mode.PREEMPT, False, TRY_NEXT_FLAVOR, MAY_STOP_SEARCH, True),
    ],
)
def test_stop_search_follows_flavor_fungibility(
    mode: Mode, borrows: bool, when_borrow: str, when_preempt: str, stop: bool
) -> None:
    choice = flavorassigner._FlavorChoice(mode, borrows, "f", frozenset())
    assert flavorassigner._stop_search(choice, FlavorFungibility(when_borrow, when_preempt)) is stop


def test_resources_by_group_stops_at_an_uncovered_resource() -> None:
    queue = cq("a", {"f": {"cpu": rq(10)}})
    status = flavorassigner._Status()
    assert flavorassigner._resources_by_group({"cpu": 1, "gpu": 1}, queue, status) is None
    assert status.reason == PendingReason.NO_MATCHING_FLAVOR
    assert status.message() == "resource gpu unavailable in ClusterQueue"
    status = flavorassigner._Status()
    [(group, names)] = flavorassigner._resources_by_group({"cpu": 1}, queue, status) or []
    assert isinstance(group, ResourceGroup) and names == ["cpu"] and not status.rejections


def _assigner(queue: quota.ClusterQueueSpec, flavors: dict[str, FlavorSpec]) -> flavorassigner._Assigner:
    return flavorassigner._Assigner(queue, QuotaState([queue]), flavors, {}, False)


def test_choose_flavor_reason_comes_from_rejection_codes() -> None:
    queue = cq("a", {"quota-flavor": {"cpu": rq(10)}})
    ps = PodSetSpec("main", 1, {"cpu": 1000})
    group = queue.resource_groups[0]
    # The flavor object is missing (its name mentions quota): no flavor matches.
    status = flavorassigner._Status()
    ctx = _assigner(queue, {})
    assert flavorassigner._choose_flavor(ctx, ps, group, ["cpu"], {"cpu": 1000}, {}, status) is None
    assert status.reason == PendingReason.NO_MATCHING_FLAVOR
    # Present but too small: waiting for quota.
    status = flavorassigner._Status()
    ctx = _assigner(queue, {"quota-flavor": FlavorSpec("quota-flavor")})
    assert flavorassigner._choose_flavor(ctx, ps, group, ["cpu"], {"cpu": 20_000}, {}, status) is None
    assert status.reason == PendingReason.EXCEEDS_MAX_QUOTA
    assert status.rejected_for_quota()


# ---------------------------------------------------------------------- cycle


@pytest.mark.parametrize(
    ("local_queues", "reason", "message"),
    [
        ({}, "Misconfigured", "LocalQueue lq doesn't exist"),
        ({"team/lq": LocalQueueSpec("team", "lq", "a", "Hold")}, "Suspended", "LocalQueue lq is stopped"),
        ({"team/lq": LocalQueueSpec("team", "lq", "gone")}, "Misconfigured", "ClusterQueue gone doesn't exist"),
    ],
)
def test_route_reports_why_a_workload_cannot_be_queued(
    local_queues: dict[str, LocalQueueSpec], reason: str, message: str
) -> None:
    snap = snapshot(cluster_queues={"a": cq("a")}, local_queues=local_queues)
    routed = cycle._route(snap, set(), pending(wl("w")))
    assert isinstance(routed, cycle.Pending)
    assert (routed.reason, routed.message) == (reason, message)
    assert type(routed.reason) is str  # plain strings: any serialiser takes them


def test_route_to_an_inactive_and_an_active_cluster_queue() -> None:
    snap = snapshot(cluster_queues={"a": cq("a")}, local_queues=lqs(("lq", "a")))
    inactive = cycle._route(snap, {"a"}, pending(wl("w")))
    assert isinstance(inactive, cycle.Pending) and inactive.message == "ClusterQueue a is inactive"
    assert cycle._route(snap, set(), pending(wl("w"))) == snap.cluster_queues["a"]


# ---------------------------------------------------------------------- preemption


def test_target_reason_table() -> None:
    def prio(w: object) -> int:
        return 5

    own, other = admitted(wl("own"), "a"), admitted(wl("other"), "b")
    assert target_reason(own, "a", 3, prio) == (IN_CLUSTER_QUEUE, False)
    assert target_reason(other, "a", None, prio) == (IN_COHORT_RECLAMATION, False)
    assert target_reason(other, "a", 5, prio) == (IN_COHORT_RECLAMATION, True)
    assert target_reason(other, "a", 6, prio) == (IN_COHORT_RECLAIM_WHILE_BORROWING, False)


def test_classical_targets_walks_the_plan() -> None:
    queue = cq("a", within="LowerPriority")
    low = admitted(wl("low", 6, prio=0), "a", at=1.0)
    state = QuotaState([queue])
    state.add_usage("a", low.usage)
    needs = frozenset({("f", "cpu")})

    def prio(w: object) -> int:
        return 0

    plan = preemption_plan(1, 0.0, queue, state, [low], needs, prio)
    assert [list(a.candidates) for a in plan] == [[low]]
    assert preemption_plan(0, 0.0, queue, state, [low], needs, prio) == []

    def fits(state: QuotaState, victims: object, allow_borrowing: bool) -> bool:
        return state.fits("a", {("f", "cpu"): 8000}, allow_borrowing)

    [target] = classical_targets(plan, "a", state, needs, fits, prio)
    assert (target.workload, target.reason) == (low, IN_CLUSTER_QUEUE)


# ---------------------------------------------------------------------- CP-SAT


def test_budget_fractions() -> None:
    budget = cpsat._Budget(time.monotonic() - 0.5, 1.0)
    assert budget.past(0.4) and not budget.past(0.9)


def test_single_leaf_answer_is_the_tightest_leaf() -> None:
    tree = tree_of([node("big", "b1", "r1", 8), node("tight", "b1", "r2", 3)])
    prob = greedy.prepare(tree, PodSetSpec("main", 3, {"cpu": 1000}, TopologyRequest(preferred=BLOCK)))
    result = cpsat._single_leaf(prob, {0: 3}, cpsat.objective(tree, prob.fit.counts, {0: 3}))
    assert result.status == "ENUMERATED" and result.optimal
    [(leaf, pods)] = result.leaf_pods.items()
    assert tree.leaf_nodes[leaf] == ("tight",) and pods == 3


def test_read_solution_gives_each_used_leaf_a_pod_then_fills_in_order() -> None:
    model = cp_model.CpModel()
    used, pods = model.new_int_var(2, 2, "u"), model.new_int_var(5, 5, "p")
    solver = cp_model.CpSolver()
    solver.solve(model)
    leaf_vars = cpsat._LeafVars([used], [pods], [4], [[9, 7, 8]])
    assert cpsat._read_solution(solver, leaf_vars) == {7: 4, 8: 1}
