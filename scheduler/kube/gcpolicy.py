"""Garbage collection for a controller that holds a large cluster in memory (issue 18, item 4).

At 10,000 nodes and 50,000 pending Workloads the process tracks about a million container
objects: the informer caches (raw dicts) and the adapter's conversions of them
(``scheduler.adapter.objects.VersionMemo``), kept from pass to pass. CPython's oldest-generation
collection walks all of them, found nothing to free in the scale bench, and took 430 ms inside
an admission cycle every few passes: the cycle's p99 was 4-5x its p50
(``scripts/bench/scale_series.py``, docs/performance.md).

:class:`GcPolicy` moves what has survived a pass into the permanent generation
(``gc.freeze``), which later collections skip; objects created after it are collected as usual.
Frozen objects are still freed by reference counting (informer dicts and converted values hold
no reference cycles), so only a frozen object that later becomes garbage *inside a cycle* is
kept; every ``refreeze_s`` the policy unfreezes, collects everything once and freezes again,
which bounds that to what one period leaves behind, at the cost of one full collection per
period between two passes rather than in the middle of one.

Process-wide state: ``scheduler.commands.controller`` installs it on the controller of the
process; a Controller built elsewhere (tests, simulators) leaves the collector alone.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

DEFAULT_REFREEZE_S = 600.0


class GcPolicy:
    """Call :meth:`after_pass` at the end of each pass; the first call (after the informer sync
    and the first pass's conversion of every object) freezes, later ones every ``refreeze_s``."""

    def __init__(self, refreeze_s: float = DEFAULT_REFREEZE_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.refreeze_s = refreeze_s
        self.monotonic = monotonic
        self._frozen_at: float | None = None

    def after_pass(self) -> bool:
        """Freeze (after a full collection) when due; True when it did."""
        now = self.monotonic()
        if self._frozen_at is not None and now - self._frozen_at < self.refreeze_s:
            return False
        gc.unfreeze()  # what the last freeze kept that has since become cyclic garbage goes now
        gc.collect()
        gc.freeze()
        self._frozen_at = now
        return True
