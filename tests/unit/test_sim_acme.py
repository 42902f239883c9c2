"""LLM-cluster traces in the shape of the Acme trace (sim/acme.py): a large sample reproduces
the published Kalos and Seren figures (reference hyperpod-and-peers.md §4.1); traces are
seeded, sized to the offered load, and carry the topology request of their size."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest
import yaml

from scheduler import cli
from scheduler.sim.acme import KALOS, SEREN, STATES, AcmeShape, acme_trace, draw_jobs, in_window
from scheduler.sim.trace import TraceError

L2 = "topology.k8s.aws/network-node-layer-2"
L3 = "topology.k8s.aws/network-node-layer-3"
LEVELS = [("topology.k8s.aws/network-node-layer-1", 512), (L2, 128), (L3, 16)]
QUEUES = [("team-0", "q"), ("team-1", "q")]


@pytest.mark.parametrize("shape", [KALOS, SEREN], ids=lambda s: s.name)
def test_large_sample_matches_the_published_figures(shape: AcmeShape) -> None:
    drawn = draw_jobs(shape, random.Random(7), 100_000)
    gpus = [d.gpus for d in drawn]
    runs = [d.duration for d in drawn]
    assert statistics.median(gpus) == shape.median_gpus and max(gpus) == shape.max_gpus
    assert statistics.mean(gpus) == pytest.approx(shape.mean_gpus, rel=0.06)
    assert statistics.median(runs) == pytest.approx(shape.median_run_s, rel=0.06)
    assert statistics.mean(runs) == pytest.approx(shape.mean_run_s, rel=0.12)
    total = sum(d.gpus * d.duration for d in drawn)
    for state, count_share, time_share in zip(STATES, shape.count_shares, shape.gpu_time_shares, strict=True):
        mine = [d for d in drawn if d.state == state]
        assert len(mine) / len(drawn) == pytest.approx(count_share, abs=0.01), state
        assert sum(d.gpus * d.duration for d in mine) / total == pytest.approx(time_share, abs=0.08), state


def test_kalos_is_the_larger_job_mix() -> None:
    kalos = draw_jobs(KALOS, random.Random(1), 20_000)
    seren = draw_jobs(SEREN, random.Random(1), 20_000)
    multi = [sum(1 for d in drawn if d.gpus > 8) / len(drawn) for drawn in (kalos, seren)]
    assert multi[0] > 0.15 > 0.03 > multi[1]


def test_trace_is_seeded_and_sized_to_the_offered_load() -> None:
    def make(seed: int) -> object:
        return acme_trace(KALOS, seed, hours=2, load=0.9, gpus_per_node=8, node_count=1024, queues=QUEUES,
                          level_capacity=LEVELS)

    trace = make(3)
    assert trace == make(3) and trace != make(4)
    window = 2 * 3600
    # drawn until the work expected inside the window is the offered load, not one job more
    work = [j.pods * j.gpus_per_pod * in_window(j.duration, window) for j in trace.jobs]
    assert sum(work) >= 0.9 * 8 * 1024 * window > sum(work[:-1])
    assert trace.jobs[-1].at == pytest.approx(window, rel=0.2)


def test_a_long_run_counts_for_what_falls_in_the_window() -> None:
    assert in_window(100.0, 1000.0) == pytest.approx(95.0)  # arrival uniform: E[min(100, 1000 - a)]
    assert in_window(1000.0, 1000.0) == in_window(10 * 86400.0, 1000.0) == 500.0


def test_multi_node_jobs_prefer_the_narrowest_domain_that_holds_them() -> None:
    trace = acme_trace(KALOS, 5, count=3000, gpus_per_node=8, node_count=1024, queues=QUEUES,
                       level_capacity=LEVELS, priority_classes=("a", "b"))
    seen = set()
    for j in trace.jobs:
        gpus = j.pods * j.gpus_per_pod
        if j.pods == 1:
            assert j.preferred is None and j.gpus_per_pod in (1, 2, 4, 8)
            continue
        assert j.gpus_per_pod == 8 and gpus in (16, 32, 64, 128, 256, 512, 1024)
        assert j.preferred == (L3 if j.pods <= 16 else L2), j
        assert j.required is None
        seen.add(j.preferred)
        assert j.name.rsplit("-", 1)[1] in STATES and j.priority_class in ("a", "b")
    assert seen == {L2, L3}


def test_count_or_hours() -> None:
    with pytest.raises(TraceError, match="either a job count or hours"):
        acme_trace(KALOS, 1, gpus_per_node=8, node_count=8, queues=QUEUES, level_capacity=LEVELS)


def test_simulate_synthetic_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    rc = cli.main(["simulate", "--cluster", str(root / "examples/clusters/hyperpod-64.yaml"),
                   "--queues", str(root / "examples/kueue/hyperpod-queues.yaml"), "--synthetic", "60",
                   "--synthetic-shape", "kalos", "--seed", "2", "--out", str(out)])
    assert rc == 0
    trace = yaml.safe_load((out / "trace.yaml").read_text())
    assert len(trace["jobs"]) == 60 and all(j["pods"] <= 64 for j in trace["jobs"])
    assert "60/60 admitted" in capsys.readouterr().out
