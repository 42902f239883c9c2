"""Quota that follows healthy capacity (opt-in per ClusterQueue): in the spirit of Kueue v0.20's
alpha ``DynamicQuotaOrchestrator`` / ``CapacityProvider`` (``status.effectiveQuotas``: discovered
capacity given out proportionally to nominal quotas), restated for HyperPod's node health.

A ClusterQueue annotated ``toposched.io/quota-follows-healthy-capacity: "true"`` is admitted
against an *effective* nominal quota per flavor and resource: its nominal quota scaled by the
share of that flavor's capacity on healthy nodes (the nodes carrying every ``nodeLabels`` of the
flavor; healthy as placement judges them: Ready, schedulable, HyperPod
``sagemaker.amazonaws.com/node-health-status`` and fault labels, taints; core/health.py),
rounded down. A rack of 4 p5 nodes with one unhealthy gives a 32-GPU quota an effective 24, so
the queue does not admit work the cluster can no longer run, and gets the 32 back when the node
recovers. Borrowing and lending limits are unchanged; queues without the annotation are Kueue's.
What was applied is the ClusterQueue's condition ``toposched.io/QuotaFollowsHealthyCapacity``
(the v0.17 and v0.19 ClusterQueue status has no ``effectiveQuotas`` field to write it to).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler.core.health import DEFAULT_POLICY, HealthPolicy, node_health
from scheduler.core.kueue.quota import ClusterQueueSpec, FlavorQuotas, FlavorSpec, ResourceGroup, ResourceQuota
from scheduler.core.nodes import NodeInfo
from scheduler.core.resources import format_quantity

ANN_FOLLOW_HEALTHY = "toposched.io/quota-follows-healthy-capacity"
CONDITION = "toposched.io/QuotaFollowsHealthyCapacity"
REASON = "HealthyCapacity"


@dataclass(frozen=True)
class FlavorCapacity:
    nodes: int = 0
    healthy_nodes: int = 0
    total: Mapping[str, int] | None = None  # resource -> allocatable on the flavor's nodes
    healthy: Mapping[str, int] | None = None  # the same on its healthy nodes


@dataclass(frozen=True)
class EffectiveQuota:
    flavor: str
    resource: str
    nominal: int
    effective: int
    healthy_nodes: int
    nodes: int


def flavor_capacities(flavors: Mapping[str, FlavorSpec], nodes: Iterable[NodeInfo],
                      policy: HealthPolicy = DEFAULT_POLICY) -> dict[str, FlavorCapacity]:
    """Per flavor: how many nodes carry its nodeLabels, how many are healthy, and their
    allocatable in total and on the healthy ones."""
    judged = [(n, bool(node_health(n, policy))) for n in nodes]
    out: dict[str, FlavorCapacity] = {}
    for name, flavor in flavors.items():
        total: dict[str, int] = {}
        healthy: dict[str, int] = {}
        count = healthy_count = 0
        for node, ok in judged:
            if any(node.labels.get(k) != v for k, v in flavor.node_labels.items()):
                continue
            count += 1
            healthy_count += ok
            for res, amount in node.allocatable.items():
                total[res] = total.get(res, 0) + amount
                if ok:
                    healthy[res] = healthy.get(res, 0) + amount
        out[name] = FlavorCapacity(count, healthy_count, total, healthy)
    return out


def follow_healthy_capacity(cq: ClusterQueueSpec, capacities: Mapping[str, FlavorCapacity]
                            ) -> tuple[ClusterQueueSpec, tuple[EffectiveQuota, ...]]:
    """``cq`` with each nominal quota scaled by its flavor's healthy share of that resource
    (unchanged where the flavor has no node offering it), and what was applied."""
    report: list[EffectiveQuota] = []
    groups: list[ResourceGroup] = []
    for group in cq.resource_groups:
        flavors: list[FlavorQuotas] = []
        for fq in group.flavors:
            cap = capacities.get(fq.name, FlavorCapacity())
            resources: dict[str, ResourceQuota] = {}
            for res, quota in fq.resources.items():
                total = (cap.total or {}).get(res, 0)
                if total <= 0:
                    resources[res] = quota
                    continue
                effective = quota.nominal * (cap.healthy or {}).get(res, 0) // total
                resources[res] = replace(quota, nominal=effective)
                report.append(EffectiveQuota(fq.name, res, quota.nominal, effective, cap.healthy_nodes, cap.nodes))
            flavors.append(FlavorQuotas(fq.name, resources))
        groups.append(ResourceGroup(group.covered_resources, tuple(flavors)))
    return replace(cq, resource_groups=tuple(groups)), tuple(report)


def quotas_following_health(cluster_queues: Mapping[str, ClusterQueueSpec], opted: Iterable[str],
                            flavors: Mapping[str, FlavorSpec], nodes: Iterable[NodeInfo],
                            policy: HealthPolicy = DEFAULT_POLICY
                            ) -> tuple[Mapping[str, ClusterQueueSpec], dict[str, tuple[EffectiveQuota, ...]]]:
    """The ClusterQueues, the ``opted`` ones (annotated :data:`ANN_FOLLOW_HEALTHY`) with their
    nominal quotas scaled to the healthy capacity of ``nodes``, and what was applied to each.
    One answer for the controller's snapshot and the simulator's."""
    opted = [name for name in opted if name in cluster_queues]
    if not opted:
        return cluster_queues, {}
    specs = dict(cluster_queues)
    capacities = flavor_capacities(flavors, nodes, policy)
    effective: dict[str, tuple[EffectiveQuota, ...]] = {}
    for name in opted:
        specs[name], effective[name] = follow_healthy_capacity(specs[name], capacities)
    return specs, effective


def condition_message(report: Sequence[EffectiveQuota]) -> str:
    """The condition's message: every quota it changed (or that none changed)."""
    changed = sorted((q for q in report if q.effective != q.nominal), key=lambda q: (q.flavor, q.resource))
    if not changed:
        return "nominal quota applies: every node of its flavors is healthy"
    parts = [f"{q.flavor} {q.resource}: {format_quantity(q.effective, q.resource)} of "
             f"{format_quantity(q.nominal, q.resource)} ({q.healthy_nodes} of {q.nodes} nodes healthy)"
             for q in changed]
    return "effective nominal quota on healthy capacity: " + "; ".join(parts)
