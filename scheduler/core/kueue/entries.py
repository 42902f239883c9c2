"""A ClusterQueue's head as the cycle nominates it (Kueue's ``entry``): who it is, the flavors
it was assigned, whether it fits, where its TAS pod sets go, whom it would preempt, and (beyond
Kueue) how it waits for a compact placement. Frozen: every step returns a new :class:`Entry`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from scheduler.core.beyond.held_domains import Reservation
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.flavorassigner import FlavorAssignment, Mode
from scheduler.core.kueue.queueing import PendingWorkload
from scheduler.core.kueue.quota import ClusterQueueSpec
from scheduler.core.kueue.topologies import Placed
from scheduler.core.preemption.clear_domain import DomainChoice
from scheduler.core.preemption.domains import DomainRequest
from scheduler.core.preemption.targets import Target
from scheduler.core.workload import WorkloadSpec


@dataclass(frozen=True)
class Head:
    """The pending workload nominated, its ClusterQueue and priority, and its spec as nominated
    (pod set counts reduced by partial admission)."""

    pw: PendingWorkload
    cq: ClusterQueueSpec
    priority: int
    spec: WorkloadSpec

    @property
    def key(self) -> str:
        return self.pw.key

    @property
    def timestamp(self) -> float:
        return self.pw.timestamp


@dataclass(frozen=True)
class Outcome:
    """Whether the entry fits (Kueue's representative mode), and if not, the QuotaReserved=False
    reason and message."""

    mode: Mode
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class Preemption:
    """What a preemptor would preempt: the targets (none found: it stays pending and holds back
    the capacity it asked for), and for a single TAS pod set wanting one domain, that request
    and the domain clearing chose (or the PreemptionLimit that held the clearing back)."""

    targets: tuple[Target, ...] = ()
    request: DomainRequest | None = None
    required: bool = False  # the request's level is required (else preferred)
    domain: DomainChoice | None = None
    # The PreemptionLimit that held its domain clearing back ("" none): the preemptor is told
    # (Pending.blocked_by_limit) and asked again each pass, as the limit's window slides.
    blocked_by_limit: str = ""


@dataclass(frozen=True)
class Waiting:
    """Beyond Kueue, a compact wait (core/beyond/compactness.py): decide again by ``retry_at``; admitted
    less compact once it ran out (``relaxed``: the note); the domain it holds (reserve-compact)."""

    retry_at: float | None = None
    relaxed: str = ""
    reservation: Reservation | None = None


@dataclass(frozen=True)
class Entry:
    head: Head
    assignment: FlavorAssignment
    outcome: Outcome
    placed: Placed = Placed()
    preemption: Preemption | None = None  # None: it needs no preemption
    waiting: Waiting = Waiting()
    replaces: AdmittedWorkload | None = None  # an elastic job's admitted slice this one replaces (slices.py)

    @property
    def mode(self) -> Mode:
        return self.outcome.mode

    @property
    def targets(self) -> tuple[Target, ...]:
        return self.preemption.targets if self.preemption is not None else ()

    @property
    def blocked_by_limit(self) -> str:
        return self.preemption.blocked_by_limit if self.preemption is not None else ""

    @property
    def admissible(self) -> bool:
        """Fits, or fits after preempting the targets found (Kueue's reducer ``fits``)."""
        return self.mode == Mode.FIT or (self.mode == Mode.PREEMPT and bool(self.targets))

    def becoming(self, mode: Mode, reason: str | None = None, message: str | None = None) -> Entry:
        """The entry with another outcome (reason and message kept unless given)."""
        outcome = Outcome(mode, self.outcome.reason if reason is None else reason,
                          self.outcome.message if message is None else message)
        return replace(self, outcome=outcome)
