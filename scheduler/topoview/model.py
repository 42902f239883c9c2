"""The view model: a topology tree built once from a node list (pure, no I/O).

Layers are discovered from the labels (``topology.k8s.aws/network-node-layer-N`` for every N
present: 3 on p5, 4 on p6-b200/b300) unless explicit level label keys are given. A node hangs
under its own deepest layer; nodes without any layer label, or with a gap (layer 3 but no
layer 2), are skipped with a warning that the caller prints.

Domains are keyed by their full value path, so the tree is strict even if one value shows up
under two parents (which the AWS script would draw under the first parent only; the Mermaid
renderer keeps that behaviour for output compatibility and this module warns about it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.health import DEFAULT_POLICY, HealthPolicy, node_health
from scheduler.core.nodes import NodeInfo, PodInfo
from scheduler.core.topology import is_drained
from scheduler.core.workload import ANN_WORKLOAD

LAYER_PREFIX = "topology.k8s.aws/network-node-layer-"
_LAYER_RE = re.compile(r"^topology\.k8s\.aws/network-node-layer-(\d+)$")
ACCELERATORS = ("nvidia.com/gpu", "aws.amazon.com/neuron", "aws.amazon.com/neurondevice")
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name", "training.kubeflow.org/job-name")

# Health categories used for colour: placeable, HyperPod/fault unhealthy, unavailable
# (NotReady or cordoned: the node itself is fine as far as HyperPod knows).
HEALTHY, UNHEALTHY, UNAVAILABLE = "healthy", "unhealthy", "unavailable"
# Healthy but marked for maintenance (toposched.io/drain): nothing new is placed there.
DRAINED = "drained"
DRAINED_REASON = "drained for maintenance (toposched.io/drain): running jobs finish, nothing new lands"


def sanitize_id(value: str) -> str:
    """The AWS script's id rule: every non-alphanumeric (ASCII) character becomes ``_``."""
    return re.sub(r"[^a-zA-Z0-9]", "_", value)


def discover_layers(nodes: Iterable[NodeInfo]) -> tuple[str, ...]:
    """``network-node-layer-1..N`` for the largest N any node carries (empty if none)."""
    deepest = 0
    for node in nodes:
        for key in node.labels:
            m = _LAYER_RE.match(key)
            if m:
                deepest = max(deepest, int(m.group(1)))
    return tuple(f"{LAYER_PREFIX}{i}" for i in range(1, deepest + 1))


def unknown_levels(nodes: Sequence[NodeInfo], levels: Sequence[str]) -> list[str]:
    """Levels no node carries (an explicit ``--levels`` / Topology typo)."""
    present: set[str] = set()
    for node in nodes:
        present.update(node.labels)
    return [level for level in levels if level not in present]


@dataclass
class NodeView:
    name: str
    path: tuple[str, ...]            # layer values, widest first (length = node depth)
    health: str                      # HEALTHY | UNHEALTHY | UNAVAILABLE
    reason: str
    gpus: int
    gpus_used: int
    instance_type: str = ""
    workloads: dict[str, int] = field(default_factory=dict)   # workload -> accelerators used

    @property
    def id(self) -> str:
        return sanitize_id(self.name)


@dataclass
class Domain:
    level: int                       # 1-based layer number
    value: str
    path: tuple[str, ...]
    children: list[Domain] = field(default_factory=list)
    nodes: list[NodeView] = field(default_factory=list)
    # aggregates over the whole subtree
    node_count: int = 0
    healthy: int = 0
    gpus: int = 0
    gpus_used: int = 0

    @property
    def id(self) -> str:
        return f"L{self.level}_{sanitize_id(self.value)}"


