"""Hostile and careless input files for `toposched place`, `topology` and `simulate`: each gets ONE
readable line naming the file, the place and the field, and exit 2 (never a traceback, a hang or
a wrong "fits"); one reader (scheduler/adapter/files.py) serves all three, so they say the same.
The last tests fuzz the reader with tests/fuzzing.py's structure-aware mutations."""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.cli import main
from tests.fuzzing import mutated

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "place"
NODES, JOB = DATA / "nodes.yaml", DATA / "job-required-l3.yaml"
CLUSTER = ROOT / "examples" / "clusters" / "small-4layer.yaml"
NODE_LIST = yaml.safe_load(NODES.read_text())
JOB_OBJ = yaml.safe_load(JOB.read_text())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run; assert exit 2, nothing on stdout and exactly one line on stderr; return that line."""
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, ""), (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def dump(path: Path, value: Any) -> Path:
    path.write_text(yaml.safe_dump(value, sort_keys=False))
    return path


def job_with(tmp_path: Path, **spec: Any) -> Path:
    job = copy.deepcopy(JOB_OBJ)
    job["spec"].update(spec)
    return dump(tmp_path / "job.yaml", job)


def place(*files: str) -> list[str]:
    return ["place", "--nodes", files[0], "--workload", files[1], *files[2:]]


# ---------------------------------------------------------------------------- place: values


def test_duplicate_node_names_are_refused_not_counted_twice(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    doubled = dict(NODE_LIST, items=NODE_LIST["items"] + [NODE_LIST["items"][0]])
    nodes = dump(tmp_path / "nodes.yaml", doubled)
    line = refused(capsys, *place(str(nodes), str(JOB)))
    assert line == (f'toposched place: nodes file {nodes}: items[16] (n-a1-0): metadata.name: Duplicate value: '
                    '"n-a1-0" (also items[0] (n-a1-0)); list each node once (a repeated node would count its '
                    "capacity twice)")


@pytest.mark.parametrize("field, value, words", [
    ("parallelism", -3, "spec.parallelism: Invalid value: -3: must be greater than or equal to 0"),
    ("completions", -1, "spec.completions: Invalid value: -1: must be greater than or equal to 0"),
    ("parallelism", "three", 'spec.parallelism: Invalid value: "three": must be an integer; write a whole number'),
    ("parallelism", float("nan"), "spec.parallelism: Invalid value: nan: must be an integer"),
    ("parallelism", 2**40, f"spec.parallelism: Invalid value: {2**40}: must be less than or equal to 2147483647"),
])
def test_bad_counts_are_field_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path, field: str, value: Any,
                                     words: str) -> None:
    job = job_with(tmp_path, **{field: value})
    line = refused(capsys, *place(str(NODES), str(job)))
    assert line.startswith(f"toposched place: workload file {job}: {words}"), line


def test_yaml_nan_count_is_a_field_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB.read_text().replace("parallelism: 3", "parallelism: .nan"))
    assert "spec.parallelism: Invalid value: nan: must be an integer" in refused(capsys, *place(str(NODES), str(job)))


def test_negative_replicas_and_workload_counts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    jobset = yaml.safe_load((ROOT / "examples/jobs/jobset-leader-workers.yaml").read_text())
    jobset["spec"]["replicatedJobs"][1]["replicas"] = -2
    line = refused(capsys, *place(str(NODES), str(dump(tmp_path / "js.yaml", jobset))))
    assert "spec.replicatedJobs[1].replicas: Invalid value: -2: must be greater than or equal to 0" in line
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"},
                "spec": {"podSets": [{"name": "main", "count": -4, "template": JOB_OBJ["spec"]["template"]}]}}
    line = refused(capsys, *place(str(NODES), str(dump(tmp_path / "wl.yaml", workload))))
    assert "pod set 0 (main): count -4: must be greater than or equal to 0" in line


def test_nan_allocatable_names_node_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    nodes = copy.deepcopy(NODE_LIST)
    nodes["items"][2]["status"]["allocatable"]["nvidia.com/gpu"] = float("nan")
    path = dump(tmp_path / "nodes.yaml", nodes)
    assert refused(capsys, *place(str(path), str(JOB))) == (
        f"toposched place: nodes file {path}: items[2] (n-a1-2): status.allocatable: invalid quantity nan: "
        "not a finite number")


@pytest.mark.parametrize("budget", ["-5", "0", "1000000000"])
def test_time_budget_out_of_range(capsys: pytest.CaptureFixture[str], budget: str) -> None:
    assert refused(capsys, *place(str(NODES), str(JOB), "--time-budget-ms", budget)) == (
        f"toposched place: --time-budget-ms: must be between 1 and 600000 milliseconds (10 minutes), got {budget}")


# ---------------------------------------------------------------------------- place: files


def test_empty_nodes_file_says_empty_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "nodes.yaml"
    empty.write_text("# nothing\n")
    assert refused(capsys, *place(str(empty), str(JOB))) == (
        f"toposched place: nodes file {empty}: the file is empty; expected Node objects (kubectl get nodes -o yaml) "
        "or a cluster description (examples/clusters/)")
    no_items = dump(tmp_path / "list.yaml", {"apiVersion": "v1", "kind": "List", "items": []})
    assert "no Node objects in it" in refused(capsys, *place(str(no_items), str(JOB)))


@pytest.mark.parametrize("name, content, words", [
    ("deep.json", "[" * 100_000 + "]" * 100_000, "nests deeper than 100 levels"),
    ("deep-flow.yaml", "a: " + "[" * 5_000 + "]" * 5_000, "nests deeper than 100 levels"),
    ("deep-block.yaml", "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 3_000)), "nests deeper than 100 levels"),
    ("laughs.yaml", "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9)),
     "holds more than 5,000,000 values once its YAML aliases (*name) are expanded"),
    ("bad-date.yaml", "kind: List\nitems: []\nwhen: 2024-13-45\n", "not valid YAML: month must be in 1..12"),
])
def test_deep_and_exploding_files(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, content: str,
                                  words: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    line = refused(capsys, *place(str(path), str(JOB)))
    assert line.startswith(f"toposched place: nodes file {path}: ") and words in line, line


def test_binary_and_undecodable_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    binary = tmp_path / "nodes.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert refused(capsys, *place(str(binary), str(JOB))) == (
        f"toposched place: nodes file {binary}: not a text file (a NUL byte at offset 0); give YAML or JSON text")
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes(NODES.read_text().replace("n-a1-0", "n-\u00e91-0").encode("latin-1"))
    assert "not UTF-8 text (byte 0xe9 at offset" in refused(capsys, *place(str(latin), str(JOB)))


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-8-sig", "utf-32"])
def test_utf16_and_bom_files_read_like_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path, codec: str) -> None:
    """What Windows PowerShell's `>` writes (UTF-16 with a byte-order mark) places exactly as UTF-8."""
    code, want, _ = run(capsys, *place(str(NODES), str(JOB), "--output", "json"))
    encoded = tmp_path / "nodes.yaml"
    encoded.write_bytes(NODES.read_text().encode(codec))
    job = tmp_path / "job.yaml"
    job.write_bytes(JOB.read_text().encode(codec))
    assert run(capsys, *place(str(encoded), str(job), "--output", "json")) == (code, want, "")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_dev_zero_and_directories_end_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    start = time.monotonic()
    assert refused(capsys, *place(str(NODES), "/dev/zero")) == (
        "toposched place: workload file /dev/zero: not a text file (a NUL byte at offset 0); give YAML or JSON text")
    assert time.monotonic() - start < 30  # bounded read: one chunk, not an endless one
    assert refused(capsys, *place(str(tmp_path), str(JOB))) == (
        f"toposched place: nodes file {tmp_path}: is a directory; give a file")


