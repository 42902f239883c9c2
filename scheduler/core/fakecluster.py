"""Fake HyperPod nodes from a small cluster description (pure: no I/O, deterministic).

A description is a plain dict (usually one YAML document, see ``examples/clusters/``)::

    name: hyperpod-64               # seeds the ids; same description -> same nodes
    instanceType: ml.p5.48xlarge
    layers: [2, 2, 4]               # fan-out per network layer: 2 layer-1 nodes, each with
                                    # 2 layer-2 children, each with 4 layer-3 children
    nodesPerDomain: 4               # Kubernetes nodes under each deepest-layer domain
    # optional:
    nodeCount: 60                   # stop after this many nodes (uneven last domains)
    resources: {nvidia.com/gpu: 8}  # override/extend the instance type's capacity
    labels: {k: v}                  # extra labels on every node
    nodes:                          # per-node overrides, by index (0-based) or by name
      - index: 5
        labels: {sagemaker.amazonaws.com/node-health-status: UnschedulablePendingReplacement}
        taints: [{key: sagemaker.amazonaws.com/node-health-status, value: Unschedulable,
                  effect: NoSchedule}]
        unschedulable: true
        ready: false
        conditions: [{type: NvidiaErrorReboot, status: "True", reason: XidHardwareFailure}]

:func:`generate_nodes` returns core/v1 Node objects as dicts (``kubectl get node -o json``
shape, status included): labels ``topology.k8s.aws/network-node-layer-1..N`` (layer-1 = top,
as the AWS cloud-controller-manager writes them), ``kubernetes.io/hostname`` (= node name),
``node.kubernetes.io/instance-type``, ``sagemaker.amazonaws.com/node-health-status:
Schedulable``; capacity = allocatable from the instance type table; a Ready condition.
Node names look like real HyperPod ones (``hyperpod-i-0<16 hex>``) and layer values like
EC2 network node ids (``nn-<17 hex>``), both derived from a hash of the name and position.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

LAYER_LABEL_PREFIX = "topology.k8s.aws/network-node-layer-"
HOSTNAME_LABEL = "kubernetes.io/hostname"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
HEALTH_STATUS_LABEL = "sagemaker.amazonaws.com/node-health-status"

# Capacity of the instance types we fake (Kubernetes quantity strings).
INSTANCE_TYPES: dict[str, dict[str, str]] = {
    "ml.p5.48xlarge": {"cpu": "192", "memory": "2048Gi", "pods": "110",
                       "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
    "ml.p5e.48xlarge": {"cpu": "192", "memory": "2048Gi", "pods": "110",
                        "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
    "ml.p5en.48xlarge": {"cpu": "192", "memory": "2048Gi", "pods": "110",
                         "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "16"},
    "ml.p4d.24xlarge": {"cpu": "96", "memory": "1152Gi", "pods": "110",
                        "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"},
    "ml.p6-b200.48xlarge": {"cpu": "192", "memory": "2048Gi", "pods": "110",
                            "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "8"},
    "ml.p6-b300.48xlarge": {"cpu": "192", "memory": "4096Gi", "pods": "110",
                            "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "16"},
    "ml.trn1.32xlarge": {"cpu": "128", "memory": "512Gi", "pods": "110",
                         "aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "8"},
}
DEFAULT_INSTANCE_TYPE = "ml.p5.48xlarge"
MAX_NODES = 200_000


def _hex(seed: str, *parts: object, length: int) -> str:
    text = "/".join([seed, *map(str, parts)])
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _positive_int(description: Mapping[str, Any], key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return value


def _fanout(description: Mapping[str, Any]) -> list[int]:
    layers = description.get("layers")
    if not isinstance(layers, Sequence) or isinstance(layers, str) or not layers:
        raise ValueError("layers must be a non-empty list of fan-outs, e.g. layers: [2, 2, 4]")
    return [_positive_int(description, f"layers[{i}]", v) for i, v in enumerate(layers)]


def _capacity(description: Mapping[str, Any], instance_type: str) -> dict[str, str]:
    base = INSTANCE_TYPES.get(instance_type)
    extra = description.get("resources") or {}
    if not isinstance(extra, Mapping):
        raise ValueError("resources must be a mapping of resource name to quantity")
    if base is None and not extra:
        known = ", ".join(sorted(INSTANCE_TYPES))
        raise ValueError(f"unknown instanceType {instance_type!r}: give resources explicitly "
                         f"or use one of {known}")
    capacity = dict(base or {})
    capacity.update({str(k): str(v) for k, v in extra.items()})
    return capacity


def _apply_override(node: dict[str, Any], override: Mapping[str, Any]) -> None:
    meta = node["metadata"]
    meta["labels"].update({str(k): str(v) for k, v in (override.get("labels") or {}).items()})
    if override.get("annotations"):
        meta.setdefault("annotations", {}).update(
            {str(k): str(v) for k, v in override["annotations"].items()})
    for key in (override.get("removeLabels") or ()):
        meta["labels"].pop(key, None)
    if override.get("taints"):
        node["spec"]["taints"] = [dict(t) for t in override["taints"]]
    if "unschedulable" in override:
        node["spec"]["unschedulable"] = bool(override["unschedulable"])
    conditions = node["status"]["conditions"]
    if "ready" in override:
        conditions[0] = {**conditions[0], "status": "True" if override["ready"] else "False",
                         "reason": "KubeletReady" if override["ready"] else "KubeletNotReady"}
    for cond in override.get("conditions") or ():
        conditions.append({"type": str(cond["type"]), "status": str(cond.get("status", "True")),
                           "reason": str(cond.get("reason", "")),
                           "message": str(cond.get("message", ""))})


def generate_nodes(description: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Node dicts for ``description`` (see module doc). Raises ValueError on a bad description."""
    if not isinstance(description, Mapping):
        raise ValueError("a cluster description must be a mapping (name, instanceType, layers, "
                         "nodesPerDomain)")
    name = str(description.get("name") or "hyperpod")
    instance_type = str(description.get("instanceType") or DEFAULT_INSTANCE_TYPE)
    fanout = _fanout(description)
    per_domain = _positive_int(description, "nodesPerDomain", description.get("nodesPerDomain", 4))
    capacity = _capacity(description, instance_type)
    extra_labels = {str(k): str(v) for k, v in (description.get("labels") or {}).items()}
    count = _node_count(description, fanout, per_domain)
    nodes: list[dict[str, Any]] = []
    for index in range(count):
        labels = _layer_labels(name, _domain_path(index // per_domain, fanout))
        node_name = "hyperpod-i-0" + _hex(name, "node", index, length=16)
        labels[HOSTNAME_LABEL] = node_name
        labels[INSTANCE_TYPE_LABEL] = instance_type
        labels[HEALTH_STATUS_LABEL] = "Schedulable"
        labels.update(extra_labels)
        nodes.append(_node_object(node_name, labels, capacity))
    _apply_overrides(nodes, description.get("nodes") or ())
    return nodes


def _node_count(description: Mapping[str, Any], fanout: Sequence[int], per_domain: int) -> int:
    """Every slot of the tree, or fewer when ``nodeCount`` says so; capped at MAX_NODES."""
    slots = per_domain
    for f in fanout:
        slots *= f
    count = slots
    if description.get("nodeCount") is not None:
        count = min(slots, _positive_int(description, "nodeCount", description["nodeCount"]))
    if count > MAX_NODES:
        raise ValueError(f"description yields {count} nodes, more than the {MAX_NODES} supported")
    return count


def _domain_path(leaf: int, fanout: Sequence[int]) -> list[int]:
    """Position of deepest-layer domain number ``leaf`` at every layer, widest first."""
    path: list[int] = []
    rest = leaf
    for f in reversed(fanout):
        rest, pos = divmod(rest, f)
        path.append(pos)
    path.reverse()
    return path


def _layer_labels(name: str, path: Sequence[int]) -> dict[str, str]:
    """Layer values: one id per domain, keyed by its full path so equal positions under
    different parents get different ids (a strict tree, as EC2 reports it)."""
    return {
        f"{LAYER_LABEL_PREFIX}{level + 1}": "nn-" + _hex(name, "layer", level + 1, *path[: level + 1], length=17)
        for level in range(len(path))
    }


def _node_object(node_name: str, labels: dict[str, str], capacity: Mapping[str, str]) -> dict[str, Any]:
    """A Ready core/v1 Node as ``kubectl get node -o json`` shows it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake node"}],
        },
    }


def _apply_overrides(nodes: list[dict[str, Any]], overrides: Sequence[Any]) -> None:
    """The description's per-node overrides, each on the node it names by index or name."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    for i, override in enumerate(overrides):
        _apply_override(_override_target(i, override, nodes, by_name), override)


def _override_target(i: int, override: Any, nodes: list[dict[str, Any]],
                     by_name: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The node ``nodes[i]`` of the description points at; ValueError when it points nowhere."""
    count = len(nodes)
    if not isinstance(override, Mapping):
        raise ValueError(f"nodes[{i}] must be a mapping with index or name")
    if "index" in override:
        idx = override["index"]
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < count:
            raise ValueError(f"nodes[{i}].index {idx!r} is out of range 0..{count - 1}")
        return nodes[idx]
    if "name" in override:
        if override["name"] not in by_name:
            raise ValueError(f"nodes[{i}].name {override['name']!r} is not a generated node")
        return by_name[override["name"]]
    raise ValueError(f"nodes[{i}] needs index or name")


def node_list(description: Mapping[str, Any]) -> dict[str, Any]:
    """The same nodes wrapped as a ``v1 List`` (what ``kubectl get nodes -o json`` prints)."""
    return {"apiVersion": "v1", "kind": "List", "items": generate_nodes(description),
            "metadata": {"resourceVersion": ""}}
