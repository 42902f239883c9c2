"""Raw Node/Pod objects -> the topology view of ``toposched topology`` and gRPC ``GetTopology``.

One function with the checks and warnings both doors give (no nodes, unknown levels, no
topology labels, unknown health label values), so they answer the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.files import convert_objects
from scheduler.core.health import HealthPolicy, UnknownValues, node_health
from scheduler.core.nodes import node_from_k8s, pod_from_k8s
from scheduler.errors import UserError
from scheduler.topoview.model import LAYER_PREFIX, TopologyView, build_view, discover_layers, unknown_levels

Located = Sequence[tuple[str, Mapping[str, Any]]]  # (error prefix ending in ": ", object)


def view_from_objects(nodes_raw: Sequence[Mapping[str, Any]], pods_raw: Sequence[Mapping[str, Any]],
                      levels: Sequence[str] | None, policy: HealthPolicy, source: str,
                      pods_source: str | None = None) -> TopologyView:
    """Raw Node/Pod objects -> the view, with the checks and warnings of ``toposched topology``
    (shared with the gRPC GetTopology servicer). UserError for a malformed object (named by its
    source, kind, name and field), no nodes, unknown levels. ``pods_source``: where the pods
    came from when not from ``source`` (``--pods FILE``)."""
    return view_from_located(named_objects(nodes_raw, "Node", source),
                             named_objects(pods_raw, "Pod", pods_source or source), levels, policy, source)


def view_from_located(nodes_located: Located, pods_located: Located, levels: Sequence[str] | None,
                      policy: HealthPolicy, source: str) -> TopologyView:
    """:func:`view_from_objects` on objects that already carry the prefix of their errors (the
    files reader's ``nodes file f: items[3] (n-1): ``)."""
    nodes = convert_objects(nodes_located, "Node", node_from_k8s, "status.allocatable")
    pods = convert_objects(pods_located, "Pod", pod_from_k8s, "spec.containers[].resources")
    if not nodes:
        raise UserError(f"{source}: no nodes")
    if levels:
        missing = unknown_levels(nodes, levels)
        if missing:
            present = discover_layers(nodes)
            have = f"the nodes' layer labels: {', '.join(present)}" if present else \
                f"no node has a layer label ({LAYER_PREFIX}N)"
            raise UserError(f"level {missing[0]!r} is not a label of any node in {source} ({have}); "
                            "check --levels/--topology")
    view = build_view(nodes, pods, levels=levels, policy=policy)
    if not view.nodes:
        what = ", ".join(levels) if levels else f"{LAYER_PREFIX}<N>"
        raise UserError(f"no node in {source} carries topology labels ({what}); instance topology labels "
                        "exist on p4d/p5/p6/trn instance types (EKS cloud-controller-manager)")
    seen = UnknownValues()
    for node in nodes:
        health = node_health(node, policy)
        if seen.first(health):
            view.warnings.append(f"node {node.name}: {health.reason}")
    return view


def named_objects(objects: Sequence[Mapping[str, Any]], kind: str, source: str) -> list[tuple[str, Mapping[str, Any]]]:
    """Each object with the prefix its error starts with: ``source: Node n-1: ``."""
    out = []
    for i, obj in enumerate(objects):
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        out.append((f"{source}: {kind} {name or f'items[{i}]'}: ", obj))
    return out
