"""``EngineSnapshot``: the raw objects of one moment with their core views computed lazily.

What the gRPC servicer and ``explain`` read, whoever filled it (the controller's informer
caches, one list call per resource, a file). The core views are cached: NodeInfo/PodInfo,
one TopologyTree per TAS flavor (:func:`scheduler.adapter.cluster.flavor_trees`, the
controller's own builder, admitted usage subtracted) and an all-nodes tree per level tuple.
Trees are never modified after they are built (placement dry-runs copy the free matrix), so
concurrent RPCs share them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from scheduler.adapter.backlog import Backlog, backlog
from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.cluster import admitted_placements, core_nodes, flavor_trees
from scheduler.adapter.objects import ClusterObjects, Obj, holds_reservation
from scheduler.adapter.pod_ownership import usage_pods
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy
from scheduler.core.nodes import NodeInfo, PodInfo
from scheduler.core.topology import DEFAULT_TOPOLOGY_NAME, TopologyTree, default_levels_for

__all__ = ["EngineSnapshot", "holds_reservation"]


class EngineSnapshot:
    """Raw objects in, cached core views out. Immutable after construction."""

    def __init__(self, *, nodes: Sequence[Obj], pods: Sequence[Obj] = (), flavors: Sequence[Obj] = (),
                 topologies: Sequence[Obj] = (), workloads: Sequence[Obj] = (), jobs: Sequence[Obj] = (),
                 cluster_queues: Sequence[Obj] = (), local_queues: Sequence[Obj] = (), cohorts: Sequence[Obj] = (),
                 namespaces: Sequence[Obj] = (), workload_priority_classes: Sequence[Obj] = (),
                 priority_classes: Sequence[Obj] = (), health_policy: HealthPolicy = DEFAULT_POLICY,
                 source: str = "live snapshot", generation: int = 0, caches: SnapshotCaches | None = None) -> None:
        """``caches``: the conversions of the one who builds such snapshots again and again (the
        gRPC engine); none: converted once."""
        self.objects = ClusterObjects(
            nodes=tuple(nodes), pods=tuple(pods), workloads=tuple(workloads), cluster_queues=tuple(cluster_queues),
            cohorts=tuple(cohorts), local_queues=tuple(local_queues), flavors=tuple(flavors),
            topologies=tuple(topologies), namespaces=tuple(namespaces),
            workload_priority_classes=tuple(workload_priority_classes), priority_classes=tuple(priority_classes))
        self.flavors_raw = {f["metadata"]["name"]: f for f in flavors}
        self.topologies_raw = {t["metadata"]["name"]: t for t in topologies}
        self.jobs_raw = list(jobs)
        self.health_policy = health_policy
        self.source = source
        self.generation = generation
        self.caches = caches if caches is not None else SnapshotCaches()
        self._lock = threading.Lock()
        self._nodes: list[NodeInfo] | None = None
        self._pods: list[PodInfo] | None = None
        self._flavor_trees: dict[str, TopologyTree] | None = None
        self._trees: dict[tuple[str, ...] | None, TopologyTree] = {}
        self._backlogs: dict[str, Backlog] = {}

    @property
    def nodes_raw(self) -> Sequence[Obj]:
        return self.objects.nodes

    @property
    def pods_raw(self) -> Sequence[Obj]:
        return self.objects.pods

    @property
    def workloads_raw(self) -> Sequence[Obj]:
        return self.objects.workloads

    # ------------------------------------------------------------------ core views
    @property
    def nodes(self) -> list[NodeInfo]:
        with self._lock:
            if self._nodes is None:
                self._nodes = core_nodes(self.objects.nodes, self.caches.nodes)
            return self._nodes

    @property
    def pods(self) -> list[PodInfo]:
        """Pods that are usage of their nodes: bound, not finished, and owned by no Workload
        holding a topology reservation (``adapter.pod_ownership``; those count by assignment)."""
        holding = self.holding()
        with self._lock:
            if self._pods is None:
                self._pods = usage_pods(self.objects.pods, holding, self.jobs_raw)
            return self._pods

    def holding(self) -> list[Obj]:
        return [w for w in self.objects.workloads if holds_reservation(w)]

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
                self._flavor_trees = flavor_trees(self.flavors_raw.values(), self.topologies_raw, nodes, pods,
                                                  self.holding(), self.health_policy, self.caches.trees,
                                                  self.caches.admitted)
            return self._flavor_trees.get(flavor)

    def tree(self, name: str | None = None, levels: Sequence[str] | None = None) -> TopologyTree:
        """All nodes (no flavor filter) with ``levels`` (default: HyperPod layers + hostname);
        the usage of every workload holding a reservation is subtracted whatever its flavor."""
        nodes, pods = self.nodes, self.pods
        key = (name or DEFAULT_TOPOLOGY_NAME, *levels) if levels else None
        with self._lock:
            tree = self._trees.get(key)
            if tree is None:
                tree = TopologyTree.build(name or DEFAULT_TOPOLOGY_NAME,
                                          tuple(levels) if levels else default_levels_for(nodes), nodes, pods,
                                          health_policy=self.health_policy, count_tas_pods=True)
                for wl in self.holding():
                    for placement, per_pod, _flavor in admitted_placements(wl):
                        tree.add_usage(placement, per_pod)
                self._trees[key] = tree
            return tree

    def backlog(self, flavor: str = "") -> Backlog:
        """The queued Workloads' demand (``adapter/backlog.py``), once per snapshot and flavor."""
        with self._lock:
            got = self._backlogs.get(flavor)
            if got is None:
                got = self._backlogs[flavor] = backlog(self.objects.workloads, self.objects.local_queues,
                                                       self.objects.cluster_queues, flavor)
            return got

    # ------------------------------------------------------------------ lookups
    def find_job(self, namespace: str, name: str) -> tuple[Obj | None, Obj | None]:
        """(job, workload) for a Job name, or (None, workload) for a Workload name."""
        job = next((j for j in self.jobs_raw if (j.get("metadata") or {}).get("namespace") == namespace
                    and j["metadata"].get("name") == name), None)
        workload = None
        uid = (job or {}).get("metadata", {}).get("uid")
        for wl in self.objects.workloads:
            meta = wl.get("metadata") or {}
            if meta.get("namespace") != namespace:
                continue
            owned = uid and any(ref.get("uid") == uid for ref in meta.get("ownerReferences") or ())
            if owned or (job is None and meta.get("name") == name):
                workload = wl
                break
        return job, workload
