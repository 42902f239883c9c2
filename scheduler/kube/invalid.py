"""Invalid pending Workloads, told to their owners: left out of admission, never stopping it.

The adapter leaves every pending Workload that breaks Kueue's schema or webhook rules out of
the snapshot (``scheduler.adapter.workload_checks``), whoever created it and whatever the API
server's CRD enforces. This reports each one once per change of what is wrong with it: a log
line, a Warning Event ``InvalidWorkload`` and the Workload's ``QuotaReserved=False`` condition
with reason ``Inadmissible`` (Kueue's reason for a workload it cannot admit), all naming the
field and what to write instead. The rest of the cluster is admitted as usual.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from scheduler.adapter.workload_checks import FieldProblem, describe
from scheduler.k8s.informer import object_key
from scheduler.kube import status as st
from scheduler.kube.isolation import REASON_INADMISSIBLE
from scheduler.kube.writer import Writer

log = logging.getLogger(__name__)
Clock = Callable[[], dt.datetime]

REASON_INVALID = "InvalidWorkload"
MAX_MESSAGE = 1000


def invalid_message(problems: Sequence[FieldProblem]) -> str:
    text = (f"Workload is invalid, toposched does not admit it: {describe(problems)}. Fix the Workload (or its "
            "job) and it is queued again")
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


class InvalidWorkloads:
    def __init__(self, writer: Writer, clock: Clock) -> None:
        self.writer = writer
        self.clock = clock
        self._told: dict[str, tuple[str, str]] = {}  # namespace/name -> (uid, message) already reported

    def report(self, invalid: Iterable[tuple[Mapping[str, Any], Sequence[FieldProblem]]]) -> None:
        """Tell each invalid Workload what is wrong, once per change (never raises: reporting
        must not become the next failure)."""
        told: dict[str, tuple[str, str]] = {}
        for raw, problems in invalid:
            wl = dict(raw)
            key, message = object_key(wl), invalid_message(problems)
            seen = (str(wl["metadata"].get("uid") or ""), message)
            told[key] = seen
            if self._told.get(key) == seen:
                continue
            log.warning("workload %s left out of admission: %s", key, message)
            try:
                self.writer.event(wl, "Warning", REASON_INVALID, message)
                current = st.find_condition(wl, st.QUOTA_RESERVED) or {}
                if (current.get("status"), current.get("reason"), current.get("message")) != (
                        "False", REASON_INADMISSIBLE, message) and self.writer.patch_workload_status(
                            wl, st.pending_status(wl, REASON_INADMISSIBLE, message, self.clock())) is None:
                    told.pop(key)  # not written (not leading, or a newer copy): again next pass
            except Exception:  # noqa: BLE001 - an API error: reported again next pass
                log.exception("reporting invalid workload %s failed", key)
                told.pop(key)
        self._told = told
