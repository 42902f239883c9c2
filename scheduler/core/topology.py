"""The topology tree: levels, domains and per-leaf free capacity (Kueue TAS capacity model).

A domain is identified by its full value path (two racks called ``rack-1`` in different blocks
are different domains). Domains of each level are kept sorted by value path, so the children
of a domain are one contiguous index range of the level below and "value path ascending" is
just "index ascending". Free capacity is one integer matrix ``leaves x resources`` updated in
place by :meth:`TopologyTree.add_usage` / :meth:`add_pod` and friends; nothing is rebuilt per
decision.

Which nodes count (Kueue ``NodeMatchesFlavor`` + node cache): the node carries every flavor
nodeLabel with the same value, a label for every topology level, and ``node_health`` says
healthy (Ready, schedulable, HyperPod health). Other nodes are left out silently (counted in
:attr:`TopologyTree.build_exclusions` for explanations, never in Kueue's no-fit message).

Leaf capacity = sum of allocatable of the leaf's nodes - requests (+1 ``pods``) of bound,
non-terminal, non-TAS pods - admitted TAS usage (count x (per-pod requests + 1 ``pods``)).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from scheduler.core.health import DEFAULT_POLICY, HEALTHY, HealthPolicy, node_health
from scheduler.core.leaf_filters import BLOCKING_EFFECTS, LeafFilters, resource_counts
from scheduler.core.node_affinity import NodeAffinity
from scheduler.core.nodes import HOSTNAME_LABEL, NodeInfo, PodInfo, Taint, Toleration
from scheduler.core.resources import PODS, Resources, with_pod_slot

if TYPE_CHECKING:
    from scheduler.core.placement.types import PodSetPlacement

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

LAYER_LABEL = "topology.k8s.aws/network-node-layer-{}"
# An UltraServer (e.g. 18 or 9 instances of 4 GPUs sharing one NVLink domain).
ULTRASERVER_LABEL = "topology.k8s.aws/ultraserver-id"
# An admin marks a node (or every node of a domain) for maintenance: nothing new is placed
# there, workloads already running finish (toposched's domain drain; any value but "false").
DRAIN_LABEL = "toposched.io/drain"
DRAINED_REASON = "drained for maintenance (toposched.io/drain)"
DEFAULT_HYPERPOD_LEVELS: tuple[str, ...] = (
    LAYER_LABEL.format(1),
    LAYER_LABEL.format(2),
    LAYER_LABEL.format(3),
    HOSTNAME_LABEL,
)
DEFAULT_TOPOLOGY_NAME = "default"



def default_levels_for(nodes: Iterable[NodeInfo]) -> tuple[str, ...]:
    """HyperPod levels discovered from the labels: layers 1-3, then ``network-node-layer-4``
    when every node that carries layer-3 also carries layer-4 (newer instance families report
    4 layers), then ``ultraserver-id`` when every such node carries it (UltraServers: the
    NVLink domain under the network layers), then hostname."""
    layer3, layer4 = LAYER_LABEL.format(3), LAYER_LABEL.format(4)
    with3 = [n for n in nodes if layer3 in n.labels]
    levels = DEFAULT_HYPERPOD_LEVELS[:3]
    for extra in (layer4, ULTRASERVER_LABEL):
        if with3 and all(extra in n.labels for n in with3):
            levels += (extra,)
    return levels + (HOSTNAME_LABEL,)


def is_drained(node: NodeInfo) -> bool:
    """The node carries :data:`DRAIN_LABEL` (any value but ``false``)."""
    value = node.labels.get(DRAIN_LABEL)
    return value is not None and value.lower() != "false"


@dataclass(frozen=True)
class LeafFit:
    """How many pods of one shape fit in each leaf, plus Kueue's exclusion statistics."""

    counts: IntArray  # per leaf; 0 for excluded leaves
    total_leaves: int
    exclusions: Mapping[str, int]  # reason text (e.g. 'resource "cpu"') -> leaves
    # Preferred node affinity score per leaf (sum of the matching terms' weights; 0 on leaves
    # the filters excluded); None when the pod set has no preferred node affinity.
    affinity_scores: IntArray | None = None

    def stats_suffix(self) -> str:
        """``. Total nodes: T; excluded: a: n, b: m`` or "" when nothing was excluded."""
        if not self.exclusions:
            return ""
        reasons = ", ".join(sorted(f"{k}: {v}" for k, v in self.exclusions.items()))
        return f". Total nodes: {self.total_leaves}; excluded: {reasons}"