def test_oversized_file_is_refused_without_reading_it_all(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler.adapter import files

    monkeypatch.setattr(files, "MAX_FILE_BYTES", 2**20)
    big = tmp_path / "nodes.yaml"
    big.write_text("# padding\n" * 120_000 + NODES.read_text())
    assert refused(capsys, *place(str(big), str(JOB))).endswith(
        f"nodes file {big}: larger than 1 MiB; give a smaller file (e.g. only the namespaces or nodes that matter)")


def test_big_yaml_is_refused_with_the_advice_to_give_json(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """PyYAML takes ~50x a file's size in memory (38 MB of pods: 1.9 GB), JSON ~7x: YAML has the
    lower bound, and the line says to give JSON, which reads the same nodes."""
    from scheduler.adapter import files

    monkeypatch.setattr(files, "MAX_YAML_BYTES", 2**20)
    big = tmp_path / "nodes.yaml"
    big.write_text("# padding\n" * 120_000 + NODES.read_text())
    assert refused(capsys, *place(str(big), str(JOB))) == (
        f"toposched place: nodes file {big}: 1.2 MiB of YAML, over the 1 MiB YAML is read up to (it takes about 50 "
        "times its size in memory); give JSON (kubectl get ... -o json, up to 64 MiB) or fewer objects")
    as_json = tmp_path / "nodes.json"
    as_json.write_text(json.dumps(NODE_LIST) + " " * 2**20)
    assert run(capsys, *place(str(as_json), str(JOB)))[0] == 0


def test_cluster_description_works_as_nodes_and_as_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    """`place --nodes` given a cluster description (as `topology --cluster` takes) places on its
    nodes, the same as `place --cluster` (it said `metadata.name: missing`)."""
    as_nodes = run(capsys, *place(str(CLUSTER), str(JOB), "--output", "json"))
    as_cluster = run(capsys, "place", "--cluster", str(CLUSTER), "--workload", str(JOB), "--output", "json")
    assert as_nodes == as_cluster and as_nodes[0] == 0 and json.loads(as_nodes[1])["fits"] is True
    assert "give --nodes or --cluster, not both" in refused(
        capsys, "place", "--nodes", str(NODES), "--cluster", str(CLUSTER), "--workload", str(JOB))


# ---------------------------------------------------------------------------- place: topology-admitted pods


def tas_pod(name: str, node: str, gpus: int = 8) -> dict[str, Any]:
    """A running pod of a topology-admitted job, as Kueue leaves it: the pod-set annotation copied
    from the template (and the Workload's label), bound to its node."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "team-b", "labels": {"kueue.x-k8s.io/managed": "true"},
        "annotations": {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3",
                        "kueue.x-k8s.io/workload": "job-big-1a2b3"}},
        "spec": {"nodeName": node,
                 "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Running"}}


def test_pods_of_topology_admitted_jobs_use_capacity(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`place --pods <(kubectl get pods -A -o yaml)` on nodes full of a topology-admitted job's
    pods: does not fit (it ignored them and said "fits")."""
    names = [n["metadata"]["name"] for n in NODE_LIST["items"]]
    full = dump(tmp_path / "pods.yaml", {"apiVersion": "v1", "kind": "List",
                                         "items": [tas_pod(f"big-{i}", n) for i, n in enumerate(names)]})
    code, out, err = run(capsys, *place(str(NODES), str(JOB), "--pods", str(full), "--output", "json"))
    assert (code, err) == (1, ""), out
    assert json.loads(out)["fits"] is False
    one_rack_free = dump(tmp_path / "some.yaml", {"apiVersion": "v1", "kind": "List", "items": [
        tas_pod(f"big-{i}", n) for i, n in enumerate(names) if not n.startswith("n-b1-")]})
    code, out, _ = run(capsys, *place(str(NODES), str(JOB), "--pods", str(one_rack_free), "--output", "json"))
    assert code == 0
    used = {node for a in json.loads(out)["podSets"][0]["assignments"] for node in a["nodes"]}
    assert used and all(node.startswith("n-b1-") for node in used), used


# ---------------------------------------------------------------------------- topology and simulate


def test_topology_reads_with_the_same_reader_and_words(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doubled = dump(tmp_path / "nodes.yaml", dict(NODE_LIST, items=NODE_LIST["items"] + [NODE_LIST["items"][0]]))
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    for path, words in ((doubled, 'metadata.name: Duplicate value: "n-a1-0"'), (empty, "the file is empty"),
                        (Path("/dev/zero"), "not a text file")):
        from_place = refused(capsys, *place(str(path), str(JOB))).removeprefix("toposched place: ")
        from_topology = refused(capsys, "topology", "--nodes", str(path)).removeprefix("toposched topology: ")
        assert from_place == from_topology and words in from_place, (from_place, from_topology)


@pytest.mark.parametrize("flag, value", [("--failures-per-day", "nan"), ("--failures-per-day", "inf"),
                                         ("--failures-per-day", "-1"), ("--eviction-delay", "nan"),
                                         ("--horizon", "inf"), ("--synthetic", "0"), ("--time-budget-ms", "-5"),
                                         ("--eviction-storm-threshold", "nan"),
                                         ("--node-failure-requeue-base-seconds", "-1")])
def test_simulate_numbers_out_of_range(capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str,
                                       value: str) -> None:
    argv = ["simulate", "--cluster", str(CLUSTER), "--queues", str(ROOT / "examples/kueue/hyperpod-queues.yaml"),
            "--synthetic", "3", "--out", str(tmp_path / "out"), flag, value]
    line = refused(capsys, *argv)
    assert line.startswith(f"toposched simulate: {flag}: must be ") and value in line, line
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------- fuzzing the reader

SEED_FILES = {"nodes": NODE_LIST, "workload": JOB_OBJ,
              "pods": {"apiVersion": "v1", "kind": "List", "items": [tas_pod("p", "n-a1-0", 4)]}}


def _encoded(value: Any, form: str) -> bytes:
    if form == "json":
        return json.dumps(value).encode()
    text = yaml.safe_dump(value)
    return text.encode("utf-16") if form == "utf-16" else text.encode()


def _garbled(data: bytes, pick: Any) -> bytes:
    """Byte-level damage on top: cut short, a NUL, a stray byte, or nothing."""
    how = pick(("none", "none", "cut", "nul", "byte"))
    at = pick(range(max(len(data), 1)))
    if how == "cut":
        return data[:at]
    if how == "nul":
        return data[:at] + b"\0" + data[at:]
    if how == "byte":
        return data[:at] + bytes([pick((0x80, 0xff, 0xc3, 0x0c))]) + data[at:]
    return data


@settings(max_examples=100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(data=st.data(), which=st.sampled_from(sorted(SEED_FILES)), form=st.sampled_from(["yaml", "json", "utf-16"]))
def test_fuzzed_files_get_an_answer_or_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                data: st.DataObject, which: str, form: str) -> None:
    """Whatever the file, `place` answers (exit 0/1) or refuses in one line (exit 2): never a
    traceback. tests/fuzzing.py's mutations, then byte damage."""
    def pick(options: Sequence[Any]) -> Any:
        return data.draw(st.sampled_from(list(options)))

    broken = _garbled(_encoded(mutated(SEED_FILES[which], pick, huge=(50, 500)), form), pick)
    files = {"nodes": NODES, "workload": JOB, "pods": DATA / "pods.yaml"}
    files[which] = tmp_path / f"{which}.in"
    files[which].write_bytes(broken)
    code = main(["place", "--nodes", str(files["nodes"]), "--workload", str(files["workload"]),
                 "--pods", str(files["pods"]), "--solver", "greedy"])
    out = capsys.readouterr()
    assert code in (0, 1, 2), code
    if code == 2:
        assert out.out == "" and len(out.err.strip().splitlines()) == 1, out.err
        assert out.err.startswith("toposched place: "), out.err


@pytest.mark.parametrize("content", [None, "a: " + "[" * 300_000 + "]" * 300_000, "when: 2024-13-45\n"],
                         ids=["dev-zero", "deep", "bad-date"])
def test_kueue_config_file_is_bounded_too(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          content: str | None) -> None:
    """`--kueue-config /dev/zero` read forever; a deep or odd YAML file was a traceback."""
    path = Path("/dev/zero") if content is None else tmp_path / "config.yaml"
    if content is not None:
        path.write_text(content)
    line = refused(capsys, *place(str(NODES), str(JOB), "--kueue-config", str(path)))
    assert line.startswith(f"toposched place: --kueue-config {path}: "), line
