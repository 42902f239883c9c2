"""toposched simulate: hand-computed outcomes, node failures, determinism, report files, gRPC stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from scheduler import cli
from scheduler.api.engine import StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc
from scheduler.api.server import serve
from scheduler.core.fakecluster import generate_nodes
from scheduler.sim.engine import simulate
from scheduler.sim.scenario import jobs_from_trace, run_variants, summarize, world_from_objects
from scheduler.sim.trace import TraceError, trace_from_data

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GPU = "nvidia.com/gpu"
L3 = "topology.k8s.aws/network-node-layer-3"
KQ = "kueue.x-k8s.io/v1beta2"
# One layer-3 domain with two 8-GPU nodes: 16 GPUs in all.
TWO_NODES = {"name": "sim-2", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 2}


def queues(gpus: int = 16, strategy: str = "BestEffortFIFO") -> list[dict[str, Any]]:
    return [
        {"apiVersion": KQ, "kind": "Topology", "metadata": {"name": "hp"}, "spec": {"levels": [
            {"nodeLabel": f"topology.k8s.aws/network-node-layer-{i}"} for i in (1, 2, 3)]
            + [{"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "p5"}, "spec": {"topologyName": "hp"}},
        {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "queueingStrategy": strategy, "resourceGroups": [{"coveredResources": [GPU],
                "flavors": [{"name": "p5", "resources": [{"name": GPU, "nominalQuota": str(gpus)}]}]}]}},
        {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "team"},
         "spec": {"clusterQueue": "cq"}},
    ]


def job(name: str, at: float, pods: int, duration: float, **extra: Any) -> dict[str, Any]:
    return {"at": at, "namespace": "team", "queue": "q", "name": name, "pods": pods, "gpusPerPod": 8,
            "duration": duration, **extra}


def run(trace: dict[str, Any], cluster: dict[str, Any] = TWO_NODES, **kw: Any) -> Any:
    world = world_from_objects(cluster, queues())
    jobs, failures = jobs_from_trace(trace_from_data(trace), world)
    result = simulate(world, jobs, failures, **kw)
    return result, {j.spec.name: j for j in result.jobs}


def test_second_job_waits_exactly_the_first_ones_duration() -> None:
    # Each job needs all 16 GPUs: b (same arrival, later name) starts when a ends at t=100.
    result, jobs = run({"jobs": [job("a", 0, 2, 100), job("b", 0, 2, 50)]})
    assert (jobs["a"].first_admitted, jobs["a"].finished_at) == (0, 100)
    assert (jobs["b"].first_admitted, jobs["b"].finished_at) == (100, 150)
    s = summarize(result)
    assert s["makespan_s"] == 150 and s["wait_s"]["max"] == 100 and s["wait_s"]["p50"] == 0
    assert s["gpu_utilization"] == 1.0  # 16 GPUs busy for all 150 s
    assert s["admitted"] == s["finished"] == 2 and s["preemptions"] == 0


def test_small_jobs_share_and_topology_domains_counted() -> None:
    _result, jobs = run({"jobs": [job("a", 0, 1, 10), job("b", 0, 1, 10, topology={"required": L3})]})
    assert jobs["a"].first_admitted == jobs["b"].first_admitted == 0
    assert jobs["b"].domains[L3] == 1


def test_node_failure_evicts_and_readmits_after_recovery() -> None:
    node = generate_nodes(TWO_NODES)[0]["metadata"]["name"]
    trace = {"jobs": [job("a", 0, 2, 100, topology={"required": L3})],
             "failures": [{"at": 30, "node": node, "recoverAfter": 20}]}
    result, jobs = run(trace)
    a = jobs["a"]
    assert a.evictions == 1 and a.first_admitted == 0
    assert a.admitted_at == 50 and a.finished_at == 150  # restarted at recovery, full duration again
    kinds = [(e["kind"], e["t"]) for e in result.events]
    assert kinds == [("failure", 30), ("eviction", 30), ("recovery", 50)]
    assert result.events[1]["detail"] == f"NodeFailures: {node}"
    s = summarize(result)
    assert s["evictions_node_failures"] == 1 and s["failures"] == 1 and s["recoveries"] == 1
    # 16 GPUs used 0-30 and 50-150 while 8 are healthy 30-50: (30*16 + 100*16) / (30*16 + 20*8 + 100*16)
    assert s["gpu_utilization"] == round((130 * 16) / (130 * 16 + 20 * 8), 4)


def test_failure_on_spare_capacity_hot_swaps() -> None:
    three = {**TWO_NODES, "name": "sim-3", "nodesPerDomain": 3}
    world = world_from_objects(three, queues(24))
    jobs, _ = jobs_from_trace(trace_from_data({"jobs": [job("a", 0, 1, 100, topology={"required": L3})]}), world)
    first = simulate(world, jobs)
    used = first.jobs[0]
    assert used.finished_at == 100
    # fail every node but one spare in turn: the job's node is one of them; it moves, never evicted
    names = [n.name for n in world.nodes]
    fails = [{"at": 10, "node": names[0]}, {"at": 20, "node": names[1]}]
    result, jobs2 = run({"jobs": [job("a", 0, 1, 100, topology={"required": L3})], "failures": fails},
                        cluster=three)
    assert jobs2["a"].evictions == 0 and jobs2["a"].finished_at == 100
    assert result.replacements >= 1


def test_synthetic_is_deterministic_with_a_seed(tmp_path: Path) -> None:
    args = ["simulate", "--cluster", str(EXAMPLES / "clusters/hyperpod-64.yaml"),
            "--queues", str(EXAMPLES / "kueue/hyperpod-queues.yaml"), "--synthetic", "40", "--seed", "7",
            "--failures-per-day", "2"]
    assert cli.main([*args, "--out", str(tmp_path / "a")]) == 0
    assert cli.main([*args, "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a/trace.yaml").read_text() == (tmp_path / "b/trace.yaml").read_text()

    def strip(p: Path) -> Any:
        s = json.loads(p.read_text())
        for v in s["variants"].values():
            v.pop("wall_s")
        return s

    assert strip(tmp_path / "a/summary.json") == strip(tmp_path / "b/summary.json")
    other = tmp_path / "c"
    assert cli.main([*args[:-4], "--seed", "8", "--out", str(other)]) == 0
    assert (other / "trace.yaml").read_text() != (tmp_path / "a/trace.yaml").read_text()


def test_report_files_and_self_contained_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert cli.main(["simulate", "--cluster", str(EXAMPLES / "clusters/hyperpod-64.yaml"),
                     "--queues", str(EXAMPLES / "kueue/hyperpod-queues.yaml"),
                     "--trace", str(EXAMPLES / "traces/hyperpod-64-demo.yaml"), "--compare", "queueing",
                     "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["variants"]) == {"StrictFIFO", "BestEffortFIFO"}
    for v in summary["variants"].values():
        assert v["submitted"] == 7 and {"wait_by_team_s", "wait_by_priority_s", "gpu_utilization"} <= set(v)
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 4
    for needle in ("<script", "http://", "https://", " src=", "<link", "@import", "url("):
        assert needle not in html, needle
    assert "Policies side by side" in html and "GPU utilisation over time" in html
    assert "wrote" in capsys.readouterr().out


def test_non_tty_progress_is_one_line_per_update(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "--cluster", str(EXAMPLES / "clusters/hyperpod-64.yaml"),
                     "--queues", str(EXAMPLES / "kueue/hyperpod-queues.yaml"), "--synthetic", "5",
                     "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and err.strip().splitlines()[-1].startswith("[greedy] 100%")


@pytest.mark.parametrize("trace, message", [
    ({"jobs": [{"at": 0, "namespace": "team", "queue": "q", "pods": 0, "duration": 1}]}, "jobs[0].pods: must be >= 1"),
    ({"jobs": [{"at": 0, "namespace": "team", "pods": 1, "duration": 1}]}, "jobs[0].queue: missing"),
    ({"jobs": [], "oops": 1}, "unknown key 'oops'"),
    ({"jobs": [{"at": 0, "namespace": "team", "queue": "q", "pods": 1, "duration": 1,
                "topology": {"required": "nope"}}]}, "level 'nope' is not in any Topology"),
    ({"jobs": [{"at": 0, "namespace": "team", "queue": "other", "pods": 1, "duration": 1}]},
     "no LocalQueue 'other'"),
    ({"failures": [{"at": 0, "node": "ghost"}]}, "failures[0].node: no node 'ghost'"),
])
def test_bad_trace_is_one_clear_line(tmp_path: Path, trace: dict[str, Any], message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(TWO_NODES))
    (tmp_path / "q.yaml").write_text(yaml.safe_dump_all(queues()))
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(trace))
    code = cli.main(["simulate", "--cluster", str(tmp_path / "c.yaml"), "--queues", str(tmp_path / "q.yaml"),
                     "--trace", str(tmp_path / "t.yaml"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err, err


def test_bad_queue_file_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(TWO_NODES))
    (tmp_path / "q.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}))
    code = cli.main(["simulate", "--cluster", str(tmp_path / "c.yaml"), "--queues", str(tmp_path / "q.yaml"),
                     "--synthetic", "3", "--out", str(tmp_path / "o")])
    assert code == 2 and "'Pod' is not a queue object" in capsys.readouterr().err


MISTAKES = pytest.mark.parametrize("cluster, queue_objects, door, message", [
    ({**TWO_NODES, "instanceType": "p5.48xlarge"}, [], "cluster", "unknown instanceType 'p5.48xlarge'"),
    ({**TWO_NODES, "layers": [1, -2]}, [], "cluster", "layers[1] must be a positive integer"),
    (TWO_NODES, [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
                  "spec": {"levels": [{"nodeLabel": "rack"}]}}],
     "queues", "Topology t: level 'rack' is not a label of any node"),
])


@MISTAKES
def test_cluster_and_queue_mistakes_name_their_own_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster: dict[str, Any],
        queue_objects: list[dict[str, Any]], door: str, message: str) -> None:
    """A mistake in the cluster is blamed on the cluster file, one in the queue objects on the
    queues file (by the error's type, not its words)."""
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cluster))
    (tmp_path / "q.yaml").write_text(yaml.safe_dump_all(queues() + queue_objects))
    code = cli.main(["simulate", "--cluster", str(tmp_path / "c.yaml"), "--queues", str(tmp_path / "q.yaml"),
                     "--synthetic", "3", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert err.startswith(f"toposched simulate: {door} file {tmp_path / (door[0] + '.yaml')}: {message}"), err


def test_compare_borrowing_runs_both_variants() -> None:
    world = world_from_objects(TWO_NODES, queues())
    runs = run_variants(world, trace_from_data({"jobs": [job("a", 0, 1, 10)]}), compare="borrowing")
    assert [r[0] for r in runs] == ["borrowing", "no borrowing"]
    with pytest.raises(TraceError):
        trace_from_data({"jobs": [job("a", 0, 1, 10), job("a", 1, 1, 10)]})


# ---------------------------------------------------------------------- gRPC Simulate


@pytest.fixture
def stub() -> Iterator[Any]:
    srv = serve(StaticEngine(None), bind="127.0.0.1", port=0, max_workers=4)
    ch = grpc.insecure_channel(f"127.0.0.1:{srv.port}")
    try:
        yield placement_pb2_grpc.PlacementStub(ch)
    finally:
        ch.close()
        srv.stop(0.5)


def test_grpc_simulate_streams_progress_then_summary(stub: Any) -> None:
    trace = {"jobs": [job("a", 0, 2, 100), job("b", 0, 2, 50)]}
    events = list(stub.Simulate(pb.SimulateRequest(
        cluster=yaml.safe_dump(TWO_NODES).encode(), queues=yaml.safe_dump_all(queues()).encode(),
        trace=yaml.safe_dump(trace).encode(), solver=pb.SOLVER_GREEDY), timeout=30))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "summary" and kinds.count("summary") == 1 and "progress" in kinds
    s = events[-1].summary
    assert (s.makespan_s, s.admitted, s.finished, s.wait_p99_s, s.gpu_utilization) == (150, 2, 2, 100, 1.0)
    assert [e.progress.time_s for e in events[:-1]] == sorted(e.progress.time_s for e in events[:-1])


def test_grpc_simulate_bad_trace_is_invalid_argument(stub: Any) -> None:
    with pytest.raises(grpc.RpcError) as info:
        list(stub.Simulate(pb.SimulateRequest(
            cluster=yaml.safe_dump(TWO_NODES).encode(), queues=yaml.safe_dump_all(queues()).encode(),
            trace=b"jobs: [{at: 0}]"), timeout=30))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert info.value.details().startswith("trace: jobs[0]")  # type: ignore[attr-defined]


@MISTAKES
def test_grpc_simulate_names_the_field_at_fault(stub: Any, cluster: dict[str, Any],
                                                queue_objects: list[dict[str, Any]], door: str, message: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        list(stub.Simulate(pb.SimulateRequest(
            cluster=yaml.safe_dump(cluster).encode(), queues=yaml.safe_dump_all(queues() + queue_objects).encode(),
            trace=yaml.safe_dump({"jobs": [job("a", 0, 1, 10)]}).encode()), timeout=30))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    details = info.value.details()  # type: ignore[attr-defined]
    assert details.startswith(f"{door}: ") and message in details, details


def test_tty_progress_bar_redraws_in_place() -> None:
    import io

    from scheduler.commands.simulate import ProgressPrinter
    from scheduler.sim.model import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = ProgressPrinter(stream)
    bar("greedy", 0, 1, Progress(10.0, 2, 1, 0, 1, 0, 0.5, 2))
    bar("greedy", 0, 1, Progress(20.0, 2, 2, 2, 0, 0, 0.0, 2))
    text = stream.getvalue()
    assert text.startswith("\r[greedy] |") and text.count("\r") == 2 and text.endswith("\n")
    assert "100%" in text and "|" + "#" * 28 + "|" in text


def test_compact_wait_from_the_cluster_queue_default_relaxes_at_its_deadline() -> None:
    """Two layer-3 domains of 2 nodes; 3 pods can never share one: the ClusterQueue's
    toposched.io/compact-* default holds the job 600 s from queueing, then it is admitted as
    placed (the wait's end wakes the loop: no other event happens at t=600)."""
    objs = queues(gpus=32)
    objs[2]["metadata"]["annotations"] = {"toposched.io/compact-level": L3, "toposched.io/compact-wait": "10m"}
    world = world_from_objects({"name": "sim-4", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2],
                                "nodesPerDomain": 2}, objs)
    trace = {"jobs": [job("wide", 0, 3, 100, topology={"preferred": L3}), job("one", 0, 1, 100)]}
    jobs, failures = jobs_from_trace(trace_from_data(trace), world)
    result = simulate(world, jobs, failures)
    by_name = {j.spec.name: j for j in result.jobs}
    assert by_name["one"].first_admitted == 0  # a single pod spans one domain: no wait
    assert by_name["wide"].first_admitted == 600 and by_name["wide"].domains[L3] == 2
    assert [e["kind"] for e in result.events if e.get("workload") == "team/wide"] == ["relaxed"]
    assert summarize(result)["multi_pod_in_one_domain"] == 0.0