@dataclass
class TopologyView:
    levels: tuple[str, ...]
    roots: list[Domain]
    nodes: list[NodeView]            # placed nodes, input order
    warnings: list[str]
    skipped: list[str]               # names of nodes left out (no/incomplete labels)

    @property
    def depth(self) -> int:
        return len(self.levels)

    def totals(self) -> dict[str, int]:
        return {
            "nodes": len(self.nodes),
            "healthy": sum(1 for n in self.nodes if n.health == HEALTHY),
            "unhealthy": sum(1 for n in self.nodes if n.health == UNHEALTHY),
            "unavailable": sum(1 for n in self.nodes if n.health == UNAVAILABLE),
            "drained": sum(1 for n in self.nodes if n.health == DRAINED),
            "gpus": sum(n.gpus for n in self.nodes),
            "gpus_used": sum(n.gpus_used for n in self.nodes),
            "skipped": len(self.skipped),
            "domains": sum(1 for _ in self.domains()),
        }

    def domains(self) -> Iterable[Domain]:
        stack = list(reversed(self.roots))
        while stack:
            d = stack.pop()
            yield d
            stack.extend(reversed(d.children))


def _category(reason: str) -> str:
    if reason.startswith(("node is not Ready", "node is cordoned")):
        return UNAVAILABLE
    return UNHEALTHY


def short_reason(reason: str) -> str:
    """A tile-sized version of a node_health reason."""
    if not reason:
        return ""
    if reason.startswith("node is cordoned"):
        return "cordoned"
    if reason.startswith("node is not Ready"):
        return "NotReady" + (f" ({reason.rsplit('(', 1)[1]}" if "(" in reason else "")
    if reason.startswith("HyperPod fault reported: "):
        return "fault: " + reason.split(": ", 1)[1].split("=", 1)[-1].split(",")[0]
    if reason.startswith("HyperPod health taint"):
        return "HyperPod health taint"
    text = reason.replace("sagemaker.amazonaws.com/", "")
    if text.startswith("node-health-status="):
        return text.split("=", 1)[1].split(" ", 1)[0]
    return text.split(" (", 1)[0]


def workload_of(pod: PodInfo) -> str:
    """A readable workload name for a pod: Kueue workload, else job name, else the pod."""
    name = pod.annotations.get(ANN_WORKLOAD)
    if not name:
        name = next((pod.labels[k] for k in JOB_NAME_LABELS if pod.labels.get(k)), pod.name)
    return f"{pod.namespace}/{name}"


def build_view(nodes: Sequence[NodeInfo], pods: Iterable[PodInfo] = (), *,
               levels: Sequence[str] | None = None,
               policy: HealthPolicy = DEFAULT_POLICY) -> TopologyView:
    """The tree for ``nodes``; ``pods`` bound to them give GPU occupancy and workloads."""
    lv = tuple(levels) if levels else discover_layers(nodes)
    used = _accelerators_in_use(pods)
    tree = _TreeBuilder()
    skipped: list[str] = []
    placed: list[NodeView] = []
    for node in nodes:
        path, gap = _layer_path(node, lv)
        if not path or gap:
            skipped.append(node.name)
            tree.warnings.append(_skip_warning(node.name, lv, len(path), gap))
            continue
        view = _node_view(node, path, used.get(node.name, {}), policy)
        placed.append(view)
        tree.hang(view)
    warnings = tree.warnings
    unbound = sorted(set(used) - {n.name for n in placed} - set(skipped))
    if unbound and nodes:
        warnings.append(f"{len(unbound)} pod node name(s) not in the node list, e.g. {unbound[0]}")
    return TopologyView(levels=lv, roots=tree.sorted_roots(), nodes=placed, warnings=warnings, skipped=skipped)


def _accelerators_in_use(pods: Iterable[PodInfo]) -> dict[str, dict[str, int]]:
    """Node -> workload -> accelerators its live pods request (terminal pods hold nothing)."""
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        if not pod.node_name or pod.terminal:
            continue
        amount = sum(pod.requests.get(r, 0) for r in ACCELERATORS)
        per_node = used.setdefault(pod.node_name, {})
        key = workload_of(pod)
        per_node[key] = per_node.get(key, 0) + amount
    return used


def _layer_path(node: NodeInfo, levels: Sequence[str]) -> tuple[list[str], bool]:
    """The node's layer values down to its first missing layer, and whether a deeper layer is
    set after that gap (such a node cannot be hung anywhere without guessing)."""
    path: list[str] = []
    for key in levels:
        value = node.labels.get(key)
        if not value:
            break
        path.append(value)
    gap = any(node.labels.get(key) for key in levels[len(path):])
    return path, gap


