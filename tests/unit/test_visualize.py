"""scripts/visualize_topology and `toposched topology`: exact Mermaid, warnings, HTML, errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cli import main as toposched
from scheduler.commands.topology import script_main
from scheduler.core.fakecluster import generate_nodes
from scheduler.core.nodes import node_from_k8s, pod_from_k8s
from scheduler.topoview import build_view, render_html, render_mermaid, sanitize_id, view_to_dict

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "visualize_topology"
L = "topology.k8s.aws/network-node-layer-"


def k8s_node(name: str, *layers: str, health: str | None = "Schedulable", gpus: int = 8,
             **extra: Any) -> dict[str, Any]:
    labels = {f"{L}{i}": v for i, v in enumerate(layers, start=1)}
    labels["kubernetes.io/hostname"] = name
    labels["node.kubernetes.io/instance-type"] = "ml.p5.48xlarge"  # a type AWS's script draws
    if health is not None:
        labels["sagemaker.amazonaws.com/node-health-status"] = health
    labels.update(extra.pop("labels", {}))
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": extra.pop("spec", {}),
            "status": {"allocatable": {"cpu": "192", "nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def node_list(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(nodes)}


THREE = [  # kubectl order (by name); nn-b* sorts after nn-a*
    k8s_node("hyperpod-i-0aaa", "nn-b1", "nn-b1-x", "nn-b1-x-1"),
    k8s_node("hyperpod-i-0bbb", "nn-a1", "nn-a1-x", "nn-a1-x-1"),
    k8s_node("hyperpod-i-0ccc", "nn-a1", "nn-a1-x", "nn-a1-x-2"),
    k8s_node("hyperpod-i-0ddd", "nn-a1", "nn-a1-y", "nn-a1-y-1"),
]
THREE_MERMAID = """\
flowchart TD
    A["Cluster Topology"]
    A --> L1_nn_a1["Layer 1: nn-a1"]
    A --> L1_nn_b1["Layer 1: nn-b1"]
    L1_nn_a1 --> L2_nn_a1_x["Layer 2: nn-a1-x"]
    L1_nn_a1 --> L2_nn_a1_y["Layer 2: nn-a1-y"]
    L1_nn_b1 --> L2_nn_b1_x["Layer 2: nn-b1-x"]
    L2_nn_a1_x --> L3_nn_a1_x_1["Layer 3: nn-a1-x-1"]
    L2_nn_a1_x --> L3_nn_a1_x_2["Layer 3: nn-a1-x-2"]
    L2_nn_a1_y --> L3_nn_a1_y_1["Layer 3: nn-a1-y-1"]
    L2_nn_b1_x --> L3_nn_b1_x_1["Layer 3: nn-b1-x-1"]
    L3_nn_b1_x_1 --> N_hyperpod_i_0aaa["hyperpod-i-0aaa"]
    L3_nn_a1_x_1 --> N_hyperpod_i_0bbb["hyperpod-i-0bbb"]
    L3_nn_a1_x_2 --> N_hyperpod_i_0ccc["hyperpod-i-0ccc"]
    L3_nn_a1_y_1 --> N_hyperpod_i_0ddd["hyperpod-i-0ddd"]
"""

FOUR = [
    k8s_node("hyperpod-i-01", "nn-1", "nn-2a", "nn-3a", "nn-4a"),
    k8s_node("hyperpod-i-02", "nn-1", "nn-2a", "nn-3a", "nn-4b"),
    k8s_node("hyperpod-i-03", "nn-1", "nn-2b", "nn-3b", "nn-4c"),
]
FOUR_MERMAID = """\
flowchart TD
    A["Cluster Topology"]
    A --> L1_nn_1["Layer 1: nn-1"]
    L1_nn_1 --> L2_nn_2a["Layer 2: nn-2a"]
    L1_nn_1 --> L2_nn_2b["Layer 2: nn-2b"]
    L2_nn_2a --> L3_nn_3a["Layer 3: nn-3a"]
    L2_nn_2b --> L3_nn_3b["Layer 3: nn-3b"]
    L3_nn_3a --> L4_nn_4a["Layer 4: nn-4a"]
    L3_nn_3a --> L4_nn_4b["Layer 4: nn-4b"]
    L3_nn_3b --> L4_nn_4c["Layer 4: nn-4c"]
    L4_nn_4a --> N_hyperpod_i_01["hyperpod-i-01"]
    L4_nn_4b --> N_hyperpod_i_02["hyperpod-i-02"]
    L4_nn_4c --> N_hyperpod_i_03["hyperpod-i-03"]
