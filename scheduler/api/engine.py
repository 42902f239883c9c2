"""What the gRPC servicer reads: one engine snapshot, whichever door asks.

:class:`EngineSnapshot` is plain data (the raw API objects the informers hold) with the derived
core views computed lazily and cached: NodeInfo/PodInfo, one TopologyTree per TAS flavor
(``scheduler.kube.snapshot.flavor_trees``, the controller's own builder, admitted usage
subtracted), and an all-nodes tree per level tuple. Trees are never modified after they are
built (placement dry-runs copy the free matrix), so concurrent RPCs share them.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.core.health import DEFAULT_POLICY, HealthPolicy
from scheduler.core.nodes import NodeInfo, PodInfo, node_from_k8s, pod_from_k8s
from scheduler.core.topology import DEFAULT_TOPOLOGY_NAME, TopologyTree, default_levels_for

if TYPE_CHECKING:
    from scheduler.kube.controller import Controller

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def _conditions_true(obj: Mapping[str, Any], type_: str) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return bool(cond.get("status") == "True")
    return False


def holds_reservation(workload: Mapping[str, Any]) -> bool:
    """Same rule as the controller: QuotaReserved with an admission, not finished."""
    return (_conditions_true(workload, "QuotaReserved") and bool((workload.get("status") or {}).get("admission"))
            and not _conditions_true(workload, "Finished"))


class EngineSnapshot:
    """Raw objects in, cached core views out. Immutable after construction."""

    def __init__(self, *, nodes: Sequence[Obj], pods: Sequence[Obj] = (), flavors: Sequence[Obj] = (),
                 topologies: Sequence[Obj] = (), workloads: Sequence[Obj] = (), jobs: Sequence[Obj] = (),
                 cluster_queues: Sequence[Obj] = (), local_queues: Sequence[Obj] = (), cohorts: Sequence[Obj] = (),
                 namespaces: Sequence[Obj] = (), workload_priority_classes: Sequence[Obj] = (),
                 priority_classes: Sequence[Obj] = (), health_policy: HealthPolicy = DEFAULT_POLICY,
                 source: str = "live snapshot", generation: int = 0) -> None:
        self.nodes_raw = list(nodes)
        self.pods_raw = list(pods)
        self.flavors_raw = {f["metadata"]["name"]: f for f in flavors}
        self.topologies_raw = {t["metadata"]["name"]: t for t in topologies}
        self.workloads_raw = list(workloads)
        self.jobs_raw = list(jobs)
        self.queue_objects: dict[str, list[Obj]] = {
            "cluster_queues": list(cluster_queues), "local_queues": list(local_queues), "cohorts": list(cohorts),
            "namespaces": list(namespaces), "workload_priority_classes": list(workload_priority_classes),
            "priority_classes": list(priority_classes)}
        self.health_policy = health_policy
        self.source = source
        self.generation = generation
        self._lock = threading.Lock()
        self._nodes: list[NodeInfo] | None = None
        self._pods: list[PodInfo] | None = None
        self._flavor_trees: dict[str, TopologyTree] | None = None
        self._trees: dict[tuple[str, ...] | None, TopologyTree] = {}

    # ------------------------------------------------------------------ core views
    @property
    def nodes(self) -> list[NodeInfo]:
        with self._lock:
            if self._nodes is None:
                self._nodes = [node_from_k8s(n) for n in self.nodes_raw]
            return self._nodes

    @property
    def pods(self) -> list[PodInfo]:
        """Pods holding capacity: bound and not finished."""
        with self._lock:
            if self._pods is None:
                pods = (pod_from_k8s(p) for p in self.pods_raw)
                self._pods = [p for p in pods if p.node_name and not p.terminal]
            return self._pods

    def holding(self) -> list[Obj]:
        return [w for w in self.workloads_raw if holds_reservation(w)]

    def tas_flavors(self) -> list[str]:
        """ResourceFlavors with a topologyName whose Topology exists (the ones with a tree)."""
        out = []
        for name, flavor in sorted(self.flavors_raw.items()):
            topo = (flavor.get("spec") or {}).get("topologyName")
            if topo and topo in self.topologies_raw:
                out.append(name)
        return out

    def flavor_tree(self, flavor: str) -> TopologyTree | None:
        """The controller's tree for a TAS flavor (admitted usage subtracted), or None."""
        nodes, pods = self.nodes, self.pods
        with self._lock:
            if self._flavor_trees is None:
                from scheduler.kube.snapshot import flavor_trees

                self._flavor_trees = flavor_trees(self.flavors_raw.values(), self.topologies_raw, nodes, pods,
                                                  self.holding(), self.health_policy)
            return self._flavor_trees.get(flavor)

    def tree(self, name: str | None = None, levels: Sequence[str] | None = None) -> TopologyTree:
        """All nodes (no flavor filter) with ``levels`` (default: HyperPod layers + hostname);
        the usage of every workload holding a reservation is subtracted whatever its flavor."""
        nodes, pods = self.nodes, self.pods
        key = (name or DEFAULT_TOPOLOGY_NAME, *levels) if levels else None
        with self._lock:
            tree = self._trees.get(key)
            if tree is None:
                from scheduler.kube.snapshot import admitted_placements

                tree = TopologyTree.build(name or DEFAULT_TOPOLOGY_NAME,
                                          tuple(levels) if levels else default_levels_for(nodes), nodes, pods,
                                          health_policy=self.health_policy)
                for wl in self.holding():
                    for placement, per_pod, _flavor in admitted_placements(wl):
                        tree.add_usage(placement, per_pod)
                self._trees[key] = tree
            return tree

    def as_cache(self) -> Any:
        """The snapshot shaped like ``ClusterCache`` (``.items()`` per resource), for
        ``scheduler.kube.snapshot.build_snapshot``."""
        from types import SimpleNamespace

        def items(objs: Iterable[Obj]) -> Any:
            frozen = list(objs)
            return SimpleNamespace(items=lambda: list(frozen))

        return SimpleNamespace(nodes=items(self.nodes_raw), pods=items(self.pods_raw),
                               flavors=items(self.flavors_raw.values()), topologies=items(self.topologies_raw.values()),
                               workloads=items(self.workloads_raw),
                               **{k: items(v) for k, v in self.queue_objects.items()})

    # ------------------------------------------------------------------ lookups
    def find_job(self, namespace: str, name: str) -> tuple[Obj | None, Obj | None]:
        """(job, workload) for a Job name, or (None, workload) for a Workload name."""
        job = next((j for j in self.jobs_raw if (j.get("metadata") or {}).get("namespace") == namespace
                    and j["metadata"].get("name") == name), None)
        workload = None
        uid = (job or {}).get("metadata", {}).get("uid")
        for wl in self.workloads_raw:
            meta = wl.get("metadata") or {}
            if meta.get("namespace") != namespace:
                continue
            owned = uid and any(ref.get("uid") == uid for ref in meta.get("ownerReferences") or ())
            if owned or (job is None and meta.get("name") == name):
                workload = wl
                break
        return job, workload


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

    def __init__(self, controller: Controller, health_policy: HealthPolicy = DEFAULT_POLICY) -> None:
        self.controller = controller
        self.solver = controller.solver
        self.time_budget_s = controller.time_budget_s
        self.cache = controller.cache
        self.health_policy = health_policy
        self.hub = DecisionHub()
        self._generation = 0
        self._lock = threading.Lock()
        self._snapshot: EngineSnapshot | None = None
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
        jobs = [job for informer in cache.jobs.values() for job in informer.items()]
        snap = EngineSnapshot(nodes=cache.nodes.items(), pods=cache.pods.items(), flavors=cache.flavors.items(),
                              topologies=cache.topologies.items(), workloads=cache.workloads.items(), jobs=jobs,
                              cluster_queues=cache.cluster_queues.items(), local_queues=cache.local_queues.items(),
                              cohorts=cache.cohorts.items(), namespaces=cache.namespaces.items(),
                              workload_priority_classes=cache.workload_priority_classes.items(),
                              priority_classes=cache.priority_classes.items(),
                              health_policy=self.health_policy, source="live snapshot", generation=generation)
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
