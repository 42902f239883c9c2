"""Phase ``admission_gates`` (after ``equivalence``, before ``admit``): Kueue's AdmissionGatedBy
(``kueue.x-k8s.io/admission-gated-by``; gate on in v0.19, off in v0.17) in the controller.

1. job -> Workload (Kueue v0.19.2 ``jobframework.UpdateAdmissionGatedBy``): the job's
   annotation is the truth for its Workload; each difference is copied over (a name removed from
   the job, or the whole annotation) with Kueue's ``UpdatedWorkload`` Event on the job. A tenant
   who rewrites the Workload's annotation cannot lift the job's gates: the next pass copies the
   job's back. The same from a LeaderWorkerSet or StatefulSet to each of its groups' Workloads
   (Kueue's reconcilers of those kinds). New Workloads get it at creation (``workload_for_job``,
   ``group_workload``).
2. The Workload's condition (``workload_controller.go mayUpdateConditionForAdmissionGatedBy``):
   a gated Workload without the gated condition gets ``QuotaReserved=False``, reason
   ``AdmissionGated``, "Admission is gated by: <names>" (Event ``AdmissionGated``); one whose
   gates are all gone gets reason ``Pending`` (``PendingEvaluation`` with
   UnadmittedWorkloadsObservability), "AdmissionGatedBy cleared, waiting for quota reservation"
   (Event ``AdmissionGateCleared``). The snapshot leaves gated Workloads out of the cycle
   (``adapter/snapshot.py``), as Kueue's queue manager skips them (``workload.IsAdmissible``).

A Workload created directly may carry the annotation: it only holds that Workload (the webhook
checks its format and lets names only be removed, ``adapter/manifest/gated_by.py``), so the
controller honours it as Kueue does. Workloads holding a reservation are left alone: the
annotation cannot be added after creation, and toposched does not drop a reservation because
the gate was switched on under a running job (Kueue's ``UnsetQuotaReservationWithCondition``
would clear it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scheduler.adapter.manifest.gated_by import GATE, gated_by
from scheduler.adapter.objects import QUOTA_RESERVED, find_condition, has_reservation
from scheduler.core.config import FeatureGates
from scheduler.core.kueue_names import ANN_ADMISSION_GATED_BY
from scheduler.k8s.informer import WORKLOADS
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.phase import PassState, Shared

log = logging.getLogger(__name__)
Obj = dict[str, Any]

ADMISSION_GATED = "AdmissionGated"  # kueue.WorkloadAdmissionGated
GATED_MESSAGE = "Admission is gated by: {}"
CLEARED_MESSAGE = "AdmissionGatedBy cleared, waiting for quota reservation"
UPDATED_EVENT = 'Updated workload AdmissionGatedBy to "{}"'  # Kueue's %q of a plain name list


class AdmissionGates:
    def __init__(self, shared: Shared, gates: FeatureGates,
                 owned_groups: Callable[[], list[tuple[Obj, Obj]]] = list) -> None:
        self.s = shared
        self.owned_groups = owned_groups  # (LeaderWorkerSet or StatefulSet, a group's Workload)
        self.enabled = gates.enabled(GATE)
        # workload.UnadmittedWorkloadReasonWithFallback(PendingEvaluation, Pending)
        self.cleared_reason = ("PendingEvaluation" if gates.enabled("UnadmittedWorkloadsObservability")
                               else "Pending")

    def run(self, _state: PassState | None = None) -> None:
        if not self.enabled:
            return
        s = self.s
        workloads = s.cache.workloads
        owned = [(job, wl) for uid, (_kind, job) in s.lookups.job_index().items()
                 if (wl := wi.owned_by(workloads, uid)) is not None] + self.owned_groups()
        s.isolation.for_each("admission_gates", owned, lambda pair: self._propagate(*pair),
                             subject=lambda pair: pair[1])
        s.isolation.for_each("admission_gates", [wl for wl in wi.live(workloads) if not has_reservation(wl)],
                             self._condition)

    def _propagate(self, job: Obj, wl: Obj) -> None:
        """Kueue's ``PropagateAdmissionGatedByAnnotation``: the job's value, or none."""
        want, have = gated_by(job) or "", gated_by(wl) or ""
        if want == have or st.is_finished(wl):
            return
        patch = {"metadata": {"annotations": {ANN_ADMISSION_GATED_BY: want or None}}}
        if self.s.writer.patch(WORKLOADS, wl, patch, self.s.cache.workloads):
            self.s.writer.event(job, "Normal", "UpdatedWorkload", UPDATED_EVENT.format(want))

    def _condition(self, wl: Obj) -> None:
        names = gated_by(wl) or ""
        cond = find_condition(wl, QUOTA_RESERVED) or {}
        gated_condition = cond.get("reason") == ADMISSION_GATED
        now = self.s.clock()
        if names and not gated_condition:
            status = st.pending_status(wl, ADMISSION_GATED, GATED_MESSAGE.format(names), now)
            if self.s.writer.patch_workload_status(wl, status):
                self.s.writer.event(wl, "Normal", "AdmissionGated", f"Workload admission is gated by: {names}")
        elif not names and gated_condition:
            status = st.pending_status(wl, self.cleared_reason, CLEARED_MESSAGE, now)
            if self.s.writer.patch_workload_status(wl, status):
                self.s.writer.event(wl, "Normal", "AdmissionGateCleared",
                                    "Admission gate cleared, workload is now admissible")
