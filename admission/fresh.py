"""A second opinion for denials: the cluster view re-read from the API server.

The webhook decides on its watch caches, which trail the API server by the time a watch event
takes to arrive (milliseconds, seconds on a loaded control plane). A denial decided on a cache
that has not yet seen the nodes, the quota raise or the flavor that were written just before
the Job (``kubectl apply -f dir/`` of queues and jobs together) would refuse a job the cluster
can run. So a denial is decided again on a view listed from the API server after the request
arrived (consistent reads), and only that answer is given.

Allowed requests never pay for it, nor do objects refused on their own (a typo, a bad shape:
refused without a cluster view too). Denials share one snapshot: a snapshot whose lists started
after a request arrived answers it, one snapshot is listed at a time, and snapshots start at
most every ``min_interval_s`` (or five times the last one's duration, on large clusters), so a
stream of hopeless jobs costs the API server a bounded number of lists, not one per request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from admission.view import ClusterView

# What a snapshot's duration is multiplied by to give the least interval between two.
INTERVAL_PER_BUILD = 5.0


class FreshViews:
    """Single-flight, rate-limited consistent snapshots of the cluster view."""

    def __init__(self, build: Callable[[], ClusterView], min_interval_s: float = 0.2,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self._build = build
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._sleep = sleep
        self._building = threading.Lock()  # one snapshot listed at a time
        self._latest: tuple[float, ClusterView] | None = None  # (when its lists started, view)
        self._next_start = float("-inf")
        self.built = 0

    def after(self, arrived: float) -> ClusterView:
        """A view whose lists started at or after ``arrived`` (a ``clock`` reading)."""
        latest = self._latest
        if latest is not None and latest[0] >= arrived:
            return latest[1]
        with self._building:
            latest = self._latest  # another request may have built one while this one waited
            if latest is not None and latest[0] >= arrived:
                return latest[1]
            wait = self._next_start - self._clock()
            if wait > 0:
                self._sleep(wait)
            started = self._clock()
            view = self._build()
            took = self._clock() - started
            self._latest = (started, view)
            self._next_start = started + max(self.min_interval_s, INTERVAL_PER_BUILD * took)
            self.built += 1
            return view
