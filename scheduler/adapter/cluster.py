"""Nodes, pods and topology trees: the cluster's capacity as the core sees it.

One :class:`~scheduler.core.topology.TopologyTree` per TAS ResourceFlavor (a flavor with a
``topologyName`` whose Topology exists and has levels), built from the flavor's nodes, the
capacity-holding pods subtracted, then the topology usage of every workload holding a
reservation (its ``AdmittedWorkload.tas``, decoded once by :mod:`scheduler.adapter.workloads`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.objects import Obj, VersionMemo, name_of
from scheduler.adapter.queues import topology_levels
from scheduler.adapter.workloads import admitted_workloads, reserved_pod_sets
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy
from scheduler.core.kueue.admitted import AdmittedWorkload, charge_topology_usage
from scheduler.core.nodes import NodeInfo, PodInfo, node_from_k8s, pod_from_k8s
from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.topology import TopologyTree


@dataclass(frozen=True)
class TasFlavor:
    """What a TAS ResourceFlavor's tree is built from."""

    flavor: str
    topology: str
    levels: tuple[str, ...]
    node_labels: Mapping[str, str]


def core_nodes(nodes: Iterable[Obj], memo: VersionMemo[NodeInfo] | None = None) -> list[NodeInfo]:
    """The nodes as core values; with ``memo`` (a snapshot builder's: ``SnapshotCaches``), an
    unchanged node reuses its conversion."""
    return (memo if memo is not None else VersionMemo()).convert(nodes, node_from_k8s)


def core_pods(pods: Iterable[Obj], memo: VersionMemo[PodInfo] | None = None) -> list[PodInfo]:
    """Pods that hold capacity: bound, not finished. ``memo``: conversions reused while a pod
    is unchanged (every pod's requests parsed on every pass was a fifth of the controller's CPU
    in a burst of 1,800 pods, issue 34)."""
    converted = (memo if memo is not None else VersionMemo()).convert(pods, pod_from_k8s)
    return [pod for pod in converted if pod.node_name and not pod.terminal]


def admitted_placements(workload: Obj) -> list[tuple[PodSetPlacement, Mapping[str, int], str]]:
    """(placement, per-pod requests, flavor) for every pod set with a topology assignment; the
    flavor is the first of the pod set's flavors by name."""
    if not (workload.get("status") or {}).get("admission"):
        return []
    return [(ps.placement, ps.per_pod, ps.flavors[0] if ps.flavors else "") for ps in reserved_pod_sets(workload)]


def tas_flavors(flavors: Iterable[Obj], topologies: Mapping[str, Obj]) -> list[TasFlavor]:
    """The flavors that get a tree: a ``topologyName`` naming an existing Topology with levels."""
    out = []
    for flavor in flavors:
        spec = flavor.get("spec") or {}
        topology = spec.get("topologyName")
        if not topology or topology not in topologies:
            continue
        levels = topology_levels(topologies[topology])
        if levels:
            out.append(TasFlavor(name_of(flavor), str(topology), levels, dict(spec.get("nodeLabels") or {})))
    return out


class TreeMemo:
    """The last empty tree of each TAS flavor, reused (cloned) while its inputs are the very
    same objects: building a 10,000-node tree was most of a pass's snapshot (issue 18). The
    node values come from :func:`core_nodes` with the same builder's memo, so an unchanged node
    is the same object; a new pod or node list content builds afresh. The entry keeps its
    inputs alive, so the ids in its key cannot be reused by other objects."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[Any, ...], list[NodeInfo], list[PodInfo], TopologyTree]] = {}

    def tree(self, tas: TasFlavor, nodes: list[NodeInfo], pods: list[PodInfo], policy: HealthPolicy) -> TopologyTree:
        key = (tas.topology, tas.levels, tuple(sorted(tas.node_labels.items())), policy,
               tuple(map(id, nodes)), tuple(map(id, pods)))
        hit = self._entries.get(tas.flavor)
        if hit is None or hit[0] != key:
            # ``pods`` are the usage pods (adapter.pod_ownership.usage_pods): the workloads' own
            # pods are already left out by ownership, so every pod given counts, whatever it carries.
            tree = TopologyTree.build(tas.topology, tas.levels, nodes, pods, flavor_node_labels=tas.node_labels,
                                      health_policy=policy, count_tas_pods=True)
            hit = (key, nodes, pods, tree)
            self._entries[tas.flavor] = hit
        return hit[3].clone()


def empty_flavor_trees(flavors: Iterable[Obj], topologies: Mapping[str, Obj], nodes: list[NodeInfo],
                       pods: list[PodInfo], health_policy: HealthPolicy | None = None,
                       memo: TreeMemo | None = None) -> dict[str, TopologyTree]:
    """One tree per TAS flavor with the pods' usage, before any workload's reservation (a
    fresh copy: callers subtract reservations from it); ``pods``: the usage pods
    (``adapter.pod_ownership.usage_pods``, every one counted); ``memo``: the builder's trees."""
    memo = memo if memo is not None else TreeMemo()
    return {tas.flavor: memo.tree(tas, nodes, pods, health_policy or DEFAULT_POLICY)
            for tas in tas_flavors(flavors, topologies)}


def subtract_admitted(trees: Mapping[str, TopologyTree], admitted: Iterable[AdmittedWorkload],
                      overlapping: bool = False) -> None:
    """Take every reserved pod set's topology usage out of its flavor's tree (``overlapping``:
    TASHandleOverlappingFlavors, out of every hostname-level flavor tree holding the host:
    ``core.kueue.admitted.charge_topology_usage``)."""
    charge_topology_usage(trees, admitted, overlapping)


def flavor_trees(flavors: Iterable[Obj], topologies: Mapping[str, Obj], nodes: list[NodeInfo],
                 pods: list[PodInfo], holding: Iterable[Obj], health_policy: HealthPolicy | None = None,
                 memo: TreeMemo | None = None,
                 admitted_memo: VersionMemo[AdmittedWorkload] | None = None,
                 overlapping: bool = False) -> dict[str, TopologyTree]:
    """One tree per TAS flavor; the usage of every workload in ``holding`` (raw Workloads
    holding a reservation) subtracted (``overlapping``: :func:`subtract_admitted`). The memos:
    a snapshot builder's (``SnapshotCaches``)."""
    trees = empty_flavor_trees(flavors, topologies, nodes, pods, health_policy, memo)
    names = frozenset(trees)
    subtract_admitted(trees, admitted_workloads([wl for wl in holding if (wl.get("status") or {}).get("admission")],
                                                names, admitted_memo), overlapping)
    return trees
