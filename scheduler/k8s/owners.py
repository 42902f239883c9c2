"""A short-lived cache of owner reads, shared by the extender's admission gate and the
webhook's ownership resolution: the pods (or child Jobs) of one job ask about the same owner
one after another."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.adapter.kinds.ownership import OwnerLookup, OwnerRef
from scheduler.k8s.informer import strip_managed_fields


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
        # In order of answer time (oldest first), so expired answers are dropped from the front.
        self._answers: OrderedDict[tuple[str, OwnerRef], tuple[float, Mapping[str, Any] | None]] = OrderedDict()

    def __call__(self, namespace: str, ref: OwnerRef) -> Mapping[str, Any] | None:
        key = (namespace, ref)
        now = self.clock()
        with self._lock:
            self._drop_expired(now)
            hit = self._answers.get(key)
        if hit is not None:
            return hit[1]
        owner = self.fetch(namespace, ref)
        if owner is not None and ref.uid and (owner.get("metadata") or {}).get("uid") != ref.uid:
            owner = None  # a different object under the owner's name: the owner itself is gone
        if isinstance(owner, dict):
            strip_managed_fields(owner)  # kept for ttl_s; nothing reads who wrote which field
        with self._lock:
            if len(self._answers) >= self.max_entries:
                self._answers.clear()  # a burst of distinct owners: start over rather than grow
            self._answers[key] = (now, owner)
            self._answers.move_to_end(key)
        return owner

    def __len__(self) -> int:
        return len(self._answers)

    def _drop_expired(self, now: float) -> None:
        """Forget answers older than the ttl, oldest first (under the lock). Without this a
        webhook kept every job of a burst (whole objects, templates included) until the cap of
        10,000: about 12 MiB per 1,000 one-pod batch Jobs with their managedFields."""
        while self._answers:
            key, (at, _) = next(iter(self._answers.items()))
            if now - at < self.ttl_s:
                return
            self._answers.popitem(last=False)
