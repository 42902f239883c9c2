"""Can this job EVER be admitted? The webhook's question, answered by the core.

The webhook keeps no model of its own: quota is ``core.quota.QuotaState`` built from every
ClusterQueue and Cohort (parents included) with no usage, so ``potential_available`` is the
most a ClusterQueue could ever get; capacity is ``core.topology.TopologyTree`` built from the
flavor's nodes with no pods, and ``TopologyTree.leaf_fit`` (the placement engine's phase-1
count, with the pod template's node selector and tolerations) says how many pods each leaf
holds. Usage is deliberately ignored: the webhook answers "can this job ever fit", the
controller answers "does it fit now".

Each tree is built twice — every member node (as if all had recovered) and only the nodes the
health policy lets place — so a job that fits only on unhealthy nodes is admitted with a
warning instead of denied. The trees are cached per node-set version (``ClusterView``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scheduler.adapter.cluster import core_nodes
from scheduler.adapter.objects import VersionMemo
from scheduler.adapter.queues import cluster_queue_spec, cohort_spec, empty_quota_state
from scheduler.core.health import HealthPolicy, recovered
from scheduler.core.kueue.quota import ClusterQueueSpec, CohortSpec, QuotaState
from scheduler.core.nodes import NodeInfo, Toleration, pod_spec_requests, tolerations_from_k8s
from scheduler.core.placement.planner import place_workload
from scheduler.core.placement.types import PlacementGates
from scheduler.core.resources import with_pod_slot
from scheduler.core.topology import IntArray, TopologyTree
from scheduler.core.workload import PodSetSpec

Obj = Mapping[str, Any]
OK, WARN, NEVER = "ok", "warn", "never"


# ---- quota -------------------------------------------------------------------------------------
def empty_quota(cluster_queues: Mapping[str, Obj], cohorts: Mapping[str, Obj], cq_name: str, cq: Obj) -> QuotaState:
    """The quota tree with no usage. ``cq`` (the job's ClusterQueue, possibly found by a live
    lookup) is always in it; another queue object the models reject is left out rather than
    failing every job's admission."""
    cqs: dict[str, ClusterQueueSpec] = {}
    for name, obj in cluster_queues.items():
        if name != cq_name:
            try:
                cqs[name] = cluster_queue_spec(obj)
            except ValueError:
                continue
    cqs[cq_name] = cluster_queue_spec(cq)
    cos: dict[str, CohortSpec] = {}
    for name, obj in cohorts.items():
        try:
            cos[name] = cohort_spec(obj)
        except ValueError:
            continue
    return empty_quota_state(cqs, cos)


def quota_limits(quota: QuotaState, cq_name: str, flavor: str, resource: str) -> tuple[int, int]:
    """(nominal quota, most that can ever be borrowed on top) of ``cq_name`` in (flavor, resource):
    lending limits of the cohort members, Cohort quotas and parents, and the borrowing limit
    applied."""
    nominal = quota.nominal(cq_name, (flavor, resource))
    return nominal, max(0, quota.potential_available(cq_name, (flavor, resource)) - nominal)


# ---- topology ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EmptyTrees:
    """One TAS flavor's nodes with nothing running: every member node, and the healthy ones."""

    every: TopologyTree
    healthy: TopologyTree


def empty_trees(topology: str, levels: Sequence[str], nodes: Sequence[NodeInfo], node_labels: Mapping[str, str],
                policy: HealthPolicy) -> EmptyTrees:
    # Every node as if healthy: a node that is registering (not-ready taint until its kubelet
    # reports) or failing now is capacity the job may get once it recovers, never a reason to refuse.
    every = TopologyTree.build(topology, levels, [recovered(n) for n in nodes], flavor_node_labels=node_labels,
                               health_policy=None)
    healthy = TopologyTree.build(topology, levels, nodes, flavor_node_labels=node_labels, health_policy=policy)
    return EmptyTrees(every, healthy)


@dataclass(frozen=True)
class PodSetShape:
    """What the fit depends on: the pods, what each asks, where it may go, how it is grouped."""

    count: int
    per_pod: Mapping[str, int]
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    required: str | None  # the level one domain must hold everything in (None: the whole flavor)
    slice_level: str | None = None
    slice_size: int | None = None


def pod_set_shape(template: Obj, count: int, flavor: Obj, required: str | None, slice_level: str | None,
                  slice_size: int | None) -> PodSetShape:
    """The job's pod template as the controller will place it: its effective requests, node
    selector, and tolerations plus the flavor's (Kueue adds those at admission)."""
    spec = template.get("spec") or {}
    tolerations = (tolerations_from_k8s(spec.get("tolerations"))
                   + tolerations_from_k8s((flavor.get("spec") or {}).get("tolerations")))
    return PodSetShape(count, pod_spec_requests(spec), dict(spec.get("nodeSelector") or {}), tolerations, required,
                       slice_level, slice_size)


