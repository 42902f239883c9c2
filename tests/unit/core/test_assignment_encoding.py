"""The v1beta2 ``topologyAssignment`` encoding as Kueue writes it: one compact slice (v0.17), or
with ``TASAssignmentsEncodingByHostnamePrefix`` (beta on in v0.19) runs of hostnames sharing a
reusable prefix unless one slice is strictly smaller. Cases restated from Kueue v0.19.2
``pkg/util/tas/tas_assignment_test.go``, names kept."""

from __future__ import annotations

import pytest

from scheduler.core.assignment import (
    MAX_SLICES,
    _prefix_runs,
    _reusable_prefix_keys,
    decode_topology_assignment,
    encode_v1beta2,
)
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement

HOST = "kubernetes.io/hostname"


def assignment(*domains: tuple[str, int], level: str = HOST) -> PodSetPlacement:
    return PodSetPlacement("main", sum(c for _, c in domains), (level,),
                           tuple(DomainAssignment((v,), c) for v, c in domains))


def runs(p: PodSetPlacement) -> list[dict[str, object]]:
    """Kueue's ``compactTopologyAssignmentEncodingWithHostnamePrefixRuns`` (before the size
    comparison ``V1Beta2From`` makes)."""
    slices = _prefix_runs(p.domains, 1, p.levels[-1] == HOST)
    assert decode_topology_assignment({"levels": list(p.levels), "slices": slices}) == (p.levels, list(p.domains))
    return slices


def test_gke_node_pools() -> None:
    p = assignment(("gke-c-pool-a-hash1-aa", 3), ("gke-c-pool-a-hash1-bb", 3), ("gke-c-pool-b-hash2-cc", 4),
                   ("gke-c-pool-b-hash2-dd", 5))
    assert runs(p) == [
        {"domainCount": 2, "valuesPerLevel": [{"individual": {"prefix": "gke-c-pool-a-hash1-", "roots": ["aa", "bb"]}}],
         "podCounts": {"universal": 3}},
        {"domainCount": 2, "valuesPerLevel": [{"individual": {"prefix": "gke-c-pool-b-hash2-", "roots": ["cc", "dd"]}}],
         "podCounts": {"individual": [4, 5]}},
    ]


def test_aws_eks_private_dns_names() -> None:
    suffix = ".us-west-2.compute.internal"
    p = assignment((f"ip-10-24-34-0{suffix}", 2), (f"ip-10-24-34-1{suffix}", 2), (f"ip-10-24-35-0{suffix}", 3),
                   (f"ip-10-24-35-1{suffix}", 4))
    assert [s["valuesPerLevel"] for s in runs(p)] == [
        [{"individual": {"prefix": "ip-10-24-34-", "suffix": suffix, "roots": ["0", "1"]}}],
        [{"individual": {"prefix": "ip-10-24-35-", "suffix": suffix, "roots": ["0", "1"]}}],
    ]


def test_azure_aks_vmss_node_pools() -> None:
    p = assignment(("aks-nodepool1-12345678-vmss000000", 1), ("aks-nodepool1-12345678-vmss000001", 1),
                   ("aks-nodepool2-87654321-vmss000000", 2), ("aks-nodepool2-87654321-vmss000001", 3))
    assert [s["valuesPerLevel"][0]["individual"]["prefix"] for s in runs(p)] == [  # type: ignore[index]
        "aks-nodepool1-12345678-vmss00000", "aks-nodepool2-87654321-vmss00000"]


def test_on_premises_uuid_node_names() -> None:
    uuids = ["550e8400-e29b-41d4-a716-446655440000", "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
             "f47ac10b-58cc-4372-a567-0e02b2c3d479"]
    (only,) = runs(assignment(*((u, i + 1) for i, u in enumerate(uuids))))
    assert only == {"domainCount": 3, "valuesPerLevel": [{"individual": {"roots": uuids}}],
                    "podCounts": {"individual": [1, 2, 3]}}


def test_without_hostname_level_one_slice() -> None:
    assert len(runs(assignment(("rack-a", 1), ("rack-b", 2), level="cloud.example.com/rack"))) == 1


def test_preserves_domain_order() -> None:
    p = assignment(("gke-c-pool-a-hash1-aa", 1), ("gke-c-pool-b-hash2-cc", 2), ("gke-c-pool-a-hash1-bb", 3),
                   ("gke-c-pool-b-hash2-dd", 4))
    assert len(runs(p)) == 4


@pytest.mark.parametrize(("hosts", "want"), [
    (["gke-c-pool-a-hash1-aa", "gke-c-pool-a-hash1-bb", "gke-c-pool-b-hash2-cc", "gke-c-pool-b-hash2-dd"],
     ["gke-c-pool-a-hash1-"] * 2 + ["gke-c-pool-b-hash2-"] * 2),
    (["node-a", "host-b"], ["", ""]),  # no reusable prefix
    (["nodea", "hostb"], None),  # no delimiter
])
def test_reusable_hostname_prefix_keys(hosts: list[str], want: list[str] | None) -> None:
    assert _reusable_prefix_keys(hosts) == want


def test_reusable_hostname_prefix_keys_back_off_to_fit_the_slice_limit() -> None:
    hosts = [f"a-{'y' if i % 2 else 'x'}-{i:04d}" for i in range(MAX_SLICES + 1)]
    assert _reusable_prefix_keys(hosts) == ["a-"] * len(hosts)


def _pools(n: int) -> PodSetPlacement:
    half = n // 2
    return assignment(*((f"pool-{'a' if i < half else 'b'}-node-{i if i < half else i - half:05d}", 1)
                        for i in range(n)))


@pytest.mark.parametrize(("gate", "domains", "prefix_runs"), [
    (True, 1, False),  # enabled keeps one-slice encoding (one domain: the same slice either way)
    (True, 4, False),  # enabled uses the smaller single-slice encoding
    (True, 20, True),  # enabled uses the smaller hostname-prefix encoding
    (False, 20, False),  # disabled uses single-slice encoding
])
def test_feature_gate_and_fallback(gate: bool, domains: int, prefix_runs: bool) -> None:
    slices = encode_v1beta2(_pools(domains), split_by_hostname_prefix=gate)["slices"]
    assert len(slices) == (2 if prefix_runs else 1)


def test_the_gate_per_release() -> None:
    assert not FeatureGates(release=KUEUE_V017).enabled("TASAssignmentsEncodingByHostnamePrefix")
    assert FeatureGates(release=KUEUE_V019).enabled("TASAssignmentsEncodingByHostnamePrefix")


def test_prefix_and_suffix_do_not_overlap_as_kueue_trims_them() -> None:
    """Kueue's motivating example {"ababa", "aba"}: prefix "aba" and suffix "aba" overlap in
    "aba", so the prefix is shortened to nothing and the roots keep the rest."""
    (only,) = encode_v1beta2(assignment(("ababa", 1), ("aba", 1), level="x"))["slices"]
    assert only["valuesPerLevel"] == [{"individual": {"suffix": "aba", "roots": ["ab", ""]}}]
