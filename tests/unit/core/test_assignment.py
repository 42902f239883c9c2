"""Kueue topologyAssignment encodings: exact shapes and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.assignment import (
    AssignmentFormatError,
    decode_topology_assignment,
    encode_v1beta1,
    encode_v1beta2,
)
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement

HOST = "kubernetes.io/hostname"


def psp(levels: tuple[str, ...], *doms: tuple[tuple[str, ...], int]) -> PodSetPlacement:
    return PodSetPlacement(
        "main", sum(c for _, c in doms), levels, tuple(DomainAssignment(v, c) for v, c in doms)
    )


def test_docs_example_kind_worker() -> None:
    p = psp((HOST,), (("kind-worker",), 7), (("kind-worker2",), 3))
    assert encode_v1beta2(p) == {
        "levels": [HOST],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "kind-worker", "roots": ["", "2"]}}],
                "podCounts": {"individual": [7, 3]},
            }
        ],
    }


def test_universal_values_and_counts_and_suffix() -> None:
    p = psp(("block", "rack"), (("b1", "r1-x"), 2), (("b1", "r2-x"), 2))
    enc = encode_v1beta2(p)
    sl = enc["slices"][0]
    assert sl["valuesPerLevel"][0] == {"universal": "b1"}
    assert sl["valuesPerLevel"][1] == {"individual": {"prefix": "r", "suffix": "-x", "roots": ["1", "2"]}}
    assert sl["podCounts"] == {"universal": 2}


def test_v1beta1_shape() -> None:
    p = psp((HOST,), (("a",), 1))
    assert encode_v1beta1(p) == {"levels": [HOST], "domains": [{"values": ["a"], "count": 1}]}


def test_hostname_prefix_runs_split_when_smaller() -> None:
    hosts = [f"ip-10-0-0-{i}" for i in range(10)] + [f"gpu-node-{i}" for i in range(10)]
    p = psp((HOST,), *(((h,), 1) for h in hosts))
    assert len(encode_v1beta2(p)["slices"]) == 1  # Kueue v0.17: one slice
    enc = encode_v1beta2(p, split_by_hostname_prefix=True)  # TASAssignmentsEncodingByHostnamePrefix
    assert len(enc["slices"]) == 2
    assert decode_topology_assignment(enc) == ((HOST,), list(p.domains))


def test_decoder_accepts_any_split() -> None:
    enc = {
        "levels": [HOST],
        "slices": [
            {"domainCount": 1, "valuesPerLevel": [{"universal": "a"}], "podCounts": {"universal": 4}},
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"roots": ["b", "c"]}}],
                "podCounts": {"individual": [1, 2]},
            },
        ],
    }
    levels, doms = decode_topology_assignment(enc)
    assert levels == (HOST,)
    assert doms == [DomainAssignment(("a",), 4), DomainAssignment(("b",), 1), DomainAssignment(("c",), 2)]


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"levels": [HOST]}, "neither slices"),
        ({"levels": [], "slices": []}, "levels"),
        (
            {"levels": [HOST], "slices": [{"domainCount": 0, "valuesPerLevel": [], "podCounts": {}}]},
            "domainCount",
        ),
        (
            {
                "levels": [HOST],
                "slices": [{"domainCount": 1, "valuesPerLevel": [], "podCounts": {"universal": 1}}],
            },
            "valuesPerLevel",
        ),
        (
            {
                "levels": [HOST],
                "slices": [
                    {
                        "domainCount": 2,
                        "valuesPerLevel": [{"individual": {"roots": ["a"]}}],
                        "podCounts": {"universal": 1},
                    }
                ],
            },
            "roots",
        ),
        ({"levels": [HOST], "domains": [{"values": ["a", "b"], "count": 1}]}, "values"),
    ],
)
def test_decoder_rejects_malformed(bad: dict, field: str) -> None:
    with pytest.raises(AssignmentFormatError, match=field):
        decode_topology_assignment(bad)


names = st.text(alphabet="ab-12", min_size=1, max_size=6)


@given(
    st.lists(
        st.tuples(names, names, st.integers(1, 9)), min_size=1, max_size=12, unique_by=lambda t: (t[0], t[1])
    )
)
def test_round_trip_both_versions(rows: list[tuple[str, str, int]]) -> None:
    rows.sort()
    p = psp(("rack", HOST), *(((r, h), c) for r, h, c in rows))
    for enc in (encode_v1beta2(p), encode_v1beta2(p, split_by_hostname_prefix=True), encode_v1beta1(p)):
        assert decode_topology_assignment(enc) == (("rack", HOST), list(p.domains))
