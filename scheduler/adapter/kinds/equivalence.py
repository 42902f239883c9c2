"""Is a Workload still the one its job would get? Kueue's ``EquivalentToWorkload`` (v0.17.0
pkg/controller/jobframework/reconciler.go) with ``equality.ComparePodSetSlices``
(pkg/util/equality/podset.go), on object dicts.

What runs must be what was admitted: a tenant who edits a job after admission (a RayCluster's
worker group from 1 x 1 GPU to 30 x 8 GPUs, a batch Job's parallelism) or rewrites its own
pending Workload's pod sets (8 GPUs per pod to 1) leaves a Workload that no longer matches its
job; the controller's equivalence phase (``scheduler/kube/equivalence.py``) then stops, replaces
or rewrites it as Kueue's reconciler does. Pure.

Compared per pod set, in order, as Kueue does: the count, the minimum count (partial admission;
the job's is dropped when the PartialAdmission gate is off), and the pod template's containers,
init containers and (unless the Workload is admitted: the flavor adds its own) tolerations,
with Go's semantic equality (a quantity equals its other spellings, an empty list or map equals
an absent one). Stricter than Kueue in one point: the pod set names must match too (the start
patch finds a pod set's node selector by name; a renamed one would start without it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds.base import PodSetSource
from scheduler.adapter.objects import ADMITTED, condition_true, has_reservation
from scheduler.core.resources import QuantityError, quantity_float

Obj = Mapping[str, Any]


def _quantity(value: Any) -> Any:
    try:
        return ("quantity", quantity_float(value)) if isinstance(value, (str, int, float)) else value
    except (QuantityError, ValueError, ArithmeticError):
        return value


def semantic(value: Any, key: str = "") -> Any:
    """``value`` reduced to what Go's ``equality.Semantic.DeepEqual`` compares: absent, null,
    empty strings, lists and maps are one value (Go's zero values), and the quantities of a
    container's ``resources`` compare by amount ("1" == "1000m"). What the Workload CRD's schema
    defaults (``false``, a port's ``protocol: TCP``) equals its absence: a job whose own API does
    not default them still matches the Workload built from it."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            reduced = semantic(v, str(k))
            if key in ("requests", "limits"):
                reduced = _quantity(v)
            if key == "" and k == "protocol" and v == "TCP":
                continue
            if reduced not in (None, "", [], {}) and reduced is not False:
                out[str(k)] = reduced
        return out
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value


def _spec(template: Any) -> Obj:
    spec = template.get("spec") if isinstance(template, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def comparable(name: Any, count: Any, min_count: Any, template: Any) -> dict[str, Any]:
    """The parts of one pod set Kueue's ``ComparePodSets`` reads (and its name)."""
    spec = _spec(template)
    return {"name": name, "count": count, "minCount": min_count,
            "containers": semantic(spec.get("containers")), "initContainers": semantic(spec.get("initContainers")),
            "tolerations": semantic(spec.get("tolerations"))}


def job_pod_sets(sources: Sequence[PodSetSource], partial_admission: bool = True) -> list[dict[str, Any]]:
    """The job's side (``JobPodSets`` + ``clearMinCountsIfFeatureDisabled``)."""
    return [comparable(ps.name, ps.count, ps.min_count if partial_admission else None, ps.template)
            for ps in sources]


def _pod_sets(workload: Obj) -> list[Obj]:
    pod_sets = (workload.get("spec") or {}).get("podSets")
    return [ps if isinstance(ps, Mapping) else {} for ps in pod_sets] if isinstance(pod_sets, list) else []


def spec_pod_sets(workload: Obj) -> list[dict[str, Any]]:
    return [comparable(ps.get("name"), ps.get("count"), ps.get("minCount"), ps.get("template"))
            for ps in _pod_sets(workload)]


def can_be_partially_admitted(workload: Obj) -> bool:
    """Kueue's ``workload.CanBePartiallyAdmitted``: a pod set with a minCount below its count."""
    for ps in _pod_sets(workload):
        count, min_count = ps.get("count"), ps.get("minCount")
        if isinstance(count, int) and isinstance(min_count, int) and count > min_count:
            return True
    return False


def running_pod_sets(workload: Obj) -> list[dict[str, Any]] | None:
    """Kueue's ``expectedRunningPodSets``: what runs under the reservation (a partially admitted
    pod set runs the admitted count); None without a reservation or when the admission does not
    name every pod set. The flavor's tolerations Kueue merges in are not (only an admitted
    Workload's run, and then tolerations are not compared)."""
    if not has_reservation(workload):
        return None
    assignments = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments")
    by_name = {a.get("name"): a for a in assignments if isinstance(a, Mapping)} \
        if isinstance(assignments, list) else {}
    partial = can_be_partially_admitted(workload)
    out = []
    for ps in spec_pod_sets(workload):
        assignment = by_name.get(ps["name"])
        if assignment is None:
            return None
        if partial and ps["minCount"] is not None and isinstance(assignment.get("count"), int):
            ps = dict(ps, count=assignment["count"])
        out.append(ps)
    return out


def same_pod_sets(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], ignore_tolerations: bool) -> bool:
    """``equality.ComparePodSetSlices`` (names compared too)."""
    def key(ps: Mapping[str, Any]) -> Mapping[str, Any]:
        return {k: v for k, v in ps.items() if not (ignore_tolerations and k == "tolerations")}
    return len(a) == len(b) and all(key(x) == key(y) for x, y in zip(a, b, strict=True))


def equivalent(job: Sequence[Mapping[str, Any]], workload: Obj, job_suspended: bool,
               max_execution_time: Any = None) -> bool:
    """Kueue's ``EquivalentToWorkload``: ``job`` is :func:`job_pod_sets` of the job;
    ``max_execution_time``: the ``spec.maximumExecutionTimeSeconds`` the job's Workload would
    have. While reserved the job is compared with what runs; a suspended job may also match
    the Workload's spec (Kueue: the next sync after it starts checks it again)."""
    if (workload.get("spec") or {}).get("maximumExecutionTimeSeconds") != max_execution_time:
        return False
    admitted = condition_true(workload, ADMITTED)
    running = running_pod_sets(workload)
    if running is not None:
        if same_pod_sets(job, running, admitted):
            return True
        return job_suspended and same_pod_sets(job, spec_pod_sets(workload), admitted)
    return same_pod_sets(job, spec_pod_sets(workload), admitted)


def only_counts_differ(job: Sequence[Mapping[str, Any]], workload: Obj) -> bool:
    """The job and its Workload differ in pod counts only: for elastic jobs (Kueue's workload
    slices, ElasticJobsViaWorkloadSlices) that is a scale, not a mismatch
    (:func:`scheduler.kube.equivalence.Equivalence.scaled`)."""
    wl = spec_pod_sets(workload)
    return len(job) == len(wl) and all(dict(x, count=0, minCount=0) == dict(y, count=0, minCount=0)
                                       for x, y in zip(job, wl, strict=True))
