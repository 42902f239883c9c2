"""The manager's MultiKueue objects read as untrusted (issue 43 item 2), and the command's check
of the manager's Kueue Configuration."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from scheduler.adapter.mk_dispatch import (
    answer,
    config_clusters,
    demand,
    manager_workload,
    multikueue_checks,
    nomination_apply,
    requested_level,
    worker_endpoints,
)
from scheduler.commands.mk_dispatch import CONFIG_KEY, check_configuration
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, WorkloadSpec
from scheduler.errors import UserError
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import Resource

L2, L3 = "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-3"
LEVELS = ("topology.k8s.aws/network-node-layer-1", L2, L3, "kubernetes.io/hostname")


def test_only_multikueues_checks_with_a_multikueueconfig_count() -> None:
    checks: list[dict[str, Any]] = [
        {"metadata": {"name": "mk"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
            "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "cfg"}}},
        {"metadata": {"name": "prov"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}},
        {"metadata": {"name": "odd"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                                               "parameters": {"kind": "ConfigMap", "name": 3}}},
    ]
    assert multikueue_checks(checks) == {"mk": "cfg"}
    assert config_clusters([{"metadata": {"name": "cfg"}, "spec": {"clusters": ["b", "a", "b", 7]}}]) == {
        "cfg": ("b", "a")}


def test_a_malformed_workload_status_is_read_without_raising() -> None:
    wl: dict[str, Any] = {"metadata": {"name": "w", "namespace": "ns"},
                          "status": {"admissionChecks": ["x", {"name": "mk", "state": "Pending"}],
                                     "nominatedClusterNames": ["a", 1], "clusterName": 5}}
    mw, check = manager_workload(wl, {"mk": "cfg"})
    assert (check, mw.mk_check_state, mw.nominated, mw.cluster_name, mw.quota_reserved) == (
        "mk", "Pending", ("a",), None, False)


@pytest.mark.parametrize("endpoint", ["http://x:1", "x", "x:0", "x:70000", "a b:1", ""])
def test_endpoints_must_be_host_and_port(endpoint: str) -> None:
    found, refused = worker_endpoints([{"metadata": {"name": "w", "annotations": {
        "toposched.io/grpc-endpoint": endpoint}}}])
    assert found == {} and "toposched.io/grpc-endpoint" in refused["w"]


def test_a_secret_name_must_be_a_name() -> None:
    found, refused = worker_endpoints([{"metadata": {"name": "w", "annotations": {
        "toposched.io/grpc-endpoint": "w.example:50051", "toposched.io/grpc-secret": "../other-ns/x"}}}])
    assert found == {} and "toposched.io/grpc-secret" in refused["w"]
    found, _ = worker_endpoints([{"metadata": {"name": "w", "annotations": {
        "toposched.io/grpc-endpoint": "[::1]:50051", "toposched.io/grpc-secret": "w-grpc"}}}])
    assert found["w"].target == "[::1]:50051" and found["w"].secret == "w-grpc"


def _spec(*pod_sets: PodSetSpec) -> WorkloadSpec:
    return WorkloadSpec("ns", "w", pod_sets)


def test_the_level_is_the_requested_one_else_the_narrowest_layer() -> None:
    assert requested_level(_spec(PodSetSpec("a", 2, {}, TopologyRequest(required=L2))), LEVELS) == L2
    assert requested_level(_spec(PodSetSpec("a", 2, {})), LEVELS) == L3


def test_demand_is_gpus_else_pods() -> None:
    assert demand(_spec(PodSetSpec("a", 4, {"nvidia.com/gpu": 8}), PodSetSpec("b", 1, {"cpu": 1000}))) == 32
    assert demand(_spec(PodSetSpec("a", 3, {"cpu": 1000}))) == 3


def test_domains_are_counted_across_pod_sets_at_the_level() -> None:
    per_ps: list[dict[str, tuple[str, ...]]] = [{L3: ("s1/r1",)}, {L3: ("s1/r1", "s1/r2")}]
    assert answer("w", True, per_ps, L3, 10).domains == 2
    assert answer("w", False, [], L3, 10).fits is False


def _api_with(config: dict[str, Any] | None) -> FakeApi:
    api = FakeApi()
    if config is not None:
        api.create(Resource("", "v1", "configmaps"), {"metadata": {"name": "kueue-manager-config", "namespace":
                                                                    "kueue-system"},
                                                       "data": {CONFIG_KEY: yaml.safe_dump(config)}})
    return api


def test_the_command_refuses_a_manager_that_runs_kueues_own_dispatcher() -> None:
    where = "kueue-system/kueue-manager-config"
    check_configuration(_api_with({"multiKueue": {"dispatcherName": "toposched.io/multikueue-dispatcher-topology"}}),
                        where)
    with pytest.raises(UserError, match=r"^multiKueue.dispatcherName: .*'kueue.x-k8s.io/multikueue-dispatcher-"
                                        r"incremental'; set it to") as err:
        check_configuration(_api_with({"multiKueue": {"dispatcherName":
                                                      "kueue.x-k8s.io/multikueue-dispatcher-incremental"}}), where)
    assert err.value.exit_code == 2
    with pytest.raises(UserError, match="cannot read") as missing:
        check_configuration(_api_with(None), where)
    assert missing.value.exit_code == 1


def test_nominations_are_applied_with_every_field_kueues_admission_patch_carries() -> None:
    # Kueue v0.17.0 pkg/workload/workload.go PrepareWorkloadPatch (admissionStatusPatch +
    # admissionChecksStatusPatch): the fields the kueue-admission manager owns, so its later
    # apply (clusterName set, nominations cleared) removes nothing else and clears ours
    wl = {"metadata": {"name": "w", "namespace": "ns", "uid": "u", "generation": 2, "resourceVersion": "7",
                       "labels": {"a": "b"}, "managedFields": [{"manager": "x"}]},
          "status": {"admission": {"clusterQueue": "cq"}, "resourceRequests": [{"name": "main"}],
                     "conditions": [{"type": "QuotaReserved", "status": "True"},
                                    {"type": "PodsReady", "status": "False"}],
                     "admissionChecks": [{"name": "mk", "state": "Pending"}],
                     "requeueState": {}, "nominatedClusterNames": ["old"]}}
    body = nomination_apply(wl, ["a", "b"])
    assert body["metadata"] == {"name": "w", "namespace": "ns", "uid": "u", "generation": 2, "resourceVersion": "7",
                                "labels": {"a": "b"}}
    assert body["status"] == {"admission": {"clusterQueue": "cq"}, "resourceRequests": [],
                              "conditions": [{"type": "QuotaReserved", "status": "True"}],
                              "admissionChecks": [{"name": "mk", "state": "Pending"}],
                              "nominatedClusterNames": ["a", "b"]}
