"""A short-lived cache of owner reads, shared by the extender's admission gate and the
webhook's ownership resolution: the pods (or child Jobs) of one job ask about the same owner
one after another."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.adapter.kinds.ownership import OwnerLookup, OwnerRef


class CachedOwners:
    """An :data:`OwnerLookup` over a fetch function (a GET), remembering each answer for
    ``ttl_s``: the pods of one job ask about the same owner one after another. Only answers are
    cached; a failed fetch is asked again next time."""

    def __init__(self, fetch: OwnerLookup, ttl_s: float = 5.0, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fetch = fetch
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._lock = threading.Lock()
        self._answers: dict[tuple[str, OwnerRef], tuple[float, Mapping[str, Any] | None]] = {}

    def __call__(self, namespace: str, ref: OwnerRef) -> Mapping[str, Any] | None:
        key = (namespace, ref)
        now = self.clock()
        with self._lock:
            hit = self._answers.get(key)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        owner = self.fetch(namespace, ref)
        if owner is not None and ref.uid and (owner.get("metadata") or {}).get("uid") != ref.uid:
            owner = None  # a different object under the owner's name: the owner itself is gone
        with self._lock:
            if len(self._answers) >= self.max_entries:
                self._answers.clear()  # a burst of distinct owners: start over rather than grow
            self._answers[key] = (now, owner)
        return owner
