"""Pydantic models of Kueue's alpha preemption objects (``kueue.x-k8s.io/v1alpha1``):
``PreemptionConfig`` (KEP-13396; Kueue main ``apis/kueue/v1alpha1/preemptionconfig_types.go``)
and ``PreemptionLimit`` (KEP-16925). Kueue v0.17 and v0.19 have neither CRD: toposched reads
them when the CRDs exist (its own copies in ``deploy/crds/``, or Kueue v0.20's with
``enableAlphaAPIs``; docs/quota-and-preemption.md). Validation mirrors the CRDs' enums and
bounds, so an object the API server would refuse is refused here too, naming the field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scheduler.models.kueue import KueueModel, LabelSelector, ObjectMeta

V1ALPHA1 = "kueue.x-k8s.io/v1alpha1"
# Alpha: the ClusterQueue names its PreemptionConfig with this annotation (a field in beta).
ANN_PREEMPTION_CONFIG_NAME = "kueue.x-k8s.io/preemption-config-name"

Comparison = Literal["LessThan", "GreaterThan", "LessThanOrEqual", "GreaterThanOrEqual"]


class NumericLabelConstraint(KueueModel):
    key: str = Field(min_length=1, max_length=316)
    fallback_value: int | None = None
    comparison: Comparison | None = None
    min_value: int | None = Field(default=None, ge=0)
    max_value: int | None = Field(default=None, ge=0)


class PriorityConstraint(KueueModel):
    mode: Literal["Base", "Boosted"]
    comparison: Comparison


class CandidateSelector(KueueModel):
    scope: Literal["WithinLocalQueue", "WithinClusterQueue", "WithinParentCohort", "WithinCohortTree",
                   "AnyClusterQueue"]
    cluster_queue_selector: LabelSelector | None = None
    label_selector: LabelSelector | None = None
    numeric_labels: list[NumericLabelConstraint] = Field(default_factory=list)
    priority: PriorityConstraint | None = None
    relative_workload_priority: Comparison | None = None  # the earlier alpha spelling (Boosted)


class ActivationPolicy(KueueModel):
    trigger: Literal["Always", "InsufficientQuota", "QuotaFeasibleAndInsufficientTopology"]


class PreemptionRule(KueueModel):
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    preemptor_selector: LabelSelector | None = None
    activation_policy: ActivationPolicy
    candidate_selectors: list[CandidateSelector] = Field(default_factory=list)


class PreemptionConfigSpec(KueueModel):
    rules: list[PreemptionRule] = Field(default_factory=list, max_length=64)


class PreemptionConfig(KueueModel):
    api_version: str = V1ALPHA1
    kind: str = "PreemptionConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PreemptionConfigSpec = Field(default_factory=PreemptionConfigSpec)


class PreemptionLimitSpec(KueueModel):
    scope: Literal["Global", "PreemptingClusterQueue", "PreemptedClusterQueue", "PreemptedWorkload"]
    config_selector: LabelSelector | None = None
    cluster_queue_selector: LabelSelector | None = None
    limit: int = Field(ge=0)
    limit_window_seconds: int = Field(ge=1)


class PreemptionLimitCount(KueueModel):
    key: str
    count: int


class PreemptionLimitStatus(KueueModel):
    counts: list[PreemptionLimitCount] = Field(default_factory=list, max_length=1000)


class PreemptionLimit(KueueModel):
    api_version: str = V1ALPHA1
    kind: str = "PreemptionLimit"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PreemptionLimitSpec
    status: PreemptionLimitStatus | None = None
