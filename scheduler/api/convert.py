"""Protobuf messages <-> the dicts and core objects the CLI and the core use.

Pure functions, no grpc: both the servicer (server side) and the CLI's ``--server`` mode
(client side) call them, so the JSON the CLI prints over gRPC is the JSON it prints offline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.core.nodes import HOSTNAME_LABEL, Toleration
from scheduler.core.resources import QuantityError, parse_quantity
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import SliceConstraint, TopologyRequest
from scheduler.core.workload import DEFAULT_POD_SET, PodSetSpec, WorkloadSpec
from scheduler.topoview.model import HEALTHY, UNAVAILABLE, UNHEALTHY, Domain, NodeView, TopologyView

SOLVER_NAMES = {pb.SOLVER_UNSPECIFIED: "auto", pb.SOLVER_AUTO: "auto", pb.SOLVER_GREEDY: "greedy",
                pb.SOLVER_CPSAT: "cpsat"}
SOLVER_ENUM = {"auto": pb.SOLVER_AUTO, "greedy": pb.SOLVER_GREEDY, "cpsat": pb.SOLVER_CPSAT}
HEALTH_ENUM = {HEALTHY: pb.NODE_HEALTH_HEALTHY, UNHEALTHY: pb.NODE_HEALTH_UNHEALTHY,
               UNAVAILABLE: pb.NODE_HEALTH_UNAVAILABLE}
HEALTH_NAMES = {v: k for k, v in HEALTH_ENUM.items()}
DECISION_ENUM = {"admitted": pb.DECISION_KIND_ADMITTED, "evicted": pb.DECISION_KIND_EVICTED,
                 "preempted": pb.DECISION_KIND_PREEMPTED, "requeued": pb.DECISION_KIND_REQUEUED,
                 "finished": pb.DECISION_KIND_FINISHED, "replaced": pb.DECISION_KIND_REPLACED,
                 "pending": pb.DECISION_KIND_PENDING}
DECISION_NAMES = {v: k for k, v in DECISION_ENUM.items()}


class FieldError(ValueError):
    """A request field that is wrong; ``field`` is its path, ``str(err)`` starts with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


# ---------------------------------------------------------------------------- Place


def structured_workload(msg: pb.StructuredWorkload, field: str = "workload.structured") -> WorkloadSpec:
    if not msg.pod_sets:
        raise FieldError(f"{field}.pod_sets", "at least one pod set is required")
    seen: set[str] = set()
    pod_sets = []
    for i, ps in enumerate(msg.pod_sets):
        at = f"{field}.pod_sets[{i}]"
        name = ps.name or DEFAULT_POD_SET
        if name in seen:
            raise FieldError(f"{at}.name", f"duplicate pod set name {name!r}")
        seen.add(name)
        if ps.count < 0:
            raise FieldError(f"{at}.count", f"must be >= 0, got {ps.count}")
        requests: dict[str, int] = {}
        for res, qty in sorted(ps.requests.items()):
            try:
                amount = parse_quantity(qty, res)
            except QuantityError as exc:
                raise FieldError(f"{at}.requests[{res}]", str(exc)) from exc
            if amount < 0:
                raise FieldError(f"{at}.requests[{res}]", f"must not be negative, got {qty!r}")
            requests[res] = amount
        topology = None
        if ps.HasField("topology"):
            t = ps.topology
            if t.slice_size < 0:
                raise FieldError(f"{at}.topology.slice_size", f"must be > 0, got {t.slice_size}")
            if t.slice_required and t.slice_size == 0:
                raise FieldError(f"{at}.topology.slice_size", "must be > 0 when slice_required is set")
            if t.slice_size and not t.slice_required:
                raise FieldError(f"{at}.topology.slice_required", "must be set when slice_size is set")
            slices = (SliceConstraint(t.slice_required, t.slice_size),) if t.slice_required else ()
            required = t.required or None
            preferred = None if required else (t.preferred or None)
            unconstrained = True if (t.unconstrained and not (required or preferred)) else None
            if required or preferred or unconstrained or slices:
                topology = TopologyRequest(required=required, preferred=preferred, unconstrained=unconstrained,
                                           slice_constraints=slices)
        tolerations = tuple(Toleration(key=t.key, operator=t.operator or "Equal", value=t.value, effect=t.effect)
                            for t in ps.tolerations)
        for j, tol in enumerate(tolerations):
            if tol.operator not in ("Equal", "Exists"):
                raise FieldError(f"{at}.tolerations[{j}].operator", f"must be Equal or Exists, got {tol.operator!r}")
        pod_sets.append(PodSetSpec(name, ps.count, requests, topology, dict(ps.node_selector), tolerations))
    return WorkloadSpec(namespace=msg.namespace or "default", name=msg.name, pod_sets=tuple(pod_sets))


