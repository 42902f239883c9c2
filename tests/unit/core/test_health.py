"""node_health as data tables: one row per rule, the reason it gives, the policy knobs."""

from __future__ import annotations

import time
from typing import Any

import pytest

from scheduler.core.health import (
    DEFAULT_POLICY,
    Health,
    HealthPolicy,
    UnknownValues,
    is_fault_condition,
    node_health,
)
from scheduler.core.nodes import NodeCondition, NodeInfo, Taint, Toleration

HS = "sagemaker.amazonaws.com/node-health-status"
DH = "sagemaker.amazonaws.com/deep-health-check-status"
READY = NodeCondition("Ready", "True")
C = NodeCondition
HP_TAINT = Taint(HS, "Unschedulable", "NoSchedule")


def node(labels: dict[str, str] | None = None, *, taints: tuple[Taint, ...] = (),
         conditions: tuple[NodeCondition, ...] = (READY,), unschedulable: bool = False) -> NodeInfo:
    return NodeInfo("n1", labels={HS: "Schedulable", **(labels or {})}, taints=taints,
                    conditions=conditions, unschedulable=unschedulable)


def bare(**kw: Any) -> NodeInfo:
    """A node without any HyperPod label."""
    return NodeInfo("n1", conditions=(READY,), **kw)


# (case id, node, expected healthy, substring of the reason)
CASES: list[tuple[str, NodeInfo, bool, str]] = [
    ("schedulable", node(), True, ""),
    ("unlabelled default healthy", bare(), True, ""),
    ("status Unschedulable", node({HS: "Unschedulable"}), False, "deep health checks are running"),
    ("status PendingReplacement", node({HS: "UnschedulablePendingReplacement"}), False,
     "UnschedulablePendingReplacement (failed health checks, waiting for replacement)"),
    ("status PendingReboot", node({HS: "UnschedulablePendingReboot"}), False, "waiting for reboot"),
    ("status unknown value", node({HS: "SchedulablePreferred"}), False,
     "unknown sagemaker.amazonaws.com/node-health-status value 'SchedulablePreferred'"),
    ("status empty string", node({HS: ""}), False, "unknown"),
    ("deep InProgress", node({DH: "InProgress"}), False, "deep health check in progress"),
    ("deep Failed", node({DH: "Failed"}), False, "deep health check failed"),
    ("deep Passed", node({DH: "Passed"}), True, ""),
    ("deep unknown", node({DH: "Maybe"}), False, "unknown sagemaker.amazonaws.com/deep-health-check-status"),
    ("deep absent, not required", node(), True, ""),
    ("fault-types plural", node({"sagemaker.amazonaws.com/fault-types": "NvidiaErrorReboot"}), False,
     "HyperPod fault reported: fault-types=NvidiaErrorReboot"),
    ("fault-reasons plural", node({"sagemaker.amazonaws.com/fault-reasons": "XidHardwareFailure"}), False,
     "fault-reasons=XidHardwareFailure"),
    ("fault-type singular", node({"sagemaker.amazonaws.com/fault-type": "GpuFault"}), False,
     "fault-type=GpuFault"),
    ("fault-reason singular", node({"sagemaker.amazonaws.com/fault-reason": "Xid79"}), False,
     "fault-reason=Xid79"),
    ("fault both", node({"sagemaker.amazonaws.com/fault-types": "A",
                         "sagemaker.amazonaws.com/fault-reasons": "B"}), False,
     "fault-types=A, fault-reasons=B"),
    ("fault label empty is no fault", node({"sagemaker.amazonaws.com/fault-types": ""}), True, ""),
    ("HyperPod taint", node(taints=(HP_TAINT,)), False,
     "HyperPod health taint sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule"),
    ("HyperPod taint on unlabelled node", bare(taints=(HP_TAINT,)), False, "HyperPod health taint"),
    ("other taint, no tolerations given", node(taints=(Taint("nvidia.com/gpu", "", "NoSchedule"),)),
     True, ""),
    ("NotReady", node(conditions=(NodeCondition("Ready", "False", "KubeletNotReady"),)), False,
     "node is not Ready: Ready=False (KubeletNotReady)"),
    ("Ready Unknown", node(conditions=(NodeCondition("Ready", "Unknown"),)), False, "Ready=Unknown"),
    ("no Ready condition", node(conditions=()), False, "no Ready condition"),
    ("cordoned", node(unschedulable=True), False, "cordoned (spec.unschedulable)"),
    ("MemoryPressure", node(conditions=(READY, NodeCondition("MemoryPressure", "True"))), False,
     "condition MemoryPressure=True"),
    ("DiskPressure", node(conditions=(READY, NodeCondition("DiskPressure", "True"))), False, "DiskPressure"),
    ("PIDPressure", node(conditions=(READY, NodeCondition("PIDPressure", "True"))), False, "PIDPressure"),
    ("NetworkUnavailable", node(conditions=(READY, NodeCondition("NetworkUnavailable", "True"))), False,
     "NetworkUnavailable"),
    ("pressure False is fine", node(conditions=(READY, NodeCondition("MemoryPressure", "False"))), True, ""),
    ("HMA condition", node(conditions=(READY, C("NvidiaErrorReboot", "True", "XidHardwareFailure"))),
     False, "condition NvidiaErrorReboot=True (XidHardwareFailure)"),
    ("HMA-style suffix", node(conditions=(READY, NodeCondition("EfaErrorReplacement", "True"))), False,
     "EfaErrorReplacement"),
    ("HMA condition recovered", node(conditions=(READY, C("NvidiaErrorReboot", "False"))), True, ""),
    ("unknown True condition is not a fault by default",
     node(conditions=(READY, NodeCondition("KernelDeadlock", "True"))), True, ""),
    # precedence: the HyperPod label explains best
    ("label before NotReady", node({HS: "UnschedulablePendingReboot"},
                                   conditions=(NodeCondition("Ready", "False"),)), False, "PendingReboot"),
    ("fault label before taint", node({"sagemaker.amazonaws.com/fault-types": "X"}, taints=(HP_TAINT,)),
     False, "fault-types=X"),
]


