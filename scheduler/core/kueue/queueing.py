"""Queues: LocalQueue -> ClusterQueue routing, per-CQ ordering, heads, inadmissible requeue.

Kueue semantics (``pkg/cache/queue``):

* Order inside a ClusterQueue: priority descending, then queue-order timestamp ascending
  (creation time, or the eviction time for a requeued workload), then UID as Kueue, then key.
* One head per ClusterQueue per cycle.
* ``StrictFIFO``: a head that cannot be admitted is requeued *immediately* and stays the
  head, blocking everything behind it (head-of-line blocking), except for a namespace
  mismatch.
* ``BestEffortFIFO``: a head that cannot be admitted goes to the *inadmissible* set, so the
  next workload becomes the head; it is requeued immediately only when it was skipped after
  nomination or is waiting for its preemptions. Inadmissible workloads come back when quota
  is released in their cohort tree (a workload finishes or is evicted) or the queue
  configuration changes: :class:`QueueState` keeps that set across cycles for the caller.
* ``stopPolicy`` ``Hold``/``HoldAndDrain`` on a ClusterQueue or LocalQueue stops new
  admissions (``HoldAndDrain`` also evicts admitted workloads; see ``cycle``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.kueue.quota import STOP_NONE, ClusterQueueSpec, FlavorSpec
from scheduler.core.workload import WorkloadSpec

ANN_PRIORITY_BOOST = "kueue.x-k8s.io/priority-boost"
DEFAULT_PRIORITY = 0

REQUEUE_IMMEDIATE = "immediate"
REQUEUE_INADMISSIBLE = "inadmissible"

# ``Active`` condition (reason, message) of ClusterQueues and LocalQueues, Kueue's words
# (pkg/cache/scheduler/clusterqueue.go, pkg/controller/core/localqueue_controller.go).
ACTIVE = "Active"
CQ_READY = ("Ready", "Can admit new workloads")
CQ_TERMINATING = ("Terminating", "Can't admit new workloads; clusterQueue is terminating")
LQ_READY = ("Ready", "Can submit new workloads to localQueue")
LQ_STOPPED = ("Stopped", "LocalQueue is stopped")
LQ_NO_CLUSTER_QUEUE = ("ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
LQ_CLUSTER_QUEUE_INACTIVE = ("ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")


@dataclass(frozen=True)
class ActiveCondition:
    active: bool
    reason: str
    message: str


def cluster_queue_readiness(cq: ClusterQueueSpec, flavors: Mapping[str, FlavorSpec],
                            tas_flavors: Collection[str]) -> ActiveCondition:
    """Kueue's ``Active`` condition of one ClusterQueue. ``tas_flavors``: the flavors whose
    Topology exists (one topology tree each); a TAS flavor outside it has no Topology."""
    if cq.terminating:
        return ActiveCondition(False, *CQ_TERMINATING)
    reasons: list[tuple[str, str]] = []
    if cq.stop_policy != STOP_NONE:
        reasons.append(("Stopped", "is stopped"))
    missing = [f for f in cq.flavor_names() if f not in flavors]
    if missing:
        reasons.append(("FlavorNotFound", f"references missing ResourceFlavor(s): {','.join(missing)}"))
    for name in sorted(f for f in cq.flavor_names() if f in flavors and flavors[f].topology_name
                       and f not in tas_flavors):
        reasons.append(("TopologyNotFound", f'there is no Topology "{flavors[name].topology_name}" '
                                            f'for TAS flavor "{name}"'))
    if not reasons:
        return ActiveCondition(True, *CQ_READY)
    return ActiveCondition(False, reasons[0][0], f"Can't admit new workloads: {', '.join(m for _, m in reasons)}.")


@dataclass(frozen=True)
class LocalQueueSpec:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = STOP_NONE

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PendingWorkload:
    """A workload waiting for quota. ``queued_at`` is Kueue's queue-order timestamp (creation,
    or eviction time after a requeue); ``requeue_at`` is the end of a requeue backoff."""

    spec: WorkloadSpec
    queued_at: float | None = None
    priority: int | None = None  # resolved priority; None = resolve from classes
    requeue_at: float | None = None
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    # ``Requeued=False`` (after a PodsReady timeout, a deactivation): Kueue keeps it out of
    # the queue until the condition turns True (``backoffWaitingTimeExpired``).
    held: bool = False

    # namespace/name, a plain field: queue updates read it for every queued Workload, and a
    # property call there was 7 % of the controller's pass in Kueue's scale test (issue 18).
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.spec.key)

    @property
    def timestamp(self) -> float:
        return self.spec.created_at if self.queued_at is None else self.queued_at


def resolve_priority(
    spec: WorkloadSpec,
    workload_priority_classes: Mapping[str, int],
    priority_classes: Mapping[str, int] | None = None,
    override: int | None = None,
) -> int:
    """Kueue: the WorkloadPriorityClass named by ``kueue.x-k8s.io/priority-class`` wins, then
    a (pod) PriorityClass of that name, then the Workload's own ``spec.priority``, default 0;
    plus the ``kueue.x-k8s.io/priority-boost`` annotation."""
    base: int
    if override is not None:
        base = override
    elif spec.priority:
        base = spec.priority  # resolved when the Workload was created (a WPC change does not move it)
    elif spec.priority_class and spec.priority_class in workload_priority_classes:
        base = workload_priority_classes[spec.priority_class]
    elif spec.priority_class and priority_classes and spec.priority_class in priority_classes:
        base = priority_classes[spec.priority_class]
    else:
        base = DEFAULT_PRIORITY
    boost = spec.annotations.get(ANN_PRIORITY_BOOST)
    if boost:
        try:
            base += int(boost)
        except ValueError:
            pass
    return base


OrderKey = tuple[float, int, float, str]


def order_key(priority: int, timestamp: float, key: str, lq_usage: float = 0.0) -> OrderKey:
    """Sort key inside a ClusterQueue: the LocalQueue's usage asc when Admission Fair Sharing
    orders the ClusterQueue (core/kueue/afs.py; 0 otherwise), then priority desc, timestamp asc, key."""
    return (lq_usage, -priority, timestamp, key)


LocalOrder = tuple[int, float, str, str]  # (-priority, timestamp, uid, key)
Queued = tuple[LocalOrder, PendingWorkload]


def local_order(pw: PendingWorkload, workload_priority_classes: Mapping[str, int],
                priority_classes: Mapping[str, int]) -> LocalOrder:
    """Kueue's order inside one LocalQueue: priority desc, timestamp asc, then UID (v0.17
    ``baseCompareFunc``; creation timestamps have whole seconds, so ties are common and a
    tie-break by name would always favour the same names), then key (objects without a UID:
    files, tests). Inside a ClusterQueue the LocalQueue's AFS usage comes first
    (:func:`order_key`), and it is the same for every workload of a LocalQueue, so this order
    is that of the ClusterQueue per LocalQueue."""
    prio = resolve_priority(pw.spec, workload_priority_classes, priority_classes, pw.priority)
    return (-prio, pw.timestamp, pw.spec.uid, pw.key)


def local_queue_of(pw: PendingWorkload) -> str:
    """The LocalQueue "ns/name" a pending workload is submitted to."""
    return f"{pw.spec.namespace}/{pw.spec.queue_name}"


@dataclass(frozen=True)
class PendingQueues:
    """``pending`` grouped by LocalQueue (:func:`local_queue_of`), each group in
    :func:`local_order` under the given priority classes. A cycle routes and orders a
    LocalQueue at once instead of every workload in it; the shell may keep one between passes
    and update it (``scheduler.adapter.pending_queues``) instead of re-sorting every pending
    workload: :meth:`describes` is how a cycle checks that the one it is handed is for its
    snapshot (else it builds its own with :func:`pending_queues`)."""

    pending: Sequence[PendingWorkload]
    workload_priority_classes: Mapping[str, int]
    priority_classes: Mapping[str, int]
    by_local_queue: Mapping[str, tuple[Queued, ...]]

    def describes(self, pending: Sequence[PendingWorkload], workload_priority_classes: Mapping[str, int],
                  priority_classes: Mapping[str, int]) -> bool:
        """Built for exactly this ``pending`` sequence (the same object) and these classes."""
        return (self.pending is pending and self.workload_priority_classes == workload_priority_classes
                and self.priority_classes == priority_classes)

    def without(self, removed: Collection[PendingWorkload], pending: Sequence[PendingWorkload]) -> PendingQueues:
        """These queues for ``pending``, which is :attr:`pending` less ``removed``."""
        groups = dict(self.by_local_queue)
        keys = {pw.key for pw in removed}
        for lq in {local_queue_of(pw) for pw in removed}:
            kept = tuple(item for item in groups[lq] if item[1].key not in keys)
            if kept:
                groups[lq] = kept
            else:
                del groups[lq]
        return PendingQueues(pending, self.workload_priority_classes, self.priority_classes, groups)


def pending_queues(pending: Sequence[PendingWorkload], workload_priority_classes: Mapping[str, int],
                   priority_classes: Mapping[str, int]) -> PendingQueues:
    """The queues of ``pending``, built from scratch."""
    groups: dict[str, list[Queued]] = {}
    for pw in pending:
        groups.setdefault(local_queue_of(pw), []).append(
            (local_order(pw, workload_priority_classes, priority_classes), pw))
    return PendingQueues(pending, workload_priority_classes, priority_classes,
                         {lq: tuple(sorted(items, key=_first)) for lq, items in groups.items()})


def _first(item: Queued) -> LocalOrder:
    return item[0]


# A ClusterQueue's queue: its LocalQueues, each with its order usage (order_key's first part).
ClusterQueueQueue = Sequence[tuple[float, Sequence[Queued]]]


def heads(
    queued: Mapping[str, ClusterQueueQueue],
    inadmissible: frozenset[str] | set[str],
    strategies: Mapping[str, str],
    now: float,
) -> dict[str, PendingWorkload]:
    """The head of every ClusterQueue: the first workload in :func:`order_key` order that is
    not in backoff and (BestEffortFIFO only) not parked as inadmissible. Each LocalQueue is in
    order, so its first such workload is its candidate; the head is the least candidate by
    (usage, local order)."""
    out: dict[str, PendingWorkload] = {}
    for cq in sorted(queued):
        strict = strategies.get(cq) == "StrictFIFO"
        best: tuple[float, LocalOrder] | None = None
        best_pw: PendingWorkload | None = None
        for usage, items in queued[cq]:
            for order, pw in items:
                if pw.held or (pw.requeue_at is not None and pw.requeue_at > now):
                    continue
                if not strict and pw.key in inadmissible:
                    continue
                if best is None or (usage, order) < best:
                    best, best_pw = (usage, order), pw
                break  # the rest of this LocalQueue comes after it
        if best_pw is not None:
            out[cq] = best_pw
    return out


class QueueState:
    """What Kueue's queue manager remembers between cycles that is not in the API objects:
    the BestEffortFIFO inadmissible set. The caller applies each cycle's decisions and calls
    :meth:`release` when quota is freed (workload finished/evicted/deleted) or a queue changes."""

    def __init__(self) -> None:
        self._inadmissible: dict[str, str] = {}  # workload key -> ClusterQueue
        self._wake: dict[str, float] = {}  # workload key -> decide again by then (Pending.retry_at)

    def inadmissible(self) -> frozenset[str]:
        return frozenset(self._inadmissible)

    def park(self, key: str, cluster_queue: str, wake_at: float | None = None) -> None:
        """Park ``key``; with ``wake_at`` (a compact wait's end) it comes back by then even
        if nothing is released (:meth:`release_due`)."""
        self._inadmissible[key] = cluster_queue
        if wake_at is None:
            self._wake.pop(key, None)
        else:
            self._wake[key] = wake_at

    def forget(self, key: str) -> None:
        self._inadmissible.pop(key, None)
        self._wake.pop(key, None)

    def release_due(self, now: float) -> int:
        """Requeue the parked workloads whose wake time has come; returns how many."""
        due = [k for k, t in self._wake.items() if t <= now]
        for k in due:
            self.forget(k)
        return len(due)

    def release(self, cluster_queues: Iterable[str] | None = None) -> int:
        """Requeue inadmissible workloads of ``cluster_queues`` (all when None); returns how many."""
        if cluster_queues is None:
            n = len(self._inadmissible)
            self._inadmissible.clear()
            self._wake.clear()
            return n
        wanted = set(cluster_queues)
        gone = [k for k, cq in self._inadmissible.items() if cq in wanted]
        for k in gone:
            del self._inadmissible[k]
            self._wake.pop(k, None)
        return len(gone)
