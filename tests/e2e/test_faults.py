"""Fault tests on the real control plane: flapping health labels, the API server restarted
mid-run, the extender unreachable, and the controller killed during an eviction."""

from __future__ import annotations

import time
from typing import Any

import pytest

from scheduler.devcluster.stack import restart_component, stop_component
from scheduler.k8s.informer import JOBS, NODES, PODS, WORKLOADS
from scheduler.kube.nodefailures import ANN_RETRIES
from tests.e2e.conftest import Stack
from tests.e2e.test_node_failure import (
    NS,
    all_running_in_one_domain,
    fail_node,
    recover_node,
    running,
    training_job,
    workload,
)

HEALTH = "sagemaker.amazonaws.com/node-health-status"
# 3 layer-3 domains of 8 nodes each.
CLUSTER = {"name": "e2e-faults", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 3], "nodesPerDomain": 8}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, controller_args=("--node-failure-grace-seconds", "3"))


def test_flapping_health_label_causes_no_eviction_storm(stack: Stack) -> None:
    job = stack.api.create(JOBS, training_job("flap", 4, max_retry=3), NS)
    pods = stack.wait(lambda: all_running_in_one_domain(stack, "flap", 4, set()), 120, "flap Running")
    before = {p["metadata"]["uid"] for p in pods}
    node = pods[0]["spec"]["nodeName"]
    deadline = time.monotonic() + 30
    flips = 0
    while time.monotonic() < deadline:  # healthy/unhealthy about four times a second for 30 s
        value = "UnschedulablePendingReboot" if flips % 2 == 0 else "Schedulable"
        stack.api.merge_patch(NODES, node, {"metadata": {"labels": {HEALTH: value}}})
        flips += 1
        time.sleep(0.125)
    stack.api.merge_patch(NODES, node, {"metadata": {"labels": {HEALTH: "Schedulable"}}})
    time.sleep(4)  # longer than the grace period: a late reaction would show now
    wl = workload(stack, job["metadata"]["uid"])
    assert not any(c["type"] == "Evicted" for c in wl["status"]["conditions"])
    assert (wl["metadata"].get("annotations") or {}).get(ANN_RETRIES) is None
    assert {p["metadata"]["uid"] for p in running(stack, "flap")} == before  # no pod was replaced
    assert flips >= 200
    stack.api.delete(JOBS, "flap", NS, propagationPolicy="Background")
    stack.wait(lambda: running(stack, "flap") == [], 60, "flap pods gone")


def test_api_server_restart_mid_run(stack: Stack) -> None:
    stack.cluster.restart("kube-apiserver")
    # Every component reconnects: a job submitted right after the restart is admitted and runs.
    stack.api.create(JOBS, training_job("after-restart", 4, max_retry=None), NS)
    stack.wait(lambda: all_running_in_one_domain(stack, "after-restart", 4, set()), 120,
               "job admitted and Running after the API server restart")
    stack.api.delete(JOBS, "after-restart", NS, propagationPolicy="Background")
    stack.wait(lambda: running(stack, "after-restart") == [], 60, "pods gone")


def test_extender_unreachable_pods_wait_then_land_on_their_assignment(stack: Stack) -> None:
    stop_component(stack.cluster, "toposched-extender")
    try:
        job = stack.api.create(JOBS, training_job("no-extender", 2, max_retry=None), NS)
        # Admitted by the controller, pods created by the Job controller...
        stack.wait(lambda: len(stack.api.list(PODS, NS, labelSelector="job-name=no-extender")["items"]) == 2,
                   60, "pods created")
        time.sleep(5)
        # ...but with ignorable=false kube-scheduler binds none of them without the extender.
        pods = stack.api.list(PODS, NS, labelSelector="job-name=no-extender")["items"]
        assert all(not p["spec"].get("nodeName") for p in pods)
    finally:
        restart_component(stack.cluster, "toposched-extender")
    pods = stack.wait(lambda: all_running_in_one_domain(stack, "no-extender", 2, set()), 120,
                      "pods placed once the extender is back")
    wl = workload(stack, job["metadata"]["uid"])
    from scheduler.core.assignment import decode_topology_assignment

    _levels, domains = decode_topology_assignment(wl["status"]["admission"]["podSetAssignments"][0]
                                                  ["topologyAssignment"])
    assert {p["spec"]["nodeName"] for p in pods} <= {d.values[0] for d in domains}
    stack.api.delete(JOBS, "no-extender", NS, propagationPolicy="Background")
    stack.wait(lambda: running(stack, "no-extender") == [], 60, "pods gone")


def test_controller_killed_during_eviction_loses_and_doubles_nothing(stack: Stack) -> None:
    job = stack.api.create(JOBS, training_job("crash", 8, max_retry=2), NS)
    uid = job["metadata"]["uid"]
    pods = stack.wait(lambda: all_running_in_one_domain(stack, "crash", 8, set()), 120, "crash Running")
    victim = sorted(p["spec"]["nodeName"] for p in pods)[0]
    fail_node(stack, victim)

    def evicting() -> bool:
        wl = workload(stack, uid)
        return any(c["type"] == "Evicted" and c["status"] == "True" for c in wl["status"]["conditions"])

    stack.wait(evicting, 60, "eviction started")
    stop_component(stack.cluster, "toposched-controller", kill=True)  # SIGKILL in the middle of it
    time.sleep(2)
    restart_component(stack.cluster, "toposched-controller")
    stack.wait(lambda: all_running_in_one_domain(stack, "crash", 8, {victim}), 120, "re-admitted after restart")
    wl = workload(stack, uid)
    assert wl["metadata"]["annotations"][ANN_RETRIES] == "1"  # counted once, not lost, not doubled
    workloads = [w for w in stack.api.list(WORKLOADS, NS)["items"]
                 if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid]
    assert len(workloads) == 1
    # Never two copies of a pod: one Running pod per completion index.
    indexes = [p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
               for p in running(stack, "crash")]
    assert sorted(indexes) == sorted(set(indexes)) and len(indexes) == 8
    stack.api.delete(JOBS, "crash", NS, propagationPolicy="Background")
    recover_node(stack, victim)