def _nodes_by_leaf(
    levels: Sequence[str], nodes: Iterable[NodeInfo], flavor: Mapping[str, str], health_policy: HealthPolicy | None,
    impaired: dict[tuple[str, ...], int] | None = None,
) -> tuple[dict[tuple[str, ...], list[NodeInfo]], dict[str, int]]:
    """The nodes that count, by leaf value path, and how many were left out and why (flavor
    nodeLabels, a missing level label, unhealthy, drained). ``impaired`` collects the value
    paths of the unhealthy and drained nodes (their domains are degraded)."""
    excluded: dict[str, int] = {}
    by_path: dict[tuple[str, ...], list[NodeInfo]] = {}
    for node in nodes:
        if any(node.labels.get(k) != v for k, v in flavor.items()):
            excluded["flavor nodeLabels"] = excluded.get("flavor nodeLabels", 0) + 1
            continue
        missing = [lvl for lvl in levels if lvl not in node.labels]
        if missing:
            key = f"missing label {missing[0]}"
            excluded[key] = excluded.get(key, 0) + 1
            continue
        path = tuple(node.labels[lvl] for lvl in levels)
        health = node_health(node, health_policy) if health_policy is not None else HEALTHY
        drained = health_policy is not None and is_drained(node)
        if not health.healthy or drained:
            key = f"unhealthy: {health.reason}" if not health.healthy else DRAINED_REASON
            excluded[key] = excluded.get(key, 0) + 1
            if impaired is not None:
                impaired[path] = impaired.get(path, 0) + 1
            continue
        by_path.setdefault(path, []).append(node)
    return by_path, excluded


def _vector(per_pod: Resources, index: Mapping[str, int], width: int) -> IntArray:
    vec = np.zeros(width, dtype=np.int64)
    for name, amount in per_pod.items():
        col = index.get(name)
        if col is not None:
            vec[col] += amount
    return vec


def _pod_key(pod: PodInfo) -> str:
    return pod.uid or f"{pod.namespace}/{pod.name}"


