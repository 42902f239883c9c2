"""One answer to "may a pod be placed on this node?", shared by every door.

:func:`node_health` reads, in this order (first failing rule gives the reason):

1. ``sagemaker.amazonaws.com/node-health-status``: only ``Schedulable`` is placeable;
   ``Unschedulable`` (deep health check running), ``UnschedulablePendingReplacement`` and
   ``UnschedulablePendingReboot`` are not; any other value is unhealthy and flagged as unknown
   (:attr:`Health.unknown`) so the shell can log it once (:class:`UnknownValues`). A node
   without the label follows :attr:`HealthPolicy.unlabelled_nodes_healthy`.
2. ``sagemaker.amazonaws.com/deep-health-check-status``: ``InProgress`` / ``Failed`` exclude;
   ``Passed`` is required only with :attr:`HealthPolicy.require_deep_health_passed`.
3. fault labels ``sagemaker.amazonaws.com/fault-types`` / ``fault-reasons`` and the singular
   ``fault-type`` / ``fault-reason``: present and non-empty => unhealthy.
4. the HMA taint ``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule``
   (any value/effect of that key): unhealthy even when tolerated — it reports health.
5. ``Ready`` condition missing or not ``True``.
6. ``spec.unschedulable`` (cordoned).
7. a fault condition with ``status: True`` (see :func:`is_fault_condition`): pressure types
   (MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable), any type in
   :attr:`HealthPolicy.fault_condition_types`, HMA's known types, any type ending in an HMA
   action suffix (``...Reboot``, ``...Replace(ment)``, ``...Terminate``, like HMA's
   ``NvidiaErrorReboot``), or every non-Ready True condition with
   :attr:`HealthPolicy.true_conditions_unhealthy`. Types in ``ignored_condition_types``
   never count. (HMA writes the fault type both as a fault-types label and as a condition
   type, so a fresh HMA fault is caught by rule 3 already; rule 7 catches the condition
   alone.)
8. only when ``tolerations`` is given: any ``NoSchedule``/``NoExecute`` taint none of them
   tolerates. Without ``tolerations`` (the topology tree, which filters taints per pod set
   itself, Kueue-style) taints other than HMA's are not health.

Pure and cheap: a few dict lookups per node (called for every node of 50k-node clusters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduler.core.nodes import NodeInfo, Toleration

HEALTH_STATUS_LABEL = "sagemaker.amazonaws.com/node-health-status"
DEEP_HEALTH_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
FAULT_TYPES_LABEL = "sagemaker.amazonaws.com/fault-types"
FAULT_REASONS_LABEL = "sagemaker.amazonaws.com/fault-reasons"
FAULT_TYPE_LABEL = "sagemaker.amazonaws.com/fault-type"
FAULT_REASON_LABEL = "sagemaker.amazonaws.com/fault-reason"
FAULT_LABELS = (FAULT_TYPES_LABEL, FAULT_TYPE_LABEL, FAULT_REASONS_LABEL, FAULT_REASON_LABEL)
HEALTH_TAINT_KEY = HEALTH_STATUS_LABEL  # value Unschedulable, effect NoSchedule

SCHEDULABLE = "Schedulable"
# Documented unplaceable values and what they mean (used in reasons).
UNSCHEDULABLE_STATUSES: Mapping[str, str] = {
    "Unschedulable": "deep health checks are running",
    "UnschedulablePendingReplacement": "failed health checks, waiting for replacement",
    "UnschedulablePendingReboot": "failed health checks, waiting for reboot",
}
DEEP_HEALTH_EXCLUDING: Mapping[str, str] = {
    "InProgress": "deep health check in progress",
    "Failed": "deep health check failed",
}
DEEP_HEALTH_PASSED = "Passed"

PRESSURE_CONDITIONS = frozenset({"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"})
# Condition types HMA is known to write (type = fault type, status True while faulty).
KNOWN_HMA_CONDITIONS = frozenset({"NvidiaErrorReboot", "NvidiaErrorTerminate",
                                  "NeuronErrorReboot", "NeuronErrorTerminate"})
HMA_ACTION_SUFFIXES = ("Reboot", "Replace", "Replacement", "Terminate")
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# Taints that report a node's state rather than restrict who may run there: Kubernetes' own
# (the node-lifecycle controller and the TaintNodesByCondition admission plugin put
# not-ready on every node as it registers, until its kubelet reports Ready) and HyperPod's
# health taint. They go away when the node recovers, so "could this ever fit" ignores them.
CONDITION_TAINT_KEYS = frozenset({
    "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure", "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable", HEALTH_TAINT_KEY,
})


@dataclass(frozen=True)
class HealthPolicy:
    """Operator choices. Defaults match HyperPod's own guidance."""

    # Nodes without the node-health-status label (non-HyperPod clusters, freshly joined nodes).
    unlabelled_nodes_healthy: bool = True
    # Require sagemaker.amazonaws.com/deep-health-check-status=Passed (labelled nodes only when
    # unlabelled_nodes_healthy: a node with no HyperPod label at all is not held to it).
    require_deep_health_passed: bool = False
    # Condition types that mean "faulty" when their status is True (besides the pressure
    # conditions, HMA's known types and HMA-style suffixes).
    fault_condition_types: frozenset[str] = field(default_factory=frozenset)
    # Condition types never treated as faults (e.g. a custom positive condition ending in Reboot).
    ignored_condition_types: frozenset[str] = field(default_factory=frozenset)
    # Strict node-problem-detector convention: every True condition other than Ready is a fault.
    true_conditions_unhealthy: bool = False


