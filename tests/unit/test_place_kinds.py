"""``toposched place`` (place/v1) for every managed kind, unambiguous domain paths, leaf
domains named the same way at every lowest level, Kueue's validation messages, PodSet groups."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission.validation import validate_job
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.workloads import workload_from_manifest, workload_pod_sets
from scheduler.cli import main

BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"


def node(name: str, block: str, rack: str, cpu: int = 4) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {BLOCK: block, RACK: rack, HOST: name}},
            "status": {"allocatable": {"cpu": str(cpu), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def topology(*levels: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


def template(cpu: int = 1, **annotations: str) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": str(cpu)}}}]}}


def jobset(*replicated: tuple[str, int, dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "ns"},
            "spec": {"replicatedJobs": [
                {"name": name, "replicas": 1,
                 "template": {"spec": {"parallelism": pods, "completions": pods, "template": tmpl}}}
                for name, pods, tmpl in replicated]}}


def place(tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: list[dict[str, Any]], workload: dict[str, Any],
          levels: tuple[str, ...] = (BLOCK, RACK, HOST), *extra: str) -> tuple[int, dict[str, Any] | str]:
    files = {"nodes": {"apiVersion": "v1", "kind": "List", "items": nodes}, "workload": workload,
             "topology": topology(*levels)}
    for name, obj in files.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(obj))
    code = main(["place", "--nodes", str(tmp_path / "nodes.yaml"), "--workload", str(tmp_path / "workload.yaml"),
                 "--topology", str(tmp_path / "topology.yaml"), "--output", "json", "--solver", "greedy", *extra])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code in (0, 1) else out.err.strip())


TWO_BLOCKS = [node("h1", "b1", "r1"), node("h2", "b1", "r2"), node("h3", "b2", "r1", cpu=8)]


def test_jobset_pod_sets_per_replicated_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    js = jobset(("driver", 1, template(**{"kueue.x-k8s.io/podset-required-topology": RACK})),
                ("workers", 6, template(**{"kueue.x-k8s.io/podset-required-topology": RACK})))
    code, doc = place(tmp_path, capsys, TWO_BLOCKS, js)
    assert code == 0 and isinstance(doc, dict)
    assert [(ps["name"], ps["count"]) for ps in doc["podSets"]] == [("driver", 1), ("workers", 6)]
    assert doc["podSets"][1]["assignments"] == [{"domain": "b2/r1/h3", "nodes": ["h3"], "count": 6}]


def test_the_controller_and_place_read_the_same_pod_sets() -> None:
    preferred = template(**{"kueue.x-k8s.io/podset-preferred-topology": RACK})
    js = jobset(("driver", 1, template()), ("workers", 2, preferred))
    controller = workload_pod_sets(JOBSET, js)
    placed = workload_from_manifest(js).pod_sets
    assert [(ps["name"], ps["count"]) for ps in controller] == [(ps.name, ps.count) for ps in placed]
    assert controller[1]["topologyRequest"]["preferred"] == RACK == placed[1].topology.preferred


def test_pytorchjob_master_and_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt", "namespace": "ns"},
           "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 3, "template": template()},
                                            "Master": {"replicas": 1, "template": template()}}}}
    code, doc = place(tmp_path, capsys, TWO_BLOCKS, job)
    assert code == 0 and isinstance(doc, dict)
    assert [(ps["name"], ps["count"]) for ps in doc["podSets"]] == [("master", 1), ("worker", 3)]


@pytest.mark.parametrize("kind", ["AppWrapper", "TFJob"])
def test_kinds_not_built_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    code, err = place(tmp_path, capsys, TWO_BLOCKS, {"kind": kind, "metadata": {"name": "x"}})
    assert code == 2
    assert f"kind: {kind} is not built in toposched yet (no {kind} integration)" in str(err)


def test_domains_are_full_paths_so_equal_names_stay_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two racks named r1 in different blocks: b1/r1 and b2/r1, never one "r1"."""
    nodes = [node("h1", "b1", "r1", cpu=1), node("h2", "b2", "r1", cpu=1)]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"parallelism": 2, "template": template()}}
    code, doc = place(tmp_path, capsys, nodes, job)
    assert code == 0 and isinstance(doc, dict)
    (ps,) = doc["podSets"]
    assert ps["domains"] == {BLOCK: ["b1", "b2"], RACK: ["b1/r1", "b2/r1"], HOST: ["b1/r1/h1", "b2/r1/h2"]}


def test_leaf_above_hostname_names_the_domain_and_its_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Lowest level rack: the assignment is the rack's path and the nodes in it, as it is the
    host's path and its one node when hostname is the lowest level."""
    nodes = [node("h1", "b1", "r1", cpu=1), node("h2", "b1", "r1", cpu=1)]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"parallelism": 2, "template": template(**{"kueue.x-k8s.io/podset-required-topology": RACK})}}
    code, doc = place(tmp_path, capsys, nodes, job, (BLOCK, RACK))
    assert code == 0 and isinstance(doc, dict)
    assert doc["levels"] == [BLOCK, RACK]
    assert doc["podSets"][0]["assignments"] == [{"domain": "b1/r1", "nodes": ["h1", "h2"], "count": 2}]


