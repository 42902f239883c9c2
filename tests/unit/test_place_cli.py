"""The ``toposched place`` contract: exit codes, JSON shape, readable errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.adapter.kinds.workloads import EXPECTED_KINDS
from scheduler.cli import main

DATA = Path(__file__).resolve().parent.parent / "data" / "place"
NODES, TOPO, PODS = DATA / "nodes.yaml", DATA / "topology.yaml", DATA / "pods.yaml"
L3 = "topology.k8s.aws/network-node-layer-3"


def ps_levels() -> tuple[str, ...]:
    return (*(f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3)), "kubernetes.io/hostname")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["place", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def run_json(capsys: pytest.CaptureFixture[str], workload: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run(
        capsys, "--nodes", str(NODES), "--workload", str(workload), "--output", "json", *extra
    )
    assert err == ""
    return code, json.loads(out)


def test_required_fits_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, DATA / "job-required-l3.yaml", "--topology", str(TOPO))
    assert code == 0
    assert set(doc) == {"apiVersion", "topology", "levels", "fits", "reason", "solver", "optimal", "podSets",
                        "emptyCluster", "note"}
    assert doc["apiVersion"] == "toposched.io/place/v1"
    assert doc["topology"] == "hyperpod" and doc["levels"] == list(ps_levels())
    assert doc["fits"] is True and doc["reason"] == "" and doc["solver"] in ("greedy", "cpsat")
    assert isinstance(doc["optimal"], bool)
    (ps,) = doc["podSets"]
    assert ps["name"] == "main" and ps["count"] == 3
    assert sum(a["count"] for a in ps["assignments"]) == 3
    assert all(set(a) == {"domain", "nodes", "count"} for a in ps["assignments"])
    assert list(ps["domains"]) == list(ps_levels())
    assert len(ps["domains"][L3]) == 1  # required: one layer-3 domain
    # Full value paths: every domain path extends its parent's; leaves are the assignments' domains.
    assert sorted(ps["domains"]["kubernetes.io/hostname"]) == sorted(a["domain"] for a in ps["assignments"])
    for a in ps["assignments"]:
        assert a["domain"].split("/")[:3] == ps["domains"][L3][0].split("/")
        assert a["nodes"] == [a["domain"].split("/")[-1]]  # hostname lowest: one node per leaf


def test_does_not_fit_exit_1_with_kueue_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, DATA / "job-required-l3-nofit.yaml", "--solver", "greedy")
    assert code == 1
    assert doc["fits"] is False and doc["podSets"] == []
    assert doc["reason"] == (
        'topology "default" allows to fit only 4 out of 5 pod(s). '
        'Total nodes: 16; excluded: resource "nvidia.com/gpu": 3'
    )


def test_unknown_level_lists_the_known_levels_as_the_webhook_does(capsys: pytest.CaptureFixture[str]) -> None:
    """Kueue never admits a job asking for a level its Topology lacks, so place refuses the input
    (exit 2) with the webhook's words and the levels it has (it said "does not fit", exit 1)."""
    code, out, err = run(capsys, "--nodes", str(NODES), "--workload", str(DATA / "job-bad-level.yaml"))
    assert (code, out) == (2, "")
    assert err.strip() == (
        f"toposched place: workload file {DATA / 'job-bad-level.yaml'}: pod set main: level \"example.com/rack\" "
        f"is not in Topology \"default\" (levels: {', '.join(ps_levels())}); use one of those levels")


def test_pods_file_uses_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    _, before = run_json(capsys, DATA / "job-required-l3.yaml", "--solver", "greedy")
    assert "n-a1-0" in {n for a in before["podSets"][0]["assignments"] for n in a["nodes"]}
    code, after = run_json(capsys, DATA / "job-required-l3.yaml", "--solver", "greedy", "--pods", str(PODS))
    assert code == 0
    assert "n-a1-0" not in {n for a in after["podSets"][0]["assignments"] for n in a["nodes"]}


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "auto"])
def test_preferred_every_solver(capsys: pytest.CaptureFixture[str], solver: str) -> None:
    code, doc = run_json(
        capsys, DATA / "job-preferred-l3.yaml", "--solver", solver, "--time-budget-ms", "500"
    )
    assert code == 0
    assert sum(a["count"] for a in doc["podSets"][0]["assignments"]) == 6
    if solver == "greedy":
        assert doc["solver"] == "greedy" and doc["optimal"] is False


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--nodes", str(NODES), "--workload", str(DATA / "job-required-l3.yaml"))
    assert code == 0 and out.startswith("fits (solver") and "pod set main: 3 pod(s)" in out
    code, out, _ = run(capsys, "--nodes", str(NODES), "--workload", str(DATA / "job-required-l3-nofit.yaml"))
    assert code == 1 and out.startswith("does not fit: topology")


