"""Pods and Workloads as the extender reads them: a pod's workload, pod set and rank; a
Workload's admission state and, per pod set, its decoded topology assignment.

A *group* is ``(namespace, workload name, pod set name)``; a group's *assignment* is the decoded
``topologyAssignment`` of its pod set: a map from a domain (one value per assignment level; with
hostname-only levels: the hostname) to the number of pods assigned there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from scheduler.adapter.kinds import workload_slicing as slicing
from scheduler.adapter.objects import ADMITTED, EVICTED, FINISHED, condition_true, find_condition
from scheduler.adapter.workloads import topology_assignments
from scheduler.core.kueue_names import ANN_POD_INDEX_OFFSET, LABEL_PREBUILT_WORKLOAD
from scheduler.core.nodes import HOSTNAME_LABEL, NodeInfo
from scheduler.core.topology_request import TopologyRequestError, request_from_kueue
from scheduler.core.workload import ANN_ROLE_HASH, ANN_WORKLOAD, DEFAULT_POD_SET, LABEL_PODSET

Group = tuple[str, str, str]  # (namespace, workload, pod set)
Domain = tuple[str, ...]




@dataclass(frozen=True)
class PodRef:
    """The parts of a pod the extender decides on."""

    namespace: str
    name: str
    uid: str
    scheduler_name: str = ""
    workload: str | None = None  # kueue.x-k8s.io/workload annotation
    pod_set: str = DEFAULT_POD_SET
    node_name: str | None = None
    terminal: bool = False
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)
    index_offset: int = 0  # kueue.x-k8s.io/pod-index-offset

    @property
    def group(self) -> Group | None:
        return (self.namespace, self.workload, self.pod_set) if self.workload else None


def _prebuilt(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """The pod's prebuilt Workload: Kueue's label, or the annotation of the same key that Kueue
    v0.19 (WorkloadIdentifierAnnotations) and toposched's controller under it write instead.
    The extender has no Kueue release of its own: it reads both, as the label alone already
    lets a pod's creator name a Workload (the webhook keeps both on a held pod:
    admission/update_guards.py)."""
    return labels.get(LABEL_PREBUILT_WORKLOAD) or annotations.get(LABEL_PREBUILT_WORKLOAD) or None


def _group_role(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """A pod of a pod group (a LeaderWorkerSet group): Kueue's role-hash annotation names its
    pod set (``leader``/``worker``/``main``), set with the prebuilt-workload name."""
    return annotations.get(ANN_ROLE_HASH) if _prebuilt(labels, annotations) else None


def pod_ref(pod: Mapping[str, Any]) -> PodRef:
    """A core/v1 Pod dict (as kube-scheduler sends it in ExtenderArgs.Pod, or as listed)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    return PodRef(
        namespace=meta.get("namespace") or "default",
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        scheduler_name=spec.get("schedulerName") or "default-scheduler",
        workload=annotations.get(ANN_WORKLOAD) or _prebuilt(labels, annotations),
        pod_set=labels.get(LABEL_PODSET) or _group_role(labels, annotations) or DEFAULT_POD_SET,
        node_name=spec.get("nodeName") or None,
        terminal=(status.get("phase") in ("Succeeded", "Failed")),
        labels=labels,
        index_offset=_uint(annotations.get(ANN_POD_INDEX_OFFSET)) or 0,
    )


@dataclass(frozen=True)
class RankRule:
    """How a pod's rank is read (Kueue's ``podIndexLabel`` / ``subGroupIndexLabel`` /
    ``subGroupCount`` of the pod set's topologyRequest): rank = sub-group index x pods per
    sub-group + pod index."""

    pod_index_label: str
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None

    def rank_of(self, labels: Mapping[str, str], pod_set_size: int, offset: int = 0) -> int | None:
        """The pod's rank, or None when it cannot be used (missing, not a number, out of
        range): Kueue's ``readRanksForLabels`` bounds. ``offset``: Kueue's
        ``kueue.x-k8s.io/pod-index-offset`` (an LWS's workers count from 1: the leader is 0)."""
        index = _uint(labels.get(self.pod_index_label))
        if index is None or index < offset:
            return None
        index -= offset
        if self.sub_group_index_label is None:
            return index if index < pod_set_size else None
        groups = self.sub_group_count or 0
        job = _uint(labels.get(self.sub_group_index_label))
        if job is None or groups <= 0 or job >= groups:
            return None
        per_group = pod_set_size // groups
        if index >= per_group:
            return None
        rank = job * per_group + index
        return rank if rank < pod_set_size else None