def test_missing_slice_size_is_kueues_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"parallelism": 2, "template": template(**{"kueue.x-k8s.io/podset-required-topology": BLOCK,
                                                             SLICE_REQUIRED: RACK})}}
    code, err = place(tmp_path, capsys, TWO_BLOCKS, job)
    assert code == 2
    # The webhook's words (Kueue's field error), checked before the manifest is read.
    assert ("spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Required value: "
            f"must be set when '{SLICE_REQUIRED}' is specified") in str(err)


def test_place_refuses_what_the_webhook_denies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A group name on a batch Job (one pod set): Kueue's webhook message, exit 2."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"parallelism": 2, "template": template(**{"kueue.x-k8s.io/podset-required-topology": BLOCK,
                                                             "kueue.x-k8s.io/podset-group-name": "g"})}}
    code, err = place(tmp_path, capsys, TWO_BLOCKS, job)
    assert code == 2
    assert 'Invalid value: "g": can only define groups of exactly 2 pod sets, got: 1 pod set(s)' in str(err)


def test_podset_group_leader_lands_with_its_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A leader + workers group (kueue.x-k8s.io/podset-group-name) goes to one rack together."""
    group = {"kueue.x-k8s.io/podset-required-topology": RACK, "kueue.x-k8s.io/podset-group-name": "g"}
    nodes = [node("h1", "b1", "r1", cpu=1), node("h2", "b1", "r2", cpu=3), node("h3", "b1", "r2", cpu=2)]
    code, doc = place(tmp_path, capsys, nodes, jobset(("leader", 1, template(**group)),
                                                      ("workers", 4, template(**group))))
    assert code == 0 and isinstance(doc, dict)
    leader, workers = doc["podSets"]
    racks = {a["domain"].rsplit("/", 1)[0] for a in leader["assignments"] + workers["assignments"]}
    assert racks == {"b1/r2"}
    assert sum(a["count"] for a in workers["assignments"]) == 4


def test_the_group_example_places_leader_with_workers(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/jobs/jobset-podset-group.yaml: admitted by the webhook's rules, and the leader
    shares the workers' layer-3 domain."""
    root = Path(__file__).resolve().parents[2]
    example = root / "examples" / "jobs" / "jobset-podset-group.yaml"
    assert validate_job(yaml.safe_load(example.read_text())).errors == []
    data = root / "tests" / "data" / "place"
    code = main(["place", "--nodes", str(data / "nodes.yaml"), "--topology", str(data / "topology.yaml"),
                 "--workload", str(example), "--output", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    leader, workers = doc["podSets"]
    l3 = "topology.k8s.aws/network-node-layer-3"
    assert leader["domains"][l3] == workers["domains"][l3] and len(workers["domains"][l3]) == 1


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"


@pytest.mark.parametrize(("example", "expected"), [
    ("trainjob-torch.yaml", [("node", 4)]),  # its TrainingRuntime is the file's other document
    ("raycluster.yaml", [("head", 1), ("gpu", 4)]),
    ("rayjob.yaml", [("head", 1), ("gpu", 2), ("submitter", 1)]),
    ("rayservice.yaml", [("head", 1), ("gpu", 2)]),
    ("hyperpod-pytorch-job.yaml", [("pod", 4)]),
    ("pod-single.yaml", [("main", 1)]),
    ("pod-group.yaml", [("a60397d5", 2)]),  # the group's members in the file, one role
    ("deployment-serving.yaml", [("main", 1)]),  # one replica: each is a Workload of its own
    ("statefulset-serving.yaml", [("main", 2)]),
])
def test_place_reads_every_governed_kind_as_the_controller_would(example: str, expected: list[Any]) -> None:
    """The registry gives ``place`` each kind's pod sets: the Workload the controller creates."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / example).read_text()) if d]
    placeable = next(d for d in docs if d["kind"] not in ("TrainingRuntime", "ClusterTrainingRuntime"))
    spec = workload_from_manifest(placeable, docs)
    assert [(ps.name, ps.count) for ps in spec.pod_sets] == expected


def test_a_hyperpod_jobs_spares_are_placed_too() -> None:
    job = yaml.safe_load((EXAMPLES / "hyperpod-pytorch-job.yaml").read_text())
    job["spec"]["replicaSpecs"][0]["spares"] = 2
    assert [(ps.name, ps.count) for ps in workload_from_manifest(job).pod_sets] == [("pod", 6)]


def test_a_trainjob_without_its_runtime_says_what_to_give(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trainjob = [d for d in yaml.safe_load_all((EXAMPLES / "trainjob-torch.yaml").read_text())][1]
    code, err = place(tmp_path, capsys, TWO_BLOCKS, trainjob)
    assert code == 2
    assert "a TrainJob's pod sets come from its TrainingRuntime or ClusterTrainingRuntime: give it too" in str(err)
