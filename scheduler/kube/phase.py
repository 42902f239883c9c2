"""What a phase of the controller's pass is: a name and one step run on the pass's state. The
controller declares its phases in one ordered list (``kube/controller.py``); each phase is a
module with a narrow input (the :class:`Shared` parts it needs, and its own)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scheduler.adapter.kinds.base import JobKind
from scheduler.core.config import FeatureGates
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.kube.cache import ClusterCache
from scheduler.kube.isolation import Isolation
from scheduler.kube.lookups import JobLookups
from scheduler.kube.writer import Writer


@dataclass(frozen=True)
class Shared:
    """The parts every phase may read: the informer caches, the one writer, the isolation of
    one bad object, the clock, the job lookups and the kinds the Configuration enables."""

    cache: ClusterCache
    writer: Writer
    isolation: Isolation
    clock: Callable[[], dt.datetime]
    lookups: JobLookups
    kinds: Sequence[JobKind]
    # The Kueue release toposched behaves as (``--kueue-version``) with the admin's gates: what
    # a job's Workload is charged for (adapter/kinds/charging.py), what an eviction requeues.
    gates: FeatureGates = field(default_factory=FeatureGates)

    @property
    def release(self) -> str:
        return self.gates.release


@dataclass
class PassState:
    """What one pass carries from phase to phase: the snapshot the admission phase decided on
    (the metrics and defragmentation read it)."""

    snapshot: Snapshot | None = None


@dataclass(frozen=True)
class Phase:
    """One named step of the pass. ``run`` reads the caches (and the pass's state) and writes
    through the writer only."""

    name: str
    run: Callable[[PassState], object]  # what it returns is not read
