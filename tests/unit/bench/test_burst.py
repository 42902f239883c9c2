"""The burst bench's pure parts (scripts/bench/burst.py): the jobs it creates at a scale, and
its figures from what the watches saw (times, throughput, CPU per admission, ratios)."""

from __future__ import annotations

import math

import pytest

from scripts.bench.benchlib import ProcessUsage
from tests.unit.bench.scripts import load_bench

bench = load_bench("burst")


def test_full_scale_is_the_issues_burst_with_ample_quota() -> None:
    shape = bench.BurstShape()
    assert (shape.nodes, shape.single_jobs, shape.gang_jobs, shape.pods) == (5000, 10_000, 1_000, 18_000)
    assert shape.gpus_needed <= 0.7 * 8 * shape.nodes  # quota and capacity never bound the burst
    per_team = shape.queues()["teams"]["team-a"]["gpu"]
    assert per_team * shape.teams == 8 * shape.nodes
    # every team's share of the burst fits its own nominal quota: no borrowing needed
    rows = shape.rows()
    for team in shape.team_names():
        assert sum(r["pods"] * r["gpus"] for r in rows if r["team"] == team) <= per_team


def test_rows_interleave_gangs_and_keep_names_unique() -> None:
    rows = bench.BurstShape().scaled(0.01).rows()
    assert len(rows) == 110 and len({r["name"] for r in rows}) == 110
    assert [r["pods"] for r in rows[:11]] == [1] * 10 + [8]
    assert sum(1 for r in rows if r["pods"] == 8 and r.get("required") == "layer-3") == 10
    assert {r["team"] for r in rows[:4]} == {"team-a", "team-b", "team-c", "team-d"}


def test_scale_keeps_the_domain_size_and_at_least_one_of_each() -> None:
    tiny = bench.BurstShape().scaled(0.0001)
    assert (tiny.nodes, tiny.single_jobs, tiny.gang_jobs) == (20, 1, 1)
    assert bench.BurstShape().scaled(0.05).description()["nodeCount"] == 250
    with pytest.raises(ValueError):
        bench.BurstShape().scaled(0)


def observation() -> object:
    obs = bench.Observation(100.0, {"a": 1, "b": 2, "c": 1})
    obs.created = {"a": 101.0, "b": 102.0, "c": 103.0}
    obs.admitted = {"a": 104.0, "b": 106.0, "c": 110.0}
    obs.binds = {"a": [105.0], "b": [107.0, 109.0], "c": [111.0]}
    return obs


def test_figures_count_from_t0_and_per_job_from_its_creation() -> None:
    f = bench.figures(observation(), observed_s=20.0)
    assert (f.jobs, f.pods, f.admitted, f.pods_bound) == (3, 4, 3, 4)
    assert (f.created_s, f.all_admitted_s, f.all_bound_s) == (3.0, 10.0, 11.0)
    assert f.admitted_per_s == pytest.approx(0.3)
    # per job: admission 3, 4, 7 s; all pods bound 4, 7, 8 s (rank round(q * (n - 1)))
    assert (f.admission_p50_s, f.admission_p99_s) == (4.0, 7.0)
    assert (f.bound_p50_s, f.bound_p99_s) == (7.0, 8.0)


def test_an_unfinished_burst_has_no_all_admitted_time() -> None:
    obs = observation()
    del obs.admitted["c"]
    obs.binds["b"] = [107.0]  # one pod of b never bound
    f = bench.figures(obs, observed_s=20.0)
    assert math.isnan(f.all_admitted_s) and math.isnan(f.all_bound_s)
    assert f.admitted_per_s == pytest.approx(2 / 20)  # over the time watched
    assert (f.bound_p50_s, f.bound_p99_s) == (4.0, 8.0)  # a and c have every pod bound, b has not


def run(engine: str, round_index: int, admitted_per_s: float, cpu_ms: int, admitted: int = 100) -> object:
    f = bench.BurstFigures(100, 100, 1.0, admitted, 100 / admitted_per_s, 100, 20.0, admitted_per_s,
                           1.0, 2.0, 3.0, 4.0, 0)
    usage = ProcessUsage(cpu_ms, 0, 100.0, 200.0)
    cpu = {"kueue": usage} if engine == "kueue" else {"toposched-controller": ProcessUsage(cpu_ms // 2, 0, 50.0, 100.0),
                                                      "toposched (3 processes)": usage}
    return bench.EngineRun(round_index, engine, f, cpu, "1 1 1", "2 2 2")


def test_ratios_compare_engines_of_the_same_round_only() -> None:
    runs = [run("kueue", 0, 10.0, 1000), run("toposched", 0, 25.0, 500),
            run("toposched", 1, 5.0, 5000), run("kueue", 1, 10.0, 1000)]
    lines = bench.ratio_lines(runs)
    assert len(lines) == 2
    assert lines[0].startswith("round 1 toposched/kueue: admitted/s 2.50x")
    assert "CPU per admission 0.50x (toposched (3 processes); controller alone 0.25x)" in lines[0]
    assert lines[1].startswith("round 2 toposched/kueue: admitted/s 0.50x")
    assert "CPU per admission 5.00x" in lines[1]


def test_without_kueue_the_ratios_are_against_the_first_engine() -> None:
    runs = [run("toposched@/tmp/old", 0, 10.0, 1000), run("toposched", 0, 20.0, 500)]
    (line,) = bench.ratio_lines(runs, reference="toposched@/tmp/old")
    assert line.startswith("round 1 toposched/toposched@/tmp/old: admitted/s 2.00x")
    assert "CPU per admission 0.50x (toposched (3 processes); controller alone 0.25x)" in line


def test_cpu_per_admission_is_per_admitted_workload() -> None:
    r = run("kueue", 0, 10.0, 1000, admitted=50)
    assert r.cpu_per_admission_ms("kueue") == pytest.approx(20.0)
    assert bench.headline_process("kueue") == "kueue"
    assert bench.headline_process("toposched-serial") == "toposched (3 processes)"


def test_engines_are_checked() -> None:
    assert bench.parse_args([]).engines == ["kueue", "toposched"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--engines", "volcano"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--scale", "-1"])


def test_a_refused_create_reports_the_api_servers_message() -> None:
    class Refused(Exception):
        status = 500
        body = ('{"message": "Internal error occurred: failed calling webhook \\"job.toposched.io\\": '
                'context deadline exceeded"}')

    assert bench.refusal(Refused()) == ('500 Internal error occurred: failed calling webhook "job.toposched.io": '
                                        'context deadline exceeded')
    assert bench.refusal(ValueError("boom")) == " boom"
    assert bench.secs(float("nan")) == "not all" and bench.secs(2.0) == "2.0s"
