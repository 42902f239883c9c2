"""What each Kueue release's Configuration knows (issue 41, item 6): the gate names and fields
v0.18/v0.19 added are refused under ``--kueue-version v0.17`` as Kueue v0.17.0 refuses them,
toposched's own behaviour beyond a release is offered under ``toposched.io/`` names, and every
gate is dated by the tag that first has it (docs/kueue-versions.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scheduler.adapter.kueue_config import (
    LATER_RELEASE_GATES,
    TOPOSCHED_GATES,
    ConfigError,
    LoadedConfig,
    parse_kueue_config,
)
from scheduler.adapter.kueue_gates import GATE_FIRST_TAGS, KUEUE_GATES, v019_tag
from scheduler.core.config import GATE_DEFAULTS_BY_RELEASE, KUEUE_V017, KUEUE_V019

ROOT = Path(__file__).resolve().parents[3]
V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
V1BETA1 = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}

# The six gates toposched acts on that Kueue v0.17.0's pkg/features/kube_features.go lacks.
V018_V019_GATES = ("TASRespectNodeAffinityPreferred", "TASAssignmentsEncodingByHostnamePrefix",
                   "TASValidateWorkloadSliceSize", "UnadmittedWorkloadsObservability", "DisableWaitForPodsReady",
                   "WorkloadPriorityClassDefaulting")


def parse(release: str, doc: dict[str, object] | None = None, **fields: object) -> LoadedConfig:
    return parse_kueue_config({**(doc or V1BETA2), **fields}, release)


# v0.19's metric gates (docs/metrics.md): they only choose which v0.19 families are fed.
METRIC_GATES = {"MetricForWorkloadCreationLatency", "MetricsForCohorts"}
# v0.18/v0.19 gates of behaviour built for issue 41 (AdmissionGatedBy is in v0.17.0, alpha).
BEHAVIOUR_GATES = {"FinishOrphanedWorkloads", "UnadmittedWorkloadsExplicitStatus", "LWSImmutableGroupSize",
                   "WorkloadIdentifierAnnotations",
                   # issue 41 items 3, 5, 7 (h5): pod-owned Workloads, overlapping flavors, quotaCheckStrategy
                   "SkipReassignmentForPodOwnedWorkloads", "TASHandleOverlappingFlavors", "QuotaCheckStrategy"}


def test_the_six_are_exactly_our_gates_v017_lacks() -> None:
    lacking = set(GATE_DEFAULTS_BY_RELEASE[KUEUE_V017]) - set(KUEUE_GATES[KUEUE_V017]) - LATER_RELEASE_GATES
    assert lacking == set(V018_V019_GATES) | METRIC_GATES | BEHAVIOUR_GATES
    assert TOPOSCHED_GATES <= set(V018_V019_GATES)


# component-base's SetFromMap (vendored in Kueue v0.17.0,
# vendor/k8s.io/component-base/featuregate/feature_gate.go): "unrecognized feature gate: %s".
@pytest.mark.parametrize("gate", (*V018_V019_GATES, *sorted(METRIC_GATES), *sorted(BEHAVIOUR_GATES)))
def test_v018_v019_gate_names_are_refused_under_v017_and_accepted_under_v019(gate: str) -> None:
    with pytest.raises(ConfigError, match=rf"^featureGates: unrecognized feature gate: {gate} \(Kueue v0.17.0\)"):
        parse(KUEUE_V017, featureGates={gate: True})
    # Kueue refuses UnadmittedWorkloadsExplicitStatus without UnadmittedWorkloadsObservability.
    needed = {"UnadmittedWorkloadsObservability": True} if gate == "UnadmittedWorkloadsExplicitStatus" else {}
    assert parse(KUEUE_V019, featureGates={gate: True, **needed}).config.feature_gates.enabled(gate)


@pytest.mark.parametrize("gate", sorted(TOPOSCHED_GATES))
def test_toposched_offers_its_own_behaviour_under_its_own_name(gate: str) -> None:
    with pytest.raises(ConfigError, match=rf"toposched offers this behaviour as featureGates.toposched.io/{gate}$"):
        parse(KUEUE_V017, featureGates={gate: True})
    for release in (KUEUE_V017, KUEUE_V019):
        gates = parse(release, featureGates={f"toposched.io/{gate}": True}).config.feature_gates
        assert gates.enabled(gate) and gates.release == release
    with pytest.raises(ConfigError, match="disagree"):
        parse(KUEUE_V019, featureGates={gate: False, f"toposched.io/{gate}": True})


@pytest.mark.parametrize("gate", ["TASAssignmentsEncodingByHostnamePrefix", "TASValidateWorkloadSliceSize",
                                  "DisableWaitForPodsReady"])
def test_gates_that_only_change_a_v019_behaviour_have_no_toposched_name(gate: str) -> None:
    with pytest.raises(ConfigError, match=r"unrecognized feature gate: .*\(Kueue v0.17.0\)$"):
        parse(KUEUE_V017, featureGates={gate: True})
    with pytest.raises(ConfigError, match="unknown toposched setting: toposched.io/"):
        parse(KUEUE_V017, featureGates={f"toposched.io/{gate}": True})


# Kueue's own case: pkg/config/config_test.go at v0.17.0, "invalid config" (strict decoding:
# `unknown field "invalidField"`); the v0.19 fields are those of v0.19.2's config_test.go
# "multiKueue config" (incrementalDispatcherConfig.stepSize 3) and validation_test.go
# (tls.curvePreferences [23, 29]; customLabels with sourceKind Workload and trackedValues ["a"]).
V019_ONLY = [
    ({"tls": {"curvePreferences": [23, 29]}}, "tls.curvePreferences", True),
    ({"multiKueue": {"incrementalDispatcherConfig": {"stepSize": 3}}}, "multiKueue.incrementalDispatcherConfig",
     False),
    ({"metrics": {"customLabels": [{"name": "team", "sourceLabelKey": "team"},
                                   {"name": "tier", "sourceLabelKey": "tier", "sourceKind": "Workload",
                                    "trackedValues": ["a"]}]}}, "metrics.customLabels[1].sourceKind", False),
    ({"metrics": {"customLabels": [{"name": "team", "sourceLabelKey": "team", "trackedValues": ["a"]}]}},
     "metrics.customLabels[0].trackedValues", False),
    ({"multiKueue": {"clusterProfile": {"accessProviders": [{"name": "p"}]}}},
     "multiKueue.clusterProfile.accessProviders", False),
    ({"resources": {"deviceClassMappings": [{"name": "r", "deviceClassNames": ["c"], "sources": []}]}},
     "resources.deviceClassMappings[0].sources", False),
    ({"resources": {"quotaCheckStrategy": "BlockUndeclared"}}, "resources.quotaCheckStrategy", False),
]


@pytest.mark.parametrize(("fields", "path", "in_v1beta1"), V019_ONLY)
def test_v019_configuration_fields_are_unknown_to_v017(fields: dict[str, object], path: str,
                                                       in_v1beta1: bool) -> None:
    with pytest.raises(ConfigError, match=f'^strict decoding error: unknown field "{re.escape(path)}"$'):
        parse(KUEUE_V017, **fields)
    parse(KUEUE_V019, **fields)  # v0.19.2's v1beta2 has it
    if in_v1beta1:
        parse(KUEUE_V019, V1BETA1, **fields)
    else:  # v0.19.2's v1beta1 did not gain it
        with pytest.raises(ConfigError, match=f'unknown field "{re.escape(path)}"'):
            parse(KUEUE_V019, V1BETA1, **fields)


def test_v017_fields_of_the_same_sections_still_pass() -> None:
    parse(KUEUE_V017, tls={"minVersion": "VersionTLS12"}, multiKueue={"gcInterval": "1m"},
          metrics={"customLabels": [{"name": "team", "sourceLabelKey": "team"}]})


def test_every_v019_gate_v017_lacks_is_dated() -> None:
    added = set(KUEUE_GATES[KUEUE_V019]) - set(KUEUE_GATES[KUEUE_V017])
    assert set(GATE_FIRST_TAGS) == added
    for gate, tags in GATE_FIRST_TAGS.items():
        assert tags == tuple(sorted(tags, key=lambda t: tuple(int(x) for x in t[1:].split(".")))), gate
        assert tags[-1].startswith("v0.19."), gate


# Gates that arrived after v0.19.0 (git show v0.19.0:pkg/features/kube_features.go lacks them).
@pytest.mark.parametrize(("gate", "tag"), [
    ("TASValidateWorkloadSliceSize", "v0.19.1"), ("FlavorFungibilityPreserveScanProgress", "v0.19.1"),
    ("LWSImmutableGroupSize", "v0.19.1"), ("WorkloadValidateResourcesAreNonNegative", "v0.19.1"),
    ("WorkloadValidationForPodSetMetadata", "v0.19.1"), ("RecomputeAssignmentUponPreemptionTargetsOverlap", "v0.19.1"),
    ("TASCacheTopologyTree", "v0.19.2"), ("ValidateRayAndSparkJobUpdates", "v0.19.2"),
    ("TASAssignmentsEncodingByHostnamePrefix", "v0.19.0"),
])
def test_gate_dates(gate: str, tag: str) -> None:
    assert v019_tag(gate) == tag


def test_the_versions_page_dates_each_gate_it_names_by_its_first_v019_tag() -> None:
    """Every row of docs/kueue-versions.md naming a gate that arrived in v0.19.1 or v0.19.2 says so."""
    rows = [line for line in (ROOT / "docs/kueue-versions.md").read_text().splitlines() if line.startswith("|")]
    for gate in GATE_FIRST_TAGS:
        tag = v019_tag(gate)
        if tag == "v0.19.0":
            continue
        for row in rows:
            if re.search(rf"`{gate}`", row):
                assert tag in row, (gate, tag, row[:120])
