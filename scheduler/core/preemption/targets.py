"""A preemption target: the victim, Kueue's reason and message, and the working set in which
every strategy takes victims one by one the way Kueue's ``minimalPreemptions`` does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.quota import FlavorResource, QuotaState
from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.core.preemption.cost import Priority
from scheduler.core.workload import WorkloadSpec

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
CONFIGURABLE_PREEMPTION = "ConfigurablePreemption"  # a PreemptionConfig rule selected it (rules.py)

HUMAN_READABLE_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    CONFIGURABLE_PREEMPTION: "the configured preemption rules",  # Kueue v0.20's PreemptionConfig
}

# The cycle's fit check for a preemptor: (quota with the victims' usage removed, the victims,
# may the preemptor borrow) -> does it fit (quota, and its topology placement without them).
FitCheck = Callable[[QuotaState, Sequence[AdmittedWorkload], bool], bool]


@dataclass(frozen=True)
class Target:
    workload: AdmittedWorkload
    reason: str


def preemption_message(preemptor: WorkloadSpec, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """Kueue's Preempted condition / Evicted message."""
    uid = preemptor.uid or "UNKNOWN"
    job_uid = preemptor.labels.get(LABEL_JOB_UID) or "UNKNOWN"
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
        f"{HUMAN_READABLE_REASONS.get(reason, 'UNKNOWN')}; preemptor path: {preemptor_path or 'UNKNOWN'}; "
        f"preemptee path: {preemptee_path or 'UNKNOWN'}"
    )


def cq_is_borrowing(quota: QuotaState, cq: str, needs: frozenset[FlavorResource]) -> bool:
    return quota.has_cohort(cq) and any(quota.borrowing(cq, fr) for fr in needs)


def target_reason(cand: AdmittedWorkload, cq: str, below_priority: int | None, priority: Priority) -> tuple[str, bool]:
    """Why ``cand`` would be preempted, and whether taking it forbids the preemptor to borrow
    (borrowWithinCohort: an other-CQ victim at or above the threshold)."""
    if cand.cluster_queue == cq:
        return IN_CLUSTER_QUEUE, False
    if below_priority is None:
        return IN_COHORT_RECLAMATION, False
    if priority(cand) >= below_priority:
        return IN_COHORT_RECLAMATION, True
    return IN_COHORT_RECLAIM_WHILE_BORROWING, False


def fill_back(targets: list[Target], work: QuotaState, fits: FitCheck, allow_borrowing: bool) -> list[Target]:
    """Walk the targets in reverse (all but the last) and keep out every one the preemptor
    can do without."""
    for i in range(len(targets) - 2, -1, -1):
        t = targets[i]
        work.add_usage(t.workload.cluster_queue, t.workload.usage)
        rest = [x.workload for j, x in enumerate(targets) if j != i]
        if fits(work, rest, allow_borrowing):
            targets.pop(i)
        else:
            work.remove_usage(t.workload.cluster_queue, t.workload.usage)
    return targets


class Victims:
    """Victims taken one by one for a preemptor of ``cq``, on a copy of the quota: an
    other-queue victim only while its queue borrows (Kueue re-checks after every removal), each
    with its reason; taking a victim at or above borrowWithinCohort's threshold forbids the
    preemptor to borrow."""

    def __init__(self, quota: QuotaState, cq: str, needs: frozenset[FlavorResource], allow_borrowing: bool,
                 below_priority: int | None, priority: Priority) -> None:
        self.work = quota.clone()
        self.cq = cq
        self.needs = needs
        self.allow_borrowing = allow_borrowing
        self.below_priority = below_priority
        self.priority = priority
        self.targets: list[Target] = []

    @property
    def workloads(self) -> list[AdmittedWorkload]:
        return [t.workload for t in self.targets]

    def may_take(self, cand: AdmittedWorkload) -> bool:
        return cand.cluster_queue == self.cq or cq_is_borrowing(self.work, cand.cluster_queue, self.needs)

    def take(self, cand: AdmittedWorkload, reason: str | None = None) -> None:
        """Take ``cand`` with the policy's reason; ``reason`` given (a rule selected it:
        ``CONFIGURABLE_PREEMPTION``): with that reason, whatever the policy says."""
        if reason is None:
            reason, forbids_borrowing = target_reason(cand, self.cq, self.below_priority, self.priority)
            self.allow_borrowing = self.allow_borrowing and not forbids_borrowing
        self.work.remove_usage(cand.cluster_queue, cand.usage)
        self.targets.append(Target(cand, reason))

    def put_back(self, target: Target) -> None:
        self.targets.remove(target)
        self.work.add_usage(target.workload.cluster_queue, target.workload.usage)

    def fit(self, fits: FitCheck) -> bool:
        return fits(self.work, self.workloads, self.allow_borrowing)

    def filled_back(self, fits: FitCheck) -> list[Target]:
        return fill_back(self.targets, self.work, fits, self.allow_borrowing)
