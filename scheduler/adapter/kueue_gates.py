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