"""


def write(tmp_path: Path, name: str, data: Any, as_yaml: bool = False) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if as_yaml else json.dumps(data))
    return path


def run_script(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = script_main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_three_layer_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_script(["--nodes", str(write(tmp_path, "n.json", node_list(*THREE)))], capsys)
    assert code == 0, err
    assert out == THREE_MERMAID
    assert err == ""


def test_four_layer_exact_from_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "n.yaml", node_list(*FOUR), as_yaml=True)
    code, out, _ = run_script(["--nodes", str(path)], capsys)
    assert code == 0
    assert out == FOUR_MERMAID


def test_engine_is_pure_and_matches() -> None:
    view = build_view([node_from_k8s(n) for n in THREE])
    assert render_mermaid(view) == THREE_MERMAID
    assert view.levels == (f"{L}1", f"{L}2", f"{L}3")


@pytest.mark.parametrize("raw, sanitized", [
    ("nn-1a2b", "nn_1a2b"), ("a.b:c/d e", "a_b_c_d_e"), ("ABC123", "ABC123"), ("ü-x", "__x"),
    ("ip-10-0-1-2.ec2.internal", "ip_10_0_1_2_ec2_internal"),
])
def test_id_sanitising(raw: str, sanitized: str) -> None:
    assert sanitize_id(raw) == sanitized


def test_sanitised_ids_in_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = node_list(k8s_node("ip-10-0-1-2.ec2.internal", "nn.top:1", "nn/mid", "nn leaf"))
    code, out, _ = run_script(["--nodes", str(write(tmp_path, "n.json", nodes))], capsys)
    assert code == 0
    assert out.splitlines()[2:] == [
        '    A --> L1_nn_top_1["Layer 1: nn.top:1"]',
        '    L1_nn_top_1 --> L2_nn_mid["Layer 2: nn/mid"]',
        '    L2_nn_mid --> L3_nn_leaf["Layer 3: nn leaf"]',
        '    L3_nn_leaf --> N_ip_10_0_1_2_ec2_internal["ip-10-0-1-2.ec2.internal"]',
    ]


def test_unlabelled_nodes_skipped_with_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cpu = k8s_node("ip-10-0-0-9.ec2.internal", health=None)
    gap = k8s_node("hyperpod-i-0gap", "nn-a1")
    gap["metadata"]["labels"][f"{L}3"] = "nn-zz"  # layer 3 without layer 2
    nodes = node_list(*THREE, cpu, gap)
    code, out, err = run_script(["--nodes", str(write(tmp_path, "n.json", nodes))], capsys)
    assert code == 0
    assert out == THREE_MERMAID
    assert ("warning: node ip-10-0-0-9.ec2.internal: skipped, no topology.k8s.aws/network-node-layer-1 "
            "label") in err
    assert "warning: node hyperpod-i-0gap: skipped" in err


def test_mixed_depth_nodes_hang_under_their_own_deepest_layer() -> None:
    view = build_view([node_from_k8s(n) for n in [*THREE, FOUR[0]]])
    text = render_mermaid(view)
    assert '    L3_nn_b1_x_1 --> N_hyperpod_i_0aaa["hyperpod-i-0aaa"]' in text
    assert '    L4_nn_4a --> N_hyperpod_i_01["hyperpod-i-01"]' in text


@pytest.mark.parametrize("data, message", [
    (node_list(*THREE) | {"kind": "PodList"}, "items[0]: kind: a 'Node' inside a PodList; a PodList holds Pod "
                                             "objects only"),
    (node_list(*THREE) | {"kind": "PodList", "items": [{"metadata": {"name": "p"}}]},
     "items[0] (p): kind: expected Node objects (kubectl get nodes -o yaml) or a cluster description "
     "(examples/clusters/), got 'Pod'"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}, "bad.json: kind: expected Node objects"),
    (node_list(THREE[0], {"kind": "Pod", "metadata": {"name": "p1"}}), "items[1] (p1): kind: expected Node objects"),
    (node_list({"kind": "Node", "metadata": {}}), "items[0]: metadata.name: Required value; every Node has a name"),
    ([1, 2], "top level: expected a Kubernetes object (a mapping), got a list"),
    (node_list(), "no Node objects in it; expected Node objects"),
    (node_list(k8s_node("plain", health=None)), "no node in"),
])
def test_bad_node_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: Any, message: str) -> None:
    code, out, err = run_script(["--nodes", str(write(tmp_path, "bad.json", data))], capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("visualize_topology: ")
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_bad_quantities_name_their_file_object_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad quantity names the file it came from (the pods file, not the nodes file), the object
    and the field, in one line."""
    bad_node = k8s_node("hyperpod-i-0neg", "nn-a1", "nn-a1-x", "nn-a1-x-1")
    bad_node["status"]["allocatable"]["nvidia.com/gpu"] = "-8"
    nodes = str(write(tmp_path, "n.json", node_list(*THREE, bad_node)))
    code, out, err = run_script(["--nodes", nodes], capsys)
    assert (code, out) == (2, "")
    assert f"nodes file {nodes}: items[4] (hyperpod-i-0neg): status.allocatable: negative quantity '-8'" in err
    assert len(err.strip().splitlines()) == 1
    good = str(write(tmp_path, "good.json", node_list(*THREE)))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "d"},
           "spec": {"nodeName": THREE[0]["metadata"]["name"],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}
    pods = str(write(tmp_path, "p.json", pod))
    code, out, err = toposched_run(["topology", "--nodes", good, "--pods", pods, "--format", "json"], capsys)
    assert (code, out) == (2, "")
    assert (f'pods file {pods}: spec.containers[0].resources.requests[cpu]: Invalid value: "lots": must be a '
            "quantity") in err
    assert good not in err and len(err.strip().splitlines()) == 1