@pytest.mark.parametrize("n, healthy, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_default_policy(n: NodeInfo, healthy: bool, reason: str) -> None:
    got = node_health(n, DEFAULT_POLICY)
    assert got.healthy is healthy
    assert bool(got) is healthy
    assert reason in got.reason
    if healthy:
        assert got.reason == ""


STRICT = HealthPolicy(unlabelled_nodes_healthy=False)
DEEP = HealthPolicy(require_deep_health_passed=True)
DEEP_STRICT = HealthPolicy(require_deep_health_passed=True, unlabelled_nodes_healthy=False)
CUSTOM = HealthPolicy(fault_condition_types=frozenset({"KernelDeadlock"}))
IGNORE = HealthPolicy(ignored_condition_types=frozenset({"WarmReboot"}))
NPD = HealthPolicy(true_conditions_unhealthy=True)

POLICY_CASES: list[tuple[str, HealthPolicy, NodeInfo, bool, str]] = [
    ("unlabelled, strict", STRICT, bare(), False, "no sagemaker.amazonaws.com/node-health-status label"),
    ("labelled, strict", STRICT, node(), True, ""),
    ("deep required, absent", DEEP, node(), False, "is not Passed"),
    ("deep required, passed", DEEP, node({DH: "Passed"}), True, ""),
    ("deep required, unlabelled node exempt", DEEP, bare(), True, ""),
    ("deep required, unlabelled strict", DEEP_STRICT, bare(), False, "no sagemaker"),
    ("custom fault type", CUSTOM, node(conditions=(READY, NodeCondition("KernelDeadlock", "True"))), False,
     "KernelDeadlock"),
    ("ignored suffix type", IGNORE, node(conditions=(READY, NodeCondition("WarmReboot", "True"))), True, ""),
    ("npd convention", NPD, node(conditions=(READY, NodeCondition("ReadonlyFilesystem", "True"))), False,
     "ReadonlyFilesystem"),
]


@pytest.mark.parametrize("policy, n, healthy, reason", [c[1:] for c in POLICY_CASES],
                         ids=[c[0] for c in POLICY_CASES])
def test_policy(policy: HealthPolicy, n: NodeInfo, healthy: bool, reason: str) -> None:
    got = node_health(n, policy)
    assert got.healthy is healthy
    assert reason in got.reason


GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
EXEC_TAINT = Taint("maintenance", "", "NoExecute")
PREFER = Taint("soft", "", "PreferNoSchedule")

TAINT_CASES: list[tuple[str, tuple[Taint, ...], tuple[Toleration, ...], bool, str]] = [
    ("untolerated NoSchedule", (GPU_TAINT,), (), False,
     "untolerated taint nvidia.com/gpu=present:NoSchedule"),
    ("untolerated NoExecute", (EXEC_TAINT,), (), False, "maintenance=:NoExecute"),
    ("PreferNoSchedule never blocks", (PREFER,), (), True, ""),
    ("tolerated by Exists", (GPU_TAINT,), (Toleration("nvidia.com/gpu", "Exists"),), True, ""),
    ("tolerated by Equal", (GPU_TAINT,), (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"),),
     True, ""),
    ("wrong value", (GPU_TAINT,), (Toleration("nvidia.com/gpu", "Equal", "other"),), False, "untolerated"),
    ("wrong effect", (EXEC_TAINT,), (Toleration("maintenance", "Exists", effect="NoSchedule"),), False,
     "untolerated"),
    ("tolerate everything", (GPU_TAINT, EXEC_TAINT), (Toleration(operator="Exists"),), True, ""),
    ("HyperPod taint even when tolerated", (HP_TAINT,), (Toleration(operator="Exists"),), False,
     "HyperPod health taint"),
]


@pytest.mark.parametrize("taints, tolerations, healthy, reason", [c[1:] for c in TAINT_CASES],
                         ids=[c[0] for c in TAINT_CASES])
def test_tolerations(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], healthy: bool,
                     reason: str) -> None:
    got = node_health(node(taints=taints), DEFAULT_POLICY, tolerations)
    assert got.healthy is healthy
    assert reason in got.reason


def test_two_argument_call_and_default_policy_still_work() -> None:
    assert node_health(node()) == Health(True)
    assert node_health(node(), DEFAULT_POLICY).healthy


@pytest.mark.parametrize("type_, fault", [
    ("Ready", False), ("MemoryPressure", True), ("NvidiaErrorTerminate", True),
    ("NeuronErrorReboot", True), ("SomethingReplace", True), ("KernelDeadlock", False),
])
def test_is_fault_condition(type_: str, fault: bool) -> None:
    assert is_fault_condition(type_) is fault


def test_unknown_values_flagged_once() -> None:
    seen = UnknownValues()
    a = node_health(node({HS: "SchedulablePreferred"}))
    b = node_health(node({HS: "SchedulablePreferred"}))
    c = node_health(node({HS: "Weird"}))
    assert a.unknown == (HS, "SchedulablePreferred")
    assert [seen.first(a), seen.first(b), seen.first(c)] == [True, False, True]
    known = node_health(node({HS: "Unschedulable"}))
    assert known.unknown is None and not seen.first(known)
    assert node_health(node({DH: "Odd"})).unknown == (DH, "Odd")


def test_fast_enough_for_50k_nodes() -> None:
    nodes = [node({"topology.k8s.aws/network-node-layer-3": f"nn-{i}"},
                  conditions=(READY, NodeCondition("MemoryPressure", "False"))) for i in range(50_000)]
    start = time.perf_counter()
    healthy = sum(1 for n in nodes if node_health(n, DEFAULT_POLICY))
    took = time.perf_counter() - start
    assert healthy == 50_000
    print(f"node_health: 50k nodes in {took * 1000:.0f} ms")  # a figure, not an assertion
