"""The dispatcher's passes, run only inside a held lease term (``toposched mk-dispatch`` with
two or more replicas; docs/multicluster.md).

The controller's Lease protocol and fence (``scheduler/k8s/leader.py``) under the dispatcher's
own Lease: each pass starts in the elector's current term and the dispatcher asks the fence
before every write, so a replica that lost the lease (or never held it) writes nothing, and a
pass computed in one term never writes in a later one. The dispatcher reads the manager's
objects with a fresh list each pass (no cache to catch up), so a new term needs only to drop
the previous term's round starts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from scheduler.api.dispatcher import Dispatcher
from scheduler.k8s.leader import LeaseElector, WriteFence

log = logging.getLogger(__name__)


class LeadingDispatch:
    """Runs the dispatcher's passes while leading, every ``interval_s``."""

    def __init__(self, dispatcher: Dispatcher, elector: LeaseElector, fence: WriteFence, interval_s: float,
                 on_written: Callable[[dict[str, tuple[str, ...]]], None] = lambda _: None) -> None:
        self.dispatcher = dispatcher
        self.elector = elector
        self.fence = fence
        self.interval_s = interval_s
        self.on_written = on_written
        self._term: int | None = None
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run_pass(self) -> dict[str, tuple[str, ...]] | None:
        """One fenced pass; None when not leading (nothing asked, nothing written)."""
        term = self.fence.begin_pass()
        try:
            if term is None:
                return None
            if term != self._term:
                self.dispatcher.new_term()
                self._term = term
                log.info("term %d: dispatching", term)
            written = self.dispatcher.run_once()
        finally:
            self.fence.end_pass()
        self.on_written(written)
        return written

    def run(self) -> None:
        while not self._stop.is_set():
            if not self.elector.is_leader.wait(timeout=1.0):
                continue
            try:
                self.run_pass()
            except Exception:  # an unreachable manager: retried next interval, the lease kept
                log.exception("dispatch pass failed; retrying")
            self._stop.wait(self.interval_s)
