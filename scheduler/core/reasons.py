"""Reason codes of the pure core and the messages rendered from them.

The core decides on codes, never on message text. Each message is rendered from its code by
one template (Kueue's words: the conformance suite compares them byte for byte with the real
Kueue). Decisions and assignments carry the code's ``.value``, a plain ``str``, so the shells
can serialise them with any library (yaml's safe dumper refuses ``str`` subclasses).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class PendingReason(StrEnum):
    """QuotaReserved=False reasons the cycle decides on: Kueue v0.19's granular ones
    (``UnadmittedWorkloadsObservability``). What is written on the Workload follows the gate:
    :func:`written_reason`."""

    WAITING_FOR_QUOTA = "WaitingForQuota"
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    NO_MATCHING_FLAVOR = "NoMatchingFlavor"
    MISCONFIGURED = "Misconfigured"
    SUSPENDED = "Suspended"
    INADMISSIBLE = "Inadmissible"
    TOPOLOGY_FAILED = "TopologyPlacementFailed"
    WAITING_FOR_PREEMPTION = "WaitingForPreemptedWorkloads"
    WAITING_FOR_PODS_READY = "WaitingForPodsReady"
    PENDING = "Pending"


# Kueue's reasons while UnadmittedWorkloadsObservability is off (v0.17; v0.19's default):
LEGACY_PENDING = "Pending"  # everything the scheduler decides
LEGACY_WAITING = "Waiting"  # waitForPodsReady.blockAdmission holds admission
LEGACY_INADMISSIBLE = "Inadmissible"  # the workload controller: queue missing, stopped, inactive
_GRANULAR = frozenset(PendingReason) | {LEGACY_WAITING}


def written_reason(reason: str, *, observability: bool, by_workload_controller: bool = False) -> str:
    """The ``QuotaReserved=False`` reason (and Event reason) Kueue writes for the cycle's
    ``reason``. With ``UnadmittedWorkloadsObservability`` the granular reason itself
    (``Waiting`` becomes ``WaitingForPodsReady``); without it Kueue's legacy reasons
    (``pkg/util/testing/observability.go`` of v0.19.2): ``Waiting`` for waitForPodsReady,
    ``Inadmissible`` for what Kueue's workload controller decides (a LocalQueue or ClusterQueue
    missing, stopped or inactive), ``Pending`` for everything the scheduler decides.
    toposched's own reasons (the compact wait's) are written as they are."""
    if reason not in _GRANULAR:
        return reason
    waiting = reason in (LEGACY_WAITING, PendingReason.WAITING_FOR_PODS_READY)
    if observability:
        return PendingReason.WAITING_FOR_PODS_READY.value if waiting else reason
    if waiting:
        return LEGACY_WAITING
    if by_workload_controller and reason in (PendingReason.MISCONFIGURED, PendingReason.SUSPENDED,
                                             PendingReason.INADMISSIBLE):
        return LEGACY_INADMISSIBLE
    return LEGACY_PENDING


class EvictReason(StrEnum):
    """Evicted=True reasons the cycle issues itself (preemptions carry preemption reasons)."""

    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"


class FlavorRejection(StrEnum):
    """Why the flavor assigner passed over a flavor (or a whole resource) for one pod set."""

    RESOURCE_NOT_COVERED = "ResourceNotCovered"
    FLAVOR_NOT_FOUND = "FlavorNotFound"
    NO_TAS_SUPPORT = "NoTASSupport"
    TAS_INFO_MISSING = "TASInfoMissing"
    LEVEL_MISSING = "LevelMissing"
    TAS_ONLY = "TASOnly"
    UNTOLERATED_TAINT = "UntoleratedTaint"
    NODE_AFFINITY = "NodeAffinityMismatch"
    EXCEEDS_MAX_CAPACITY = "ExceedsMaxCapacity"
    INSUFFICIENT_UNUSED_QUOTA = "InsufficientUnusedQuota"


# Rejections caused by quota (the rest are about labels, taints and topology): a pod set whose
# every flavor was rejected for something else is NoMatchingFlavor, not WaitingForQuota.
QUOTA_REJECTIONS = frozenset({FlavorRejection.EXCEEDS_MAX_CAPACITY, FlavorRejection.INSUFFICIENT_UNUSED_QUOTA})

_FLAVOR_REJECTION_TEXT: Mapping[FlavorRejection, str] = {
    FlavorRejection.RESOURCE_NOT_COVERED: "resource {resource} unavailable in ClusterQueue",
    FlavorRejection.FLAVOR_NOT_FOUND: "flavor {flavor} not found",
    FlavorRejection.NO_TAS_SUPPORT: 'Flavor "{flavor}" does not support TopologyAwareScheduling',
    FlavorRejection.TAS_INFO_MISSING: 'Flavor "{flavor}" information missing in TAS cache',
    FlavorRejection.LEVEL_MISSING: 'Flavor "{flavor}" does not contain the requested level',
    FlavorRejection.TAS_ONLY: 'Flavor "{flavor}" supports only TopologyAwareScheduling',
    FlavorRejection.UNTOLERATED_TAINT: "untolerated taint {taint} in flavor {flavor}",
    FlavorRejection.NODE_AFFINITY: "flavor {flavor} doesn't match node affinity",
    FlavorRejection.EXCEEDS_MAX_CAPACITY: (
        "insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
        "({assumed}) + current podset request ({request}) > maximum capacity ({capacity})"
    ),
    # Kueue v0.17's text, also when the borrowing limit is what blocks (Kueue <= v0.9, which
    # HyperPod's older docs show, said "borrowing limit for <res> in flavor <f> exceeded").
    FlavorRejection.INSUFFICIENT_UNUSED_QUOTA: (
        "insufficient unused quota for {resource} in flavor {flavor}, {missing} more needed"
    ),
}


@dataclass(frozen=True)
class Rejection:
    """One reason a flavor was passed over: the code, and Kueue's message rendered from it."""

    code: FlavorRejection
    message: str

    @classmethod
    def of(cls, code: FlavorRejection, **fields: object) -> Rejection:
        return cls(code, _FLAVOR_REJECTION_TEXT[code].format(**fields))


