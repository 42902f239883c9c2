"""Feature gates and runtime config of the local control plane (LocalCluster(feature_gates=...,
runtime_config=...)): one --feature-gates flag per component, the watch-list gates kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.devcluster.controlplane import LocalCluster


def _flags(argv: list[str], name: str) -> list[str]:
    return [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]


def test_gates_reach_every_kubernetes_component_in_one_flag(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, feature_gates={"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True},
                           runtime_config={"scheduling.k8s.io/v1beta1": "true"})
    assert _flags(cluster._apiserver_argv(), "feature-gates") == [
        "WatchList=false,GenericWorkload=true,TopologyAwareWorkloadScheduling=true"]
    for argv in (cluster._controller_manager_argv(), cluster._scheduler_argv()):
        assert _flags(argv, "feature-gates") == [
            "WatchListClient=false,GenericWorkload=true,TopologyAwareWorkloadScheduling=true"]
    assert _flags(cluster._apiserver_argv(), "runtime-config") == ["scheduling.k8s.io/v1beta1=true"]


def test_without_gates_the_flags_are_as_before(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path)
    assert _flags(cluster._apiserver_argv(), "feature-gates") == ["WatchList=false"]
    assert _flags(cluster._scheduler_argv(), "feature-gates") == ["WatchListClient=false"]
    assert _flags(cluster._apiserver_argv(), "runtime-config") == []


def test_a_gate_can_turn_a_default_off(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, feature_gates={"WatchListClient": True})  # the cluster's word wins
    assert _flags(cluster._scheduler_argv(), "feature-gates") == ["WatchListClient=true"]


@pytest.mark.parametrize(("gates", "config", "message"), [
    ({"GenericWorkload=true,Evil": True}, {}, "feature gate 'GenericWorkload=true,Evil': a gate name is letters"),
    ({}, {"scheduling.k8s.io/v1beta1": "yes"}, "runtime config scheduling.k8s.io/v1beta1=yes: expected"),
    ({}, {"--admission-control": "true"}, "runtime config --admission-control=true: expected"),
])
def test_values_that_would_bend_the_command_line_are_refused(
        tmp_path: Path, gates: dict[str, bool], config: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LocalCluster(tmp_path, feature_gates=gates, runtime_config=config)
