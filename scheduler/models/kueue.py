"""Pydantic v2 models of the Kueue objects toposched reads and writes (kueue.x-k8s.io).

Written for ``v1beta2``; ``v1beta1`` objects are accepted too (ClusterQueue ``spec.cohort``,
v1beta2 ``cohortName``): the ``effective_*`` accessors give one answer for both;
``to_v1beta2()`` rewrites the renamed fields. Workloads are not modelled here: they are read
straight from the dicts on the hot path (``adapter/workloads.py``, ``core/workload.py``).
Every model keeps fields it does not know (``extra="allow"``) and :func:`dump` writes back
exactly the fields that were read or set (``exclude_unset``), so a read-modify-write never
drops what another controller (or a newer Kueue) put there.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GROUP = "kueue.x-k8s.io"
V1BETA2 = f"{GROUP}/v1beta2"
V1BETA1 = f"{GROUP}/v1beta1"

Quantity = str | int | float


class KueueModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)


def dump(model: BaseModel) -> dict[str, Any]:
    """Back to the API's JSON shape: camelCase, only fields that were present or set."""
    return model.model_dump(by_alias=True, exclude_unset=True, mode="json")


class OwnerReference(KueueModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KueueModel):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    finalizers: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)


class Condition(KueueModel):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class LabelSelectorRequirement(KueueModel):
    key: str
    operator: str
    values: list[str] = Field(default_factory=list)


class LabelSelector(KueueModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class Taint(KueueModel):
    key: str
    value: str = ""
    effect: str


class Toleration(KueueModel):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


# ---------------------------------------------------------------------- ClusterQueue / Cohort


class ResourceQuota(KueueModel):
    name: str
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(KueueModel):
    name: str
    resources: list[ResourceQuota]


class ResourceGroup(KueueModel):
    covered_resources: list[str]
    flavors: list[FlavorQuotas]


class BorrowWithinCohort(KueueModel):
    policy: str = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(KueueModel):
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None


class FlavorFungibility(KueueModel):
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None

    def effective_when_can_borrow(self) -> str:
        return "MayStopSearch" if self.when_can_borrow == "Borrow" else self.when_can_borrow  # v1beta1 spelling

    def effective_when_can_preempt(self) -> str:
        return "MayStopSearch" if self.when_can_preempt == "Preempt" else self.when_can_preempt


class FairSharing(KueueModel):
    """``spec.fairSharing`` of a ClusterQueue, Cohort or LocalQueue (same in v1beta1 and v1beta2)."""

    weight: Quantity | None = None  # Kueue default 1


class AdmissionScope(KueueModel):
    admission_mode: str = ""  # UsageBasedAdmissionFairSharing | NoAdmissionFairSharing


class ClusterQueueSpec(KueueModel):
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    cohort_name: str | None = None  # v1beta2
    cohort: str | None = None  # v1beta1
    queueing_strategy: str = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = None
    preemption: ClusterQueuePreemption | None = None
    flavor_fungibility: FlavorFungibility | None = None
    stop_policy: str = "None"
    fair_sharing: FairSharing | None = None
    admission_scope: AdmissionScope | None = None

    def effective_cohort(self) -> str | None:
        return self.cohort_name or self.cohort or None


class ClusterQueue(KueueModel):
    api_version: str = V1BETA2
    kind: str = "ClusterQueue"
    metadata: ObjectMeta
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: dict[str, Any] | None = None

    def to_v1beta2(self) -> ClusterQueue:
        out = self.model_copy(deep=True)
        out.api_version = V1BETA2
        if out.spec.cohort and not out.spec.cohort_name:
            out.spec.cohort_name = out.spec.cohort
        if "cohort" in out.spec.model_fields_set:
            out.spec.cohort = None
            out.spec.model_fields_set.discard("cohort")
        return out


class CohortSpec(KueueModel):
    parent_name: str | None = None
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    fair_sharing: FairSharing | None = None


class Cohort(KueueModel):
    api_version: str = V1BETA2
    kind: str = "Cohort"
    metadata: ObjectMeta
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: dict[str, Any] | None = None


class LocalQueueSpec(KueueModel):
    cluster_queue: str
    stop_policy: str = "None"
    fair_sharing: FairSharing | None = None


class LocalQueue(KueueModel):
    api_version: str = V1BETA2
    kind: str = "LocalQueue"
    metadata: ObjectMeta
    spec: LocalQueueSpec
    status: dict[str, Any] | None = None


class ResourceFlavorSpec(KueueModel):
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: list[Taint] = Field(default_factory=list)
    tolerations: list[Toleration] = Field(default_factory=list)
    topology_name: str | None = None


class ResourceFlavor(KueueModel):
    api_version: str = V1BETA2
    kind: str = "ResourceFlavor"
    metadata: ObjectMeta
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)


class TopologyLevel(KueueModel):
    node_label: str


class TopologySpec(KueueModel):
    levels: list[TopologyLevel]


class Topology(KueueModel):
    api_version: str = V1BETA2
    kind: str = "Topology"
    metadata: ObjectMeta
    spec: TopologySpec

    def level_labels(self) -> tuple[str, ...]:
        return tuple(lv.node_label for lv in self.spec.levels)


class WorkloadPriorityClass(KueueModel):
    api_version: str = V1BETA2
    kind: str = "WorkloadPriorityClass"
    metadata: ObjectMeta
    value: int
    description: str | None = None


KINDS: dict[str, type[KueueModel]] = {
    "ClusterQueue": ClusterQueue,
    "Cohort": Cohort,
    "LocalQueue": LocalQueue,
    "ResourceFlavor": ResourceFlavor,
    "Topology": Topology,
    "WorkloadPriorityClass": WorkloadPriorityClass,
}


def parse(obj: dict[str, Any]) -> KueueModel:
    """Any supported Kueue object (v1beta1 or v1beta2) by its ``kind``."""
    kind = obj.get("kind")
    model = KINDS.get(str(kind))
    if model is None:
        raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    return model.model_validate(obj)
