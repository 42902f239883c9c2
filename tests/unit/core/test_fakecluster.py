"""generate_nodes: shape, determinism, overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.core.fakecluster import generate_nodes
from scheduler.core.nodes import node_from_k8s

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "clusters"
L = "topology.k8s.aws/network-node-layer-"


def test_hyperpod_64_example() -> None:
    nodes = generate_nodes(yaml.safe_load((EXAMPLES / "hyperpod-64.yaml").read_text()))
    assert len(nodes) == 64
    labels = [n["metadata"]["labels"] for n in nodes]
    assert len({lab[L + "1"] for lab in labels}) == 2
    assert len({lab[L + "2"] for lab in labels}) == 4
    assert len({lab[L + "3"] for lab in labels}) == 16
    assert not any(L + "4" in lab for lab in labels)
    first = nodes[0]
    name = first["metadata"]["name"]
    assert name.startswith("hyperpod-i-0") and len(name) == len("hyperpod-i-0") + 16
    assert first["metadata"]["labels"]["kubernetes.io/hostname"] == name
    assert first["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "ml.p5.48xlarge"
    assert first["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"
    assert first["status"]["allocatable"] == {"cpu": "192", "memory": "2048Gi", "pods": "110",
                                              "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    info = node_from_k8s(first)
    assert info.ready and info.allocatable["nvidia.com/gpu"] == 8
    assert len({n["metadata"]["name"] for n in nodes}) == 64


def test_deterministic_and_four_layers() -> None:
    desc = yaml.safe_load((EXAMPLES / "small-4layer.yaml").read_text())
    a, b = generate_nodes(desc), generate_nodes(desc)
    assert a == b
    assert len(a) == 16
    assert {L + "4"} <= set(a[0]["metadata"]["labels"])
    failing = node_from_k8s(a[3])
    assert failing.labels["sagemaker.amazonaws.com/node-health-status"] == "UnschedulablePendingReplacement"
    assert failing.taints and failing.condition("NvidiaErrorReboot") is not None
    assert node_from_k8s(a[10]).unschedulable


def test_strict_tree_and_node_count() -> None:
    nodes = generate_nodes({"name": "x", "layers": [2, 3], "nodesPerDomain": 2, "nodeCount": 9})
    assert len(nodes) == 9
    parent: dict[str, str] = {}
    for n in nodes:
        lab = n["metadata"]["labels"]
        assert parent.setdefault(lab[L + "2"], lab[L + "1"]) == lab[L + "1"]


@pytest.mark.parametrize("desc, message", [
    ({"layers": []}, "layers must be a non-empty list"),
    ({"layers": [2, 0]}, "layers[1] must be a positive integer"),
    ({"layers": [2], "nodesPerDomain": "4"}, "nodesPerDomain must be a positive integer"),
    ({"layers": [2], "instanceType": "ml.c5.large"}, "unknown instanceType"),
    ({"layers": [2], "nodes": [{"index": 99}]}, "out of range"),
    ({"layers": [2], "nodes": [{"labels": {}}]}, "needs index or name"),
    ([1, 2], "must be a mapping"),
])
def test_bad_descriptions(desc: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        generate_nodes(desc)  # type: ignore[arg-type]
