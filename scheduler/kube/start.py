"""Phase 4's selectors: how an admitted Workload's job is started. Per pod set, the flavors'
nodeLabels and tolerations, the required domain's labels (every level from the top down to the
required one, read from the nodes of the assignment), and Kueue's unconstrained annotation for
an implied topology request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import PodSetStart
from scheduler.core.assignment import decode_topology_assignment
from scheduler.core.topology_request import ANN_UNCONSTRAINED, request_from_kueue
from scheduler.kube.cache import ClusterCache


def start_selectors(wl: Mapping[str, Any], cache: ClusterCache) -> list[PodSetStart]:
    """Per pod set: the flavors' nodeLabels, plus the required domain's labels (every level
    from the top down to the required one), read from the nodes of the assignment."""
    spec_sets = {ps["name"]: ps for ps in (wl.get("spec") or {}).get("podSets") or ()}
    out = []
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
        selector: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for flavor_name in sorted(set((psa.get("flavors") or {}).values())):
            flavor = cache.flavors.get(flavor_name) or {}
            selector.update(((flavor.get("spec") or {}).get("nodeLabels")) or {})
            tolerations.extend(((flavor.get("spec") or {}).get("tolerations")) or ())
        request = request_from_kueue((spec_sets.get(psa["name"]) or {}).get("topologyRequest"))
        required = request.required if request is not None else None
        annotations: dict[str, str] = {}
        if psa.get("topologyAssignment"):
            if required:
                selector.update(_required_domain_selector(cache, psa, required, flavor_name))
            if request is None or not request.explicit:
                annotations[ANN_UNCONSTRAINED] = "true"
        out.append(PodSetStart(psa["name"], selector, tuple(tolerations), annotations, psa.get("count"),
                               topology_assigned=bool(psa.get("topologyAssignment"))))
    return out

def _required_domain_selector(cache: ClusterCache, psa: Mapping[str, Any], required: str,
                          flavor_name: str) -> dict[str, str]:
    levels, domains = decode_topology_assignment(psa["topologyAssignment"])
    topo_name = ((cache.flavors.get(flavor_name) or {}).get("spec") or {}).get("topologyName")
    topo = cache.topologies.get(topo_name or "") or {}
    topo_levels = [lv["nodeLabel"] for lv in (topo.get("spec") or {}).get("levels") or ()]
    wanted = topo_levels[: topo_levels.index(required) + 1] if required in topo_levels else [required]
    values: dict[str, set[str]] = {level: set() for level in wanted}
    for domain in domains:
        labels: dict[str, str] = dict(zip(levels, domain.values, strict=False))
        if "kubernetes.io/hostname" in labels and len(levels) == 1:
            node = cache.nodes.get(labels["kubernetes.io/hostname"]) or {}
            labels = {**((node.get("metadata") or {}).get("labels") or {}), **labels}
        for level in wanted:
            if level in labels:
                values[level].add(labels[level])
    return {level: next(iter(vals)) for level, vals in values.items() if len(vals) == 1}
