"""What the webhook knows about the cluster: Kueue objects and nodes, as plain dicts.

The server fills it from informers (``scheduler.k8s.informer``); unit tests fill it with
literals. ``lookup`` (optional) is a live GET used on a cache miss before denying, so a
LocalQueue created a moment before its first Job (``kubectl apply -f`` of both) is found;
``owners`` reads the owner an owner reference names (ownership is resolved, never assumed:
``scheduler/adapter/kinds/ownership.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.fit import EmptyTrees, empty_trees, nodes_of
from scheduler.adapter.kinds.ownership import OwnerLookup
from scheduler.adapter.objects import VersionMemo
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy
from scheduler.core.nodes import NodeInfo

Obj = dict[str, Any]
Lookup = Callable[[str, str, str | None], Obj | None]  # (kind, name, namespace) -> object or None


@dataclass
class ClusterView:
    local_queues: Mapping[str, Obj] = field(default_factory=dict)  # "ns/name"
    cluster_queues: Mapping[str, Obj] = field(default_factory=dict)
    flavors: Mapping[str, Obj] = field(default_factory=dict)
    topologies: Mapping[str, Obj] = field(default_factory=dict)
    priority_classes: Mapping[str, Obj] = field(default_factory=dict)  # WorkloadPriorityClasses
    cohorts: Mapping[str, Obj] = field(default_factory=dict)
    # What decides which priority classes a namespace may use (adapter/priority_policy.py).
    k8s_priority_classes: Mapping[str, Obj] = field(default_factory=dict)  # scheduling.k8s.io PriorityClasses
    namespaces: Mapping[str, Obj] = field(default_factory=dict)
    resource_quotas: Mapping[str, Obj] = field(default_factory=dict)  # "ns/name"
    nodes: Mapping[str, Obj] = field(default_factory=dict)
    lookup: Lookup | None = None
    # Owner references are resolved with it (the object under the reference's name, any uid):
    # a live GET in the server; None (unit tests without owners) resolves nothing.
    owners: OwnerLookup | None = None
    health_policy: HealthPolicy = DEFAULT_POLICY
    # Bumped by the owner whenever a node's labels, allocatable or health changed.
    nodes_version: int = 0
    _cache: dict[tuple[str, ...], tuple[int, EmptyTrees]] = field(default_factory=dict, repr=False)
    _node_memo: VersionMemo[NodeInfo] = field(default_factory=VersionMemo, repr=False)  # unchanged nodes reused
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _get(self, store: Mapping[str, Obj], kind: str, key: str, name: str, namespace: str | None,
             live: bool = True) -> Obj | None:
        obj = store.get(key)
        if obj is None and live and self.lookup is not None:
            obj = self.lookup(kind, name, namespace)
        return obj

    def local_queue(self, namespace: str, name: str, live: bool = True) -> Obj | None:
        """``live=False``: the cache only (defaulting looks up on every unlabelled Job: no extra GET)."""
        return self._get(self.local_queues, "LocalQueue", f"{namespace}/{name}", name, namespace, live)

    def cluster_queue(self, name: str) -> Obj | None:
        return self._get(self.cluster_queues, "ClusterQueue", name, name, None)

    def flavor(self, name: str) -> Obj | None:
        return self._get(self.flavors, "ResourceFlavor", name, name, None)

    def topology(self, name: str) -> Obj | None:
        return self._get(self.topologies, "Topology", name, name, None)

    def priority_class(self, name: str, live: bool = True) -> Obj | None:
        return self._get(self.priority_classes, "WorkloadPriorityClass", name, name, None, live)

    def pod_priority_class(self, name: str) -> Obj | None:
        """A PriorityClass (scheduling.k8s.io), as kube-apiserver's Priority plugin reads it."""
        return self._get(self.k8s_priority_classes, "PriorityClass", name, name, None)

    def namespace(self, name: str) -> Obj | None:
        return self._get(self.namespaces, "Namespace", name, name, None)

    def quotas(self, namespace: str) -> list[Obj]:
        """The namespace's ResourceQuotas (the watch cache; a denial is decided again on a fresh list)."""
        prefix = f"{namespace}/"
        return [q for key, q in self.resource_quotas.items() if key.startswith(prefix)]

    def empty_trees(self, topology: str, levels: tuple[str, ...], node_labels: Mapping[str, str]) -> EmptyTrees:
        """A TAS flavor's nodes as empty topology trees (``admission.fit``), rebuilt only after
        the node set changed (``nodes_version``)."""
        key = (topology, *levels, "\0", *(f"{k}={v}" for k, v in sorted(node_labels.items())))
        with self._lock:
            hit = self._cache.get(key)
            if hit and hit[0] == self.nodes_version:
                return hit[1]
            version = self.nodes_version
            nodes = nodes_of(dict(self.nodes), self._node_memo)
        trees = empty_trees(topology, levels, nodes, node_labels, self.health_policy)
        with self._lock:
            self._cache[key] = (version, trees)
        return trees
