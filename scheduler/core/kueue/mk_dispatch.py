"""Kueue v0.17.0's MultiKueue dispatchers, restated on plain data (issue 43 items 2 and 3).

Kueue's source at v0.17.0: ``pkg/controller/workloaddispatcher/incrementaldispatcher.go``
(Incremental: rounds of at most three not yet nominated workers in sorted name order, a round
lasting five minutes, nominations only ever appended) and
``pkg/controller/admissionchecks/multikueue/workload.go`` ``nominateAndSynchronizeWorkers``
(AllAtOnce: every worker of the MultiKueueConfig at once; any other dispatcher name is external
and MultiKueue copies the Workload to exactly ``status.nominatedClusterNames``).

toposched's topology-aware dispatcher (``core/beyond/dispatch.py``) reuses the eligibility
rule and the Incremental round for the workers it cannot ask; the simulator's comparison
(scripts/bench/multicluster.py) runs all three on the same stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
# toposched's external dispatcher: the value an admin writes in the manager's Kueue
# Configuration ``multiKueue.dispatcherName`` so that Kueue's own dispatchers stand aside.
TOPOSCHED = "toposched.io/multikueue-dispatcher-topology"

# incrementalDispatcherRoundTimeout and the batch size of getNextNominatedWorkers
ROUND_TIMEOUT_S = 300.0
BATCH_SIZE = 3


@dataclass(frozen=True)
class ManagerWorkload:
    """What the dispatchers read of one Workload on the manager (Kueue's Reconcile guards)."""

    key: str  # namespace/name
    deleted: bool
    finished: bool
    quota_reserved: bool
    mk_check_state: str | None  # state of its MultiKueue AdmissionCheck, None without one
    cluster_name: str | None  # status.clusterName
    nominated: tuple[str, ...]  # status.nominatedClusterNames


def needs_nomination(wl: ManagerWorkload) -> bool:
    """Incremental's Reconcile: only a live, unfinished Workload with quota reserved on the
    manager, whose MultiKueue check is Pending and which no worker has admitted yet."""
    return (not wl.deleted and wl.mk_check_state == "Pending" and wl.cluster_name is None
            and not wl.finished and wl.quota_reserved)


def all_at_once(workers: Sequence[str]) -> tuple[str, ...]:
    """AllAtOnce nominates every worker of the MultiKueueConfig."""
    return tuple(workers)


def next_incremental_workers(nominated: Sequence[str], workers: Sequence[str],
                             batch: int = BATCH_SIZE) -> tuple[str, ...]:
    """getNextNominatedWorkers: up to ``batch`` workers not yet nominated, in sorted order;
    empty is Kueue's ErrNoMoreWorkers."""
    already = set(nominated)
    return tuple(sorted(w for w in set(workers) if w not in already)[:batch])


@dataclass(frozen=True)
class Round:
    """The nominations after one reconcile and when the current round started."""

    nominated: tuple[str, ...]
    round_start: float | None
    changed: bool


def incremental_round(nominated: Sequence[str], workers: Sequence[str], round_start: float | None,
                      now: float, timeout_s: float = ROUND_TIMEOUT_S) -> Round:
    """nominateWorkers: a round still in progress (``now - start <= timeout``) keeps the
    nominations; otherwise the next batch is appended and a new round starts. With no worker
    left nothing changes and the round start is kept (Kueue sets it only on success)."""
    if round_start is not None and now - round_start <= timeout_s:
        return Round(tuple(nominated), round_start, False)
    added = next_incremental_workers(nominated, workers)
    if not added:
        return Round(tuple(nominated), round_start, False)
    return Round((*nominated, *added), now, True)
