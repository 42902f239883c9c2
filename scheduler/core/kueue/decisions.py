"""What a cycle decides: frozen data with Kueue's reasons and messages (``core/reasons.py``
codes); the shell only applies them (``kube/apply.py``, ``sim/engine.py`` through
``adapter/apply.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.core.kueue.queueing import REQUEUE_INADMISSIBLE
from scheduler.core.placement.types import PodSetPlacement


@dataclass(frozen=True)
class PodSetAdmission:
    """One ``status.admission.podSetAssignments[]`` entry."""

    name: str
    count: int
    flavors: Mapping[str, str]  # resource -> flavor
    resource_usage: Mapping[str, int]  # resource -> total (canonical units)
    topology: PodSetPlacement | None = None  # encode with assignment.encode_v1beta2


@dataclass(frozen=True)
class Admit:
    workload: str  # "ns/name"
    uid: str
    cluster_queue: str
    pod_sets: tuple[PodSetAdmission, ...]
    borrows: bool
    reason: str = "QuotaReserved"
    message: str = ""  # "Quota reserved in ClusterQueue <cq>"
    relaxed: str = ""  # the compact wait ran out: admitted less compact (Event CompactPlacementRelaxed)
    replaces: str = ""  # an elastic job's new slice: the old slice ("ns/name") to finish once admitted


@dataclass(frozen=True)
class Preempt:
    workload: str  # the victim
    uid: str
    cluster_queue: str  # the victim's ClusterQueue
    preemptor: str
    preemptor_cluster_queue: str
    reason: str  # InClusterQueue | InCohortReclamation | InCohortReclaimWhileBorrowing | ConfigurablePreemption
    message: str  # Kueue's "Preempted to accommodate a workload ..." text
    # Domain clearing made it: it counts against PreemptionLimits (under ``config``, the
    # preemptor ClusterQueue's PreemptionConfig, "" none); Kueue's classical preemptions do not.
    counted: bool = False
    config: str = ""


@dataclass(frozen=True)
class Evict:
    workload: str
    uid: str
    cluster_queue: str
    reason: str  # ClusterQueueStopped | LocalQueueStopped
    message: str


@dataclass(frozen=True)
class Pending:
    workload: str
    uid: str
    cluster_queue: str  # "" when routing failed
    reason: str  # QuotaReserved=False reason
    message: str
    requeue: str = REQUEUE_INADMISSIBLE  # "immediate" | "inadmissible" (queueing.QueueState)
    # WaitingForPreemptedWorkloads: the domain the preemptions free (DomainTarget.encode()),
    # kept on the Workload as ANN_PREEMPTION_TARGET so later cycles (and a restarted
    # controller) keep preempting for, and land in, the same domain.
    preemption_target: str = ""
    retry_at: float | None = None  # decide again by then even if nothing changes (compact wait's end)
    # reserve-compact: the domain this compact waiter holds (Reservation.encode()), kept on the
    # Workload as ANN_RESERVED_DOMAIN; "" = it holds none (the writer removes the annotation).
    reserved_domain: str = ""
    # Kueue's workload controller, not its scheduler, decides this one (a LocalQueue or
    # ClusterQueue missing, stopped or inactive): reasons.written_reason maps it to Inadmissible.
    by_workload_controller: bool = False
    # The PreemptionLimit that held this preemptor's domain clearing back ("" none): the
    # controller writes Kueue's PreemptionBlockedByLimit condition and PreemptionThrottled Event.
    blocked_by_limit: str = ""


Decision = Admit | Preempt | Evict | Pending
