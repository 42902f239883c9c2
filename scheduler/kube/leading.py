"""The controller's reconcile loop, run only inside a held lease term.

Each pass starts in the elector's current term and the writer's check
(:class:`~scheduler.k8s.leader.WriteFence`) refuses every write once that term is over or
the lease stops counting as held, so a pass that loses leadership half-way sends nothing more.

A new term first waits until the Workload cache has caught up with the API server: the
previous leader's last writes may have been committed just before we acquired (an API server
that was paused processes its queued requests on resume), and deciding admissions on a cache
that misses one of them could reserve the same quota twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from scheduler.k8s.informer import WORKLOADS, KubeApi, object_key, version_number
from scheduler.k8s.leader import LeaseElector, WriteFence
from scheduler.kube.cache import ClusterCache

log = logging.getLogger(__name__)
CATCH_UP_POLL_S = 0.05


def workloads_caught_up(api: KubeApi, cache: ClusterCache, timeout_s: float,
                        monotonic: Callable[[], float] = time.monotonic) -> bool:
    """True once every Workload the API server holds now (a quorum list) is in the cache at
    that version or newer; False if the cache is still behind after ``timeout_s``."""
    listed = api.list(WORKLOADS).get("items") or ()
    wanted = {object_key(wl): version_number(wl) for wl in listed}
    deadline = monotonic() + timeout_s
    while True:
        behind = [key for key, rv in wanted.items()
                  if version_number(cache.workloads.get(key) or {}) < rv]
        if not behind:
            return True
        if monotonic() >= deadline:
            log.info("workload cache still behind the API server (%d objects, e.g. %s)", len(behind), behind[0])
            return False
        time.sleep(CATCH_UP_POLL_S)


class LeadingLoop:
    """Runs ``reconcile`` while leading: a pass per wake-up or resync period, each one fenced
    to the term it started in; a new term starts only once the caches have caught up."""

    def __init__(self, api: KubeApi, cache: ClusterCache, elector: LeaseElector, fence: WriteFence,
                 reconcile: Callable[[], None], wait: Callable[[float], object], resync_s: float,
                 hold: Callable[[], bool] | None = None) -> None:
        """``wait(seconds)``: sleeps until a watch event or the timeout (the controller's wakeup).
        ``hold()``: True skips the pass (a Kueue controller is alive, scheduler/kube/kueueguard.py)."""
        self.api = api
        self.cache = cache
        self.elector = elector
        self.fence = fence
        self.reconcile = reconcile
        self.wait = wait
        self.resync_s = resync_s
        self.hold = hold
        self._caught_up_term: int | None = None
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.is_set():
            if not self.elector.is_leader.wait(timeout=1.0):
                continue
            ran = self.run_pass()
            # A pass that could not run (caches behind) is retried soon, not after a resync.
            self.wait(self.resync_s if ran else min(self.resync_s, self.elector.retry_period_s))

    def run_pass(self) -> bool:
        """One fenced pass; False when it did not run (not leading, or caches behind)."""
        term = self.fence.begin_pass()
        try:
            if term is None:
                return False
            if term != self._caught_up_term:
                if not workloads_caught_up(self.api, self.cache, timeout_s=self.elector.renew_deadline_s / 2):
                    return False
                self._caught_up_term = term
                log.info("term %d: caches caught up, reconciling", term)
            if self.hold is not None and self.hold():
                return False
            self.reconcile()
            return True
        except Exception:
            log.exception("reconcile failed; retrying")
            return False
        finally:
            self.fence.end_pass()
