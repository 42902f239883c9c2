"""The controller's indexes of the Workload informer: which Workloads each phase acts on.

Every pass walks the Workloads several times (finish, PodsReady, node failures, evictions,
start, the capacity fingerprint, the snapshot, the gauges), and each walk used to read every
Workload's conditions: with Kueue's scale test (15,000 Workloads, most of them finished by the
end) that was a fifth of the controller's time (issue 18). The informer files each Workload
once per change instead (:meth:`scheduler.k8s.informer.Informer.add_indexer`):

- ``STATE``: ``LIVE`` for every Workload not Finished, ``HOLDING`` too for one that holds a
  reservation (QuotaReserved with an admission) and is not Finished;
- ``OWNER``: the uid of the job it belongs to (controller ownerReference, else Kueue's
  ``kueue.x-k8s.io/job-uid`` label);
- ``FINISHED_IN``: the ClusterQueue a Finished Workload was admitted to (Kueue's
  ``kueue_finished_workloads`` gauge).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.k8s.informer import Informer
from scheduler.kube import status as st

STATE, OWNER, FINISHED_IN = "state", "owner", "finished-in"
LIVE, HOLDING = "live", "holding"


def owner_uid(workload: Mapping[str, Any]) -> str | None:
    """The uid of the job a Workload belongs to, if any."""
    meta = workload.get("metadata") or {}
    refs = meta.get("ownerReferences") or ()
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("uid"))
    labels = meta.get("labels") or {}
    uid = labels.get(LABEL_JOB_UID) if isinstance(labels, Mapping) else None
    return str(uid) if uid else None


def _states(workload: dict[str, Any]) -> tuple[str, ...]:
    if st.is_finished(workload):
        return ()
    return (LIVE, HOLDING) if st.has_reservation(workload) else (LIVE,)


def _owner(workload: dict[str, Any]) -> tuple[str, ...]:
    uid = owner_uid(workload)
    return (uid,) if uid else ()


def _finished_in(workload: dict[str, Any]) -> tuple[str, ...]:
    cq = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
    return (str(cq),) if cq and st.is_finished(workload) else ()


def index_workloads(informer: Informer) -> None:
    informer.add_indexer(STATE, _states)
    informer.add_indexer(OWNER, _owner)
    informer.add_indexer(FINISHED_IN, _finished_in)


def live(informer: Informer) -> list[dict[str, Any]]:
    """The Workloads not Finished."""
    return informer.indexed(STATE, LIVE)


def holding(informer: Informer) -> list[dict[str, Any]]:
    """The Workloads holding a reservation, not Finished."""
    return informer.indexed(STATE, HOLDING)


def owned_by(informer: Informer, uid: str) -> dict[str, Any] | None:
    """The Workload of a job (the first filed, should a job have several)."""
    found = informer.indexed(OWNER, uid)
    return found[0] if found else None


def finished_counts(informer: Informer) -> dict[str, int]:
    """Finished Workloads per ClusterQueue they were admitted to."""
    return informer.index_sizes(FINISHED_IN)
