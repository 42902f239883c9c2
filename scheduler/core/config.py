"""The admin's Kueue Configuration as plain core values (what the scheduling cycle reads).

Kueue reads a ``config.kueue.x-k8s.io/v1beta2`` Configuration file; toposched reads the same
file (``--kueue-config``, ``scheduler/adapter/kueue_config.py``) into :class:`KueueConfig`, so an
admin's Kueue config works unchanged. Every field here carries Kueue v0.17's default: a
:class:`KueueConfig()` is Kueue started without a config file.

Feature gates: the names admins use in Kueue's ``featureGates`` map. :data:`GATE_DEFAULTS`
holds Kueue's default for each gate toposched knows; for a gate Kueue added after v0.17 the
default is that of the newest Kueue release that has it (docs/placement.md, "Feature gates").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Fair sharing preemption strategies (Kueue's ``fairSharing.preemptionStrategies``).
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"

# Kueue's default gate values (name -> enabled). Owners of each feature add their gates here.
GATE_DEFAULTS: dict[str, bool] = {
    "TopologyAwareScheduling": True,
    "TASMultiLayerTopology": False,  # alpha in v0.17, beta on in v0.19
    "PriorityBoost": False,
    "PartialAdmission": True,  # beta, on since v0.5
    # Off in v0.17 (alpha); toposched does not build workload slices (docs/status.md).
    "ElasticJobsViaWorkloadSlices": False,
    # Fair sharing (scheduler/core/fairsharing.py): v0.17's defaults.
    "PrioritySortingWithinCohort": True,
    "FairSharingPrioritizeNonBorrowing": True,
    "FairSharingPreemptWithinNominal": True,
    # Admission Fair Sharing (scheduler/core/afs.py): beta, on in v0.17.
    "AdmissionFairSharing": True,
    # TAS placement (docs/placement.md, "Kueue's TAS features"):
    "TASProfileMixed": True,  # beta on since v0.15: LeastFreeCapacity for unconstrained requests
    "TASBalancedPlacement": False,  # alpha since v0.15
    "TASRespectNodeAffinityPreferred": False,  # alpha in v0.18 (not in v0.17)
    "TASTopologySpreading": False,  # alpha in the v0.20 cycle (not in v0.17)
    "TASPartialSlices": False,  # v0.20 cycle (not in v0.17); default unconfirmed, kept off
}


@dataclass(frozen=True)
class FeatureGates:
    """``featureGates`` overrides on top of :data:`GATE_DEFAULTS`."""

    overrides: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        if name in self.overrides:
            return self.overrides[name]
        if name not in GATE_DEFAULTS:
            raise KeyError(f"unknown feature gate {name!r}")
        return GATE_DEFAULTS[name]


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
    """Kueue's ``waitForPodsReady``: present in a v1beta2 Configuration = enabled (v0.17)."""

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


# Kueue started without a Configuration file (the default of every ``config`` parameter).
KUEUE_DEFAULTS = KueueConfig()
