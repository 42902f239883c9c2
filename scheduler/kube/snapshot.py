"""Cache -> core snapshot, and core decisions -> API writes.

The immutable-snapshot / pure-cycle / writer split of Kueue: :func:`build_snapshot` turns the
informer caches into plain core data (one TopologyTree per TAS flavor with the admitted
workloads' usage already subtracted), ``scheduler.core.cycle.run_cycle`` decides, and
:func:`apply_decisions` writes the results. Nothing here decides anything.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.core.assignment import decode_topology_assignment
from scheduler.core.nodes import NodeInfo, PodInfo, node_from_k8s, pod_from_k8s
from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import workload_from_kueue

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def core_nodes(nodes: Iterable[Obj]) -> list[NodeInfo]:
    return [node_from_k8s(n) for n in nodes]


def core_pods(pods: Iterable[Obj]) -> list[PodInfo]:
    """Pods that hold capacity: bound, not finished. Pods of toposched-admitted workloads are
    TAS usage (counted from their Workload's assignment), so they are marked as TAS pods."""
    out = []
    for obj in pods:
        pod = pod_from_k8s(obj)
        if not pod.node_name or pod.terminal:
            continue
        out.append(pod)
    return out


def admitted_placements(workload: Mapping[str, Any]) -> list[tuple[PodSetPlacement, Mapping[str, int], str]]:
    """(placement, per-pod requests, flavor) for every pod set with a topology assignment."""
    admission = (workload.get("status") or {}).get("admission") or {}
    if not admission:
        return []
    spec = workload_from_kueue({**workload, "kind": "Workload"})
    requests = {ps.name: ps.requests for ps in spec.pod_sets}
    out = []
    for psa in admission.get("podSetAssignments") or ():
        ta = psa.get("topologyAssignment")
        if not ta:
            continue
        levels, domains = decode_topology_assignment(ta)
        count = sum(d.count for d in domains)
        flavors = sorted(set((psa.get("flavors") or {}).values()))
        out.append((PodSetPlacement(psa["name"], count, tuple(levels), tuple(domains)),
                    requests.get(psa["name"], {}), flavors[0] if flavors else ""))
    return out


def flavor_trees(flavors: Iterable[Obj], topologies: Mapping[str, Obj], nodes: list[NodeInfo],
                 pods: list[PodInfo], holding: Iterable[Obj], health_policy: Any = None) -> dict[str, TopologyTree]:
    """One tree per TAS flavor; usage of every workload that holds a reservation subtracted."""
    from scheduler.core.health import DEFAULT_POLICY

    trees: dict[str, TopologyTree] = {}
    for flavor in flavors:
        spec = flavor.get("spec") or {}
        topo_name = spec.get("topologyName")
        if not topo_name or topo_name not in topologies:
            continue
        levels = [lv["nodeLabel"] for lv in (topologies[topo_name].get("spec") or {}).get("levels") or ()]
        if not levels:
            continue
        trees[flavor["metadata"]["name"]] = TopologyTree.build(
            topo_name, levels, nodes, pods, flavor_node_labels=spec.get("nodeLabels") or {},
            health_policy=health_policy or DEFAULT_POLICY)
    for wl in holding:
        for placement, per_pod, flavor_name in admitted_placements(wl):
            tree = trees.get(flavor_name)
            if tree is not None:
                tree.add_usage(placement, per_pod)
    return trees


# ---------------------------------------------------------------------- cache -> Snapshot


def build_snapshot(cache: Any, now: Any, *, solver: str = "auto", time_budget_s: float = 0.1,
                   inadmissible: frozenset[str] = frozenset(), health_policy: Any = None) -> Any:
    """The informer caches as one immutable core ``Snapshot`` (Kueue objects parsed through
    ``scheduler.models`` and converted by ``scheduler.models.convert``)."""
    from scheduler.core.cycle import Snapshot
    from scheduler.kube import status as st
    from scheduler.models import convert
    from scheduler.models.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload

    holding, pending = [], []
    for wl in cache.workloads.items():
        if st.condition_true(wl, st.FINISHED) or (wl.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if st.condition_true(wl, st.QUOTA_RESERVED) and (wl.get("status") or {}).get("admission"):
            holding.append(wl)
        elif (wl.get("spec") or {}).get("active") is not False:
            pending.append(wl)
    nodes = core_nodes(cache.nodes.items())
    pods = core_pods(cache.pods.items())
    topologies = {t["metadata"]["name"]: t for t in cache.topologies.items()}
    trees = flavor_trees(cache.flavors.items(), topologies, nodes, pods, holding, health_policy)
    namespace_labels = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {})
                        for n in cache.namespaces.items()}
    tas_flavors = frozenset(trees)
    return Snapshot(
        now=now.timestamp(),
        cluster_queues={o["metadata"]["name"]: convert.cluster_queue_to_core(ClusterQueue.model_validate(o))
                        for o in cache.cluster_queues.items()},
        cohorts={o["metadata"]["name"]: convert.cohort_to_core(Cohort.model_validate(o))
                 for o in cache.cohorts.items()},
        local_queues={f"{o['metadata']['namespace']}/{o['metadata']['name']}":
                      convert.local_queue_to_core(LocalQueue.model_validate(o)) for o in cache.local_queues.items()},
        flavors={o["metadata"]["name"]: convert.flavor_to_core(ResourceFlavor.model_validate(o))
                 for o in cache.flavors.items()},
        trees=trees,
        pending=tuple(convert.workload_to_pending(
            Workload.model_validate(wl), namespace_labels.get(wl["metadata"]["namespace"], {})) for wl in pending),
        admitted=tuple(convert.workload_to_admitted(Workload.model_validate(wl), tas_flavors) for wl in holding),
        workload_priority_classes={o["metadata"]["name"]: int(o.get("value") or 0)
                                   for o in cache.workload_priority_classes.items()},
        priority_classes={o["metadata"]["name"]: int(o.get("value") or 0) for o in cache.priority_classes.items()},
        inadmissible=inadmissible,
        namespace_labels=namespace_labels,
        solver=solver,
        time_budget_s=time_budget_s,
    )
