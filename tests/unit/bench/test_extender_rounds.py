"""The extender bench's order and stopping rule (scripts/bench/extender.py): phases alternate
A-B-C / C-B-A, rounds come in pairs, and the run stops once each mode's cost is resolved."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.unit.bench.scripts import load_bench

bench = load_bench("extender")


def rounds_of(c_ratios: list[float], b_ratio: float = 0.5) -> list[Any]:
    return [bench.Round({"A": 100.0, "B": 100.0 * b_ratio, "C": 100.0 * c},
                        tuple(bench.balanced_order(bench.PHASES, i)), "1.0 1.0 1.0") for i, c in enumerate(c_ratios)]


def test_a_round_costs_one_minus_the_ratio_to_a() -> None:
    r = rounds_of([0.9])[0]
    assert r.cost("C") == pytest.approx(0.1)
    assert r.cost("B") == 0.5
    assert math.isnan(bench.Round({"A": 0.0, "C": 10.0}, ("A", "C"), "").cost("C"))  # A never completed
    assert math.isnan(bench.Round({"A": 10.0, "C": 0.0}, ("A", "C"), "").cost("C"))


def test_odd_rounds_run_the_phases_in_reverse() -> None:
    assert [r.order for r in rounds_of([1.0, 1.0, 1.0])] == [("A", "B", "C"), ("C", "B", "A"), ("A", "B", "C")]


def test_stops_only_after_whole_pairs_and_the_minimum() -> None:
    steady = rounds_of([0.9, 0.9, 0.9, 0.9, 0.9])
    assert not bench.should_stop(steady[:2], min_rounds=4, max_rounds=16, half_width=0.05)  # under the minimum
    assert not bench.should_stop(steady[:5], min_rounds=4, max_rounds=16, half_width=0.05)  # odd: pair unfinished
    assert bench.should_stop(steady[:4], min_rounds=4, max_rounds=16, half_width=0.05)


def test_a_noisy_cost_that_straddles_zero_keeps_going_until_the_maximum() -> None:
    # the order bias the issue saw: A first gives costs around zero, in both directions
    noisy = rounds_of([1.15, 0.85, 1.20, 0.80, 1.1, 0.9])
    assert not bench.should_stop(noisy[:4], min_rounds=4, max_rounds=16, half_width=0.05)
    assert not bench.should_stop(noisy, min_rounds=4, max_rounds=16, half_width=0.05)
    assert bench.should_stop(noisy, min_rounds=4, max_rounds=6, half_width=0.05)


def test_a_wide_interval_clear_of_zero_and_the_goal_is_resolved() -> None:
    # C costs 40-60 %: wider than +-5 points, but certainly above 0 and above the 20 % goal
    clear = rounds_of([0.4, 0.6, 0.45, 0.55])
    assert bench.cost_interval(clear, "C").half_width > 0.05
    assert bench.should_stop(clear, min_rounds=4, max_rounds=16, half_width=0.05)


def test_the_series_table_gives_the_mean_cost_and_each_rounds_order() -> None:
    lines = bench.series_table([(1300, rounds_of([0.9, 0.9, 0.8, 1.0])), (5000, [])], pods=800)
    row = lines[1]
    assert row.split()[:2] == ["1300", "800"]
    assert "10.0 % [" in row  # C: mean of 10, 10, 20, 0 %
    assert "50.0 % [ 50.0,  50.0]" in row  # B: always half of A
    assert "ABC 0.90, CBA 0.90, ABC 0.80, CBA 1.00" in row
    assert "no complete round" in lines[2]