class NotAdmitted(StrEnum):
    """Why the cycle left a workload pending before or after flavor assignment."""

    LOCAL_QUEUE_MISSING = "LocalQueueMissing"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    CLUSTER_QUEUE_MISSING = "ClusterQueueMissing"
    CLUSTER_QUEUE_INACTIVE = "ClusterQueueInactive"
    NAMESPACE_MISMATCH = "NamespaceMismatch"
    NO_LONGER_FITS = "NoLongerFits"
    OVERLAPPING_TARGETS = "OverlappingTargets"
    INVALID_SLICE_SIZE = "InvalidSliceSize"  # Kueue v0.19 refuses the Workload (TASValidateWorkloadSliceSize)


# (QuotaReserved=False reason, message template); None = the reason the entry already had.
_NOT_ADMITTED: Mapping[NotAdmitted, tuple[PendingReason | None, str]] = {
    NotAdmitted.LOCAL_QUEUE_MISSING: (PendingReason.MISCONFIGURED, "LocalQueue {queue} doesn't exist"),
    NotAdmitted.LOCAL_QUEUE_STOPPED: (PendingReason.SUSPENDED, "LocalQueue {queue} is stopped"),
    NotAdmitted.CLUSTER_QUEUE_MISSING: (
        PendingReason.MISCONFIGURED,
        "ClusterQueue {cluster_queue} doesn't exist",
    ),
    NotAdmitted.CLUSTER_QUEUE_INACTIVE: (PendingReason.SUSPENDED, "ClusterQueue {cluster_queue} is inactive"),
    NotAdmitted.NAMESPACE_MISMATCH: (  # decided by Kueue's scheduler (ValidateAdmissibility)
        PendingReason.MISCONFIGURED,
        "Workload namespace doesn't match ClusterQueue selector",
    ),
    NotAdmitted.NO_LONGER_FITS: (None, "Workload no longer fits after processing another workload"),
    NotAdmitted.INVALID_SLICE_SIZE: (
        PendingReason.MISCONFIGURED,
        "Workload is invalid (Kueue rejects it under TASValidateWorkloadSliceSize): {errors}",
    ),
    NotAdmitted.OVERLAPPING_TARGETS: (
        None,
        "Workload has overlapping preemption targets with another workload",
    ),
}


# Routing failures Kueue's workload controller writes (not its scheduler): Inadmissible without
# UnadmittedWorkloadsObservability.
BY_WORKLOAD_CONTROLLER = frozenset({NotAdmitted.LOCAL_QUEUE_MISSING, NotAdmitted.LOCAL_QUEUE_STOPPED,
                                    NotAdmitted.CLUSTER_QUEUE_MISSING, NotAdmitted.CLUSTER_QUEUE_INACTIVE,
                                    NotAdmitted.INVALID_SLICE_SIZE})


def not_admitted_reason(code: NotAdmitted) -> PendingReason | None:
    """The QuotaReserved=False reason of ``code`` (None: keep the entry's own reason)."""
    return _NOT_ADMITTED[code][0]


def not_admitted_message(code: NotAdmitted, **fields: object) -> str:
    return _NOT_ADMITTED[code][1].format(**fields)


_EVICT_TEXT: Mapping[EvictReason, str] = {
    EvictReason.CLUSTER_QUEUE_STOPPED: "The ClusterQueue is stopped",
    EvictReason.LOCAL_QUEUE_STOPPED: "The LocalQueue is stopped",
}


def evict_message(code: EvictReason) -> str:
    return _EVICT_TEXT[code]


def flavors_message(pod_set: str, detail: str | None) -> str:
    """Kueue's prefix for every flavor or topology failure of a pod set."""
    head = f"couldn't assign flavors to pod set {pod_set}"
    return head if detail is None else f"{head}: {detail}"


def preemption_pending_message(base: str, issued: int) -> str:
    return f"{base}. Pending the preemption of {issued} workload(s)"


def quota_reserved_message(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"