def test_kueue_workload_and_multidoc_nodes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    nodes = yaml.safe_load(NODES.read_text())["items"]
    multi = tmp_path / "nodes.yaml"
    multi.write_text(yaml.safe_dump_all(nodes))
    job = yaml.safe_load((DATA / "job-required-l3.yaml").read_text())
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "workers",
                    "count": 2,
                    "template": job["spec"]["template"],
                    "topologyRequest": {"required": L3},
                },
                {"name": "launcher", "count": 1, "template": job["spec"]["template"]},
            ],
        },
    }
    path = tmp_path / "wl.yaml"
    path.write_text(yaml.safe_dump(wl))
    code, out, err = run(capsys, "--nodes", str(multi), "--workload", str(path), "--output", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [p["name"] for p in doc["podSets"]] == ["workers", "launcher"]
    assert [sum(a["count"] for a in p["assignments"]) for p in doc["podSets"]] == [2, 1]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "flag, content, expect",
    [
        ("--nodes", None, "no such file"),
        ("--nodes", "items: [\n  - a: b\n  c", "not valid JSON or YAML at line 2"),
        ("--nodes", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", "kind: expected Node"),
        ("--nodes", "kind: List\nitems:\n- kind: Node\n  metadata: {}\n", "items[0]: metadata.name: Required value"),
        (
            "--nodes",
            "kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: lots}}\n",
            "status.allocatable",
        ),
        (
            "--workload",
            "kind: ConfigMap\nmetadata: {name: d}\n",
            f"kind: expected {EXPECTED_KINDS}, got 'ConfigMap'",
        ),
        ("--workload", "kind: Job\nmetadata: {name: j}\nspec: {}\n", "spec.template"),
        ("--workload", "", "empty"),
        ("--topology", "kind: Topology\nmetadata: {name: t}\nspec: {levels: []}\n", "spec.levels"),
        (
            "--topology",
            "kind: Topology\nmetadata: {name: t}\nspec: {levels: [{foo: bar}]}\n",
            "spec.levels[0].nodeLabel",
        ),
        ("--pods", "kind: Pod\nmetadata: {}\n", "metadata.name: Required value"),
    ],
)
def test_invalid_input_exit_2_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, content: str | None, expect: str
) -> None:
    files = {"--nodes": NODES, "--workload": DATA / "job-required-l3.yaml"}
    bad = tmp_path / "bad.yaml" if content is None else write(tmp_path, "bad.yaml", content)
    files[flag] = bad
    argv = [x for k, v in files.items() for x in (k, str(v))]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(bad) in lines[0] and expect in lines[0], lines[0]


def test_says_when_it_placed_on_an_empty_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --pods (and without --server) every node counts as free: the answer says so, in
    JSON and in text, and how to give the running pods."""
    workload = DATA / "job-required-l3.yaml"
    code, doc = run_json(capsys, workload, "--topology", str(TOPO))
    assert code == 0 and doc["emptyCluster"] is True
    assert "--pods FILE" in doc["note"] and "--server HOST:PORT" in doc["note"]
    code, doc = run_json(capsys, workload, "--topology", str(TOPO), "--pods", str(PODS))
    assert doc["emptyCluster"] is False and doc["note"] == ""
    code, out, _ = run(capsys, "--nodes", str(NODES), "--workload", str(workload), "--topology", str(TOPO))
    assert code == 0 and out.splitlines()[0].startswith("fits")
    assert out.splitlines()[-1].startswith("note: placed on an empty cluster: no running pods were given")
    code, out, _ = run(capsys, "--nodes", str(NODES), "--workload", str(workload), "--topology", str(TOPO),
                       "--pods", str(PODS))
    assert "empty cluster" not in out
