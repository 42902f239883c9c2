"""The admin's Kueue Configuration as plain core values (what the scheduling cycle reads).

Kueue reads a ``config.kueue.x-k8s.io/v1beta2`` Configuration file; toposched reads the same
file (``--kueue-config``, ``scheduler/adapter/kueue_config.py``) into :class:`KueueConfig`, so an
admin's Kueue config works unchanged.

Which Kueue: toposched behaves as one Kueue release (``--kueue-version``, Helm ``kueueVersion``;
docs/kueue-versions.md): :data:`KUEUE_V017` (v0.17.0, what the live conformance suite checks,
the default) or :data:`KUEUE_V019` (v0.19.2, what HyperPod's task governance v1.6 runs). The
release decides every gate default and the Configuration's own defaults; :func:`kueue_defaults`
is that Kueue started without a config file.

Feature gates: the names admins use in Kueue's ``featureGates`` map.
:data:`GATE_DEFAULTS_BY_RELEASE` holds, per release, Kueue's default of each gate toposched
acts on; a gate Kueue added after that release keeps the default of the newest Kueue release
that has it (off for every gate not yet on by default; docs/placement.md, "Feature gates").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# Fair sharing preemption strategies (Kueue's ``fairSharing.preemptionStrategies``).
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"

# The Kueue releases toposched can behave as: the release line and the tag it reproduces.
KUEUE_V017 = "v0.17"
KUEUE_V019 = "v0.19"
KUEUE_RELEASES: Mapping[str, str] = {KUEUE_V017: "v0.17.0", KUEUE_V019: "v0.19.2"}
DEFAULT_KUEUE_RELEASE = KUEUE_V017
_RELEASE_TEXT = re.compile(r"^v?0\.(\d+)(?:\.(\d+))?$")


def kueue_release(text: str) -> str:
    """``v0.19``, ``v0.19.2``, ``0.19`` -> :data:`KUEUE_V019` (ValueError naming the choices).
    Any patch of a supported line is accepted: toposched behaves as the line's tag in
    :data:`KUEUE_RELEASES` (task governance ships v0.19.2)."""
    match = _RELEASE_TEXT.match(text.strip())
    line = f"v0.{match.group(1)}" if match else ""
    if line not in KUEUE_RELEASES:
        choices = ", ".join(f"{k} ({v})" for k, v in KUEUE_RELEASES.items())
        raise ValueError(f"unsupported Kueue version {text!r}: toposched behaves as {choices}")
    return line


# Kueue v0.17.0's default gate values (name -> enabled) of the gates toposched acts on. Owners
# of each feature add their gates here (and to the v0.19 overrides when v0.19 flips them).
_V017_GATE_DEFAULTS: dict[str, bool] = {
    "TopologyAwareScheduling": True,
    "TASMultiLayerTopology": False,  # alpha in v0.17, beta on in v0.19
    "PriorityBoost": False,
    "PartialAdmission": True,  # beta, on since v0.5
    # Fair sharing (scheduler/core/kueue/fairsharing.py): v0.17's defaults.
    "PrioritySortingWithinCohort": True,
    "FairSharingPrioritizeNonBorrowing": True,
    "FairSharingPreemptWithinNominal": True,
    # Admission Fair Sharing (scheduler/core/kueue/afs.py): beta, on in v0.17.
    "AdmissionFairSharing": True,
    # TAS placement (docs/placement.md, "Kueue's TAS features"):
    "TASProfileMixed": True,  # beta on since v0.15: LeastFreeCapacity for unconstrained requests
    "TASBalancedPlacement": False,  # alpha since v0.15
    "TASRespectNodeAffinityPreferred": False,  # alpha in v0.18 (not in v0.17)
    "TASTopologySpreading": False,  # alpha in the v0.20 cycle (not in v0.17)
    "TASPartialSlices": False,  # v0.20 cycle (not in v0.17); default unconfirmed, kept off
    # Gates v0.18/v0.19 added (docs/kueue-versions.md); not in v0.17, so off here.
    "TASAssignmentsEncodingByHostnamePrefix": False,  # beta on in v0.19: status encoding
    "TASValidateWorkloadSliceSize": False,  # beta on in v0.19: Workload slice-size checks
    "UnadmittedWorkloadsObservability": False,  # beta off in v0.19: granular QuotaReserved reasons
    "DisableWaitForPodsReady": False,  # alpha off in v0.19: turns waitForPodsReady off
    "WorkloadPriorityClassDefaulting": False,  # alpha off in v0.18/v0.19: WPC "default"
    "SkipReassignmentForPodOwnedWorkloads": False,  # beta on in v0.19: no hot swap of a Pod's Workload
    "TASHandleOverlappingFlavors": False,  # beta on in v0.18: a node under two TAS flavors counted once
    "QuotaCheckStrategy": False,  # beta on in v0.19: resources.quotaCheckStrategy honoured
    # kueue.x-k8s.io/admission-gated-by (scheduler/adapter/manifest/gated_by.py): alpha off in v0.17.
    "AdmissionGatedBy": False,
    "FinishOrphanedWorkloads": False,  # beta on since v0.18 (not in v0.17): kube/orphans.py
    "UnadmittedWorkloadsExplicitStatus": False,  # beta off in v0.19: kube/explicit_status.py
    "LWSImmutableGroupSize": False,  # beta on in v0.19.1 (not in v0.17): admission/update_guards.py
    "WorkloadIdentifierAnnotations": False,  # beta on since v0.18 (not in v0.17): adapter/kinds/identifiers.py
    # Metrics (scheduler/kube/metrics_v019.py): which families Kueue registers and feeds.
    "LocalQueueMetrics": True,  # beta on in v0.17 and v0.19: local_queue_admission_fair_sharing_usage (v0.19)
    "MetricForWorkloadCreationLatency": False,  # beta on in v0.19 (v0.18.0): workload_creation_latency_seconds
    "MetricsForCohorts": False,  # beta on in v0.19 (v0.18.0): cluster_queue_info, cohort_info
    # Elastic jobs (workload slices: adapter/kinds/workload_slicing.py): alpha off in v0.17,
    # beta on since v0.18.
    "ElasticJobsViaWorkloadSlices": False,
}
# What Kueue v0.19.2 flipped (pkg/features/kube_features.go at the tag).
_V019_FLIPS: dict[str, bool] = {
    "TASMultiLayerTopology": True,
    "TASAssignmentsEncodingByHostnamePrefix": True,
    "TASValidateWorkloadSliceSize": True,
    "SkipReassignmentForPodOwnedWorkloads": True,
    "TASHandleOverlappingFlavors": True,
    "QuotaCheckStrategy": True,
    "AdmissionGatedBy": True,  # beta on in v0.19
    "FinishOrphanedWorkloads": True,
    "LWSImmutableGroupSize": True,
    "WorkloadIdentifierAnnotations": True,
    "MetricForWorkloadCreationLatency": True,
    "MetricsForCohorts": True,
    "ElasticJobsViaWorkloadSlices": True,
}
GATE_DEFAULTS_BY_RELEASE: Mapping[str, Mapping[str, bool]] = {
    KUEUE_V017: _V017_GATE_DEFAULTS,
    KUEUE_V019: {**_V017_GATE_DEFAULTS, **_V019_FLIPS},
}
# The default release's table (the name older callers use).
GATE_DEFAULTS: Mapping[str, bool] = GATE_DEFAULTS_BY_RELEASE[DEFAULT_KUEUE_RELEASE]


@dataclass(frozen=True)
class FeatureGates:
    """``featureGates`` overrides on top of the defaults of the Kueue ``release`` toposched
    behaves as (:data:`GATE_DEFAULTS_BY_RELEASE`)."""

    overrides: Mapping[str, bool] = field(default_factory=dict)
    release: str = DEFAULT_KUEUE_RELEASE

    def enabled(self, name: str) -> bool:
        if name in self.overrides:
            return self.overrides[name]
        defaults = GATE_DEFAULTS_BY_RELEASE[self.release]
        if name not in defaults:
            raise KeyError(f"unknown feature gate {name!r}")
        return defaults[name]


@dataclass(frozen=True)
class FairSharing:
    """Kueue's ``fairSharing``: present in the Configuration = enabled."""

    enabled: bool = False
    preemption_strategies: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


