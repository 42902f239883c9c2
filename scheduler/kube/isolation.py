"""Per-object isolation of the controller's phases: one bad object never stops a pass.

Every phase walks objects (Jobs, Workloads, queue objects) and runs one step on each.
:meth:`Isolation.for_each` runs those steps so that a failure on one object — any exception,
``RecursionError``, ``KeyError`` or ``TypeError`` from a malformed Job or Workload included —
is reported and every other object proceeds in the same pass:

- logged once with the object's kind and namespace/name (at WARNING; repeats at DEBUG until
  the object changes, so a bad object does not flood the log every resync);
- recorded as a Warning Event on the object (through the writer: leadership-checked,
  deduplicated by the Event recorder);
- where a Workload exists that holds no quota: its ``QuotaReserved`` condition stays False with
  reason ``Inadmissible`` and a message naming the phase and the error (a Workload holding
  quota keeps its conditions: rewriting them would misreport the reservation it still has).

An ``ApiException`` is the API server's trouble, not the object's: it is logged only, and the
next pass tries again.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException

from scheduler.adapter.snapshot import split_workloads
from scheduler.adapter.workloads import admitted_workload, pending_workload
from scheduler.core.topology_request import TopologyRequestError
from scheduler.k8s.informer import object_key
from scheduler.kube import status as st
from scheduler.kube.writer import Obj, Writer

log = logging.getLogger(__name__)
T = TypeVar("T")
Clock = Callable[[], dt.datetime]

REASON_RECONCILE_FAILED = "ReconcileFailed"
REASON_INADMISSIBLE = "Inadmissible"  # Kueue's QuotaReserved=False reason for a workload it cannot admit
MAX_DETAIL = 400
MAX_REMEMBERED = 10_000


def describe_error(exc: BaseException) -> str:
    """What went wrong, naming the field where the error knows it (short: it goes into an
    Event and a condition message)."""
    if isinstance(exc, TopologyRequestError):
        detail = f"{exc.field}: {exc}"
    elif isinstance(exc, KeyError):
        detail = f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    elif isinstance(exc, RecursionError):
        detail = "the object is nested too deeply to read"
    else:
        detail = f"{type(exc).__name__}: {exc}"
    return detail if len(detail) <= MAX_DETAIL else detail[: MAX_DETAIL - 3] + "..."


def failure_message(phase: str, exc: BaseException) -> str:
    return f"toposched could not process this object ({phase}): {describe_error(exc)}; fix the object and it is " \
           "retried on the next pass"


class Isolation:
    def __init__(self, writer: Writer, clock: Clock) -> None:
        self.writer = writer
        self.clock = clock
        # (phase, object key) -> (resourceVersion, detail) already reported: report once per change.
        self._reported: dict[tuple[str, str], tuple[str, str]] = {}
        self.failures = 0  # every failed step since start (metrics, tests)

    def for_each(self, phase: str, objects: Iterable[T], step: Callable[[T], object], *,
                 subject: Callable[[T], Mapping[str, Any]] | None = None,
                 workload_of: Callable[[T], Obj | None] | None = None, concurrent: bool = False,
                 wanted: Callable[[T], bool] | None = None) -> list[T]:
        """Run ``step`` on every object; returns the objects whose step failed. ``subject``:
        the API object an item stands for (default: the item); ``workload_of``: the item's
        Workload, if any (gets the condition). ``concurrent``: the steps are independent (one
        object each) and are run side by side by the writer (:meth:`Writer.run_each`);
        failures are reported afterwards, in item order, from this thread. ``wanted``: a pure
        test run here first, so that only the objects with something to write are handed to
        the writer's pool (most objects of a pass have nothing to do, and a hand-off costs more
        than the test); a test that raises counts as the object's failure."""
        items = list(objects)
        failures: list[tuple[T, Exception]] = []
        if wanted is not None:
            chosen = []
            for item in items:
                try:
                    if wanted(item):
                        chosen.append(item)
                except Exception as exc:  # noqa: BLE001 - the object's failure, reported below
                    failures.append((item, exc))
            items = chosen
        failures += self.writer.run_each(items, step, concurrent=concurrent)
        for item, error in failures:
            obj = subject(item) if subject is not None else item
            workload = workload_of(item) if workload_of is not None else None
            self.report(phase, obj if isinstance(obj, Mapping) else {}, error, workload)
        return [item for item, _ in failures]

    def report(self, phase: str, obj: Mapping[str, Any], exc: BaseException, workload: Obj | None = None) -> None:
        """Log, Event, and (when a Workload without quota exists) its QuotaReserved condition."""
        self.failures += 1
        kind = str(obj.get("kind") or "object")
        key = object_key(obj) if obj.get("metadata") else "<unnamed>"
        if isinstance(exc, ApiException):
            log.warning("%s: %s %s: API error HTTP %s, retried next pass", phase, kind, key, exc.status)
            return
        detail = describe_error(exc)
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        if self._reported.get((phase, key)) == (version, detail):
            log.debug("%s: %s %s still failing: %s", phase, kind, key, detail)
            return
        if len(self._reported) >= MAX_REMEMBERED:
            self._reported.clear()
        self._reported[(phase, key)] = (version, detail)
        log.warning("%s: %s %s failed, skipped (the others go on): %s", phase, kind, key, detail,
                    exc_info=not isinstance(exc, (RecursionError, TopologyRequestError)))
        message = failure_message(phase, exc)
        try:
            if obj.get("metadata"):
                self.writer.event(obj, "Warning", REASON_RECONCILE_FAILED, message)
            if workload is not None:
                self._mark_workload(workload, message)
        except Exception:  # noqa: BLE001 - reporting must not become the next failure
            log.exception("%s: reporting the failure of %s %s failed", phase, kind, key)

    def _mark_workload(self, workload: Obj, message: str) -> None:
        if st.has_reservation(workload) or st.is_finished(workload):
            return
        current = st.find_condition(workload, st.QUOTA_RESERVED) or {}
        if (current.get("status"), current.get("reason"), current.get("message")) == (
                "False", REASON_INADMISSIBLE, message):
            return
        self.writer.patch_workload_status(workload, st.pending_status(workload, REASON_INADMISSIBLE, message,
                                                                      self.clock()))