def place_json_to_response(doc: Mapping[str, Any], **extra: Any) -> pb.PlaceResponse:
    """``toposched place --output json`` document -> PlaceResponse."""
    extra.setdefault("topology", doc["topology"])
    return pb.PlaceResponse(
        api_version=doc["apiVersion"], levels=doc["levels"],
        fits=doc["fits"], reason=doc["reason"], solver=doc["solver"], optimal=doc["optimal"],
        pod_sets=[pb.PodSetPlacement(
            name=ps["name"], count=ps["count"],
            assignments=[pb.NodeAssignment(domain=a["domain"], nodes=a["nodes"], count=a["count"])
                         for a in ps["assignments"]],
            domains=[pb.LevelDomains(level=level, values=values) for level, values in ps["domains"].items()],
        ) for ps in doc["podSets"]],
        **extra,
    )


def place_response_to_json(resp: pb.PlaceResponse) -> dict[str, Any]:
    """PlaceResponse -> exactly the ``toposched place --output json`` document."""
    return {
        "apiVersion": resp.api_version,
        "topology": resp.topology,
        "levels": list(resp.levels),
        "fits": resp.fits,
        "reason": resp.reason,
        "solver": resp.solver,
        "optimal": resp.optimal,
        "podSets": [
            {
                "name": ps.name,
                "count": ps.count,
                "assignments": [{"domain": a.domain, "nodes": list(a.nodes), "count": a.count}
                                for a in ps.assignments],
                "domains": {d.level: list(d.values) for d in ps.domains},
            }
            for ps in resp.pod_sets
        ],
    }


# ---------------------------------------------------------------------------- GetTopology


def _capacity_maps(tree: TopologyTree | None, view_levels: Sequence[str]) -> dict[tuple[str, ...], tuple[
        dict[str, int], dict[str, int]]]:
    """Domain value path -> (allocatable, free) summed over its placeable leaves."""
    out: dict[tuple[str, ...], tuple[dict[str, int], dict[str, int]]] = {}
    if tree is None or not tree.n_leaves or tuple(tree.levels[: len(view_levels)]) != tuple(view_levels):
        return out
    width = len(tree.resources)
    for lvl in range(len(view_levels)):
        anc = tree.ancestors_array(lvl)
        n = tree.domain_count(lvl)
        alloc = np.zeros((n, width), dtype=np.int64)
        free = np.zeros((n, width), dtype=np.int64)
        np.add.at(alloc, anc, tree.allocatable)
        np.add.at(free, anc, tree.free)
        for i, path in enumerate(tree.paths[lvl]):
            out[path] = ({r: int(alloc[i, j]) for j, r in enumerate(tree.resources)},
                         {r: int(free[i, j]) for j, r in enumerate(tree.resources)})
    return out


