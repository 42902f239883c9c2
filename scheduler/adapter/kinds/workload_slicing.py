"""Elastic jobs: Kueue's workload slices (``ElasticJobsViaWorkloadSlices``, beta and on in
Kueue v0.19.2, off in v0.17.0), pure functions on object dicts. Restates v0.19.2
``pkg/workloadslicing/workloadslicing.go`` and the slice annotations of
``pkg/controller/jobframework/reconciler.go`` (``prepareWorkloadSlice``, ``newWorkloadName``).

A job annotated ``kueue.x-k8s.io/elastic-job: "true"`` scales without being suspended: a
scale-down (or any count change before the Workload holds quota) rewrites the Workload's pod
counts in place; a scale-up of an admitted Workload is served by a new Workload (a new "slice",
named with the job's generation) annotated ``kueue.x-k8s.io/workload-slice-replacement-for:
<ns>/<old>``, admitted against quota for the delta only, after which the old slice is finished
with reason ``WorkloadSliceReplaced``. Any other change of the job's pod sets (names, templates)
is not a scale: the ordinary reconcile (``kube/equivalence.py``) handles it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.adapter.objects import EVICTED, FINISHED, condition_true, has_reservation
from scheduler.core.config import FeatureGates
from scheduler.core.kueue_names import GATE_ELASTIC_JOB
from scheduler.core.workload import LABEL_PODSET

Obj = Mapping[str, Any]
Counts = dict[str, int]

GATE = "ElasticJobsViaWorkloadSlices"
ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"  # Kueue's constants.ElasticJobAnnotation
ELASTIC_VALUE = "true"
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"  # kueue.WorkloadSliceNameAnnotation

# Kueue's Finished reasons and messages, word for word (workloadslicing.go, scheduler.go).
REASON_REPLACED = "WorkloadSliceReplaced"
REASON_OUT_OF_SYNC = "OutOfSync"
MESSAGE_OUT_OF_SYNC = "The workload slice is out of sync with its parent job"
MESSAGE_NORMALIZED_REPLACED = "Replaced to accommodate a new workload slice"
MESSAGE_REPLACED = ("Replaced to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
                    "workload slice aggregation")


def _annotations(obj: Obj | None) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def enabled(obj: Obj | None, gates: FeatureGates) -> bool:
    """Kueue's ``workloadslicing.Enabled``: the gate is on and the object carries the elastic
    annotation with the value ``"true"`` exactly (a job's or a Workload's)."""
    return obj is not None and gates.enabled(GATE) and _annotations(obj).get(ELASTIC_ANNOTATION) == ELASTIC_VALUE


# Kueue's ``supportedElasticJobGVKs`` (jobframework/validation.go at v0.19.2): (group, kind).
SUPPORTED = frozenset({("batch", "Job"), ("ray.io", "RayCluster"), ("ray.io", "RayJob"), ("ray.io", "RayService")})


def supported(group: str, kind: str) -> bool:
    return (group, kind) in SUPPORTED


def key(wl: Obj) -> str:
    meta = wl.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def replacement_for(wl: Obj) -> str | None:
    """``ReplacementForKey``: the ``<namespace>/<name>`` of the slice this one replaces."""
    value = _annotations(wl).get(REPLACEMENT_FOR)
    return value if isinstance(value, str) else None


def slice_name(wl: Obj) -> str:
    """``SliceName``: the first slice's name, carried along the chain."""
    value = _annotations(wl).get(SLICE_NAME)
    return value if isinstance(value, str) else str((wl.get("metadata") or {}).get("name", ""))


def counts_of(pod_sets: Sequence[Obj]) -> Counts:
    """``ExtractPodSetCounts``."""
    return {str(ps.get("name")): int(ps.get("count") or 0) for ps in pod_sets if isinstance(ps, Mapping)}


def workload_counts(wl: Obj) -> Counts:
    pod_sets = (wl.get("spec") or {}).get("podSets")
    return counts_of(pod_sets if isinstance(pod_sets, list) else [])


def _fewer(c: Counts, other: Counts) -> bool:
    """``HasFewerReplicasThan``: some pod set of ``c`` has fewer pods than in ``other``."""
    return any(name in other and n < other[name] for name, n in c.items())