class UnreadableWorkloads:
    """The Workloads the adapter could not read, left out of the admission cycle until they
    change (namespace/name -> resourceVersion, and whether the Workload holds quota).

    A pending one is simply not admitted. One that holds quota is different: its usage
    (quota and topology slots) is unknown, so admitting anything could double-book what it
    holds; admission is held (fail closed) until it is fixed or gone — only someone allowed
    to edit Workloads (not a batch user under Kueue's roles) can cause that."""

    def __init__(self) -> None:
        self._bad: dict[str, tuple[str, bool]] = {}

    def current(self, workloads: Iterable[Mapping[str, Any]]) -> frozenset[str]:
        """The keys still unreadable (the same resourceVersion as when they failed)."""
        if not self._bad:
            return frozenset()  # the usual case: nothing to look up in every Workload
        versions = {object_key(w): str(w["metadata"].get("resourceVersion", "")) for w in workloads}
        self._bad = {key: seen for key, seen in self._bad.items() if versions.get(key) == seen[0]}
        return frozenset(self._bad)

    def holds_admission(self) -> bool:
        held = sorted(key for key, (_rv, holding) in self._bad.items() if holding)
        if held:
            log.warning("admission held: cannot read the quota held by Workload(s) %s", ", ".join(held))
        return bool(held)

    def probe(self, workloads: Iterable[Obj], flavors: Iterable[Mapping[str, Any]],
              report: Callable[[Obj, Exception], None], lookup: Callable[[str], Obj | None]) -> bool:
        """Convert each Workload on its own; remember and report the ones that fail. True
        when at least one did. ``lookup``: the cache's copy after the report (which may have
        written the Workload's condition: that new version is the one to skip)."""
        tas_flavors = frozenset(str(f["metadata"]["name"]) for f in flavors
                                if (f.get("spec") or {}).get("topologyName"))
        found = False
        for wl in workloads:
            holding = True  # unless shown otherwise: fail closed
            try:
                holding = st.has_reservation(wl)
                split = split_workloads([wl])
                for held in split.holding:
                    admitted_workload(held, tas_flavors)
                for pending in split.pending:
                    pending_workload(pending)
            except Exception as exc:  # noqa: BLE001 - any failure makes this one Workload unreadable
                report(wl, exc)
                key = object_key(wl)
                now_stored = lookup(key) or wl
                self._bad[key] = (str(now_stored["metadata"].get("resourceVersion", "")), holding)
                found = True
        return found