def toposched_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = toposched(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_unreadable_yaml_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: List\nitems: [\n  - {a: 1\n")
    code, _, err = run_script(["--nodes", str(bad)], capsys)
    assert code == 2 and "not valid JSON or YAML at line" in err and len(err.splitlines()) == 1
    code, _, err = run_script(["--nodes", str(tmp_path / "nope.json")], capsys)
    assert code == 2 and "no such file" in err


def test_unknown_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(write(tmp_path, "n.json", node_list(*THREE)))
    code, _, err = run_script(["--nodes", path, "--levels", f"{L}1,{L}9"], capsys)
    assert code == 2
    assert f"level '{L}9' is not a label of any node in {path} (the nodes' layer labels: {L}1, {L}2, {L}3); " \
        "check --levels/--topology" in err
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": f"{L}1"}, {"nodeLabel": "rack"},
                                {"nodeLabel": "kubernetes.io/hostname"}]}}
    topo_file = str(write(tmp_path, "t.yaml", topo, True))
    code, _, err = run_script(["--nodes", path, "--topology", topo_file], capsys)
    assert code == 2 and "level 'rack'" in err
    wrong = write(tmp_path, "cq.yaml", {"kind": "ClusterQueue", "metadata": {"name": "x"}}, True)
    code, _, err = run_script(["--nodes", path, "--topology", str(wrong)], capsys)
    assert code == 2 and "kind: expected a Kueue Topology (spec.levels[].nodeLabel), got ClusterQueue" in err


def test_levels_from_kueue_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo = {"kind": "Topology", "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": f"{L}1"}, {"nodeLabel": f"{L}2"},
                                {"nodeLabel": "kubernetes.io/hostname"}]}}
    path = str(write(tmp_path, "n.json", node_list(*THREE)))
    topo_file = str(write(tmp_path, "t.yaml", topo, True))
    code, out, _ = run_script(["--nodes", path, "--topology", topo_file], capsys)
    assert code == 0
    assert '    L2_nn_a1_x --> N_hyperpod_i_0bbb["hyperpod-i-0bbb"]' in out
    assert "Layer 3" not in out