def scaled_down(old: Counts, new: Counts) -> bool:
    """``ScaledDown``: some pod set shrinks and none grows."""
    return _fewer(new, old) and not _fewer(old, new)


def _evicted(wl: Obj) -> bool:
    return condition_true(wl, EVICTED)


def not_finished(workloads: Sequence[Obj]) -> list[Obj]:
    """``FindNotFinishedWorkloads`` on a job's Workloads: oldest first (uid breaks a tie), the
    Finished ones dropped."""
    def order(wl: Obj) -> tuple[str, str]:
        meta = wl.get("metadata") or {}
        return str(meta.get("creationTimestamp") or ""), str(meta.get("uid") or "")
    return [wl for wl in sorted(workloads, key=order) if not condition_true(wl, FINISHED)]


@dataclass(frozen=True)
class Finish:
    workload: Obj
    reason: str
    message: str


@dataclass(frozen=True)
class SlicePlan:
    """What ``EnsureWorkloadSlices`` decides. ``compatible`` False: the job's pod sets are not
    the slices' (fall back to the ordinary reconcile). ``workload`` None and compatible: a new
    slice is to be created. ``counts``: rewrite ``workload``'s pod counts in place to these."""
    compatible: bool
    workload: Obj | None = None
    counts: Counts | None = None
    finish: tuple[Finish, ...] = field(default=())


def normalize(workloads: Sequence[Obj]) -> tuple[Obj | None, tuple[Finish, ...]]:
    """``normalizeActiveSlices`` on ``not_finished`` output: the slice to serve the job and the
    slices to finish (evicted ones always; a replaced one ``WorkloadSliceReplaced``, any other
    ``OutOfSync``)."""
    replacements: dict[str, Obj] = {}
    for wl in workloads:
        target = replacement_for(wl)
        if target is not None and not _evicted(wl):
            existing = replacements.get(target)
            if existing is None or (not has_reservation(existing) and has_reservation(wl)):
                replacements[target] = wl
    latest_reserved: Obj | None = None
    latest: Obj | None = None
    for wl in workloads:
        if _evicted(wl):
            continue
        latest = wl
        if not has_reservation(wl):
            continue
        repl = replacements.get(key(wl))
        if repl is not None and has_reservation(repl):
            continue
        latest_reserved = wl
    pending: Obj | None = None
    if latest_reserved is not None:
        repl = replacements.get(key(latest_reserved))
        if repl is not None and not has_reservation(repl):
            pending = repl
    selected = pending if pending is not None else latest_reserved if latest_reserved is not None else latest
    finish = tuple(
        Finish(wl, REASON_REPLACED, MESSAGE_NORMALIZED_REPLACED) if key(wl) in replacements
        else Finish(wl, REASON_OUT_OF_SYNC, MESSAGE_OUT_OF_SYNC)
        for wl in workloads if wl is not selected and wl is not latest_reserved)
    return selected, finish


def ensure_slices(job_counts: Counts, workloads: Sequence[Obj]) -> SlicePlan:
    """``EnsureWorkloadSlices``: ``workloads`` are the job's Workloads (any order, Finished ones
    included)."""
    live = not_finished(workloads)
    if not live:
        return SlicePlan(True)
    finish: tuple[Finish, ...] = ()
    selected: Obj | None = live[0]
    if len(live) > 1:
        selected, finish = normalize(live)
        if selected is None:
            return SlicePlan(True, finish=finish)
    assert selected is not None
    counts = workload_counts(selected)
    if set(counts) != set(job_counts):
        return SlicePlan(False, finish=finish)
    if counts == job_counts:
        return SlicePlan(True, selected, finish=finish)
    if not has_reservation(selected) or scaled_down(counts, job_counts):
        return SlicePlan(True, selected, dict(job_counts), finish)
    return SlicePlan(True, finish=finish)  # a scale-up of an admitted slice: a new slice


