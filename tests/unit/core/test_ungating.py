"""Kueue v0.17.0's topology ungater's choice of domain per pod (pkg/controller/tas/
topology_ungater_test.go, restated on plain data): ranks for batch Jobs, LeaderWorkerSet groups,
JobSets and offsets; the greedy fallback when ranks are missing, repeated or below 0; released
pods counted per domain."""

from __future__ import annotations

from scheduler.core.kueue.ungating import AdmittedPodSet, GatedPodView, plan_ungating
from scheduler.core.placement.types import DomainAssignment

LEVELS = ("cloud.com/block", "cloud.com/rack")
COMPLETION = "batch.kubernetes.io/job-completion-index"
LWS_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def domains(*entries: tuple[str, str, int]) -> tuple[DomainAssignment, ...]:
    return tuple(DomainAssignment((b, r), n) for b, r, n in entries)


def gated(name: str, **labels: str) -> GatedPodView:
    return GatedPodView(name, True, labels=labels)


def placed(name: str, block: str, rack: str, **labels: str) -> GatedPodView:
    return GatedPodView(name, False, {LEVELS[0]: block, LEVELS[1]: rack}, labels)


def where(plan_releases: tuple[object, ...]) -> dict[str, tuple[str, str]]:
    return {r.pod: (r.node_labels[LEVELS[0]], r.node_labels[LEVELS[1]]) for r in plan_releases}  # type: ignore[attr-defined]


def test_batch_job_ranks_some_pods_already_scheduled() -> None:
    ps = AdmittedPodSet("main", 5, LEVELS, domains(("b1", "r1", 2), ("b1", "r2", 1), ("b2", "r1", 2)), COMPLETION)
    pods = [placed("p0", "b1", "r1", **{COMPLETION: "0"}), gated("p1", **{COMPLETION: "1"}),
            gated("p2", **{COMPLETION: "2"}), placed("p3", "b2", "r1", **{COMPLETION: "3"}),
            gated("p4", **{COMPLETION: "4"})]
    plan = plan_ungating([ps], {"main": pods})
    assert where(plan.releases) == {"p1": ("b1", "r1"), "p2": ("b1", "r2"), "p4": ("b2", "r1")}
    assert plan.notes == ()


def test_leader_worker_group_shares_one_rank_space() -> None:
    workers = AdmittedPodSet("workers", 4, LEVELS, domains(("b1", "r1", 1), ("b1", "r2", 1), ("b2", "r1", 2)),
                             LWS_INDEX, group_name="lws-group")
    leader = AdmittedPodSet("leader", 1, LEVELS, domains(("b1", "r1", 1)), LWS_INDEX, group_name="lws-group")
    pods = {"leader": [gated("p0", **{LWS_INDEX: "0"})],
            "workers": [gated("p1", **{LWS_INDEX: "2"}), gated("p2", **{LWS_INDEX: "1"}),
                        gated("p3", **{LWS_INDEX: "3"}), gated("p4", **{LWS_INDEX: "4"})]}
    plan = plan_ungating([workers, leader], pods)
    assert where(plan.releases) == {"p0": ("b1", "r1"), "p2": ("b1", "r1"), "p1": ("b1", "r2"),
                                    "p3": ("b2", "r1"), "p4": ("b2", "r1")}


def test_ranks_below_zero_fall_back_to_greedy() -> None:
    """Workers numbered from 0 although the leader holds rank 0: worker 0 would be rank -1."""
    workers = AdmittedPodSet("workers", 4, LEVELS, domains(("b1", "r1", 1), ("b1", "r2", 1), ("b2", "r1", 2)),
                             LWS_INDEX, group_name="lws-group")
    leader = AdmittedPodSet("leader", 1, LEVELS, domains(("b1", "r1", 1)), LWS_INDEX, group_name="lws-group")
    pods = {"leader": [gated("p0", **{LWS_INDEX: "0"})],
            "workers": [gated(f"p{i + 1}", **{LWS_INDEX: str(i)}) for i in range(4)]}
    plan = plan_ungating([workers, leader], pods)
    assert where(plan.releases) == {"p0": ("b1", "r1"), "p1": ("b1", "r1"), "p2": ("b1", "r2"),
                                    "p3": ("b2", "r1"), "p4": ("b2", "r1")}
    assert plan.notes == ('pod set workers: ranks not used (rank -1 of Pod "p1" is below 0); placing greedily',)


