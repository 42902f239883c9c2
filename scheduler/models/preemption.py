"""Pydantic models of Kueue's ``PreemptionConfig`` (``kueue.x-k8s.io/v1alpha1``, KEP-13396, alpha
in Kueue v0.20: ``apis/kueue/v1alpha1/preemptionconfig_types.go``), read exactly as Kueue's types
are: every field Kueue has, and no other. A field Kueue v0.20 does not have is refused (pydantic's
``extra_forbidden``, reported by the adapter with the field's path), never kept and ignored: an
ignored selector would make a rule match more workloads than Kueue's would. The CRDs' enums,
bounds and CEL rules (``minValue <= maxValue``; ``mode`` with ``comparison``) are checked here
too, so an object the API server would refuse is refused here as well, naming the field.

Kueue v0.17 and v0.19 do not serve this kind; toposched reads it where Kueue v0.20's CRD
(``enableAlphaAPIs``) or the copy the chart installs on request (``kueuePreemptionConfigCRD``)
serves it. toposched's own ``PreemptionLimit`` is not Kueue's: ``models/preemption_limit.py``.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from scheduler.models.kueue import ObjectMeta

V1ALPHA1: Final = "kueue.x-k8s.io/v1alpha1"
# Alpha: the ClusterQueue names its PreemptionConfig with this annotation (Kueue's
# PreemptionConfigNameAnnotation; a ClusterQueue field only from beta).
ANN_PREEMPTION_CONFIG_NAME = "kueue.x-k8s.io/preemption-config-name"

Comparison = Literal["LessThan", "GreaterThan", "LessThanOrEqual", "GreaterThanOrEqual"]
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
NonNegInt32 = Annotated[int, Field(ge=0, le=2**31 - 1)]
ClassName = Annotated[str, StringConstraints(min_length=1, max_length=253)]


class ExactType(BaseModel):
    """A Go struct of the API: its JSON fields and nothing else (an unknown one is refused)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)


class LabelSelectorRequirement(ExactType):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(ExactType):
    """``metav1.LabelSelector``: its two fields only."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


def _unique(names: list[str], what: str) -> list[str]:
    if len(set(names)) != len(names):  # +listType=set
        raise ValueError(f"{what} must not contain duplicate names")
    return names


class PriorityClassSelector(ExactType):
    """``PreemptionConfigPriorityClassSelector``: matched against the Workload's
    ``spec.priorityClassRef.name`` (both lists: AND; a Workload without a class matches no
    non-empty ``matchNames`` and every ``notMatchNames``)."""

    match_names: list[ClassName] = Field(default_factory=list, max_length=32)
    not_match_names: list[ClassName] = Field(default_factory=list, max_length=32)

    @model_validator(mode="after")
    def _sets(self) -> PriorityClassSelector:
        _unique(self.match_names, "matchNames")
        _unique(self.not_match_names, "notMatchNames")
        return self


class NumericLabelConstraint(ExactType):
    key: str = Field(min_length=1, max_length=316)
    fallback_value: Int32 | None = None
    comparison: Comparison | None = None
    min_value: NonNegInt32 | None = None
    max_value: NonNegInt32 | None = None

    @model_validator(mode="after")
    def _bounds(self) -> NumericLabelConstraint:
        if self.min_value is not None and self.max_value is not None and self.min_value > self.max_value:
            raise ValueError("minValue must be less than or equal to maxValue")  # the CRD's CEL message
        return self


class PriorityConstraint(PriorityClassSelector):
    """``PreemptionConfigPriorityConstraint``: ``mode`` and ``comparison`` together, or neither
    (then only the inline class selector filters)."""

    mode: Literal["Base", "Boosted"] | None = None
    comparison: Comparison | None = None

    @model_validator(mode="after")
    def _together(self) -> PriorityConstraint:
        if (self.mode is None) != (self.comparison is None):
            raise ValueError("mode and comparison must be specified together")  # the CRD's CEL message
        return self


class CandidateSelector(ExactType):
    scope: Literal["WithinLocalQueue", "WithinClusterQueue", "WithinParentCohort", "WithinCohortTree",
                   "AnyClusterQueue"]
    cluster_queue_selector: LabelSelector | None = None
    label_selector: LabelSelector | None = None
    numeric_labels: list[NumericLabelConstraint] = Field(default_factory=list, max_length=32)
    priority: PriorityConstraint | None = None


class ActivationPolicy(ExactType):
    trigger: Literal["Always", "InsufficientQuota", "QuotaFeasibleAndInsufficientTopology"]


class PreemptionRule(ExactType):
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    preemptor_selector: LabelSelector | None = None
    preemptor_priority_class_selector: PriorityClassSelector | None = None
    activation_policy: ActivationPolicy
    candidate_selectors: list[CandidateSelector] = Field(default_factory=list, max_length=32)


class PreemptionConfigSpec(ExactType):
    rules: list[PreemptionRule] = Field(default_factory=list, max_length=64)

    @model_validator(mode="after")
    def _rule_names(self) -> PreemptionConfigSpec:
        seen: set[str] = set()
        for rule in self.rules:  # +listType=map, +listMapKey=name
            if rule.name in seen:
                raise ValueError(f"rules: Duplicate value: {rule.name!r}")
            seen.add(rule.name)
        return self


class PreemptionConfig(ExactType):
    api_version: Literal["kueue.x-k8s.io/v1alpha1"] = V1ALPHA1
    kind: Literal["PreemptionConfig"] = "PreemptionConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PreemptionConfigSpec = Field(default_factory=PreemptionConfigSpec)