def pods_for(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    def pod(i: int, node: str, job: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
        return {"kind": "Pod", "metadata": {"name": f"{job}-{i}", "namespace": "hyperpod-ns-team-a",
                                            "labels": {"job-name": job}},
                "spec": {"nodeName": node, "containers": [
                    {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
                "status": {"phase": phase}}
    names = [n["metadata"]["name"] for n in nodes]
    return node_list(pod(0, names[0], "llama", 8), pod(1, names[1], "llama", 8),
                     pod(2, names[1], "old", 8, "Succeeded"), pod(3, names[2], "eval", 2))


def test_html_self_contained_with_health_and_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [dict(n) for n in THREE]
    nodes[3] = k8s_node("hyperpod-i-0ddd", "nn-a1", "nn-a1-y", "nn-a1-y-1",
                        health="UnschedulablePendingReboot")
    html_path = tmp_path / "topology.html"
    code, out, err = run_script(["--nodes", str(write(tmp_path, "n.json", node_list(*nodes))),
                                 "--pods", str(write(tmp_path, "p.json", pods_for(nodes))),
                                 "--html", str(html_path)], capsys)
    assert code == 0, err
    assert out.startswith("flowchart TD")
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert "<svg" in page and "UnschedulablePendingReboot" in page
    assert "llama (8)" in page and "eval (2)" in page and "old (8)" not in page
    assert "18 / 32 (56%)" in page  # 8 + 8 + 2 of 4 x 8 (the Succeeded pod does not count)
    assert "GPU 8/8" in page and "GPU 2/8" in page
    assert "Layer 3: nn-a1-y-1" in page


def test_collapsed_view_for_large_clusters() -> None:
    desc = {"name": "big", "layers": [2, 4, 8], "nodesPerDomain": 16}
    nodes = [node_from_k8s(n) for n in generate_nodes(desc)]
    view = build_view(nodes)
    page = render_html(view)  # automatic: 1024 nodes > 400
    assert "collapsed view" in page and "16 nodes: 16 healthy<" in page
    assert 'class="node"' not in page
    full = render_html(view, collapse_at=0)
    assert full.count('class="node"') == 1024
    assert "collapsed view" in render_html(build_view(nodes[:64]), collapse_at=10)


def test_json_format_and_toposched_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(write(tmp_path, "n.json", node_list(*THREE)))
    assert toposched(["topology", "--nodes", path, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["levels"] == [f"{L}1", f"{L}2", f"{L}3"]
    assert data["totals"]["nodes"] == 4 and data["totals"]["gpus"] == 32
    assert [d["value"] for d in data["domains"]] == ["nn-a1", "nn-b1"]
    assert toposched(["topology", "--nodes", path]) == 0
    assert capsys.readouterr().out == THREE_MERMAID
    assert toposched(["topology", "--nodes", str(tmp_path / "missing.json")]) == 2
    assert "toposched topology: nodes file" in capsys.readouterr().err


def test_view_dict_and_fake_cluster_input(capsys: pytest.CaptureFixture[str]) -> None:
    desc = str(ROOT / "examples/clusters/small-4layer.yaml")
    code, out, _ = run_script(["--cluster", desc, "--format", "json"], capsys)
    assert code == 0
    totals = json.loads(out)["totals"]
    assert totals == {"nodes": 16, "healthy": 14, "unhealthy": 1, "unavailable": 1, "drained": 0, "gpus": 128,
                      "gpus_used": 0, "skipped": 0, "domains": 15}
    view = build_view([node_from_k8s(n) for n in THREE], [pod_from_k8s(p) for p in pods_for(THREE)["items"]])
    assert view_to_dict(view)["totals"]["gpus_used"] == 18  # type: ignore[index]


def test_script_runs_from_checkout_without_install(tmp_path: Path) -> None:
    path = write(tmp_path, "n.json", node_list(*FOUR))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--nodes", str(path)], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == FOUR_MERMAID
    bad = write(tmp_path, "bad.json", {"kind": "Service", "metadata": {"name": "x"}})
    proc = subprocess.run([sys.executable, str(SCRIPT), "--nodes", str(bad)], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "got 'Service'" in proc.stderr


def test_drained_nodes_are_shown_as_drained() -> None:
    """toposched.io/drain (domain drain, docs/beyond-kueue.md): its own category and count."""
    drained = [dict(n, metadata=dict(n["metadata"], labels={**n["metadata"]["labels"], "toposched.io/drain": "true"}))
               if i == 0 else n for i, n in enumerate(THREE)]
    view = build_view([node_from_k8s(n) for n in drained])
    assert view.totals()["drained"] == 1
    (first,) = [v for v in view.nodes if v.name == THREE[0]["metadata"]["name"]]
    assert first.health == "drained" and "toposched.io/drain" in first.reason


def test_instance_types_aws_script_skips_are_skipped_with_a_warning_per_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As AWS's visualize_topology.sh: nodes of types it does not draw (g5, or no type label) are
    left out, with one warning per type naming the flag that draws them (they were drawn
    without a word); with --include-instance-types they are drawn."""
    g5 = [k8s_node(f"hyperpod-i-0g5{i}", "nn-a1", "nn-a1-x", "nn-a1-x-1",
                   labels={"node.kubernetes.io/instance-type": "ml.g5.8xlarge"}) for i in range(2)]
    bare = k8s_node("hyperpod-i-0bare", "nn-a1", "nn-a1-x", "nn-a1-x-1")
    del bare["metadata"]["labels"]["node.kubernetes.io/instance-type"]
    path = str(write(tmp_path, "n.json", node_list(*THREE, *g5, bare)))
    code, out, err = run_script(["--nodes", path], capsys)
    assert code == 0 and out == THREE_MERMAID, out
    assert err.splitlines() == [
        "warning: skipped 1 node(s) of instance type (none: no node.kubernetes.io/instance-type label): AWS's "
        "visualize_topology.sh does not draw this type; add --include-instance-types '*' to draw them",
        "warning: skipped 2 node(s) of instance type ml.g5.8xlarge: AWS's visualize_topology.sh does not draw "
        "this type; add --include-instance-types 'ml.g5.8xlarge' to draw them"]
    code, out, err = run_script(["--nodes", path, "--include-instance-types", "ml.g5.*"], capsys)
    assert code == 0 and "hyperpod-i-0g50" in out and "hyperpod-i-0g51" in out and "0bare" not in out
    assert "ml.g5.8xlarge" not in err and "(none: no node.kubernetes.io/instance-type label)" in err
    code, out, _ = run_script(["--nodes", path, "--include-instance-types", "*"], capsys)
    assert code == 0 and "hyperpod-i-0bare" in out
    # toposched topology is toposched's own view: every labelled node, as before
    assert toposched(["topology", "--nodes", path]) == 0
    assert "hyperpod-i-0g50" in capsys.readouterr().out


def test_only_unsupported_instance_types_exit_1_as_aws_script(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    g5 = [k8s_node(f"hyperpod-i-0g5{i}", "nn-a1", "nn-a1-x", "nn-a1-x-1",
                   labels={"node.kubernetes.io/instance-type": "ml.g5.8xlarge"}) for i in range(3)]
    path = str(write(tmp_path, "n.json", node_list(*g5)))
    code, out, err = run_script(["--nodes", path], capsys)
    assert (code, out) == (1, "")
    assert err.strip() == (
        f"visualize_topology: no node in {path} is of an instance type AWS's visualize_topology.sh draws (found 3 "
        "node(s) of instance type ml.g5.8xlarge); add --include-instance-types 'ml.g5.8xlarge' to draw them")
    plain = [k8s_node(f"p5-{i}", "nn-a1", "nn-a1-x", "nn-a1-x-1",
                      labels={"node.kubernetes.io/instance-type": "p5.48xlarge"}) for i in range(2)]
    code, out, _ = run_script(["--nodes", str(write(tmp_path, "eks.json", node_list(*plain)))], capsys)
    assert code == 0 and "p5-1" in out  # EKS spelling (no "ml.") as the script's first versions
