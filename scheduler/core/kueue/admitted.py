"""A workload that holds a quota reservation, as the cycle sees it: its spec, its ClusterQueue,
the quota it takes per flavor-resource and, on TAS flavors, the topology it occupies.

Read from the API once by the adapter (``adapter/workloads.py``); the cycle charges it to the
quota tree and the topology trees, preemption weighs it as a victim (``core/preemption``),
node failures replace or evict it (``core/kueue/failures.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.core.kueue.quota import FlavorResource
from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import WorkloadSpec


@dataclass(frozen=True)
class TASUsage:
    """One admitted pod set's topology assignment on a TAS flavor."""

    flavor: str
    placement: PodSetPlacement
    per_pod: Mapping[str, int]  # per-pod requests WITHOUT pods: 1


@dataclass(frozen=True)
class AdmittedWorkload:
    """A workload holding a quota reservation (admitted, or being evicted)."""

    spec: WorkloadSpec
    cluster_queue: str
    usage: Mapping[FlavorResource, int]
    reserved_at: float = 0.0  # QuotaReserved lastTransitionTime
    priority: int | None = None  # resolved priority; None = resolve from classes
    evicted: bool = False  # Evicted=True already (its preemption is in progress)
    queued_at: float | None = None  # queue-order timestamp (for LowerOrNewerEqualPriority)
    tas: tuple[TASUsage, ...] = ()
    pods_ready: bool = True  # PodsReady=True (waitForPodsReady's blockAdmission looks at it)

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def uid(self) -> str:
        return self.spec.uid

    @property
    def timestamp(self) -> float:
        return self.spec.created_at if self.queued_at is None else self.queued_at


def charge_topology_usage(trees: Mapping[str, TopologyTree], admitted: Iterable[AdmittedWorkload],
                          overlapping: bool = False) -> None:
    """Take every reserved pod set's topology usage out of its flavor's tree. ``overlapping``
    (``TASHandleOverlappingFlavors``, beta on since Kueue v0.18; ``pkg/cache/scheduler/
    snapshot.go`` ``snapshotTopologyDomainUsages`` at v0.19.2): the usage of a flavor whose
    topology ends at the hostname is taken out of every such flavor's tree that holds the host,
    so a node two TAS flavors select is booked once for both; other flavors keep their own."""
    by_host = [t for t in trees.values() if t.hostname_lowest] if overlapping else []
    for workload in admitted:
        for usage in workload.tas:
            tree = trees.get(usage.flavor)
            if tree is None:
                continue
            targets = by_host if overlapping and tree.hostname_lowest else [tree]
            for target in targets:
                target.add_usage(usage.placement, usage.per_pod)  # hosts a tree lacks are skipped
