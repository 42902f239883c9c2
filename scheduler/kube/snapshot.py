"""Cache -> core snapshot.

The immutable-snapshot / pure-cycle / writer split of Kueue: :func:`build_snapshot` copies the
informer caches into ``scheduler.adapter.objects.ClusterObjects`` and lets the adapter convert
them (``scheduler.adapter.snapshot.build_snapshot``), ``scheduler.core.cycle.run_cycle``
decides, and ``scheduler.kube.apply.apply_decisions`` writes the results through the writer.
Nothing here decides anything.
"""

from __future__ import annotations

import logging
from typing import Any

from scheduler.adapter import snapshot as adapter_snapshot
from scheduler.adapter.cluster import admitted_placements, core_nodes, core_pods, flavor_trees  # re-exported
from scheduler.adapter.objects import ClusterObjects
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.cycle import Snapshot
from scheduler.core.health import HealthPolicy
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.preemption_rules import ConfiguredPreemption
from scheduler.kube.informer import object_key
from scheduler.kube.workload_index import live

__all__ = ["admitted_placements", "build_snapshot", "cluster_objects", "core_nodes", "core_pods", "flavor_trees"]

log = logging.getLogger(__name__)
Obj = dict[str, Any]


# ---------------------------------------------------------------------- cache -> Snapshot


def cluster_objects(cache: Any, exclude: frozenset[str] = frozenset()) -> ClusterObjects:
    """What the informers hold right now (``ClusterCache``: ``.items()`` per resource), without
    the Workloads named in ``exclude`` (namespace/name: ones the adapter cannot read) and the
    Finished ones (they count nowhere in a cycle; by the end of Kueue's scale test they are
    nearly all of them)."""
    workloads = live(cache.workloads)
    if exclude:
        workloads = [w for w in workloads if object_key(w) not in exclude]
    return ClusterObjects(
        nodes=cache.nodes.items(), pods=cache.pods.items(), workloads=workloads,
        cluster_queues=cache.cluster_queues.items(), cohorts=cache.cohorts.items(),
        local_queues=cache.local_queues.items(), flavors=cache.flavors.items(), topologies=cache.topologies.items(),
        namespaces=cache.namespaces.items(), workload_priority_classes=cache.workload_priority_classes.items(),
        priority_classes=cache.priority_classes.items(),
        preemption_configs=_items(getattr(cache, "preemption_configs", None)),
        preemption_limits=_items(getattr(cache, "preemption_limits", None)))


def _items(informer: Any) -> list[Obj]:
    """An optional informer's objects (none when the cache has no such informer)."""
    return list(informer.items()) if informer is not None else []


def build_snapshot(cache: Any, now: Any, *, solver: str = "auto", time_budget_s: float = 0.1,
                   inadmissible: frozenset[str] = frozenset(), health_policy: HealthPolicy | None = None,
                   exclude: frozenset[str] = frozenset(), config: KueueConfig = KUEUE_DEFAULTS,
                   placement_options: PlacementOptions | None = None, domain_preemption: bool = True,
                   preemption_rules: ConfiguredPreemption | None = None) -> Snapshot:
    """The informer caches as one immutable core ``Snapshot`` (converted by ``scheduler.adapter``)."""
    return adapter_snapshot.build_snapshot(cluster_objects(cache, exclude), now, solver=solver,
                                           time_budget_s=time_budget_s, inadmissible=inadmissible,
                                           health_policy=health_policy, config=config,
                                           placement_options=placement_options,
                                           domain_preemption=domain_preemption, preemption_rules=preemption_rules)
