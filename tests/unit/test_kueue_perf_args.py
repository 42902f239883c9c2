"""Argument handling of scripts/bench/kueue_perf.py (the benchmark itself never runs in the
test suite: it needs Go, two control planes and minutes)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "kueue_perf.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kueue_perf", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


bench = load_script()

GENERATOR = {"cohorts": [{"className": "cohort", "count": 2, "queuesSets": [{
    "className": "cq", "count": 3, "nominalQuota": 20,
    "workloadsSets": [{"count": 350, "workloads": [{"className": "small"}]},
                      {"count": 1, "workloads": [{"className": "large"}]}]}]}]}


def test_defaults_run_both_engines_on_the_tas_config() -> None:
    args = bench.parse_args([])
    assert (args.config, args.scale, args.engines) == ("tas", 1.0, ("kueue", "toposched"))


def test_engines_and_scale_are_checked() -> None:
    assert bench.parse_args(["--engines", "toposched", "--scale", "0.1"]).engines == ("toposched",)
    with pytest.raises(SystemExit):
        bench.parse_args(["--engines", "volcano"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--scale", "0"])


def test_scale_multiplies_every_workload_set_keeping_at_least_one() -> None:
    small = bench.scaled(GENERATOR, 0.1)
    counts = [w["count"] for w in small["cohorts"][0]["queuesSets"][0]["workloadsSets"]]
    assert counts == [35, 1]
    assert GENERATOR["cohorts"][0]["queuesSets"][0]["workloadsSets"][0]["count"] == 350  # not mutated
    assert bench.workload_total(small) == 2 * 3 * 36


def test_a_config_path_takes_the_rangespec_beside_it(tmp_path: Path) -> None:
    generator = tmp_path / "generator.yaml"
    generator.write_text(yaml.safe_dump({**GENERATOR, "topology": {"name": "t"}}))
    assert bench.resolve_config(str(generator), None, tmp_path).rangespec is None
    (tmp_path / "rangespec.yaml").write_text("cmd: {maxWallMs: 1}\n")
    config = bench.resolve_config(str(generator), None, tmp_path)
    assert (config.rangespec, config.tas) == (tmp_path / "rangespec.yaml", True)
    with pytest.raises(SystemExit):
        bench.resolve_config(str(tmp_path / "missing.yaml"), None, tmp_path)


def test_kueue_configs_come_from_the_module(tmp_path: Path) -> None:
    base = tmp_path / "test/performance/scheduler/configs/baseline"
    base.mkdir(parents=True)
    (base / "generator.yaml").write_text(yaml.safe_dump(GENERATOR))
    (base / "rangespec.yaml").write_text("cmd: {maxWallMs: 1}\n")
    config = bench.resolve_config("baseline", None, tmp_path)
    assert (config.generator, config.rangespec, config.tas) == (base / "generator.yaml", base / "rangespec.yaml",
                                                                False)


def test_cq_usage_is_the_checkers_formula() -> None:
    summary = {"clusterQueueClasses": {"cq": {"cpuUsed": 600_000, "nominalQuota": 20,
                                              "firstEventTime": "2026-01-01T00:00:00.123456789Z",
                                              "lastEventTime": "2026-01-01T00:01:00.123456789Z"}}}
    assert bench.cq_usage(summary) == {"cq": pytest.approx(50.0)}


def test_cpu_per_admitted_workload_counts_every_class() -> None:
    result = bench.EngineResult("toposched", ok=True, cpu_user_ms=900, cpu_sys_ms=100,
                                classes={"small": {"count": 30, "totalEvictions": 2},
                                         "large": {"count": 10, "totalEvictions": 0}})
    assert bench.admitted_counts(result.classes) == (40, 42)
    assert bench.cpu_per_admitted_ms(result) == pytest.approx(25.0)
    kueue = bench.EngineResult("kueue", ok=True, cpu_user_ms=400, cpu_sys_ms=100,
                               classes={"small": {"count": 30}, "large": {"count": 10}})
    text = bench.report([kueue, result], {})
    assert "engine CPU per admitted Workload 25.0 ms (40 Workloads, 42 admissions" in text
    assert "CPU per admitted Workload 2.00x" in text  # 25 ms against Kueue's 12.5 ms
    assert math.isnan(bench.cpu_per_admitted_ms(bench.EngineResult("x", ok=False)))  # nothing admitted
