"""Which Kueue toposched behaves as (``--kueue-version``; docs/kueue-versions.md): gate defaults
per release, the release's gate list and locks, and the Configuration defaults that changed
between Kueue v0.17.0 and v0.19.2 (``apis/config/v1beta2/defaults.go``, #11855)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scheduler.adapter.kueue_config import ConfigError, LoadedConfig, parse_kueue_config
from scheduler.adapter.kueue_gates import KUEUE_GATES, KUEUE_LOCKED_GATES
from scheduler.commands._kueue_config import add_kueue_config_argument, kueue_config
from scheduler.core.config import (
    GATE_DEFAULTS_BY_RELEASE,
    KUEUE_DEFAULTS,
    KUEUE_V017,
    KUEUE_V019,
    FeatureGates,
    kueue_defaults,
    kueue_release,
)

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


def parse(release: str, **fields: object) -> LoadedConfig:
    return parse_kueue_config({**V1BETA2, **fields}, release)


@pytest.mark.parametrize(("gate", "v017", "v019"), [
    ("TASMultiLayerTopology", False, True),
    ("TASAssignmentsEncodingByHostnamePrefix", False, True),
    ("TASValidateWorkloadSliceSize", False, True),
    ("UnadmittedWorkloadsObservability", False, False),  # beta but off in v0.19 (on in v0.20)
    ("WorkloadPriorityClassDefaulting", False, False),  # alpha in v0.18 and v0.19
    ("TASProfileMixed", True, True),
    ("TASBalancedPlacement", False, False),
])
def test_gate_defaults_per_release(gate: str, v017: bool, v019: bool) -> None:
    assert FeatureGates().enabled(gate) is v017  # nothing set: v0.17
    assert FeatureGates(release=KUEUE_V017).enabled(gate) is v017
    assert FeatureGates(release=KUEUE_V019).enabled(gate) is v019


def test_our_gate_defaults_agree_with_kueues_table_wherever_kueue_has_the_gate() -> None:
    for release, ours in GATE_DEFAULTS_BY_RELEASE.items():
        for gate, default in ours.items():
            if gate in KUEUE_GATES[release]:
                assert KUEUE_GATES[release][gate] is default, (release, gate)


def test_explicit_feature_gates_override_the_release() -> None:
    off = parse(KUEUE_V019, featureGates={"TASMultiLayerTopology": False}).config
    assert off.release == KUEUE_V019 and not off.feature_gates.enabled("TASMultiLayerTopology")
    on = parse(KUEUE_V017, featureGates={"TASMultiLayerTopology": True}).config
    assert on.release == KUEUE_V017 and on.feature_gates.enabled("TASMultiLayerTopology")


def test_each_release_knows_its_own_gate_names() -> None:
    # removed in v0.19 (LendingLimit was GA and locked in v0.17)
    assert parse(KUEUE_V017, featureGates={"LendingLimit": True}).config.feature_gates.overrides == {}
    with pytest.raises(ConfigError, match=r"featureGates: unrecognized feature gate: LendingLimit \(Kueue v0.19.2\)"):
        parse(KUEUE_V019, featureGates={"LendingLimit": True})
    # added in v0.19: inert (toposched does not act on it) under v0.19, unknown to v0.17
    # (QuotaCheckStrategy was the example until toposched acted on it, issue 41)
    assert parse(KUEUE_V019, featureGates={"MultiKueueRemoteSpecSync": False}).inert_gates == (
        "MultiKueueRemoteSpecSync=false",)
    with pytest.raises(ConfigError, match="unrecognized feature gate: MultiKueueRemoteSpecSync"):
        parse(KUEUE_V017, featureGates={"MultiKueueRemoteSpecSync": False})


def test_locked_gates_are_refused_with_component_base_words() -> None:
    assert "ManagedJobsNamespaceSelectorAlwaysRespected" in KUEUE_LOCKED_GATES[KUEUE_V019]
    assert parse(KUEUE_V017, featureGates={"ManagedJobsNamespaceSelectorAlwaysRespected": False}).inert_gates
    with pytest.raises(ConfigError, match="cannot set feature gate ManagedJobsNamespaceSelectorAlwaysRespected "
                                          "to false, feature is locked to true"):
        parse(KUEUE_V019, featureGates={"ManagedJobsNamespaceSelectorAlwaysRespected": False})


def test_wait_for_pods_ready_is_on_by_default_from_v019() -> None:
    assert not parse(KUEUE_V017).config.wait_for_pods_ready.enabled
    wait = parse(KUEUE_V019).config.wait_for_pods_ready
    assert wait.enabled and wait.timeout_s == 1800 and wait.recovery_timeout_s is None  # recovery = timeout
    assert kueue_defaults(KUEUE_V019).wait_for_pods_ready == wait
    assert KUEUE_DEFAULTS == kueue_defaults(KUEUE_V017) and not KUEUE_DEFAULTS.wait_for_pods_ready.enabled
    # a section without a timeout: v0.17 refuses it, v0.19 defaults it (also a zero one)
    with pytest.raises(ConfigError, match="waitForPodsReady.timeout: Required value"):
        parse(KUEUE_V017, waitForPodsReady={"blockAdmission": True})
    defaulted = parse(KUEUE_V019, waitForPodsReady={"blockAdmission": True}).config.wait_for_pods_ready
    assert defaulted.timeout_s == 1800 and defaulted.block_admission
    assert parse(KUEUE_V019, waitForPodsReady={"timeout": "0s"}).config.wait_for_pods_ready.timeout_s == 1800
    # HyperPod's gang-scheduling console defaults
    hp = parse(KUEUE_V019, waitForPodsReady={"timeout": "5m", "recoveryTimeout": "5m"}).config.wait_for_pods_ready
    assert (hp.timeout_s, hp.recovery_timeout_s, hp.block_admission) == (300, 300, False)


def test_disable_wait_for_pods_ready_turns_it_off() -> None:
    off = parse(KUEUE_V019, featureGates={"DisableWaitForPodsReady": True}, waitForPodsReady={"timeout": "5m"})
    assert not off.config.wait_for_pods_ready.enabled
    assert not parse(KUEUE_V019, featureGates={"DisableWaitForPodsReady": True}).config.wait_for_pods_ready.enabled


def test_v1beta1_files_keep_their_enable_flag_under_v019() -> None:
    v1 = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}
    assert not parse_kueue_config(dict(v1), KUEUE_V019).config.wait_for_pods_ready.enabled


def test_quota_check_strategy_is_a_v019_field() -> None:
    with pytest.raises(ConfigError, match='unknown field "resources.quotaCheckStrategy"'):
        parse(KUEUE_V017, resources={"quotaCheckStrategy": "BlockUndeclared"})
    assert parse(KUEUE_V019, resources={"quotaCheckStrategy": "BlockUndeclared"}).not_supported == ()
    # honoured (issue 41): pkg/config/validation_test.go at v0.19.2, "quotaCheckStrategy with value
    # ignoreundeclared allowed without excludeResourcePrefixes" and the cases below
    honoured = parse(KUEUE_V019, resources={"quotaCheckStrategy": "IgnoreUndeclared"})
    assert honoured.not_supported == () and honoured.config.ignore_undeclared_resources
    assert not parse(KUEUE_V019, resources={"quotaCheckStrategy": "BlockUndeclared"}).config.ignore_undeclared_resources
    with pytest.raises(ConfigError, match='^resources.quotaCheckStrategy: Unsupported value: "Loose": supported '
                                          'values: "IgnoreUndeclared", "BlockUndeclared"$'):
        parse(KUEUE_V019, resources={"quotaCheckStrategy": "Loose"})
    # "quotaCheckStrategy with value ignoreUndeclared not allowed with excludeResourcePrefixes"
    with pytest.raises(ConfigError, match='^resources.quotaCheckStrategy: Invalid value: "IgnoreUndeclared": '
                                          "excludeResourcePrefixes is not allowed when quotaCheckStrategy is "
                                          "IgnoreUndeclared$"):
        parse(KUEUE_V019, resources={"quotaCheckStrategy": "IgnoreUndeclared", "excludeResourcePrefixes": ["x"]})
    # gate off: Kueue neither validates nor honours the field
    off = parse(KUEUE_V019, featureGates={"QuotaCheckStrategy": False}, resources={"quotaCheckStrategy": "Loose"})
    assert not off.config.ignore_undeclared_resources


@pytest.mark.parametrize(("text", "release"), [("v0.17", KUEUE_V017), ("v0.17.0", KUEUE_V017), ("0.19", KUEUE_V019),
                                               ("v0.19.2", KUEUE_V019), (" v0.19.4 ", KUEUE_V019)])
def test_release_spellings(text: str, release: str) -> None:
    assert kueue_release(text) == release


@pytest.mark.parametrize("text", ["v0.18", "v0.20.1", "latest", "", "v1.19"])
def test_unsupported_releases(text: str) -> None:
    with pytest.raises(ValueError, match=r"toposched behaves as v0.17 \(v0.17.0\), v0.19 \(v0.19.2\)"):
        kueue_release(text)


def test_the_flag_without_a_file_gives_that_kueues_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_kueue_config_argument(parser)
    assert kueue_config(parser.parse_args([])) == KUEUE_DEFAULTS
    v019 = kueue_config(parser.parse_args(["--kueue-version", "v0.19.2"]))
    assert v019.release == KUEUE_V019 and v019.wait_for_pods_ready.enabled


def test_the_flag_reads_the_file_as_that_release(tmp_path: Path) -> None:
    path = tmp_path / "kueue.yaml"
    path.write_text(yaml.safe_dump({**V1BETA2, "resources": {"quotaCheckStrategy": "BlockUndeclared"}}))
    parser = argparse.ArgumentParser()
    add_kueue_config_argument(parser)
    assert kueue_config(parser.parse_args(["--kueue-config", str(path), "--kueue-version", "v0.19"])).release == \
        KUEUE_V019
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "simulate", "--cluster", "x", "--queues", "y",
                           "--synthetic", "1", "--out", str(tmp_path / "o"), "--kueue-config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and 'unknown field "resources.quotaCheckStrategy"' in proc.stderr


def test_cli_refuses_an_unsupported_version_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "simulate", "--cluster", "x", "--queues", "y",
                           "--synthetic", "1", "--out", str(tmp_path / "o"), "--kueue-version", "v0.18"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "argument --kueue-version: unsupported Kueue version 'v0.18': toposched behaves as v0.17 (v0.17.0), "
        "v0.19 (v0.19.2)")
