"""Kueue queue objects (plain dicts) -> the core's quota and queueing values.

ClusterQueues, Cohorts, LocalQueues and ResourceFlavors go through the pydantic models of
``scheduler.models.kueue`` first: they validate the object and give one answer for the
v1beta1 and v1beta2 spellings (``cohort`` / ``cohortName``, flavor fungibility defaults).
There are few of them and they change rarely, so the validation is worth its cost here; the
hot path (Workloads) is read straight from dicts (:mod:`scheduler.adapter.workloads`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.adapter.objects import Obj, name_of
from scheduler.core.beyond.healthy_capacity import ANN_FOLLOW_HEALTHY
from scheduler.core.kueue.queueing import LocalQueueSpec
from scheduler.core.kueue.quota import ClusterQueueSpec, CohortSpec, FlavorSpec, QuotaState
from scheduler.core.topology_request import CompactWait, TopologyRequestError, compact_wait_from_annotations
from scheduler.models import convert
from scheduler.models.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor


def cluster_queue_spec(obj: Obj) -> ClusterQueueSpec:
    return convert.cluster_queue_to_core(ClusterQueue.model_validate(obj))


def cohort_spec(obj: Obj) -> CohortSpec:
    return convert.cohort_to_core(Cohort.model_validate(obj))


def local_queue_spec(obj: Obj) -> LocalQueueSpec:
    return convert.local_queue_to_core(LocalQueue.model_validate(obj))


def flavor_spec(obj: Obj) -> FlavorSpec:
    return convert.flavor_to_core(ResourceFlavor.model_validate(obj))


def topology_levels(obj: Obj) -> tuple[str, ...]:
    """A Topology's ``spec.levels[].nodeLabel``, widest first (empty when it has none)."""
    return tuple(str(level.get("nodeLabel", "")) for level in (obj.get("spec") or {}).get("levels") or ())


def priority_values(objs: Iterable[Obj]) -> dict[str, int]:
    """WorkloadPriorityClasses or PriorityClasses: name -> value."""
    return {name_of(o): int(o.get("value") or 0) for o in objs}


def namespace_labels(namespaces: Iterable[Obj]) -> dict[str, dict[str, str]]:
    return {name_of(n): dict((n.get("metadata") or {}).get("labels") or {}) for n in namespaces}


def following_health(cluster_queues: Iterable[Obj]) -> frozenset[str]:
    """The ClusterQueues whose quota follows healthy capacity (annotated
    ``toposched.io/quota-follows-healthy-capacity: "true"``; core/beyond/healthy_capacity.py)."""
    return frozenset(name_of(o) for o in cluster_queues
                     if ((o.get("metadata") or {}).get("annotations") or {}).get(ANN_FOLLOW_HEALTHY) == "true")


def local_queue_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def compact_default(obj: Obj) -> CompactWait | None:
    """A ClusterQueue's default bounded wait for a compact placement: the same
    ``toposched.io/compact-*`` keys as a pod template, on the ClusterQueue's
    ``metadata.annotations`` (Kueue's CRD is not changed). A value that cannot be read is
    ignored here (``compact_default_error`` says why, for ``explain`` and the docs)."""
    try:
        return compact_wait_from_annotations((obj.get("metadata") or {}).get("annotations") or {})
    except TopologyRequestError:
        return None


def compact_default_error(obj: Obj) -> str:
    """Why a ClusterQueue's compact-wait default cannot be read ("" when it can)."""
    try:
        compact_wait_from_annotations((obj.get("metadata") or {}).get("annotations") or {})
    except TopologyRequestError as exc:
        return str(exc)
    return ""


def compact_defaults(objs: Iterable[Obj]) -> dict[str, CompactWait]:
    """ClusterQueue name -> its compact-wait default (only those that set one)."""
    out = {}
    for o in objs:
        wanted = compact_default(o)
        if wanted is not None:
            out[name_of(o)] = wanted
    return out


def cluster_queue_specs(objs: Iterable[Obj]) -> dict[str, ClusterQueueSpec]:
    return {name_of(o): cluster_queue_spec(o) for o in objs}


def cohort_specs(objs: Iterable[Obj]) -> dict[str, CohortSpec]:
    return {name_of(o): cohort_spec(o) for o in objs}


def empty_quota_state(cluster_queues: Mapping[str, ClusterQueueSpec] | Iterable[ClusterQueueSpec],
                      cohorts: Mapping[str, CohortSpec] | Iterable[CohortSpec] = ()) -> QuotaState:
    """The quota tree (ClusterQueues under their Cohorts, Cohort parents included) with no usage:
    ``potential_available`` is the most a ClusterQueue could ever get."""
    cqs = cluster_queues.values() if isinstance(cluster_queues, Mapping) else cluster_queues
    cos = cohorts.values() if isinstance(cohorts, Mapping) else cohorts
    return QuotaState(cqs, cos)