def test_repeated_ranks_fall_back_to_greedy_counting_released_pods() -> None:
    ps = AdmittedPodSet("main", 3, LEVELS, domains(("b1", "r1", 1), ("b2", "r1", 2)), COMPLETION)
    pods = [placed("p0", "b2", "r1", **{COMPLETION: "0"}), gated("p1", **{COMPLETION: "1"}),
            gated("p2", **{COMPLETION: "1"})]
    plan = plan_ungating([ps], {"main": pods})
    assert where(plan.releases) == {"p1": ("b1", "r1"), "p2": ("b2", "r1")}
    assert "conflicting rank 1" in plan.notes[0]


def test_a_released_pod_in_the_wrong_domain_for_its_rank_means_greedy() -> None:
    ps = AdmittedPodSet("main", 2, LEVELS, domains(("b1", "r1", 1), ("b2", "r1", 1)), COMPLETION)
    pods = [placed("p0", "b2", "r1", **{COMPLETION: "0"}), gated("p1", **{COMPLETION: "1"})]
    plan = plan_ungating([ps], {"main": pods})
    assert where(plan.releases) == {"p1": ("b1", "r1")}  # the only domain still short
    assert "running Pod \"p0\" (rank 0)" in plan.notes[0]


def test_jobset_sub_groups_rank_by_job_index_then_completion_index() -> None:
    ps = AdmittedPodSet("workers", 4, LEVELS, domains(("b1", "r1", 2), ("b2", "r1", 2)), COMPLETION,
                        "jobset.sigs.k8s.io/job-index", 2)
    pods = [gated(f"j{job}-{idx}", **{COMPLETION: str(idx), "jobset.sigs.k8s.io/job-index": str(job)})
            for job in (1, 0) for idx in (1, 0)]
    plan = plan_ungating([ps], {"workers": pods})
    assert where(plan.releases) == {"j0-0": ("b1", "r1"), "j0-1": ("b1", "r1"), "j1-0": ("b2", "r1"),
                                    "j1-1": ("b2", "r1")}


def test_offset_annotation_shifts_ranks_and_a_bad_one_keeps_pods_gated() -> None:
    ps = AdmittedPodSet("worker", 2, LEVELS, domains(("b1", "r1", 1), ("b2", "r1", 1)),
                        "training.kubeflow.org/replica-index")
    offset = {"kueue.x-k8s.io/pod-index-offset": "1"}
    pods = [GatedPodView("w2", True, labels={"training.kubeflow.org/replica-index": "2"}, annotations=offset),
            GatedPodView("w1", True, labels={"training.kubeflow.org/replica-index": "1"}, annotations=offset)]
    assert where(plan_ungating([ps], {"worker": pods}).releases) == {"w1": ("b1", "r1"), "w2": ("b2", "r1")}
    bad = [GatedPodView("w1", True, annotations={"kueue.x-k8s.io/pod-index-offset": "x"})]
    plan = plan_ungating([ps], {"worker": bad})
    assert plan.releases == () and "is not an integer" in plan.notes[0]


def test_without_rank_label_greedy_in_given_order_and_never_over_a_domain_count() -> None:
    ps = AdmittedPodSet("head", 1, LEVELS, domains(("b1", "r1", 1)))
    plan = plan_ungating([ps], {"head": [gated("h1"), gated("h2")]})
    assert where(plan.releases) == {"h1": ("b1", "r1")}  # the second waits (a replacement, later)
    assert plan_ungating([AdmittedPodSet("x", 1)], {"x": [gated("p")]}).releases == ()  # admitted without TAS
