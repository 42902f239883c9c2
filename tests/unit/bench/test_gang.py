"""The gang bench's pure parts (scripts/bench/gang.py): the objects each engine gets, the stream,
and the figures (time to wholly bound, one-domain share, partly bound and stuck gangs)."""

from __future__ import annotations

import math

import pytest

from tests.unit.bench.scripts import load_bench

bench = load_bench("gang")


def test_kube_scheduler_gangs_get_a_workload_a_pod_group_and_pods_in_the_group() -> None:
    gang = bench.Gang("g00001", "team-b", 16, 10.0)
    workload, pod_group = bench.workload_api_objects(gang)
    template = workload["spec"]["podGroupTemplates"][0]
    assert workload["apiVersion"] == pod_group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert template["schedulingPolicy"] == pod_group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 16}}
    assert template["schedulingConstraints"] == {"topology": [{"key": "topology.k8s.aws/network-node-layer-3"}]}
    assert pod_group["spec"]["workloadRef"] == {"workloadName": "g00001", "templateName": "workers"}
    assert workload["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job", "name": "g00001"}
    job = bench.job_for("kube-scheduler", gang)
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["schedulingGroup"] == {"podGroupName": "g00001"}
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]  # nothing queues it
    assert job["spec"]["parallelism"] == 16 and job["metadata"]["namespace"] == "hyperpod-ns-team-b"


def test_queued_engines_get_the_required_layer_3_annotation() -> None:
    job = bench.job_for("kueue", bench.Gang("g1", "team-a", 4, 10.0))
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"}
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-team-a-localqueue"
    assert "schedulingGroup" not in job["spec"]["template"]["spec"]


def test_the_stream_is_deterministic_and_uses_every_size() -> None:
    gangs = bench.stream(400, ["team-a", "team-b"], 7, 10.0, 40.0)
    assert gangs == bench.stream(400, ["team-a", "team-b"], 7, 10.0, 40.0)
    assert {g.pods for g in gangs} == set(bench.SIZES)
    assert all(10.0 <= g.run_s <= 40.0 for g in gangs)
    assert bench.stream(400, ["team-a", "team-b"], 8, 10.0, 40.0) != gangs


def test_the_cluster_has_32_node_layer_3_domains() -> None:
    d = bench.description(1300)
    assert d["nodesPerDomain"] == 32 and d["nodeCount"] == 1300
    assert d["layers"][0] * d["layers"][1] * d["layers"][2] * 32 >= 1300
    assert bench.queues(1300, ["team-a", "team-b"])["teams"]["team-a"]["gpu"] == 5200


def track(name: str, pods: int, created: float, binds: list[tuple[float, str]]) -> object:
    return bench.Track(bench.Gang(name, "team-a", pods, 10.0), created, binds)


def test_figures_split_whole_partial_and_unbound_gangs() -> None:
    domain = {"n1": "d1", "n2": "d1", "n3": "d2", "n4": "d2"}
    tracks = [
        track("whole", 2, 0.0, [(1.0, "n1"), (3.0, "n2")]),  # 3 s, one domain
        track("spread", 2, 1.0, [(2.0, "n2"), (2.5, "n3")]),  # 1.5 s, two domains
        track("partly", 2, 0.0, [(5.0, "n4")]),  # one of two pods bound since 5 s
        track("waiting", 4, 2.0, []),
    ]
    f = bench.gang_figures(tracks, domain, end=100.0, stuck_s=30.0, t0=0.0)
    assert (f.gangs, f.complete, f.partly_bound, f.never_bound) == (4, 2, 1, 1)
    assert (f.p50_s, f.p99_s) == (1.5, 3.0)  # rank round(q * (n - 1)) of [1.5, 3.0], round half to even
    assert f.one_domain == 0.5
    assert f.stuck == 1  # "partly" has been partly bound for 95 s
    assert f.wall_s == 3.0
    assert f.by_size == {2: 2.25}


def test_a_gang_with_no_complete_member_has_no_share() -> None:
    f = bench.gang_figures([track("w", 2, 0.0, [])], {}, end=10.0, stuck_s=30.0, t0=0.0)
    assert math.isnan(f.one_domain) and math.isnan(f.p99_s) and f.never_bound == 1


def test_the_ratio_names_the_better_peer() -> None:
    def fig(p99: float, one: float) -> object:
        return bench.GangFigures(10, 10, 1.0, p99, one, 0, 0, 0, 100.0, {})

    line = bench.ratio_line({"kube-scheduler": fig(20.0, 1.0), "kueue": fig(10.0, 0.9), "toposched": fig(4.0, 1.0)})
    assert "vs kube-scheduler: p50 1.00x p99 0.20x" in line
    assert "vs kueue: p50 1.00x p99 0.40x, one domain 100.0 % vs 90.0 %" in line
    assert line.endswith("p99 vs the better peer 0.40x (goal <= 0.5x)")
    assert bench.ratio_line({"kueue": fig(1.0, 1.0)}) == ""


def test_arguments_are_checked() -> None:
    args = bench.parse_args([])
    assert (args.nodes, args.engines) == ([1300, 5000], ["kube-scheduler", "kueue", "toposched"])
    for bad in (["--nodes", "16"], ["--nodes", "a"], ["--engines", "volcano"], ["--load", "0"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)
