"""Kueue's own feature gates per release: which names Kueue accepts, their defaults, and
which are locked (``pkg/features/kube_features.go``, the default in effect at each tag).

Facts, not code: the names and defaults were read from Kueue v0.17.0 (Go module cache) and
v0.19.2 (``git show v0.19.2:pkg/features/kube_features.go`` of the fetched snapshot). A name that
is in neither a release's list nor toposched's own gates (``core/config.py``) is refused as Kueue
refuses it ("unrecognized feature gate"); a locked gate set away from its default is refused
with component-base's message.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.core.config import KUEUE_V017, KUEUE_V019

_V017_ON = frozenset({
    "AdmissionFairSharing", "AssignQueueLabelsForPods", "FairSharingPreemptWithinNominal",
    "FairSharingPrioritizeNonBorrowing", "FlavorFungibility", "HierarchicalCohorts", "LendingLimit",
    "LocalQueueDefaulting", "LocalQueueMetrics", "ManagedJobsNamespaceSelectorAlwaysRespected",
    "MultiKueue", "MultiKueueAdaptersForCustomJobs", "MultiKueueBatchJobWithManagedBy",
    "MultiKueueRedoAdmissionOnEvictionInWorker", "MultiKueueWaitForWorkloadAdmitted",
    "ObjectRetentionPolicies", "PartialAdmission", "PrioritySortingWithinCohort",
    "PropagateBatchJobLabelsToWorkload", "ReclaimablePods", "RemoveFinalizersWithStrictPatch",
    "SanitizePodSets", "SkipFinalizersForPodsSuspendedByParent", "TASFailedNodeReplacement",
    "TASFailedNodeReplacementFailFast", "TASProfileMixed", "TASReplaceNodeOnNodeTaints",
    "TASReplaceNodeOnPodTermination", "TLSOptions", "TopologyAwareScheduling", "VisibilityOnDemand",
})
_V017_OFF = frozenset({
    "AdmissionGatedBy", "CustomMetricLabels", "DRAExtendedResources", "DynamicResourceAllocation",
    "ElasticJobsViaWorkloadSlices", "ElasticJobsViaWorkloadSlicesWithTAS", "FailureRecoveryPolicy",
    "FastQuotaReleaseInPodIntegration", "MultiKueueAllowInsecureKubeconfigs", "MultiKueueClusterProfile",
    "MultiKueueOrchestratedPreemption", "PriorityBoost", "SchedulerLongRequeueInterval",
    "SchedulerTimestampPreemptionBuffer", "SchedulingEquivalenceHashing", "ShortWorkloadNames",
    "SparkApplicationIntegration", "TASBalancedPlacement", "TASMultiLayerTopology",
    "WorkloadRequestUseMergePatch",
})
_V017_LOCKED = frozenset({
    "HierarchicalCohorts", "LendingLimit", "LocalQueueDefaulting", "MultiKueueBatchJobWithManagedBy",
    "ObjectRetentionPolicies", "PropagateBatchJobLabelsToWorkload", "SanitizePodSets",
})

_V019_ON = frozenset({
    "AdmissionFairSharing", "AdmissionGatedBy", "AssignQueueLabelsForPods",
    "CleanupProvisioningRequestsOnEviction", "DeferRayServiceFinalizationForRedisCleanup",
    "ElasticJobsViaWorkloadSlices", "FairSharingPreemptWithinNominal", "FairSharingPrioritizeNonBorrowing",
    "FinishOrphanedWorkloads", "FlavorFungibility", "FlavorFungibilityPreserveScanProgress",
    "HierarchicalCohorts", "KueueDRAIntegration", "KueueDRAIntegrationExtendedResource",
    "KueueDRAIntegrationPartitionableDevices", "KueueDRARejectWorkloadsWhenDRADisabled",
    "LWSImmutableGroupSize", "LocalQueueMetrics", "ManagedJobsNamespaceSelectorAlwaysRespected",
    "MetricForWorkloadCreationLatency", "MetricsForCohorts", "MultiKueue",
    "MultiKueueAdaptersForCustomJobs", "MultiKueueIncrementalDispatcherConfig",
    "MultiKueueIncrementalDispatcherRespectConfigOrder", "MultiKueueRedoAdmissionOnEvictionInWorker",
    "MultiKueueRemoteSpecSync", "MultiKueueWaitForWorkloadAdmitted", "ObjectRetentionPolicies",
    "PartialAdmission", "PodIntegrationValidateGroupOwner", "PrioritySortingWithinCohort",
    "PropagateBatchJobLabelsToWorkload", "QuotaCheckStrategy", "ReclaimablePods",
    "RemoveFinalizersWithStrictPatch", "SchedulingEquivalenceHashing",
    "SkipAncestorCheckForDeletedWorkloads", "SkipFinalizersForPodsSuspendedByParent",
    "SkipReassignmentForPodOwnedWorkloads", "TASAssignmentsEncodingByHostnamePrefix",
    "TASCacheNodeMatchResults", "TASCachingRemainingResources", "TASFailedNodeReplacement",
    "TASFailedNodeReplacementFailFast", "TASHandleOverlappingFlavors", "TASMultiLayerTopology",
    "TASProfileMixed", "TASRecomputeAssignmentWithinSchedulingCycle", "TASReplaceNodeOnNodeTaints",
    "TASReplaceNodeOnPodTermination", "TASValidateWorkloadSliceSize", "TLSOptions",
    "TopologyAwareScheduling", "ValidateRayAndSparkJobUpdates", "VectorizedResourceRequests",
    "VisibilityOnDemand", "WorkloadIdentifierAnnotations", "WorkloadValidateResourcesAreNonNegative",
    "WorkloadValidationForPodSetMetadata",
})
_V019_OFF = frozenset({
    "ConcurrentAdmission", "CustomMetricLabels", "DisableWaitForPodsReady",
    "ElasticJobsViaWorkloadSlicesWithTAS", "FailureRecoveryPolicy", "FastQuotaReleaseInPodIntegration",
    "KueueDRAIntegrationConsumableCapacity", "MultiKueueAllowInsecureKubeconfigs",
    "MultiKueueClusterProfile", "MultiKueueKubeConfigPathValidation", "MultiKueueManagerQuotaAutomation",
    "MultiKueueOrchestratedPreemption", "PrioritizePreemptorWorkloads", "PriorityBoost",
    "RecomputeAssignmentUponPreemptionTargetsOverlap", "RejectUpdatesToCQWithInvalidOnFlavors",
    "SchedulerLibraryIntegration", "SchedulerLongRequeueInterval", "SchedulerTimestampPreemptionBuffer",
    "ShortWorkloadNames", "SparkApplicationIntegration", "TASBalancedPlacement", "TASCacheTopologyTree",
    "TASReplaceNodeDueToNotReadyOverFixedTime", "TASRespectNodeAffinityPreferred",
    "UnadmittedWorkloadsExplicitStatus", "UnadmittedWorkloadsObservability",
    "WorkloadPriorityClassDefaulting", "WorkloadRequestUseMergePatch",
})
_V019_LOCKED = frozenset({
    "HierarchicalCohorts", "ManagedJobsNamespaceSelectorAlwaysRespected",
    "MultiKueueAllowInsecureKubeconfigs", "MultiKueueRedoAdmissionOnEvictionInWorker",
    "MultiKueueWaitForWorkloadAdmitted", "ObjectRetentionPolicies", "PropagateBatchJobLabelsToWorkload",
    "SkipFinalizersForPodsSuspendedByParent",
})


def _table(on: frozenset[str], off: frozenset[str]) -> dict[str, bool]:
    return {**dict.fromkeys(off, False), **dict.fromkeys(on, True)}


# release -> gate -> Kueue's default at that release
KUEUE_GATES: Mapping[str, Mapping[str, bool]] = {
    KUEUE_V017: _table(_V017_ON, _V017_OFF),
    KUEUE_V019: _table(_V019_ON, _V019_OFF),
}
# release -> gates locked to their default (component-base LockToDefault)
KUEUE_LOCKED_GATES: Mapping[str, frozenset[str]] = {
    KUEUE_V017: _V017_LOCKED,
    KUEUE_V019: _V019_LOCKED,
}


# Every gate of Kueue v0.19.2 that v0.17.0 does not have, with the first tag of each release line
# that has it (v0.17 patch backports, v0.18.x, v0.19.x), read with
# ``git show <tag>:pkg/features/kube_features.go`` at every tag from v0.17.1 to v0.19.2. A doc row
# dates a gate by its v0.19 tag (the last of the tuple): several arrived in v0.19.1 or v0.19.2.
GATE_FIRST_TAGS: Mapping[str, tuple[str, ...]] = {
    "CleanupProvisioningRequestsOnEviction": ("v0.17.7", "v0.18.3", "v0.19.0"),
    "ConcurrentAdmission": ("v0.18.0", "v0.19.0"),
    "DeferRayServiceFinalizationForRedisCleanup": ("v0.17.7", "v0.18.3", "v0.19.0"),
    "DisableWaitForPodsReady": ("v0.19.0",),
    "FinishOrphanedWorkloads": ("v0.17.1", "v0.18.0", "v0.19.0"),
    "FlavorFungibilityPreserveScanProgress": ("v0.18.5", "v0.19.1"),
    "KueueDRAIntegration": ("v0.18.0", "v0.19.0"),
    "KueueDRAIntegrationConsumableCapacity": ("v0.19.0",),
    "KueueDRAIntegrationExtendedResource": ("v0.18.0", "v0.19.0"),
    "KueueDRAIntegrationPartitionableDevices": ("v0.18.0", "v0.19.0"),
    "KueueDRARejectWorkloadsWhenDRADisabled": ("v0.18.0", "v0.19.0"),
    "LWSImmutableGroupSize": ("v0.18.5", "v0.19.1"),
    "MetricForWorkloadCreationLatency": ("v0.18.0", "v0.19.0"),
    "MetricsForCohorts": ("v0.18.0", "v0.19.0"),
    "MultiKueueIncrementalDispatcherConfig": ("v0.19.0",),
    "MultiKueueIncrementalDispatcherRespectConfigOrder": ("v0.19.0",),
    "MultiKueueKubeConfigPathValidation": ("v0.19.0",),
    "MultiKueueManagerQuotaAutomation": ("v0.18.0", "v0.19.0"),
    "MultiKueueRemoteSpecSync": ("v0.18.5", "v0.19.1"),
    "PodIntegrationValidateGroupOwner": ("v0.18.6", "v0.19.2"),
    "PrioritizePreemptorWorkloads": ("v0.18.6", "v0.19.2"),
    "QuotaCheckStrategy": ("v0.18.0", "v0.19.0"),
    "RecomputeAssignmentUponPreemptionTargetsOverlap": ("v0.18.5", "v0.19.1"),
    "RejectUpdatesToCQWithInvalidOnFlavors": ("v0.17.1", "v0.18.0", "v0.19.0"),
    "SchedulerLibraryIntegration": ("v0.19.0",),
    "SkipAncestorCheckForDeletedWorkloads": ("v0.18.5", "v0.19.1"),
    "SkipReassignmentForPodOwnedWorkloads": ("v0.17.8", "v0.18.4", "v0.19.0"),
    "TASAssignmentsEncodingByHostnamePrefix": ("v0.19.0",),
    "TASCacheNodeMatchResults": ("v0.17.8", "v0.18.4", "v0.19.0"),
    "TASCacheTopologyTree": ("v0.18.6", "v0.19.2"),
    "TASCachingRemainingResources": ("v0.17.8", "v0.18.4", "v0.19.0"),
    "TASHandleOverlappingFlavors": ("v0.17.4", "v0.18.0", "v0.19.0"),
    "TASRecomputeAssignmentWithinSchedulingCycle": ("v0.17.6", "v0.18.2", "v0.19.0"),
    "TASReplaceNodeDueToNotReadyOverFixedTime": ("v0.17.8", "v0.18.4", "v0.19.0"),
    "TASRespectNodeAffinityPreferred": ("v0.18.0", "v0.19.0"),
    "TASValidateWorkloadSliceSize": ("v0.18.5", "v0.19.1"),
    "UnadmittedWorkloadsExplicitStatus": ("v0.18.5", "v0.19.0"),
    "UnadmittedWorkloadsObservability": ("v0.18.5", "v0.19.0"),
    "ValidateRayAndSparkJobUpdates": ("v0.18.6", "v0.19.2"),
    "VectorizedResourceRequests": ("v0.17.8", "v0.18.4", "v0.19.0"),
    "WorkloadIdentifierAnnotations": ("v0.17.4", "v0.18.0", "v0.19.0"),
    "WorkloadPriorityClassDefaulting": ("v0.18.0", "v0.19.0"),
    "WorkloadValidateResourcesAreNonNegative": ("v0.18.5", "v0.19.1"),
    "WorkloadValidationForPodSetMetadata": ("v0.18.5", "v0.19.1"),
}


def v019_tag(gate: str) -> str:
    """The v0.19 tag that first has ``gate`` (``v0.19.0`` for a gate v0.17.0 already had)."""
    return GATE_FIRST_TAGS.get(gate, ("v0.19.0",))[-1]
