"""Kueue's Configuration file read as Kueue v0.17 reads it (scheduler/adapter/kueue_config.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scheduler.adapter.kueue_config import ConfigError, load_kueue_config_text, parse_duration, parse_kueue_config
from scheduler.core.config import KUEUE_DEFAULTS, LESS_THAN_INITIAL_SHARE, FeatureGates
from scheduler.devcluster.kueue import KueuePorts, kueue_configuration

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


def parse(**fields: object) -> object:
    return parse_kueue_config({**V1BETA2, **fields})


def test_no_scheduling_fields_is_kueue_default() -> None:
    loaded = parse_kueue_config(dict(V1BETA2))
    assert loaded.config == KUEUE_DEFAULTS
    assert loaded.report() == []


def test_the_file_the_harness_gives_kueue_is_read_and_its_server_settings_reported() -> None:
    doc = kueue_configuration(KueuePorts(1, 2, 3), Path("/certs"), overlay={"fairSharing": {
        "preemptionStrategies": [LESS_THAN_INITIAL_SHARE]}, "waitForPodsReady": {"timeout": "5m"}})
    loaded = parse_kueue_config(yaml.safe_load(yaml.safe_dump(doc)))
    assert loaded.config.fair_sharing.enabled
    assert loaded.config.fair_sharing.preemption_strategies == (LESS_THAN_INITIAL_SHARE,)
    assert loaded.config.wait_for_pods_ready.enabled and loaded.config.wait_for_pods_ready.timeout_s == 300
    assert loaded.config.frameworks == ("batch/job",)
    assert set(loaded.process_settings) >= {"webhook", "metrics", "health", "leaderElection", "namespace"}
    assert loaded.not_supported == ()
    assert "VisibilityOnDemand=false" in loaded.inert_gates


def test_fair_sharing_follows_kueue_validation() -> None:
    with pytest.raises(ConfigError, match=r"fairSharing.preemptionStrategies: Required value"):
        parse(fairSharing={})
    with pytest.raises(ConfigError, match=r"fairSharing.preemptionStrategies: Unsupported value"):
        parse(fairSharing={"preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]})
    both = parse(fairSharing={"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]})
    assert both.config.fair_sharing.enabled  # type: ignore[attr-defined]


def test_v1beta1_enable_flags() -> None:
    v1 = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}
    off = parse_kueue_config({**v1, "fairSharing": {"enable": False}, "waitForPodsReady": {"enable": False}})
    assert not off.config.fair_sharing.enabled and not off.config.wait_for_pods_ready.enabled
    on = parse_kueue_config({**v1, "fairSharing": {"enable": True}, "waitForPodsReady": {"enable": True}})
    assert on.config.fair_sharing.enabled
    assert on.config.wait_for_pods_ready.enabled and on.config.wait_for_pods_ready.timeout_s == 300


def test_wait_for_pods_ready_defaults_and_requeuing() -> None:
    cfg = parse(waitForPodsReady={"timeout": "10m", "requeuingStrategy": {
        "timestamp": "Creation", "backoffLimitCount": 3}}).config  # type: ignore[attr-defined]
    w = cfg.wait_for_pods_ready
    assert (w.timeout_s, w.recovery_timeout_s, w.block_admission) == (600, None, False)
    assert (w.requeuing_strategy.timestamp, w.requeuing_strategy.backoff_limit_count) == ("Creation", 3)
    assert (w.requeuing_strategy.backoff_base_seconds, w.requeuing_strategy.backoff_max_seconds) == (60, 3600)
    with pytest.raises(ConfigError, match=r"waitForPodsReady.timeout: Required value"):
        parse(waitForPodsReady={"blockAdmission": True})
    with pytest.raises(ConfigError, match=r'requeuingStrategy.timestamp: Unsupported value: "Soon"'):
        parse(waitForPodsReady={"timeout": "1m", "requeuingStrategy": {"timestamp": "Soon"}})


def test_admission_fair_sharing() -> None:
    afs = parse(admissionFairSharing={"usageHalfLifeTime": "168h", "resourceWeights": {"nvidia.com/gpu": 2}}
                ).config.admission_fair_sharing  # type: ignore[attr-defined]
    assert afs.enabled and afs.usage_half_life_time_s == 168 * 3600 and afs.usage_sampling_interval_s == 300
    assert afs.resource_weights == {"nvidia.com/gpu": 2.0}
    with pytest.raises(ConfigError, match=r"resourceWeights\[cpu\]: Invalid value"):
        parse(admissionFairSharing={"usageHalfLifeTime": "1h", "resourceWeights": {"cpu": -1}})


def test_feature_gates() -> None:
    loaded = parse(featureGates={"TASMultiLayerTopology": True, "MultiKueue": False})
    assert loaded.config.feature_gates.enabled("TASMultiLayerTopology")  # type: ignore[attr-defined]
    assert loaded.inert_gates == ("MultiKueue=false",)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="unrecognized feature gate: NoSuchGate"):
        parse(featureGates={"NoSuchGate": True})
    assert not FeatureGates().enabled("TASMultiLayerTopology")  # Kueue v0.17's default


def test_unknown_and_unsupported_fields() -> None:
    with pytest.raises(ConfigError, match='strict decoding error: unknown field "fairShare"'):
        parse(fairShare={})
    with pytest.raises(ConfigError, match='unknown field "waitForPodsReady.enable"'):
        parse(waitForPodsReady={"enable": True, "timeout": "1m"})  # v1beta1 spelling in a v1beta2 file
    loaded = parse(multiKueue={"gcInterval": "1m"}, manageJobsWithoutQueueName=True,
                   resources={"transformations": [{"input": "a"}]})
    assert loaded.not_supported == ("manageJobsWithoutQueueName", "multiKueue",  # type: ignore[attr-defined]
                                    "resources.transformations")
    assert "NOT honoured" in loaded.report()[0]  # type: ignore[attr-defined]


def test_not_a_configuration() -> None:
    with pytest.raises(ConfigError, match="this is not Kueue's Configuration file"):
        parse_kueue_config({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"})
    with pytest.raises(ConfigError, match=r"f: not valid YAML \(line 1\)"):
        load_kueue_config_text("a: [", "f")
    with pytest.raises(ConfigError, match="expected an object"):
        load_kueue_config_text("- 1", "f")


@pytest.mark.parametrize(("text", "seconds"), [("0", 0), ("0s", 0), ("1h30m", 5400), ("300ms", 0.3),
                                                ("1.5h", 5400), ("-2m", -120), ("5m0s", 300)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "x") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "m", "5 m", "1d", 5])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ConfigError, match="^x: "):
        parse_duration(text, "x")


def test_cli_exit_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "kueue.yaml"
    bad.write_text(yaml.safe_dump({**V1BETA2, "fairSharing": {"preemptionStrategies": ["Nope"]}}))
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "simulate", "--cluster", "x", "--queues", "y",
                           "--synthetic", "1", "--out", str(tmp_path / "o"), "--kueue-config", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "fairSharing.preemptionStrategies: Unsupported value" in lines[0], proc.stderr
