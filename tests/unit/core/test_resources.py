"""Quantity parsing into canonical integer units, and Kueue's pods-that-fit rule."""

from __future__ import annotations

import pytest

from scheduler.core.resources import QuantityError, format_quantity, parse_quantity, pods_that_fit, with_pod_slot


@pytest.mark.parametrize(
    ("text", "resource", "expected"),
    [
        ("500m", "cpu", 500),
        ("2", "cpu", 2000),
        ("0.5", "cpu", 500),
        ("100n", "cpu", 1),  # rounded up: a request is never under-counted
        ("1Gi", "memory", 2**30),
        ("2048Gi", "memory", 2048 * 2**30),
        ("1.5G", "memory", 1_500_000_000),
        ("2k", "memory", 2000),
        ("1e3", "memory", 1000),
        ("1E", "memory", 10**18),
        ("8", "nvidia.com/gpu", 8),
        (32, "vpc.amazonaws.com/efa", 32),
    ],
)
def test_parse_quantity(text: str | int, resource: str, expected: int) -> None:
    assert parse_quantity(text, resource) == expected


@pytest.mark.parametrize("text", ["abc", "1Qi", "", "m", "-1"])
def test_bad_quantities_raise(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text, "cpu")


@pytest.mark.parametrize("value, words", [
    ("NaN", "not a finite number"), (".nan", "invalid quantity"), ("Infinity", "not a finite number"),
    (float("nan"), "not a finite number"), (float("inf"), "not a finite number"), ("1e999999", "too large"),
    ("8" * 5000, "longer than 64 characters"), (10**4000, "too large"), ("1e19", "too large"),
], ids=["NaN", ".nan", "Infinity", "float-nan", "float-inf", "1e999999", "5000-digits", "int-4000-digits", "1e19"])
def test_non_finite_huge_and_long_quantities_raise_quickly(value: str | float, words: str) -> None:
    """Each is a QuantityError naming the problem (before: decimal.InvalidOperation, OverflowError,
    or Python's 4,300-digit limit escaped as other exceptions)."""
    with pytest.raises(QuantityError, match=words):
        parse_quantity(value, "cpu")


@pytest.mark.parametrize(
    ("amount", "resource", "expected"),
    [(2000, "cpu", "2"), (1500, "cpu", "1500m"), (2**31, "memory", "2Gi"), (7, "nvidia.com/gpu", "7")],
)
def test_format_quantity_round_trips(amount: int, resource: str, expected: str) -> None:
    assert format_quantity(amount, resource) == expected
    assert parse_quantity(expected, resource) == amount


@pytest.mark.parametrize(
    ("free", "per_pod", "expected"),
    [
        ({"cpu": 4000, "pods": 110}, {"cpu": 1000}, 4),
        ({"cpu": 4000, "pods": 2}, {"cpu": 1000}, 2),  # the pods slot limits
        ({"cpu": -500, "pods": 110}, {"cpu": 1000}, 0),  # negative free is 0
        ({"pods": 110}, {"nvidia.com/gpu": 1}, 0),  # requested resource absent
        ({"cpu": 4000, "pods": 110}, {"cpu": 1000, "memory": 0}, 4),  # zero requests ignored
    ],
)
def test_pods_that_fit(free: dict[str, int], per_pod: dict[str, int], expected: int) -> None:
    assert pods_that_fit(free, with_pod_slot(per_pod)) == expected
