"""Phase ``explicit_status`` (after ``admission_gates``, before ``admit``): Kueue's
UnadmittedWorkloadsExplicitStatus (new in v0.19, beta but **off** by default; it requires
UnadmittedWorkloadsObservability, ``adapter/kueue_config.py``). With the gate on, a Workload is
stamped as soon as it exists, before any cycle has looked at it: ``QuotaReserved=False`` reason
``PendingEvaluation``, "Workload is pending evaluation in the scheduling queue" (``Deactivated``,
"The workload is deactivated", for an inactive one) and ``Admitted=False`` reason
``NoReservation``, "The workload has no reservation" (Kueue v0.19.2 ``workload_controller.go
resolveGranularUnadmittedQuotaReservedCondition`` with ``cond == nil``, and
``workload.SyncAdmittedCondition``). The cycle of the same pass then writes its own reason
(queue missing or stopped, no quota, ...), as Kueue's scheduler does after the stamp. With the
gate off (both releases' default) the conditions first appear at the first cycle.
"""

from __future__ import annotations

from typing import Any

from scheduler.adapter.objects import ADMITTED, QUOTA_RESERVED, find_condition, has_reservation
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.phase import PassState, Shared

Obj = dict[str, Any]

GATE = "UnadmittedWorkloadsExplicitStatus"
PENDING_EVALUATION = ("PendingEvaluation", "Workload is pending evaluation in the scheduling queue")
DEACTIVATED = ("Deactivated", "The workload is deactivated")
NO_RESERVATION = ("NoReservation", "The workload has no reservation")


def unstamped(wl: Obj) -> bool:
    """A Workload no one has judged yet: no QuotaReserved condition, no reservation."""
    return find_condition(wl, QUOTA_RESERVED) is None and not has_reservation(wl) \
        and not (wl.get("metadata") or {}).get("deletionTimestamp")


class ExplicitStatus:
    def __init__(self, shared: Shared, enabled: bool) -> None:
        self.s = shared
        self.enabled = enabled

    def run(self, _state: PassState | None = None) -> None:
        if not self.enabled:
            return
        self.s.isolation.for_each("explicit_status", [wl for wl in wi.live(self.s.cache.workloads) if unstamped(wl)],
                                  self._stamp)

    def _stamp(self, wl: Obj) -> None:
        now = self.s.clock()
        active = (wl.get("spec") or {}).get("active") is not False
        reason, message = PENDING_EVALUATION if active else DEACTIVATED
        status = st.pending_status(wl, reason, message, now)
        if find_condition(wl, ADMITTED) is None:
            gen = (wl.get("metadata") or {}).get("generation")
            status["conditions"] = st.set_condition(status["conditions"], ADMITTED, "False", *NO_RESERVATION, now, gen)
        self.s.writer.patch_workload_status(wl, status)
