"""Cache -> core snapshot.

The immutable-snapshot / pure-cycle / writer split of Kueue: :func:`build_snapshot` copies the
informer caches into ``scheduler.adapter.objects.ClusterObjects`` and lets the adapter convert
them (``scheduler.adapter.snapshot.build_snapshot``), ``scheduler.core.kueue.cycle.run_cycle``
decides, and ``scheduler.kube.apply.apply_decisions`` writes the results through the writer.
Nothing here decides anything.
"""

from __future__ import annotations

import logging
from typing import Any

from scheduler.adapter import snapshot as adapter_snapshot
from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.cluster import admitted_placements, core_nodes, core_pods, flavor_trees  # re-exported
from scheduler.adapter.objects import ClusterObjects
from scheduler.adapter.owned import Signer
from scheduler.adapter.snapshot import Invalid
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.health import HealthPolicy
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.preemption.rules import ConfiguredPreemption
from scheduler.k8s.informer import object_key
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
        preemption_limits=_items(getattr(cache, "preemption_limits", None)),
        owner_links=cache.owner_links() if hasattr(cache, "owner_links") else ())


def _items(informer: Any) -> list[Obj]:
    """An optional informer's objects (none when the cache has no such informer)."""
    return list(informer.items()) if informer is not None else []


def build_snapshot(cache: Any, now: Any, *, solver: str = "auto", time_budget_s: float = 0.1,
                   inadmissible: frozenset[str] = frozenset(), health_policy: HealthPolicy | None = None,
                   exclude: frozenset[str] = frozenset(), config: KueueConfig = KUEUE_DEFAULTS,
                   placement_options: PlacementOptions | None = None, domain_preemption: bool = True,
                   signer: Signer | None = None, invalid: list[Invalid] | None = None,
                   caches: SnapshotCaches | None = None,
                   preemption_rules: ConfiguredPreemption | None = None) -> Snapshot:
    """The informer caches as one immutable core ``Snapshot`` (converted by ``scheduler.adapter``).
    ``signer``: the controller's key; its owned annotations are honoured only where it signed them.
    ``caches``: the conversions the builder keeps from one snapshot to the next.
    ``preemption_rules``: the controller's PreemptionConfigs and PreemptionLimits with the
    evictions they count (default: read from the caches, none counted)."""
    return adapter_snapshot.build_snapshot(cluster_objects(cache, exclude), now, solver=solver,
                                           time_budget_s=time_budget_s, inadmissible=inadmissible,
                                           health_policy=health_policy, config=config,
                                           placement_options=placement_options,
                                           domain_preemption=domain_preemption, signer=signer,
                                           invalid=invalid, caches=caches, preemption_rules=preemption_rules)