class TopologyTree:
    """See the module docstring. Build with :meth:`build`; copy with :meth:`clone`."""

    name: str
    levels: tuple[str, ...]

    def __init__(self) -> None:  # use build(); fields are filled there or by clone()
        self.name = DEFAULT_TOPOLOGY_NAME
        self.levels = ()
        self.hostname_lowest = False
        self.paths: list[list[tuple[str, ...]]] = []
        self.parent: list[IntArray] = []
        self.child_start: list[IntArray] = []
        self.child_end: list[IntArray] = []
        self.leaf_nodes: list[tuple[str, ...]] = []
        self._leaf_by_path: dict[tuple[str, ...], int] = {}
        self._leaf_by_host: dict[str, int] = {}
        self._node_leaf: dict[str, int] = {}
        self.resources: list[str] = []
        self._res_index: dict[str, int] = {}
        self.allocatable: IntArray = np.zeros((0, 0), dtype=np.int64)
        self.free: IntArray = np.zeros((0, 0), dtype=np.int64)
        self._pods: dict[str, tuple[int, IntArray]] = {}
        self.filters: LeafFilters | None = None  # Kueue's node filters (hostname-lowest trees only)
        self.build_exclusions: dict[str, int] = {}
        # Value paths of the nodes left out as unhealthy or drained -> how many (their
        # domains are degraded: placement.fragmentation ranks them last when asked to).
        self.impaired: dict[tuple[str, ...], int] = {}

    # ------------------------------------------------------------------ building

    @classmethod
    def build(
        cls,
        name: str,
        levels: Sequence[str],
        nodes: Iterable[NodeInfo],
        pods: Iterable[PodInfo] = (),
        *,
        flavor_node_labels: Mapping[str, str] | None = None,
        health_policy: HealthPolicy | None = DEFAULT_POLICY,
        count_tas_pods: bool = False,
    ) -> TopologyTree:
        """``health_policy=None`` keeps unhealthy nodes too (the what-if "once every node has
        recovered" the webhook's can-this-ever-fit question needs). ``count_tas_pods``: count
        the pods of topology-admitted workloads like any bound pod, for a caller that has the
        pods but not the Workloads whose assignments normally account them (``place --pods``)."""
        if not levels:
            raise ValueError("a topology needs at least one level")
        tree = cls()
        tree.name = name
        tree.levels = tuple(levels)
        tree.hostname_lowest = tree.levels[-1] == HOSTNAME_LABEL
        by_path, tree.build_exclusions = _nodes_by_leaf(
            tree.levels, nodes, flavor_node_labels or {}, health_policy, tree.impaired
        )
        leaf_paths = sorted(by_path)
        tree._index_domains(leaf_paths)
        tree._fill_leaves(leaf_paths, by_path)
        for pod in pods:
            tree.add_pod(pod, count_tas=count_tas_pods)
        return tree

    def _index_domains(self, leaf_paths: list[tuple[str, ...]]) -> None:
        """Domains per level sorted by value path, parent pointers and child ranges."""
        n_levels = len(self.levels)
        # Domains per level, sorted by value path; parent pointers; child ranges.
        self.paths = [[] for _ in range(n_levels)]
        self.paths[-1] = leaf_paths
        for lvl in range(n_levels - 2, -1, -1):
            seen: list[tuple[str, ...]] = []
            for child in self.paths[lvl + 1]:
                prefix = child[: lvl + 1]
                if not seen or seen[-1] != prefix:
                    seen.append(prefix)
            self.paths[lvl] = seen
        self.parent = []
        for lvl in range(n_levels):
            if lvl == 0:
                self.parent.append(np.zeros(len(self.paths[0]), dtype=np.int64))
                continue
            index = {p: i for i, p in enumerate(self.paths[lvl - 1])}
            self.parent.append(np.array([index[p[:lvl]] for p in self.paths[lvl]], dtype=np.int64))
        self.child_start, self.child_end = [], []
        for lvl in range(n_levels - 1):
            n_parent = len(self.paths[lvl])
            counts = np.bincount(self.parent[lvl + 1], minlength=n_parent).astype(np.int64)
            end = np.cumsum(counts).astype(np.int64)
            self.child_end.append(end)
            self.child_start.append((end - counts).astype(np.int64))

    def _fill_leaves(
        self, leaf_paths: list[tuple[str, ...]], by_path: Mapping[tuple[str, ...], list[NodeInfo]]
    ) -> None:
        """Per leaf: its nodes, allocatable (= free before any pod), and on hostname-lowest
        trees the node's taints and labels (for node selectors and tolerations)."""
        resources = {PODS}
        for group in by_path.values():
            for node in group:
                resources.update(node.allocatable)
        self.resources = sorted(resources)
        self._res_index = {r: i for i, r in enumerate(self.resources)}
        width = len(self.resources)
        alloc = np.zeros((len(leaf_paths), width), dtype=np.int64)
        leaf_taints: list[tuple[Taint, ...]] = []
        leaf_labels: list[Mapping[str, str]] = []
        for i, path in enumerate(leaf_paths):
            group = sorted(by_path[path], key=lambda n: n.name)
            self.leaf_nodes.append(tuple(n.name for n in group))
            self._leaf_by_path[path] = i
            for node in group:
                self._node_leaf[node.name] = i
                alloc[i] += _vector(node.allocatable, self._res_index, width)
            if self.hostname_lowest:
                self._leaf_by_host[path[-1]] = i
                leaf_taints.append(tuple(t for n in group for t in n.taints if t.effect in BLOCKING_EFFECTS))
                labels: dict[str, str] = {}
                for node in group:
                    labels.update(node.labels)
                leaf_labels.append(labels)
        self.allocatable = alloc
        self.free = alloc.copy()
        if self.hostname_lowest:
            self.filters = LeafFilters(leaf_taints, leaf_labels, [nodes[0] for nodes in self.leaf_nodes])

    def clone(self) -> TopologyTree:
        """Independent copy of the mutable state (free capacity, tracked pods); the immutable
        structure (domains, parents, labels) is shared."""
        other = TopologyTree.__new__(TopologyTree)
        other.__dict__.update(self.__dict__)
        other.free = self.free.copy()
        other._pods = dict(self._pods)
        return other

    # ------------------------------------------------------------------ queries

    def has_level(self, level: str) -> bool:
        return level in self.levels

    def level_index(self, level: str) -> int:
        return self.levels.index(level)

    @property
    def n_leaves(self) -> int:
        return len(self.paths[-1]) if self.paths else 0

    def domain_count(self, level: int) -> int:
        return len(self.paths[level])

    def leaf_values(self, leaf: int) -> tuple[str, ...]:
        """Values stored in a topology assignment for this leaf (hostname only when hostname
        is the lowest level, the full path otherwise)."""
        path = self.paths[-1][leaf]
        return (path[-1],) if self.hostname_lowest else path

    def assignment_levels(self) -> tuple[str, ...]:
        return (HOSTNAME_LABEL,) if self.hostname_lowest else self.levels

    def leaf_for_values(self, levels: Sequence[str], values: Sequence[str]) -> int | None:
        """The leaf an assignment domain refers to, or None when it no longer exists."""
        if tuple(levels) == (HOSTNAME_LABEL,) and self.hostname_lowest:
            return self._leaf_by_host.get(values[0])
        if tuple(levels) == self.levels:
            return self._leaf_by_path.get(tuple(values))
        return None

    def leaf_of_node(self, node_name: str) -> int | None:
        return self._node_leaf.get(node_name)

    def ancestor(self, leaf: int, level: int) -> int:
        """Index of the domain at ``level`` that contains ``leaf``."""
        idx = leaf
        for lvl in range(len(self.levels) - 1, level, -1):
            idx = int(self.parent[lvl][idx])
        return idx

    def ancestors_array(self, level: int) -> IntArray:
        """For every leaf, the index of its domain at ``level`` (vectorised :meth:`ancestor`)."""
        idx = np.arange(self.n_leaves, dtype=np.int64)
        for lvl in range(len(self.levels) - 1, level, -1):
            idx = self.parent[lvl][idx]
        return idx

    def free_of_leaf(self, leaf: int) -> dict[str, int]:
        return {r: int(self.free[leaf, i]) for i, r in enumerate(self.resources)}

    def request_vector(self, per_pod: Resources) -> IntArray:
        return _vector(per_pod, self._res_index, len(self.resources))

    # ------------------------------------------------------------------ fitting

    def leaf_fit(
        self,
        per_pod: Resources,
        node_selector: Mapping[str, str] | None = None,
        tolerations: Sequence[Toleration] = (),
        free: IntArray | None = None,
        affinity: NodeAffinity | None = None,
    ) -> LeafFit:
        """Pods of ``per_pod`` (which must already include ``pods: 1``) that fit per leaf.

        When hostname is the lowest level, leaves with an untolerated NoSchedule/NoExecute
        taint, a node selector mismatch or a required node affinity mismatch count 0, in that
        order, and preferred node affinity is scored (Kueue filters only in that case)."""
        matrix = self.free if free is None else free
        n = self.n_leaves
        exclusions: dict[str, int] = {}
        feasible = np.ones(n, dtype=np.bool_)
        scores: IntArray | None = None
        if self.filters is not None:
            feasible, scores = self.filters.apply(feasible, exclusions, node_selector, tolerations, affinity)
        requested = sorted((r, a) for r, a in per_pod.items() if a > 0)
        if not requested:
            counts = np.where(feasible, 2**31 - 1, 0).astype(np.int64)
            return LeafFit(counts, n, exclusions, scores)
        return LeafFit(resource_counts(matrix, self._res_index, requested, feasible, exclusions), n, exclusions,
                       scores)

    def subtree_sums(self, leaf_counts: IntArray) -> list[IntArray]:
        """Per level, the sum of ``leaf_counts`` over each domain's leaves."""
        out: list[IntArray] = [np.zeros(0, dtype=np.int64)] * len(self.levels)
        out[-1] = leaf_counts
        for lvl in range(len(self.levels) - 1, 0, -1):
            out[lvl - 1] = np.bincount(
                self.parent[lvl], weights=out[lvl], minlength=len(self.paths[lvl - 1])
            ).astype(np.int64)
        return out

    # ------------------------------------------------------------------ usage

    def _apply(self, pod_set: PodSetPlacement, per_pod: Resources, sign: int) -> None:
        vec = self.request_vector(with_pod_slot(per_pod))
        for dom in pod_set.domains:
            leaf = self.leaf_for_values(pod_set.levels, dom.values)
            if leaf is not None:  # usage on leaves that no longer exist is skipped (Kueue)
                self.free[leaf] -= sign * dom.count * vec

    def add_usage(self, pod_set: PodSetPlacement, per_pod: Resources) -> None:
        """Subtract an admitted pod set's assignment. ``per_pod`` is the pod set's per-pod
        requests WITHOUT ``pods: 1`` (added here, as for :class:`PodSetSpec.requests`)."""
        self._apply(pod_set, per_pod, 1)

    def remove_usage(self, pod_set: PodSetPlacement, per_pod: Resources) -> None:
        self._apply(pod_set, per_pod, -1)

    def add_pod(self, pod: PodInfo, count_tas: bool = False) -> None:
        """Account a bound, non-terminal, non-TAS pod (watch event: added/updated). TAS pods
        (unless ``count_tas``: their Workloads are not known) and unbound or finished pods are
        ignored (an update that finishes a pod releases it)."""
        key = _pod_key(pod)
        if key in self._pods:
            self.remove_pod(pod)
        if (pod.is_tas and not count_tas) or pod.terminal or not pod.node_name:
            return
        leaf = self._node_leaf.get(pod.node_name)
        if leaf is None:
            return
        vec = self.request_vector(with_pod_slot(pod.requests))
        self.free[leaf] -= vec
        self._pods[key] = (leaf, vec)

    def remove_pod(self, pod: PodInfo) -> None:
        entry = self._pods.pop(_pod_key(pod), None)
        if entry is not None:
            leaf, vec = entry
            self.free[leaf] += vec
