"""Pydantic v2 models of the Kueue objects toposched reads and writes (kueue.x-k8s.io).

Written for ``v1beta2``; ``v1beta1`` objects are accepted too: ClusterQueue ``spec.cohort``
(v1beta2 ``cohortName``), Workload ``spec.priorityClassName`` + ``priorityClassSource``
(v1beta2 ``priorityClassRef``), ``topologyAssignment.domains`` (v1beta2 ``slices``). The
``effective_*`` accessors give one answer for both; ``to_v1beta2()`` rewrites the renamed
fields. Every model keeps fields it does not know (``extra="allow"``) and
:func:`dump` writes back exactly the fields that were read or set (``exclude_unset``), so
a read-modify-write never drops what another controller (or a newer Kueue) put there.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from scheduler.core.assignment import decode_topology_assignment, encode_v1beta2
from scheduler.core.placement.types import PodSetPlacement

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


# ---------------------------------------------------------------------- Workload


class PodSetTopologyRequest(KueueModel):
    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    pod_set_group_name: str | None = None
    pod_set_slice_required_topology: str | None = None
    pod_set_slice_size: int | None = None


class PodSet(KueueModel):
    name: str = "main"
    count: int = 1
    min_count: int | None = None
    template: dict[str, Any] = Field(default_factory=dict)
    topology_request: PodSetTopologyRequest | None = None


class PriorityClassRef(KueueModel):
    group: str = GROUP
    kind: str = "WorkloadPriorityClass"
    name: str


class WorkloadSpec(KueueModel):
    queue_name: str = ""
    pod_sets: list[PodSet] = Field(default_factory=list)
    priority: int | None = None
    priority_class_ref: PriorityClassRef | None = None  # v1beta2
    priority_class_name: str | None = None  # v1beta1
    priority_class_source: str | None = (
        None  # v1beta1: kueue.x-k8s.io/workloadpriorityclass | scheduling.k8s.io/priorityclass
    )
    active: bool | None = None
    maximum_execution_time_seconds: int | None = None

    def effective_priority_class(self) -> tuple[str, str] | None:
        """(kind, name): kind ``WorkloadPriorityClass`` or ``PriorityClass``."""
        if self.priority_class_ref is not None:
            return self.priority_class_ref.kind, self.priority_class_ref.name
        if self.priority_class_name:
            pod = self.priority_class_source == "scheduling.k8s.io/priorityclass"
            return ("PriorityClass" if pod else "WorkloadPriorityClass"), self.priority_class_name
        return None


class UniversalOrIndividual(KueueModel):
    universal: Any = None
    individual: Any = None


class TopologyAssignmentSlice(KueueModel):
    domain_count: int
    values_per_level: list[dict[str, Any]]
    pod_counts: dict[str, Any]


class TopologyDomainAssignment(KueueModel):
    values: list[str]
    count: int


class TopologyAssignment(KueueModel):
    """Both shapes: v1beta2 ``slices`` or v1beta1 ``domains``."""

    levels: list[str]
    slices: list[TopologyAssignmentSlice] | None = None
    domains: list[TopologyDomainAssignment] | None = None

    def decoded(self) -> tuple[tuple[str, ...], list[Any]]:
        return decode_topology_assignment(dump(self))


class PodSetAssignment(KueueModel):
    name: str = "main"
    flavors: dict[str, str] = Field(default_factory=dict)
    resource_usage: dict[str, Quantity] = Field(default_factory=dict)
    count: int | None = None
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: str | None = None


class Admission(KueueModel):
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment] = Field(default_factory=list)


class RequeueState(KueueModel):
    count: int | None = None
    requeue_at: str | None = None


class UnhealthyNode(KueueModel):
    name: str


class WorkloadStatus(KueueModel):
    conditions: list[Condition] = Field(default_factory=list)
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    unhealthy_nodes: list[UnhealthyNode] = Field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def is_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"


class Workload(KueueModel):
    api_version: str = V1BETA2
    kind: str = "Workload"
    metadata: ObjectMeta
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)
    status: WorkloadStatus | None = None

    def to_v1beta2(self) -> Workload:
        """Rename the v1beta1 fields (priority class, topology ``domains`` -> ``slices``)."""
        out = self.model_copy(deep=True)
        out.api_version = V1BETA2
        ref = out.spec.effective_priority_class()
        if ref is not None and out.spec.priority_class_ref is None:
            group = "scheduling.k8s.io" if ref[0] == "PriorityClass" else GROUP
            out.spec.priority_class_ref = PriorityClassRef(group=group, kind=ref[0], name=ref[1])
        for name in ("priority_class_name", "priority_class_source"):
            setattr(out.spec, name, None)
            out.spec.model_fields_set.discard(name)
        if out.status and out.status.admission:
            for psa in out.status.admission.pod_set_assignments:
                ta = psa.topology_assignment
                if ta is not None and ta.domains is not None and ta.slices is None:
                    levels, domains = ta.decoded()
                    count = sum(d.count for d in domains)
                    encoded = encode_v1beta2(PodSetPlacement(psa.name, count, tuple(levels), tuple(domains)))
                    psa.topology_assignment = TopologyAssignment.model_validate(encoded)
        return out


KINDS: dict[str, type[KueueModel]] = {
    "ClusterQueue": ClusterQueue,
    "Cohort": Cohort,
    "LocalQueue": LocalQueue,
    "ResourceFlavor": ResourceFlavor,
    "Topology": Topology,
    "WorkloadPriorityClass": WorkloadPriorityClass,
    "Workload": Workload,
}


def parse(obj: dict[str, Any]) -> KueueModel:
    """Any supported Kueue object (v1beta1 or v1beta2) by its ``kind``."""
    kind = obj.get("kind")
    model = KINDS.get(str(kind))
    if model is None:
        raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    return model.model_validate(obj)