def view_to_response(view: TopologyView, tree: TopologyTree | None, *, omit_nodes: bool = False,
                     source: str = "", flavor: str = "") -> pb.GetTopologyResponse:
    capacity = _capacity_maps(tree, view.levels)
    counts: dict[tuple[str, ...], dict[str, int]] = {}
    for node in view.nodes:
        for depth in range(1, len(node.path) + 1):
            c = counts.setdefault(node.path[:depth], {HEALTHY: 0, UNHEALTHY: 0, UNAVAILABLE: 0})
            c[node.health] += 1

    def domain(d: Domain) -> pb.Domain:
        alloc, free = capacity.get(d.path, ({}, {}))
        c = counts.get(d.path, {})
        return pb.Domain(
            level=d.level, label=view.levels[d.level - 1], value=d.value, path=list(d.path), nodes=d.node_count,
            healthy=d.healthy, unhealthy=c.get(UNHEALTHY, 0), unavailable=c.get(UNAVAILABLE, 0), gpus=d.gpus,
            gpus_used=d.gpus_used, allocatable=alloc, free=free,
            used={r: alloc[r] - free.get(r, 0) for r in alloc},
            children=[domain(ch) for ch in d.children],
            member_names=[] if omit_nodes else [n.name for n in d.nodes],
        )

    nodes = []
    if not omit_nodes:
        for n in view.nodes:
            leaf = tree.leaf_of_node(n.name) if tree is not None else None
            node_free = (tree.free_of_leaf(leaf) if tree is not None and leaf is not None
                         and len(tree.leaf_nodes[leaf]) == 1 else {})
            nodes.append(pb.TopologyNode(
                name=n.name, path=list(n.path), health=HEALTH_ENUM.get(n.health, pb.NODE_HEALTH_HEALTHY),
                reason=n.reason, gpus=n.gpus,
                gpus_used=n.gpus_used, instance_type=n.instance_type, workloads=n.workloads, free=node_free))
    # The proto has no drained state: a drained node is healthy there, its reason says drained.
    totals = {k: v for k, v in view.totals().items() if k != "drained"}
    return pb.GetTopologyResponse(
        levels=list(view.levels), domains=[domain(d) for d in view.roots], nodes=nodes,
        totals=pb.TopologyTotals(**totals), warnings=list(view.warnings), skipped=list(view.skipped),
        source=source, topology=tree.name if tree is not None else "", flavor=flavor)


def response_to_view(resp: pb.GetTopologyResponse) -> TopologyView:
    """Rebuild the topology view the renderers take (the inverse of :func:`view_to_response`)."""
    nodes = {n.name: NodeView(name=n.name, path=tuple(n.path), health=HEALTH_NAMES.get(n.health, UNHEALTHY),
                              reason=n.reason, gpus=n.gpus, gpus_used=n.gpus_used, instance_type=n.instance_type,
                              workloads=dict(sorted(n.workloads.items())))
             for n in resp.nodes}

    def domain(d: pb.Domain) -> Domain:
        return Domain(level=d.level, value=d.value, path=tuple(d.path), children=[domain(c) for c in d.children],
                      nodes=[nodes[name] for name in d.member_names if name in nodes], node_count=d.nodes,
                      healthy=d.healthy, gpus=d.gpus, gpus_used=d.gpus_used)

    return TopologyView(levels=tuple(resp.levels), roots=[domain(d) for d in resp.domains],
                        nodes=[nodes[n.name] for n in resp.nodes], warnings=list(resp.warnings),
                        skipped=list(resp.skipped))


def capacity_levels(view_levels: Sequence[str]) -> tuple[str, ...]:
    """Levels of the all-nodes capacity tree behind a view: its layers plus hostname."""
    return (*view_levels, HOSTNAME_LABEL)


def explain_response_to_dict(resp: pb.ExplainResponse) -> dict[str, Any]:
    """An ExplainResponse back to ``scheduler.explain.explain``'s dict (details_json when the
    server sent it, else the typed fields)."""
    import json

    if resp.details_json:
        return dict(json.loads(resp.details_json))
    return {"namespace": resp.namespace, "name": resp.name, "workload": resp.workload,
            "clusterQueue": resp.cluster_queue, "admitted": resp.admitted,
            "reasons": [{"reason": r.reason, "message": r.message} for r in resp.reasons]}
