"""``toposched place --kueue-config``: the Configuration's featureGates switch Kueue's TAS
features (here ``TASBalancedPlacement``, Kueue's "balanced placement; basic" case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scheduler.cli import main

LEVELS = ["cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"]


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    nodes = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": name, "labels": dict(zip(LEVELS, ("b1", rack, name), strict=True))},
         "status": {"allocatable": {"cpu": "15", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}
        for name, rack in (("x1", "r1"), ("x2", "r2"))]}
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": lvl} for lvl in LEVELS]}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
           "spec": {"parallelism": 25, "completions": 25, "template": {
               "metadata": {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": LEVELS[1]}},
               "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}
    paths = tmp_path / "nodes.yaml", tmp_path / "topology.yaml", tmp_path / "job.yaml"
    for path, doc in zip(paths, (nodes, topo, job), strict=True):
        path.write_text(yaml.safe_dump(doc))
    return paths


def _counts(capsys: pytest.CaptureFixture[str], tmp_path: Path, *extra: str) -> dict[str, int]:
    nodes, topo, job = _files(tmp_path)
    code = main(["place", "--nodes", str(nodes), "--topology", str(topo), "--workload", str(job),
                 "--solver", "greedy", "--output", "json", *extra])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    return {a["domain"]: a["count"] for a in doc["podSets"][0]["assignments"]}


def test_balanced_placement_gate_from_the_kueue_configuration(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    assert _counts(capsys, tmp_path) == {"b1/r1/x1": 15, "b1/r2/x2": 10}  # Kueue's default: BestFit
    config = tmp_path / "kueue-config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                      "featureGates": {"TASBalancedPlacement": True}}))
    assert _counts(capsys, tmp_path, "--kueue-config", str(config)) == {"b1/r1/x1": 13, "b1/r2/x2": 12}


def test_kueue_config_is_refused_with_server(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    nodes, _, job = _files(tmp_path)
    code = main(["place", "--server", "127.0.0.1:1", "--workload", str(job), "--kueue-config", str(nodes)])
    assert code == 2
    assert "--kueue-config is for offline placement" in capsys.readouterr().err