def slice_annotations(new_name: str, live: Sequence[Obj]) -> dict[str, str] | None:
    """``prepareWorkloadSlice``: the annotations of a new slice given the job's not-finished
    Workloads (``not_finished``); None when there is more than one (Kueue returns an error and
    retries once the old ones are finished)."""
    out = {ELASTIC_ANNOTATION: ELASTIC_VALUE}
    if not live:
        return {**out, SLICE_NAME: new_name}
    if len(live) == 1:
        return {**out, REPLACEMENT_FOR: key(live[0]), SLICE_NAME: slice_name(live[0])}
    return None


def replaced_message(new_slice: Obj) -> str:
    """The Finished message the scheduler writes on the old slice once the new one is admitted
    (``Scheduler.replaceWorkloadSlice``)."""
    meta = new_slice.get("metadata") or {}
    labels = meta.get("labels") or {}
    return MESSAGE_REPLACED.format(uid=meta.get("uid", ""), job_uid=labels.get("kueue.x-k8s.io/job-uid", ""))


def controller_uid(wl: Obj) -> str | None:
    """The uid of the Workload's controller owner reference."""
    for ref in (wl.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid"):
            return str(ref["uid"])
    return None


def replacements(pending: Sequence[Obj], holding: Sequence[Obj], gates: FeatureGates) -> dict[str, str]:
    """Which pending Workload replaces which reserved one (``Snapshot.slice_replacements``):
    the gate on, both elastic, the annotation naming a Workload that holds quota in the same
    namespace and is controlled by the same job (by uid). Kueue checks the namespace and the
    ClusterQueue only; the owner is checked here too, so that a Workload a tenant writes by hand
    cannot retire a slice of another job (docs/security.md)."""
    if not gates.enabled(GATE):
        return {}
    reserved = {key(wl): wl for wl in holding if enabled(wl, gates)}
    out: dict[str, str] = {}
    for wl in pending:
        target = replacement_for(wl)
        old = reserved.get(target) if target is not None and enabled(wl, gates) else None
        if old is None or (old.get("metadata") or {}).get("namespace") != (wl.get("metadata") or {}).get("namespace"):
            continue
        uid = controller_uid(wl)
        if uid is not None and uid == controller_uid(old):
            out[key(wl)] = str(target)
    return out


# Kueue's ElasticJobSchedulingGate (apis/kueue/v1beta2/constants.go): the job webhook puts it in
# an elastic job's pod templates; the ElasticJobUngater lifts it from as many pods as the chain's
# admitted slice grants (pkg/controller/elasticjobs/elastic_job_ungater.go).
SCHEDULING_GATE = GATE_ELASTIC_JOB


def gated(pod: Obj) -> bool:
    return any(isinstance(g, Mapping) and g.get("name") == SCHEDULING_GATE
               for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def pods_to_ungate(granted: Counts, pods: Sequence[Obj]) -> list[Obj]:
    """``podsToUngate``: per pod set (the pod's ``kueue.x-k8s.io/podset`` label), the gated
    pods up to the granted count less the pods already ungated (they hold quota too), lowest
    names first; finished pods count for nothing."""
    waiting: dict[str, list[Obj]] = {}
    running: dict[str, int] = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        pod_set = str(((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_PODSET) or "")
        if gated(pod):
            waiting.setdefault(pod_set, []).append(pod)
        else:
            running[pod_set] = running.get(pod_set, 0) + 1
    out: list[Obj] = []
    for pod_set, candidates in sorted(waiting.items()):
        room = granted.get(pod_set, 0) - running.get(pod_set, 0)
        if room > 0:
            out.extend(sorted(candidates, key=lambda p: str((p.get("metadata") or {}).get("name")))[:room])
    return out


def template_paths(group: str, kind: str, obj: Obj) -> list[tuple[str, ...]]:
    """The pod templates Kueue's webhook gates in an elastic job (``applyWorkloadSliceSchedulingGate``
    for a Job; the head's and every worker group's for a RayCluster)."""
    if (group, kind) == ("batch", "Job"):
        return [("spec", "template")]
    if (group, kind) == ("ray.io", "RayCluster"):
        workers = (obj.get("spec") or {}).get("workerGroupSpecs")
        count = len(workers) if isinstance(workers, list) else 0
        return [("spec", "headGroupSpec", "template"),
                *(("spec", "workerGroupSpecs", str(i), "template") for i in range(count))]
    return []