def _uint(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


@dataclass(frozen=True)
class Assignment:
    """One pod set's topology assignment: levels and pods per domain (in assignment order,
    which is also rank order: ranks 0..n-1 fill the domains one after the other)."""

    levels: tuple[str, ...]
    counts: Mapping[Domain, int]
    rank_rule: RankRule | None = None
    flavor: str = ""  # the ResourceFlavor of the pod set (its Topology's levels judge compactness)

    def domain_of_rank(self, rank: int) -> Domain | None:
        """Kueue's ``rankToDomainID``: the domain rank ``rank`` belongs to."""
        start = 0
        for dom, count in self.counts.items():
            if rank < start + count:
                return dom
            start += count
        return None

    @cached_property
    def hostname_only(self) -> bool:  # read per node in filter: computed once
        return self.levels == (HOSTNAME_LABEL,)

    def domain_of(self, node: NodeInfo) -> Domain | None:
        """The assignment domain the node belongs to, or None when it is not in the assignment."""
        labels = node.labels
        if self.hostname_only:
            key: Domain = (labels.get(HOSTNAME_LABEL) or node.name,)
        else:
            values = []
            for level in self.levels:
                value = labels.get(level)
                if value is None:
                    if level != HOSTNAME_LABEL:
                        return None
                    value = node.name
                values.append(value)
            key = tuple(values)
        return key if key in self.counts else None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class WorkloadView:
    """A Workload reduced to what filter/bind need."""

    namespace: str
    name: str
    admitted: bool
    reason: str  # why not admitted ("" when admitted)
    pod_sets: Mapping[str, Assignment]
    errors: Mapping[str, str] = field(default_factory=dict)  # pod set -> undecodable assignment


def workload_view(obj: Mapping[str, Any]) -> WorkloadView:
    """A Kueue Workload dict (v1beta2, v1beta1 assignment shapes both accepted; the adapter
    decodes them: ``adapter.workloads.topology_assignments``)."""
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace") or "default", meta.get("name") or ""
    reason = ""
    if not (obj.get("status") or {}).get("admission"):
        reason = "has no status.admission yet"
    elif not condition_true(obj, ADMITTED):
        reason = "is not Admitted (condition Admitted is not True)"
    elif condition_true(obj, FINISHED):
        reason = "is Finished"
    elif condition_true(obj, EVICTED):
        reason = "is being evicted (condition Evicted is True)"
    pod_sets: dict[str, Assignment] = {}
    errors: dict[str, str] = {}
    rules = {str(ps.get("name") or DEFAULT_POD_SET): _rank_rule(ps.get("topologyRequest"))
             for ps in (obj.get("spec") or {}).get("podSets") or ()}
    for ps in topology_assignments(obj):
        if ps.placement is None:
            errors[ps.name] = str(ps.error)
            continue
        counts: dict[Domain, int] = {}
        for d in ps.placement.domains:
            counts[d.values] = counts.get(d.values, 0) + d.count
        pod_sets[ps.name] = Assignment(ps.placement.levels, counts, rules.get(ps.name),
                                       ps.flavors[0] if ps.flavors else "")
    return WorkloadView(ns, name, not reason, reason, pod_sets, errors)


def without_pod_templates(obj: dict[str, Any]) -> dict[str, Any]:
    """A Workload as the extender keeps it: every pod set without its pod template, which the
    views never read (they read the admission, the conditions and each pod set's name and
    ``topologyRequest``) and which is most of a Workload's size (issue 42, the doors' memory)."""
    for pod_set in (obj.get("spec") or {}).get("podSets") or ():
        if isinstance(pod_set, dict):
            pod_set.pop("template", None)
    return obj


def view_names(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The names a Workload's view is filed under: its own; an elastic job's slice also under
    its slice name (``kueue.x-k8s.io/workload-slice-name``, the first slice's name, which the
    job's pods carry in ``kueue.x-k8s.io/workload``), so the pods of a scaled job are judged by
    its newest slice (pending: its new pods wait, as behind Kueue's elastic scheduling gate); a
    slice finished as replaced is filed under none (its successor holds the name)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    annotations = meta.get("annotations") or {}
    if annotations.get(slicing.ELASTIC_ANNOTATION) != slicing.ELASTIC_VALUE:
        return (name,)
    finished = find_condition(obj, FINISHED)
    if finished is not None and finished.get("status") == "True" and finished.get("reason") == slicing.REASON_REPLACED:
        return ()
    chain = slicing.slice_name(obj)
    return (name,) if chain == name else (name, chain)


def _rank_rule(raw: Mapping[str, Any] | None) -> RankRule | None:
    """The pod set's rank rule from its topologyRequest (read by the codec); none when the
    request has no pod index label or cannot be read (the ranks are an optimisation)."""
    try:
        request = request_from_kueue(raw)
    except TopologyRequestError:
        return None
    if request is None or not request.pod_index_label:
        return None
    return RankRule(request.pod_index_label, request.sub_group_index_label, request.sub_group_count)


