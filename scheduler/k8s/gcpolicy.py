"""Garbage collection for a process that holds a cluster in its watch caches (issues 18 and 42).

Every long-running door (controller, webhook, extender) keeps informer caches: raw JSON dicts,
millions of container objects at scale, and, in the controller, the adapter's conversions of
them kept from pass to pass (``scheduler.adapter.objects.VersionMemo``). CPython's oldest-
generation collection walks all of them and finds nothing to free: those dicts hold no reference
cycles and go by reference counting. The walk stops every thread of the process:
- in the scale bench, 430 ms inside an admission cycle every few passes (the cycle's p99 was
  4-5x its p50; ``scripts/bench/scale_series.py``);
- in the burst (issue 42), 130-560 ms every 7 s in each of the three processes while thousands
  of objects arrived (4.2 s in the controller over one x0.1 burst). A paused process reads no
  watch event: the API server's watch cache finds the watcher unresponsive, blocks its dispatch
  to every client of that resource for up to its budget and closes the watch ("Forcing pods
  watcher close due to unresponsiveness": 20-52 per burst in toposched's cluster, 0 in Kueue's),
  and every webhook call in flight waits for the pause.

:class:`GcPolicy` moves what has survived into the permanent generation (``gc.freeze``, a
constant-time list splice), which collections skip, after every pass of the controller and every
``period_s`` in the doors without passes (:func:`start_freezing`). Objects created after it are
collected as usual. Frozen objects are still freed by reference counting, so only a frozen object
that later becomes garbage *inside a cycle* is kept; every ``refreeze_s`` the policy unfreezes,
collects everything once and freezes again, which bounds that to what one period leaves behind,
at the cost of one full collection per period (between two passes in the controller).

:class:`PauseLog` logs every collection over ``LONG_PAUSE_MS``, so a slow burst can be told from
a paused process. Process-wide state: the commands install both; a Controller built elsewhere
(tests, simulators) leaves the collector alone.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_REFREEZE_S = 600.0
DEFAULT_FREEZE_PERIOD_S = 2.0  # the doors without passes (webhook, extender)
LONG_PAUSE_MS = 50.0


class GcPolicy:
    """Call :meth:`after_pass` at the end of each pass (or every few seconds): it freezes what
    survived; the first call and then one every ``refreeze_s`` collect everything first."""

    def __init__(self, refreeze_s: float = DEFAULT_REFREEZE_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.refreeze_s = refreeze_s
        self.monotonic = monotonic
        self._collected_at: float | None = None

    def after_pass(self) -> bool:
        """Freeze what survived; True when a full collection came first (due every ``refreeze_s``)."""
        now = self.monotonic()
        full = self._collected_at is None or now - self._collected_at >= self.refreeze_s
        if full:
            gc.unfreeze()  # what the last freeze kept that has since become cyclic garbage goes now
            gc.collect()
            self._collected_at = now
        gc.freeze()
        return full


def start_freezing(policy: GcPolicy, period_s: float = DEFAULT_FREEZE_PERIOD_S,
                   stop: threading.Event | None = None) -> threading.Thread:
    """Run ``policy.after_pass`` every ``period_s`` on a daemon thread (a door without passes)."""
    done = stop or threading.Event()

    def loop() -> None:
        while not done.wait(period_s):
            policy.after_pass()

    thread = threading.Thread(target=loop, name="gc-freeze", daemon=True)
    thread.start()
    return thread


class PauseLog:
    """A ``gc.callbacks`` entry: times each collection and logs those over ``long_ms``."""

    def __init__(self, long_ms: float = LONG_PAUSE_MS, clock: Callable[[], float] = time.perf_counter) -> None:
        self.long_ms = long_ms
        self.clock = clock
        self.started = 0.0
        self.collections = 0
        self.paused_s = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = self.clock()
            return
        took_ms = 1000 * (self.clock() - self.started)
        self.collections += 1
        self.paused_s += took_ms / 1000
        if took_ms >= self.long_ms:
            log.info("garbage collection of generation %s paused the process %.0f ms (%s freed; %.1f s paused "
                     "over %d collections so far)", info.get("generation"), took_ms, info.get("collected"),
                     self.paused_s, self.collections)


@contextlib.contextmanager
def pause_log(long_ms: float = LONG_PAUSE_MS) -> Iterator[PauseLog]:
    """Log long collections while a door serves (removed after: a command run inside another
    process, as tests do, leaves that process's collector as it found it)."""
    pauses = PauseLog(long_ms)
    gc.callbacks.append(pauses)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(pauses)