DEFAULT_POLICY = HealthPolicy()


@dataclass(frozen=True)
class Health:
    healthy: bool
    reason: str = ""
    # (label key, value) when the verdict comes from a value we do not know; log it once.
    unknown: tuple[str, str] | None = None

    def __bool__(self) -> bool:
        return self.healthy


HEALTHY = Health(True)


def is_fault_condition(type_: str, policy: HealthPolicy = DEFAULT_POLICY) -> bool:
    """Whether a node condition of this type with ``status: True`` makes the node unhealthy."""
    if type_ == "Ready" or type_ in policy.ignored_condition_types:
        return False
    return (
        policy.true_conditions_unhealthy
        or type_ in PRESSURE_CONDITIONS
        or type_ in KNOWN_HMA_CONDITIONS
        or type_ in policy.fault_condition_types
        or type_.endswith(HMA_ACTION_SUFFIXES)
    )


def _fault_label_reason(labels: Mapping[str, str]) -> str:
    parts = [f"{key.rsplit('/', 1)[1]}={labels[key]}" for key in FAULT_LABELS if labels.get(key)]
    return "HyperPod fault reported: " + ", ".join(parts) if parts else ""


def node_health(node: NodeInfo, policy: HealthPolicy = DEFAULT_POLICY,
                tolerations: Sequence[Toleration] | None = None) -> Health:
    """Healthy, or Unhealthy with a short human-readable reason (rules: module doc)."""
    labels = node.labels
    status = labels.get(HEALTH_STATUS_LABEL)
    if status is None:
        if not policy.unlabelled_nodes_healthy:
            return Health(False, f"no {HEALTH_STATUS_LABEL} label (policy: unlabelled nodes are unhealthy)")
    elif status != SCHEDULABLE:
        meaning = UNSCHEDULABLE_STATUSES.get(status)
        if meaning is not None:
            return Health(False, f"{HEALTH_STATUS_LABEL}={status} ({meaning})")
        return Health(False, f"unknown {HEALTH_STATUS_LABEL} value {status!r} "
                      f"(only {SCHEDULABLE} is placeable)", unknown=(HEALTH_STATUS_LABEL, status))

    deep = labels.get(DEEP_HEALTH_LABEL)
    if deep is not None and deep != DEEP_HEALTH_PASSED:
        meaning = DEEP_HEALTH_EXCLUDING.get(deep)
        if meaning is not None:
            return Health(False, f"{DEEP_HEALTH_LABEL}={deep} ({meaning})")
        return Health(False, f"unknown {DEEP_HEALTH_LABEL} value {deep!r}", unknown=(DEEP_HEALTH_LABEL, deep))
    if deep is None and policy.require_deep_health_passed and (
            status is not None or not policy.unlabelled_nodes_healthy):
        return Health(False, f"{DEEP_HEALTH_LABEL} is not Passed "
                      "(policy requires a passed deep health check)")

    if (labels.get(FAULT_TYPES_LABEL) or labels.get(FAULT_TYPE_LABEL)
            or labels.get(FAULT_REASONS_LABEL) or labels.get(FAULT_REASON_LABEL)):
        return Health(False, _fault_label_reason(labels))

    for taint in node.taints:
        if taint.key == HEALTH_TAINT_KEY:
            return Health(False, f"HyperPod health taint {taint}")

    if not node.ready:
        cond = node.condition("Ready")
        detail = "no Ready condition" if cond is None else f"Ready={cond.status}" + (
            f" ({cond.reason})" if cond.reason else "")
        return Health(False, f"node is not Ready: {detail}")
    if node.unschedulable:
        return Health(False, "node is cordoned (spec.unschedulable)")

    if len(node.conditions) > 1:
        for cond in node.conditions:
            if cond.status == "True" and is_fault_condition(cond.type, policy):
                why = f" ({cond.reason})" if cond.reason else ""
                return Health(False, f"condition {cond.type}=True{why}")

    if tolerations is not None:
        for taint in node.taints:
            if taint.effect in BLOCKING_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
                return Health(False, f"untolerated taint {taint}")
    return HEALTHY


class UnknownValues:
    """Remembers which unknown label values were already reported, so the shell logs each once.

    ``if seen.first(health): log.warning(health.reason)`` — no I/O here.
    """

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    def first(self, health: Health) -> bool:
        if health.unknown is None or health.unknown in self._seen:
            return False
        self._seen.add(health.unknown)
        return True


def recovered(node: NodeInfo) -> NodeInfo:
    """The node as it will be once healthy: without the taints that report its condition."""
    kept = tuple(t for t in node.taints if t.key not in CONDITION_TAINT_KEYS)
    return node if len(kept) == len(node.taints) else replace(node, taints=kept)
