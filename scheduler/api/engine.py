"""What the gRPC servicer reads: one engine snapshot, whichever door asks.

:class:`EngineSnapshot` (``scheduler.adapter.views``, re-exported here) is plain data (the raw
API objects the informers hold) with the derived core views computed lazily and cached.

An engine hands out the current snapshot and a :class:`DecisionHub` for WatchDecisions:

- :class:`StaticEngine` — a fixed snapshot (tests, offline serving, benchmarks).
- :class:`ControllerEngine` — the running controller's informer caches: a new snapshot is
  made only after a watch event changed something, and the hub is registered once in
  ``Controller.observers`` (subscribers come and go inside the hub, so the controller's list
  never changes while it iterates it).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.kinds.registry import BY_FRAMEWORK, with_kind
from scheduler.adapter.views import EngineSnapshot, holds_reservation
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy

__all__ = ["ControllerEngine", "DecisionHub", "Engine", "EngineSnapshot", "StaticEngine", "Subscription",
           "holds_reservation"]

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Observer = Callable[[str, Obj, Mapping[str, Any]], None]


class RunningController(Protocol):
    """What :class:`ControllerEngine` reads of ``scheduler.kube.controller.Controller`` (a
    protocol, so this module does not import the controller)."""

    settings: Any  # scheduler.kube.settings.ControllerSettings: .solver, .time_budget_s, .config
    cache: Any  # scheduler.kube.cache.ClusterCache: .all(), .jobs, .<resource>.items()
    observers: list[Observer]


# ---------------------------------------------------------------------------- decisions


@dataclass
class Subscription:
    """One WatchDecisions stream: a bounded queue; overflow drops and is counted."""

    namespace: str
    kinds: frozenset[str]
    maxsize: int = 1024
    ident: int = 0
    queue: queue.Queue[tuple[str, Obj, Mapping[str, Any], float, int] | None] = field(init=False)
    dropped: int = 0
    closed: bool = False

    def __post_init__(self) -> None:
        self.queue = queue.Queue(self.maxsize)

    def wants(self, kind: str, workload: Mapping[str, Any]) -> bool:
        if self.kinds and kind not in self.kinds:
            return False
        return not self.namespace or (workload.get("metadata") or {}).get("namespace") == self.namespace

    def offer(self, kind: str, workload: Obj, detail: Mapping[str, Any], at: float) -> None:
        try:
            self.queue.put_nowait((kind, workload, detail, at, self.dropped))
            self.dropped = 0
        except queue.Full:
            self.dropped += 1

    def get(self, timeout: float) -> tuple[str, Obj, Mapping[str, Any], float, int] | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None


class DecisionHub:
    """Fans the controller's decisions out to the open WatchDecisions streams. ``publish`` has
    the ``Controller.observers`` signature and never blocks (slow readers lose decisions,
    counted in ``Decision.dropped_before``)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._subs: dict[int, Subscription] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._clock = clock
        self.closed = False

    def publish(self, kind: str, workload: Obj, detail: Mapping[str, Any]) -> None:
        at = self._clock()
        with self._lock:
            subs = list(self._subs.values())
        for sub in subs:
            if sub.wants(kind, workload):
                sub.offer(kind, workload, detail, at)

    __call__ = publish

    def subscribe(self, namespace: str = "", kinds: Iterable[str] = (), maxsize: int = 1024) -> Subscription:
        sub = Subscription(namespace, frozenset(kinds), maxsize)
        with self._lock:
            sub.ident = next(self._ids)
            self._subs[sub.ident] = sub
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Idempotent (called from the stream's done callback and from its generator)."""
        with self._lock:
            self._subs.pop(sub.ident, None)
        if not sub.closed:
            sub.closed = True
            try:
                sub.queue.put_nowait(None)  # wake a reader blocked in get()
            except queue.Full:
                pass

    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._subs)

    def close(self) -> None:
        """Server stopping: end every stream."""
        self.closed = True
        with self._lock:
            subs = list(self._subs.values())
        for sub in subs:
            self.unsubscribe(sub)


# ---------------------------------------------------------------------------- engines


class Engine:
    """Interface the servicer uses. ``snapshot()`` returns None when there is no live data
    (a server started without a cluster: only offline requests can be answered)."""

    hub: DecisionHub
    solver: str = "auto"
    time_budget_s: float = 0.1
    config: KueueConfig = KUEUE_DEFAULTS  # the admin's Kueue Configuration, for Explain's what-if cycle

    def snapshot(self) -> EngineSnapshot | None:
        raise NotImplementedError

    def close(self) -> None:
        self.hub.close()


class StaticEngine(Engine):
    def __init__(self, snapshot: EngineSnapshot | None) -> None:
        self._snapshot = snapshot
        self.hub = DecisionHub()

    def snapshot(self) -> EngineSnapshot | None:
        return self._snapshot

    def replace(self, snapshot: EngineSnapshot | None) -> None:
        self._snapshot = snapshot


class ControllerEngine(Engine):
    """The controller's caches as snapshots; rebuilt lazily after any watch event."""

    def __init__(self, controller: RunningController, health_policy: HealthPolicy = DEFAULT_POLICY) -> None:
        self.controller = controller
        self.solver: str = controller.settings.solver
        self.time_budget_s: float = controller.settings.time_budget_s
        self.config: KueueConfig = controller.settings.config
        self.cache = controller.cache
        self.health_policy = health_policy
        self.hub = DecisionHub()
        self._generation = 0
        self._lock = threading.Lock()
        self._snapshot: EngineSnapshot | None = None
        self.caches = SnapshotCaches()  # the conversions each rebuilt snapshot reuses
        for informer in self.cache.all():
            informer.add_handler(self._changed)
        controller.observers.append(self.hub.publish)

    def _changed(self, _kind: str, _obj: Obj, _old: Obj | None) -> None:
        with self._lock:
            self._generation += 1

    def snapshot(self) -> EngineSnapshot | None:
        with self._lock:
            generation = self._generation
            current = self._snapshot
        if current is not None and current.generation == generation:
            return current
        cache = self.cache
        jobs = [with_kind(BY_FRAMEWORK[framework], job) if framework in BY_FRAMEWORK else job
                for framework, informer in cache.jobs.items() for job in informer.items()]
        snap = EngineSnapshot(nodes=cache.nodes.items(), pods=cache.pods.items(), flavors=cache.flavors.items(),
                              topologies=cache.topologies.items(), workloads=cache.workloads.items(), jobs=jobs,
                              cluster_queues=cache.cluster_queues.items(), local_queues=cache.local_queues.items(),
                              cohorts=cache.cohorts.items(), namespaces=cache.namespaces.items(),
                              workload_priority_classes=cache.workload_priority_classes.items(),
                              priority_classes=cache.priority_classes.items(),
                              health_policy=self.health_policy, source="live snapshot", generation=generation,
                              caches=self.caches)
        with self._lock:
            if self._snapshot is None or self._snapshot.generation <= generation:
                self._snapshot = snap
        return snap

    def close(self) -> None:
        super().close()
        try:
            self.controller.observers.remove(self.hub.publish)
        except ValueError:
            pass
