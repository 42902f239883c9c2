"""Phase ``finish_orphaned`` (after ``sync_finished``): Kueue's FinishOrphanedWorkloads (beta,
on since v0.18, so under ``--kueue-version v0.19``; not in v0.17). A Workload that a job once
owned (the ``kueue.x-k8s.io/job-uid`` label) and that has no owner reference left (the job was
deleted with ``--cascade=orphan``, so the garbage collector dropped the reference instead of the
Workload) is finished: ``Finished=True``, reason ``OwnerNotFound``, "The workload's owner no
longer exists" (Kueue v0.19.2 ``workload_controller.go isOrphanedWorkload`` and
``pkg/workload/workload.go FinalizeOrphanedWorkload``), so its quota is free.

One step stricter than Kueue: the job the label names must be gone from the caches too. A
tenant who strips the owner reference from the Workload of a job that still runs does not free
its quota that way (Kueue would finish it and then stop the job); that Workload stays its job's
(``workload_index.owner_uid`` reads the label) and is judged by the job's phases.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.phase import PassState, Shared

Obj = dict[str, Any]

GATE = "FinishOrphanedWorkloads"
OWNER_NOT_FOUND = "OwnerNotFound"  # kueue.WorkloadFinishedReasonOwnerNotFound
OWNER_GONE_MESSAGE = "The workload's owner no longer exists"


def orphaned(wl: Obj) -> bool:
    """Kueue's ``isOrphanedWorkload`` with the gate on, for a Workload not being deleted: no
    owner reference, a job-uid label."""
    meta = wl.get("metadata") or {}
    labels = meta.get("labels") or {}
    return not meta.get("ownerReferences") and not meta.get("deletionTimestamp") and bool(labels.get(LABEL_JOB_UID))


class FinishOrphaned:
    def __init__(self, shared: Shared, enabled: bool) -> None:
        self.s = shared
        self.enabled = enabled

    def run(self, _state: PassState | None = None) -> None:
        if not self.enabled:
            return
        s = self.s
        candidates = [wl for wl in wi.live(s.cache.workloads) if orphaned(wl)]
        if not candidates:
            return
        owners = {str((o.get("metadata") or {}).get("uid")) for informer in (*s.cache.jobs.values(), s.cache.pods)
                  for o in informer.items()}
        s.isolation.for_each("finish_orphaned",
                             [wl for wl in candidates if wl["metadata"]["labels"][LABEL_JOB_UID] not in owners],
                             self._finish, workload_of=lambda wl: wl)

    def _finish(self, wl: Obj) -> None:
        status = st.finish_status(wl, OWNER_NOT_FOUND, OWNER_GONE_MESSAGE, self.s.clock())
        if self.s.writer.patch_workload_status(wl, status):
            self.s.writer.notify("finished", wl, {"reason": OWNER_NOT_FOUND})