def _skip_warning(node_name: str, levels: Sequence[str], depth: int, gap: bool) -> str:
    """Why a node is left out: the first layer label it lacks."""
    missing = levels[depth] if levels else LAYER_PREFIX + "1"
    return (f"node {node_name}: skipped, no {missing} label"
            + (" (but deeper layer labels)" if gap else ""))


def _node_view(node: NodeInfo, path: Sequence[str], workloads: Mapping[str, int],
               policy: HealthPolicy) -> NodeView:
    """One tile: health category, accelerator capacity and what runs there."""
    health = node_health(node, policy)
    category = HEALTHY if health.healthy else _category(health.reason)
    reason = health.reason
    if health.healthy and is_drained(node):
        category, reason = DRAINED, DRAINED_REASON
    return NodeView(
        name=node.name, path=tuple(path),
        health=category,
        reason=reason, gpus=sum(node.allocatable.get(r, 0) for r in ACCELERATORS),
        gpus_used=sum(workloads.values()),
        instance_type=node.labels.get("node.kubernetes.io/instance-type", ""),
        workloads=dict(sorted(workloads.items())),
    )


class _TreeBuilder:
    """Domains keyed by their full value path, created as nodes are hung under them; collects
    the warnings in the order they arise (skips and two-parent values interleaved)."""

    def __init__(self) -> None:
        self.roots: dict[str, Domain] = {}
        self.index: dict[tuple[str, ...], Domain] = {}
        self.first_parent: dict[tuple[int, str], tuple[str, ...]] = {}
        self.warnings: list[str] = []

    def hang(self, view: NodeView) -> None:
        """Add ``view`` to every domain on its path (aggregates) and to its deepest domain."""
        parent: Domain | None = None
        for depth in range(1, len(view.path) + 1):
            dom = self._domain(view.path[:depth], parent)
            dom.node_count += 1
            dom.healthy += view.health == HEALTHY
            dom.gpus += view.gpus
            dom.gpus_used += view.gpus_used
            parent = dom
        assert parent is not None
        parent.nodes.append(view)

    def _domain(self, key_path: tuple[str, ...], parent: Domain | None) -> Domain:
        """The domain at ``key_path``, created under ``parent`` on first sight."""
        dom = self.index.get(key_path)
        if dom is not None:
            return dom
        depth, value = len(key_path), key_path[-1]
        dom = Domain(level=depth, value=value, path=key_path)
        self.index[key_path] = dom
        if parent is None:
            self.roots[value] = dom
        else:
            parent.children.append(dom)
        seen = self.first_parent.setdefault((depth, value), key_path)
        if seen != key_path:
            self.warnings.append(f"layer {depth} value {value} appears under two parents "
                                 f"({seen[-2]} and {key_path[-2]}); Mermaid draws it under the first")
        return dom

    def sorted_roots(self) -> list[Domain]:
        """Roots and every child list by value, for stable output."""
        for dom in self.index.values():
            dom.children.sort(key=lambda d: d.value)
        return [self.roots[k] for k in sorted(self.roots)]


def view_to_dict(view: TopologyView) -> dict[str, object]:
    """JSON-ready form (``--format json``)."""

    def node_dict(n: NodeView) -> dict[str, object]:
        return {"name": n.name, "health": n.health, "reason": n.reason, "gpus": n.gpus,
                "gpusUsed": n.gpus_used, "instanceType": n.instance_type, "workloads": n.workloads}

    def dom_dict(d: Domain) -> dict[str, object]:
        out: dict[str, object] = {
            "level": d.level, "label": view.levels[d.level - 1], "value": d.value,
            "nodes": d.node_count, "healthy": d.healthy, "gpus": d.gpus, "gpusUsed": d.gpus_used,
        }
        if d.children:
            out["children"] = [dom_dict(c) for c in d.children]
        if d.nodes:
            out["members"] = [node_dict(n) for n in d.nodes]
        return out

    return {"levels": list(view.levels), "totals": view.totals(), "warnings": list(view.warnings),
            "skipped": list(view.skipped), "domains": [dom_dict(d) for d in view.roots]}


def level_counts(view: TopologyView) -> Mapping[int, int]:
    counts: dict[int, int] = {}
    for d in view.domains():
        counts[d.level] = counts.get(d.level, 0) + 1
    return counts
