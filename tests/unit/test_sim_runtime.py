"""The simulator's run-time model (sim/runtime.py) and what users feel (sim/outcomes.py): a
spread multi-node job runs longer by the avoidable spread only; completion time and completed
work per job class; the model's parameters in the summary, the report and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler import cli
from scheduler.sim.engine import simulate
from scheduler.sim.outcomes import completed_gpu_hours_per_day, jct_by_class, job_class
from scheduler.sim.runtime import PRESETS, RunTimeModel, parse_model
from scheduler.sim.scenario import jobs_from_trace, summarize, world_from_objects
from scheduler.sim.trace import trace_from_data
from tests.unit.test_simulate import L3, job, queues

# Two layer-3 domains of two 8-GPU nodes under one layer-2 domain.
TWO_RACKS = {"name": "sim-4", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2], "nodesPerDomain": 2}
# Two layer-2 domains, each one layer-3 domain of two nodes.
TWO_SPINES = {"name": "sim-4s", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 1], "nodesPerDomain": 2}
# x, y, z fill rack A and half of rack B (Kueue's LeastFreeCapacity, leaves in path order);
# when x ends at t=50 the 2-pod job s fits only across both racks (one node in each).
SPREAD = {"jobs": [job("x", 0, 1, 50), job("y", 0, 1, 1000), job("z", 0, 1, 1000),
                   job("s", 10, 2, 100, topology={"preferred": L3})]}


def run(trace: dict[str, Any], cluster: dict[str, Any], model: RunTimeModel) -> tuple[Any, dict[str, Any]]:
    world = world_from_objects(cluster, queues(32))
    jobs, failures = jobs_from_trace(trace_from_data(trace), world)
    result = simulate(world, jobs, failures, run_time=model)
    return result, {j.spec.name: j for j in result.jobs}


def test_spread_job_runs_longer_by_the_extra_layer3_domain() -> None:
    for model, end in ((PRESETS["off"], 150.0), (PRESETS["moderate"], 153.0), (PRESETS["strong"], 156.0)):
        _r, jobs = run(SPREAD, TWO_RACKS, model)
        s = jobs["s"]
        assert (s.first_admitted, s.domains[L3]) == (50.0, 2)
        assert s.finished_at == pytest.approx(end), model.name
        assert jobs["y"].finished_at == 1000.0  # single-pod jobs never slow down


def test_crossing_layer2_adds_its_own_share() -> None:
    _r, jobs = run(SPREAD, TWO_SPINES, PRESETS["moderate"])
    assert jobs["s"].slowdown == pytest.approx(1 + 0.03 + 0.08)  # one extra layer-3 and one extra layer-2


def test_spread_a_job_cannot_avoid_costs_nothing() -> None:
    # 3 pods on 2-node racks need two racks whatever the scheduler does.
    _r, jobs = run({"jobs": [job("big", 0, 3, 100, topology={"preferred": L3})]}, TWO_RACKS, PRESETS["strong"])
    assert jobs["big"].domains[L3] == 2 and jobs["big"].finished_at == 100.0


def test_factor_is_capped() -> None:
    model = RunTimeModel("t", 0.1, 0.5, 0.3)
    assert model.factor(1, 0) == pytest.approx(1.1)
    assert model.factor(10, 4) == pytest.approx(1.3)
    assert RunTimeModel().factor(10, 4) == 1.0


@pytest.mark.parametrize("text, message", [
    ("fast", "expected one of off, moderate, strong"),
    ("0.1,x,1", "PER_EXTRA_L2: expected a number, got 'x'"),
    ("0.1,0.2,nan", "MAX: must be between 0 and 10"),
    ("-0.1,0.2,1", "PER_EXTRA_L3: must be between 0 and 10"),
])
def test_parse_refuses_bad_models(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_model(text)


def test_parse_reads_presets_and_fractions() -> None:
    assert parse_model("moderate") == PRESETS["moderate"]
    assert parse_model("0.05, 0.1, 0.5") == RunTimeModel("custom", 0.05, 0.1, 0.5)


def test_completion_time_and_work_per_class() -> None:
    result, _jobs = run(SPREAD, TWO_RACKS, PRESETS["moderate"])
    assert [job_class(j) for j in result.jobs] == ["1-node", "1-node", "1-node", "multi-node"]
    jct = jct_by_class(result.jobs)
    assert jct["multi-node"] == {"count": 1, "p50": 143.0, "p95": 143.0}  # submitted at 10, done at 153
    assert jct["all"] == {"count": 4, "p50": 143.0, "p95": 1000.0}  # 50, 143, 1000, 1000 (nearest rank)
    # Within the first 100 s only x (8 GPUs x 50 s) finished; per day of that window.
    per_day = completed_gpu_hours_per_day(result.jobs, 100.0)
    assert per_day["1-node"] == pytest.approx(round(8 * 50 / 3600 / (100 / 86400), 1))
    assert per_day["multi-node"] == 0.0
    s = summarize(result)
    assert s["run_time_model"] == {"name": "moderate", "per_extra_narrow": 0.03, "per_extra_wide": 0.08,
                                   "max_slowdown": 0.3}
    assert s["jct_s"]["multi-node"]["p50"] == 143.0 and s["mean_slowdown"]["multi-node"] == pytest.approx(1.03)


def test_cli_reports_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.yaml"
    trace.write_text(yaml.safe_dump(SPREAD))
    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump(TWO_RACKS))
    qs = tmp_path / "q.yaml"
    qs.write_text(yaml.safe_dump_all(queues(32)))
    out = tmp_path / "out"
    rc = cli.main(["simulate", "--cluster", str(cluster), "--queues", str(qs), "--trace", str(trace),
                   "--run-time-model", "strong", "--out", str(out)])
    assert rc == 0
    assert "multi-node 146/146s" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run_time_model"]["name"] == "strong"
    html = (out / "report.html").read_text()
    assert "run-time model strong: +6% per extra layer-3 domain, +15% per extra layer-2 domain, at most +60%" in html
    assert "Job completion time per class" in html


def test_cli_refuses_a_bad_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["simulate", "--cluster", "c", "--queues", "q", "--synthetic", "3", "--run-time-model", "0.1,x,1",
                   "--out", str(tmp_path)])
    assert rc == 2
    assert "--run-time-model: PER_EXTRA_L2: expected a number, got 'x'" in capsys.readouterr().err