def _lift(tree: TopologyTree, per_domain: IntArray, from_level: int, to_level: int) -> IntArray:
    """Sum per-domain values at ``from_level`` up to the domains of ``to_level`` (above it)."""
    out = per_domain
    for lvl in range(from_level, to_level, -1):
        out = np.bincount(tree.parent[lvl], weights=out, minlength=tree.domain_count(lvl - 1)).astype(np.int64)
    return out


def best_units(tree: TopologyTree, shape: PodSetShape) -> int:
    """Pods (or whole slices) that fit in the best ``required`` domain (else the whole flavor)."""
    if not tree.n_leaves:
        return 0
    fit = tree.leaf_fit(with_pod_slot(shape.per_pod), shape.node_selector, shape.tolerations)
    sums = tree.subtree_sums(fit.counts)
    outer = tree.level_index(shape.required) if shape.required else 0
    if shape.slice_level and shape.slice_size:
        inner = tree.level_index(shape.slice_level)
        units = _lift(tree, sums[inner] // shape.slice_size, inner, outer)
    else:
        units = sums[outer]
    return int(units.max()) if shape.required else int(units.sum())


def _labels(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"


def topology_fit(trees: EmptyTrees, shape: PodSetShape, flavor_name: str, topology: str,
                 node_labels: Mapping[str, str]) -> tuple[str, str]:
    """(OK | WARN | NEVER, message) for the pod set in this TAS flavor."""
    if not trees.every.n_leaves:
        return WARN, (f"no node carries the labels of ResourceFlavor \"{flavor_name}\" ({_labels(node_labels)}) and "
                      f"every level of Topology \"{topology}\" yet; the job stays pending until such nodes join")
    every, healthy = best_units(trees.every, shape), best_units(trees.healthy, shape)
    count, required = shape.count, shape.required
    if shape.slice_level and shape.slice_size:
        need = math.ceil(count / shape.slice_size)
        where = f"one {required} domain" if required else f"ResourceFlavor \"{flavor_name}\""
        what = f"{need} slice(s) of {shape.slice_size} pod(s), each inside one {shape.slice_level} domain"
        if every < need:
            return NEVER, (f"{what}, can never fit in {where} of Topology \"{topology}\": at most {every} "
                           f"slice(s) fit even on an empty cluster")
        if healthy < need:
            return WARN, f"{what} fit in {where} only if unhealthy nodes recover (healthy nodes hold {healthy})"
        return OK, ""
    if required:
        if every < count:
            return NEVER, (f"{count} pod(s) can never fit in one {required} domain of Topology \"{topology}\": "
                           f"the largest holds {every} such pod(s) even on an empty cluster")
        if healthy < count:
            return WARN, (f"{count} pod(s) fit in one {required} domain only if unhealthy nodes recover "
                          f"(the largest healthy domain holds {healthy})")
        return OK, ""
    if every < count:
        return NEVER, (f"{count} pod(s) can never fit in ResourceFlavor \"{flavor_name}\": its nodes hold "
                       f"{every} such pod(s) even when empty")
    if healthy < count:
        return WARN, f"{count} pod(s) fit in ResourceFlavor \"{flavor_name}\" only if unhealthy nodes recover"
    return OK, ""


def group_fit(trees: EmptyTrees, members: Sequence[PodSetSpec], flavor: Obj,
              gates: PlacementGates) -> tuple[str, str]:
    """(OK | WARN | NEVER, message) for a PodSet group (leader + workers) in this TAS flavor:
    the core places the two pod sets jointly, as the controller will, on the empty trees (each
    pod set fitting alone is not enough: the leader's node must leave room for the workers of
    its domain). The message of NEVER is the placement's own (Kueue's words)."""
    flavor_tolerations = tolerations_from_k8s((flavor.get("spec") or {}).get("tolerations"))
    pod_sets = [replace(ps, tolerations=ps.tolerations + flavor_tolerations) for ps in members]
    every = place_workload(trees.every, pod_sets, solver="greedy", gates=gates)
    if not every.fits:
        return NEVER, every.reason
    if not place_workload(trees.healthy, pod_sets, solver="greedy", gates=gates).fits:
        return WARN, "fits only if unhealthy nodes recover"
    return OK, ""


def nodes_of(objs: Mapping[str, Obj], memo: VersionMemo[NodeInfo] | None = None) -> list[NodeInfo]:
    return core_nodes(list(objs.values()), memo)