@dataclass(frozen=True)
class AdmissionFairSharing:
    """Kueue's ``admissionFairSharing``: present = enabled (LocalQueue usage, decayed)."""

    enabled: bool = False
    usage_half_life_time_s: float = 0.0
    usage_sampling_interval_s: float = 300.0
    resource_weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RequeuingStrategy:
    timestamp: str = "Eviction"  # Eviction | Creation
    backoff_limit_count: int | None = None  # None: requeue forever
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True)
class WaitForPodsReady:
    """Kueue's ``waitForPodsReady``: present in a v1beta2 Configuration = enabled (v0.17); from
    v0.19 enabled unless ``DisableWaitForPodsReady``, with a 30-minute default timeout."""

    enabled: bool = False
    timeout_s: float = 300.0  # required in the file (v1beta2 has no default)
    recovery_timeout_s: float | None = None  # None: same as timeout_s
    block_admission: bool = False
    requeuing_strategy: RequeuingStrategy = RequeuingStrategy()


@dataclass(frozen=True)
class KueueConfig:
    feature_gates: FeatureGates = FeatureGates()
    fair_sharing: FairSharing = FairSharing()
    admission_fair_sharing: AdmissionFairSharing = AdmissionFairSharing()
    wait_for_pods_ready: WaitForPodsReady = WaitForPodsReady()
    # ``integrations.frameworks`` (Kueue's names, e.g. ``batch/job``); empty = toposched's default set.
    frameworks: tuple[str, ...] = ()
    # ``integrations.externalFrameworks``: (group, version, kind) of kinds whose Workloads an
    # external controller creates; the webhook lets their queued objects through.
    external_frameworks: tuple[tuple[str, str, str], ...] = ()
    # ``resources.quotaCheckStrategy`` (v0.19): BlockUndeclared (v0.17's behaviour) or IgnoreUndeclared.
    quota_check_strategy: str = "BlockUndeclared"

    @property
    def ignore_undeclared_resources(self) -> bool:
        """Kueue's ``flavorassigner.IgnoreUndeclaredResources``: the QuotaCheckStrategy gate on
        and ``IgnoreUndeclared`` chosen: resources the ClusterQueue does not cover are not checked."""
        return self.quota_check_strategy == "IgnoreUndeclared" and self.feature_gates.enabled("QuotaCheckStrategy")

    @property
    def release(self) -> str:
        """The Kueue release toposched behaves as (carried by the feature gates)."""
        return self.feature_gates.release


# v0.19's default when the Configuration has no waitForPodsReady (apis/config/v1beta2/defaults.go).
V019_WAIT_FOR_PODS_READY = WaitForPodsReady(enabled=True, timeout_s=1800.0)


def kueue_defaults(release: str = DEFAULT_KUEUE_RELEASE) -> KueueConfig:
    """Kueue ``release`` started without a Configuration file."""
    wait = V019_WAIT_FOR_PODS_READY if release == KUEUE_V019 else WaitForPodsReady()
    return KueueConfig(feature_gates=FeatureGates(release=release), wait_for_pods_ready=wait)


# Kueue v0.17 started without a Configuration file (the default of every ``config`` parameter).
KUEUE_DEFAULTS = KueueConfig()
