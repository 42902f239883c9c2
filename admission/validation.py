"""Validation: plain dicts in, a :class:`Verdict` (errors + warnings) out. No I/O.

Two families:

* Kueue's own admission checks of the topology annotations (:mod:`scheduler.adapter.manifest.annotations`).
* toposched's extra checks, which Kueue does not make at admission time because it leaves the
  job pending instead: the LocalQueue exists, the requested level exists in a Topology of a
  flavor the queue can use, and the job can ever fit the queue's quota and the largest topology
  domain. A job that can only fit by borrowing, or only on nodes that are unhealthy right now,
  is admitted with a warning. They run as small named steps (:data:`JOB_FIT_STEPS`), each
  returning whether the verdict is final; why a flavor can never fit is a :class:`Never` code.

The checks that need no cluster are the manifest's (``scheduler/adapter/manifest/checks.py``);
Kueue's queue objects are ``admission/kueue_objects.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

from admission.fit import NEVER, OK, WARN, empty_quota, group_fit, pod_set_shape, quota_limits, topology_fit
from admission.kueue_objects import topology_levels
from admission.view import ClusterView
from admission.workloads import class_error
from scheduler.adapter.kinds.base import PodSetSource
from scheduler.adapter.kinds.registry import kind_or_job
from scheduler.adapter.kinds.workloads import workload_from_manifest
from scheduler.adapter.manifest.annotations import (
    NO_OVERRIDES,
    TEMPLATE_ANNOTATIONS,
    annotation_path,
)
from scheduler.adapter.manifest.checks import manifest_verdict
from scheduler.adapter.manifest.fielderrors import INVALID, OMIT, FieldError, Verdict, plain
from scheduler.adapter.priority_policy import template_priority_class
from scheduler.core.config import FeatureGates
from scheduler.core.kueue.quota import QuotaState
from scheduler.core.nodes import pod_spec_requests
from scheduler.core.placement.types import PlacementGates
from scheduler.core.resources import format_quantity
from scheduler.core.topology_request import (
    ANN_GROUP_NAME,
    ANN_PREFERRED,
    ANN_REQUIRED,
    ANN_SLICE_CONSTRAINTS,
    ANN_SLICE_REQUIRED,
    ANN_SLICE_SIZE,
    UNKNOWN_LEVEL_FIX,
    TopologyRequest,
    request_from_annotations,
    unknown_level_detail,
)
from scheduler.core.workload import (
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    PodSetSpec,
    job_min_parallelism,
    job_pod_count,
)

Obj = Mapping[str, Any]

QUEUE_LABEL_PATH = f"metadata.labels[{LABEL_QUEUE_NAME}]"
PRIORITY_LABEL_PATH = f"metadata.labels[{LABEL_PRIORITY_CLASS}]"
PRIORITY_CLASS_NAME_PATH = "spec.template.spec.priorityClassName"
REQUESTS_PATH = "spec.template.spec.containers[*].resources.requests"
_OMIT: Any = OMIT
__all__ = ["validate_job", "validate_job_against_cluster"]


# ---- the job against the cluster ----------------------------------------------------------
def _cohort(cq: Obj) -> str:
    spec = cq.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def _fmt(amount: int, resource: str) -> str:
    return format_quantity(amount, resource)


class Fit(IntEnum):
    """How well the job fits a flavor (ordered: the best flavor of a resource group wins)."""

    FITS = 0
    FITS_WITH_WARNING = 1
    NEVER = 3


class Never(StrEnum):
    """Why a flavor can never take the job; the message is rendered next to it."""

    QUOTA = "QuotaTooSmall"
    NO_REQUESTED_LEVEL = "NoRequestedLevel"
    NOT_TOPOLOGY_AWARE = "NotTopologyAware"
    DOMAIN_TOO_SMALL = "DomainTooSmall"
    FLAVOR_TOO_SMALL = "FlavorTooSmall"


# A "never" for these points the error at the topology annotation rather than the requests.
TOPOLOGY_NEVERS = frozenset({Never.NO_REQUESTED_LEVEL, Never.NOT_TOPOLOGY_AWARE, Never.DOMAIN_TOO_SMALL})


@dataclass(frozen=True)
class _PodSetRequest:
    """The topology request of the job's single pod set (read by the codec after syntax
    validation), with the annotation paths its levels came from, for the messages."""

    request: TopologyRequest | None
    level_path: str
    slice_path: str

    @classmethod
    def read(cls, ann: Mapping[str, str]) -> _PodSetRequest:
        request = request_from_annotations(ann)
        level_key = ANN_REQUIRED if request is not None and request.required else ANN_PREFERRED
        slice_path = annotation_path(TEMPLATE_ANNOTATIONS, ANN_SLICE_REQUIRED)
        if request is not None and request.layered_slices:
            slice_path = annotation_path(TEMPLATE_ANNOTATIONS, ANN_SLICE_CONSTRAINTS) + "[0].topology"
        return cls(request, annotation_path(TEMPLATE_ANNOTATIONS, level_key), slice_path)

    @property
    def explicit(self) -> bool:
        return self.request is not None and self.request.explicit

    @property
    def required(self) -> str | None:
        return self.request.required if self.request is not None else None

    @property
    def level(self) -> str | None:
        return (self.request.required or self.request.preferred) if self.request is not None else None

    @property
    def slice_level(self) -> str | None:
        return self.request.slice_level if self.request is not None else None

    @property
    def slice_size(self) -> int | None:
        return self.request.slice_size if self.request is not None else None

    def levels_used(self) -> list[tuple[str, str]]:
        out = []
        if self.level:
            out.append((self.level, self.level_path))
        if self.slice_level:
            out.append((self.slice_level, self.slice_path))
        return out


def _flavor_names(cq: Obj) -> list[str]:
    names: list[str] = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or ():
        for fl in group.get("flavors") or ():
            if fl.get("name") not in names:
                names.append(str(fl.get("name")))
    return names


@dataclass(frozen=True)
class _TopologyFit:
    fit: Fit
    message: str = ""
    never: Never | None = None


def _topology_fit(req: _PodSetRequest, count: int, template: Obj, flavor_name: str, flavor: Obj,
                  topo_name: str, levels: list[str], view: ClusterView) -> _TopologyFit:
    """Whether the pod set can fit in this TAS flavor's topology (on an empty cluster), asked of
    the core's topology tree through :mod:`admission.fit`."""
    node_labels = dict((flavor.get("spec") or {}).get("nodeLabels") or {})
    shape = pod_set_shape(template, count, flavor, req.required, req.slice_level, req.slice_size)
    outcome, message = topology_fit(view.empty_trees(topo_name, tuple(levels), node_labels), shape, flavor_name,
                                    topo_name, node_labels)
    if outcome == NEVER:
        # A domain (the required level, or slices) is too small; else the whole flavor is.
        return _TopologyFit(Fit.NEVER, message, Never.DOMAIN_TOO_SMALL if req.required or req.slice_level
                            else Never.FLAVOR_TOO_SMALL)
    return _TopologyFit(Fit.FITS_WITH_WARNING if outcome == WARN else Fit.FITS, message)


def _queue_checks(job: Obj, view: ClusterView, verdict: Verdict) -> tuple[str, str, Obj] | None:
    """Priority class and LocalQueue exist, the LocalQueue's ClusterQueue too (else a warning):
    (queue, ClusterQueue name, ClusterQueue) to go on with, or None."""
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    namespace = str(meta.get("namespace") or "default")
    queue = labels.get(LABEL_QUEUE_NAME)
    if not queue:
        return None
    wpc = labels.get(LABEL_PRIORITY_CLASS)
    if wpc and view.priority_class(wpc) is None:
        verdict.errors.append(plain(PRIORITY_LABEL_PATH, f"WorkloadPriorityClass \"{wpc}\" not found",
                                    "create it (kubectl get workloadpriorityclasses lists the existing ones) "
                                    "or fix the label"))
    elif wpc:
        verdict.errors += [e for e in [class_error(view, "WorkloadPriorityClass", wpc, namespace, PRIORITY_LABEL_PATH)]
                           if e is not None]
    pc = template_priority_class(job)
    if not wpc and pc:  # the class the controller would read (kube/lookups.py)
        verdict.errors += [e for e in [class_error(view, "PriorityClass", pc, namespace, PRIORITY_CLASS_NAME_PATH)]
                           if e is not None]
    lq = view.local_queue(namespace, queue)
    if lq is None:
        verdict.errors.append(plain(
            QUEUE_LABEL_PATH, f"LocalQueue \"{queue}\" does not exist in namespace \"{namespace}\"",
            f"create it (kind: LocalQueue, metadata.namespace: {namespace}, spec.clusterQueue: <ClusterQueue>) "
            f"or fix the label (kubectl get localqueues -n {namespace})"))
        return None
    cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
    cq = view.cluster_queue(cq_name) if cq_name else None
    if cq is None:
        verdict.warnings.append(f"LocalQueue \"{namespace}/{queue}\" points to ClusterQueue \"{cq_name}\", which "
                                "does not exist; the job stays pending until it is created")
        return None
    return str(queue), cq_name, cq


class Step(StrEnum):
    """What a check step tells the pipeline: go on, or the verdict is final."""

    CONTINUE = "Continue"
    STOP = "Stop"


@dataclass
class _JobFit:
    """What the steps of :func:`validate_job_against_cluster` read, and what they find out."""

    view: ClusterView
    queue: str
    cq_name: str
    cq: Obj
    count: int
    per_pod: Mapping[str, int]
    req: _PodSetRequest
    flavor_names: list[str]
    template: Obj
    quota: QuotaState  # the quota tree with no usage: what the job could ever get
    # TAS flavors of the ClusterQueue: name -> (flavor, topology name, levels)
    tas: dict[str, tuple[Obj, str, list[str]]] = field(default_factory=dict)
    missing_topology: list[tuple[str, str]] = field(default_factory=list)
    usable: dict[str, tuple[Obj, str, list[str]]] = field(default_factory=dict)  # TAS flavors with every level
    totals: dict[str, int] = field(default_factory=dict)  # the job's requests, all pods


def _tas_flavor(view: ClusterView, name: str) -> tuple[Obj, str, list[str] | None] | None:
    """(flavor, its Topology's name, that Topology's levels or None when it does not exist) of a
    topology-aware flavor; None for a flavor that is missing or not topology-aware."""
    flavor = view.flavor(name)
    topo_name = ((flavor or {}).get("spec") or {}).get("topologyName") if flavor else None
    if not topo_name:
        return None
    topo = view.topology(str(topo_name))
    return flavor or {}, str(topo_name), topology_levels(topo) if topo is not None else None


def _find_tas_flavors(ctx: _JobFit, verdict: Verdict) -> Step:
    """The ClusterQueue's topology-aware flavors; an explicit request needs one."""
    for name in ctx.flavor_names:
        found = _tas_flavor(ctx.view, name)
        if found is None:
            continue
        flavor, topo_name, levels = found
        if levels is None:
            ctx.missing_topology.append((name, topo_name))
            continue
        ctx.tas[name] = (flavor, topo_name, levels)
    if not ctx.req.explicit or ctx.tas:
        return Step.CONTINUE
    if ctx.missing_topology:
        verdict.warnings.append("; ".join(f"there is no Topology \"{t}\" for TAS flavor \"{f}\""
                                          for f, t in ctx.missing_topology) + "; the job stays pending")
        return Step.STOP
    path = ctx.req.level_path if ctx.req.level else TEMPLATE_ANNOTATIONS
    verdict.errors.append(plain(
        path, f"ClusterQueue \"{ctx.cq_name}\" (LocalQueue \"{ctx.queue}\") has no topology-aware ResourceFlavor "
              f"(flavors: {', '.join(ctx.flavor_names) or 'none'}); topology annotations cannot be honoured",
        "remove the topology annotations, or use a queue whose ClusterQueue has a ResourceFlavor with "
        "spec.topologyName"))
    return Step.STOP


def _check_levels_exist(ctx: _JobFit, verdict: Verdict) -> Step:
    """Every requested level is a level of some TAS flavor's Topology."""
    usable = dict(ctx.tas)
    for level, path in ctx.req.levels_used():
        usable = {n: v for n, v in usable.items() if level in v[2]}
        if not usable:
            topos: dict[str, list[str]] = {t: lv for _, t, lv in ctx.tas.values()}
            listing = "; ".join(f"Topology \"{t}\" (levels: {', '.join(lv)})" for t, lv in sorted(topos.items()))
            if len(topos) == 1:
                (t, lv), = topos.items()
                detail = unknown_level_detail(level, t, lv)
            else:
                detail = f"level \"{level}\" is not in any Topology of ClusterQueue \"{ctx.cq_name}\" ({listing})"
            verdict.errors.append(plain(path, detail, UNKNOWN_LEVEL_FIX))
            return Step.STOP
    ctx.usable = usable
    return Step.CONTINUE


def _check_slice_below_level(ctx: _JobFit, verdict: Verdict) -> Step:
    req = ctx.req
    if not (req.level and req.slice_level and ctx.usable):
        return Step.CONTINUE
    for _, topo_name, lv in ctx.usable.values():
        if lv.index(req.slice_level) < lv.index(req.level):
            verdict.errors.append(plain(
                req.slice_path, f"slice level \"{req.slice_level}\" is above the pod set level \"{req.level}\" "
                f"in Topology \"{topo_name}\" (levels: {', '.join(lv)})",
                "choose a slice level at or below the pod set level"))
            return Step.STOP
    return Step.CONTINUE


def _warn_uneven_slices(ctx: _JobFit, verdict: Verdict) -> Step:
    size = ctx.req.slice_size
    if size and ctx.count % size:
        verdict.warnings.append(f"{annotation_path(TEMPLATE_ANNOTATIONS, ANN_SLICE_SIZE)}: {size} does not divide "
                                f"the pod count {ctx.count}; the last slice will be smaller")
    return Step.CONTINUE


def _check_resources_covered(ctx: _JobFit, verdict: Verdict) -> Step:
    """Every requested resource is covered by the ClusterQueue (else Kueue keeps the job pending)."""
    ctx.totals = {r: v * ctx.count for r, v in ctx.per_pod.items() if v > 0}
    groups = (ctx.cq.get("spec") or {}).get("resourceGroups") or ()
    covered_all = {str(r) for g in groups for r in g.get("coveredResources") or ()}
    if "pods" in covered_all:
        ctx.totals["pods"] = ctx.count
    uncovered = sorted(r for r in ctx.totals if r not in covered_all)
    if not uncovered:
        return Step.CONTINUE
    verdict.errors.append(plain(
        REQUESTS_PATH,
        f"resource(s) {', '.join(uncovered)} unavailable in ClusterQueue \"{ctx.cq_name}\" (covered: "
        f"{', '.join(sorted(covered_all)) or 'none'}); Kueue would keep the job pending forever",
        "drop those requests or ask the cluster admin to add them to the ClusterQueue's coveredResources"))
    return Step.STOP


@dataclass
class _FlavorFit:
    fit: Fit = Fit.FITS
    warnings: list[str] = field(default_factory=list)
    never: list[tuple[Never, str]] = field(default_factory=list)


def _flavor_quota_fit(ctx: _JobFit, fname: str, asked: list[str], out: _FlavorFit) -> None:
    for r in asked:
        nominal, borrow = quota_limits(ctx.quota, ctx.cq_name, fname, r)
        total = ctx.totals[r]
        if total <= nominal:
            continue
        if borrow is not None and total <= nominal + borrow:
            out.fit = max(out.fit, Fit.FITS_WITH_WARNING)
            out.warnings.append(f"{r}: {_fmt(total, r)} exceeds the nominal quota {_fmt(nominal, r)} of "
                                f"ClusterQueue \"{ctx.cq_name}\" flavor \"{fname}\" and fits only by borrowing from "
                                f"cohort \"{_cohort(ctx.cq)}\"; it may wait until the cohort has unused quota")
        else:
            out.fit = Fit.NEVER
            limit = f"nominal {_fmt(nominal, r)}" + (f" + borrowable {_fmt(borrow, r)}" if borrow else "")
            out.never.append((Never.QUOTA, f"flavor \"{fname}\": {r} {_fmt(total, r)} > {limit}"))
            return


def _flavor_topology_fit(ctx: _JobFit, fname: str, out: _FlavorFit) -> None:
    if fname not in ctx.tas:
        out.fit = Fit.NEVER
        out.never.append((Never.NOT_TOPOLOGY_AWARE, f"flavor \"{fname}\" does not support TopologyAwareScheduling"))
        return
    if fname not in ctx.usable:
        out.fit = Fit.NEVER
        out.never.append((Never.NO_REQUESTED_LEVEL, f"flavor \"{fname}\": its Topology has no requested level"))
        return
    flavor, topo_name, lv = ctx.usable[fname]
    result = _topology_fit(ctx.req, ctx.count, ctx.template, fname, flavor, topo_name, lv, ctx.view)
    if result.fit == Fit.NEVER and result.never is not None:
        out.fit = Fit.NEVER
        out.never.append((result.never, f"flavor \"{fname}\": {result.message}"))
    elif result.fit == Fit.FITS_WITH_WARNING:
        out.fit = max(out.fit, Fit.FITS_WITH_WARNING)
        out.warnings.append(result.message)


def _flavor_fit(ctx: _JobFit, fname: str, asked: list[str]) -> _FlavorFit:
    """Quota first; then, for an explicit topology request, the flavor's topology."""
    out = _FlavorFit()
    _flavor_quota_fit(ctx, fname, asked, out)
    if out.fit < Fit.NEVER and ctx.req.explicit:
        _flavor_topology_fit(ctx, fname, out)
    return out


def _check_groups_fit(ctx: _JobFit, verdict: Verdict) -> Step:
    """Per resource group, the best flavor: an error when none can ever take the job, else its warnings."""
    for g_index, group in enumerate((ctx.cq.get("spec") or {}).get("resourceGroups") or ()):
        asked = [r for r in (str(r) for r in group.get("coveredResources") or ()) if r in ctx.totals]
        if not asked:
            continue
        best: _FlavorFit | None = None
        never: list[tuple[Never, str]] = []
        for fl in group.get("flavors") or ():
            result = _flavor_fit(ctx, str(fl.get("name")), asked)
            never.extend(result.never)
            if result.fit < Fit.NEVER and (best is None or result.fit < best.fit):
                best = result
            if result.fit == Fit.FITS:
                break
        if best is not None:
            verdict.warnings.extend(best.warnings)
            continue
        topology_bound = ctx.req.level and any(why in TOPOLOGY_NEVERS for why, _ in never)
        verdict.errors.append(plain(
            ctx.req.level_path if topology_bound else REQUESTS_PATH,
            f"the job ({ctx.count} pod(s)) can never be admitted by ClusterQueue \"{ctx.cq_name}\" "
            f"(resourceGroups[{g_index}]): {'; '.join(text for _, text in never)}",
            # a wider level only helps when the topology is what stops it, not the quota
            "lower spec.parallelism or the per-pod requests, "
            + ("choose a wider topology level, or use another queue" if topology_bound else "or use another queue")))
    return Step.CONTINUE


# The checks of a job against the cluster, in order; each may end the verdict.
JOB_FIT_STEPS: tuple[Callable[[_JobFit, Verdict], Step], ...] = (
    _find_tas_flavors, _check_levels_exist, _check_slice_below_level, _warn_uneven_slices,
    _check_resources_covered, _check_groups_fit,
)


def fewest_pods(job: Obj) -> int:
    """The fewest pods the job can be admitted with: its ``kueue.x-k8s.io/job-min-parallelism``
    when partial admission may reduce it (Kueue's PartialAdmission gate, on by default), else
    all of them. "Can it ever fit" is asked for that count."""
    count = job_pod_count(job)
    minimum = job_min_parallelism(job)
    return minimum if minimum is not None and 0 < minimum < count else count


def validate_job_against_cluster(job: Obj, view: ClusterView) -> Verdict:
    """toposched's checks that need the cluster: queue, priority class, level, quota and topology fit.
    Kueue accepts such a job and leaves it pending: a refusal here is 422 Invalid, not 403."""
    verdict = Verdict(code=INVALID)
    found = _queue_checks(job, view, verdict)
    if found is None:
        return verdict
    queue, cq_name, cq = found
    template = (job.get("spec") or {}).get("template") or {}
    ctx = _JobFit(view=view, queue=queue, cq_name=cq_name, cq=cq, count=fewest_pods(job),
                  per_pod=pod_spec_requests(template.get("spec") or {}),
                  req=_PodSetRequest.read((template.get("metadata") or {}).get("annotations") or {}),
                  flavor_names=_flavor_names(cq), template=template,
                  quota=empty_quota(view.cluster_queues, view.cohorts, cq_name, cq))
    for step in JOB_FIT_STEPS:
        if step(ctx, verdict) == Step.STOP:
            break
    return verdict


def validate_job(job: Obj, view: ClusterView | None = None, old: Obj | None = None,
                 gates: FeatureGates = NO_OVERRIDES) -> Verdict:
    """The validating webhook's decision for a job of a governed kind carrying the queue label:
    the manifest's own checks (``scheduler/adapter/manifest/checks.py``), then toposched's
    checks against the cluster (single pod set: :func:`validate_job_against_cluster`; several:
    every pod set and the whole job, :func:`_multi_pod_set_fit`).

    On UPDATE (``old`` given) only changed topology annotations are checked, never the cluster:
    the controller's own updates (unsuspend, node selectors) must not be blocked because a
    queue was deleted after the job was accepted. ``gates``: the Kueue Configuration's.
    """
    verdict = manifest_verdict(job, old, gates)
    if verdict.errors or old is not None or view is None:
        return verdict
    kind = kind_or_job(job)
    if kind.single_pod_set:
        verdict.extend(validate_job_against_cluster(job, view))
        return verdict
    cluster = Verdict(code=INVALID)  # as validate_job_against_cluster's
    found = _queue_checks(job, view, cluster)
    if found is not None and not cluster.errors:
        cluster.extend(_multi_pod_set_fit(job, kind.kind, view, found, gates))
    verdict.extend(cluster)
    return verdict


def _pod_sets_of(obj: Obj) -> list[PodSetSource]:
    """The pod sets of a governed job, with their template paths: the registry's, the very pod
    sets the controller's Workload gets (``scheduler/adapter/kinds``)."""
    return kind_or_job(obj).pod_sets(obj)


def _relocated(err: FieldError, ps: PodSetSource) -> FieldError:
    """A single-pod-set check's error moved to the pod set's own template path and words."""
    path = err.path.replace("spec.template", ps.template_path, 1) if err.path.startswith("spec.template") else err.path
    detail = err.detail.replace("the job (", f"pod set \"{ps.name}\" (", 1)
    fix = err.fix.replace("lower spec.parallelism", "lower the pod set's count", 1)
    return FieldError(path, err.kind, detail, err.value, fix)


def _multi_pod_set_fit(job: Obj, kind: str, view: ClusterView, found: tuple[str, str, Obj],
                       gates: FeatureGates = NO_OVERRIDES) -> Verdict:
    """Every pod set on its own through :data:`JOB_FIT_STEPS` (each must fit a flavor of the
    ClusterQueue, so each is a necessary condition), then the pod sets' summed requests against
    everything the ClusterQueue could ever get in all its flavors together, then each PodSet
    group placed jointly (:func:`_groups_fit`)."""
    queue, cq_name, cq = found
    verdict = Verdict()
    quota = empty_quota(view.cluster_queues, view.cohorts, cq_name, cq)
    sums: dict[str, int] = {}
    for ps in _pod_sets_of(job):
        if ps.count <= 0:
            continue
        ctx = _JobFit(view=view, queue=queue, cq_name=cq_name, cq=cq, count=ps.count,
                      per_pod=pod_spec_requests(ps.template.get("spec") or {}),
                      req=_PodSetRequest.read(ps.annotations), flavor_names=_flavor_names(cq), template=ps.template,
                      quota=quota)
        one = Verdict()
        for step in JOB_FIT_STEPS:
            if step(ctx, one) == Step.STOP:
                break
        verdict.errors.extend(_relocated(err, ps) for err in one.errors)
        verdict.warnings.extend(f"pod set \"{ps.name}\": {w}" for w in one.warnings)
        for r, v in ctx.totals.items():
            sums[r] = sums.get(r, 0) + v
    if not verdict.errors:
        verdict.errors.extend(_summed_quota_errors(job, kind, cq_name, cq, quota, sums))
    if not verdict.errors:
        verdict.extend(_groups_fit(job, kind, view, cq_name, cq, gates))
    return verdict


def _group_members(job: Obj) -> dict[str, list[PodSetSpec]]:
    """The job's PodSet groups (name -> its two pod sets), as the controller's Workload has them."""
    try:
        pod_sets = workload_from_manifest(job).pod_sets
    except (ValueError, TypeError):  # the syntax checks before this have said what is wrong
        return {}
    groups: dict[str, list[PodSetSpec]] = {}
    for ps in pod_sets:
        name = ps.topology.group_name if ps.topology is not None else None
        if name and ps.count > 0:
            groups.setdefault(name, []).append(ps)
    return {name: members for name, members in groups.items() if len(members) == 2}


def _groups_fit(job: Obj, kind: str, view: ClusterView, cq_name: str, cq: Obj, gates: FeatureGates) -> Verdict:
    """Each PodSet group (leader + workers) placed jointly in one domain by the core on the
    empty cluster, flavor by flavor (the first that holds it ends the search): an error when no
    TAS flavor of the ClusterQueue ever can, a warning when it fits only counting unhealthy nodes."""
    verdict = Verdict()
    paths = {ps.name: ps.annotations_path for ps in _pod_sets_of(job)}
    placement_gates = PlacementGates.from_gates(gates.enabled)
    for group, members in _group_members(job).items():
        request = members[0].topology
        level = (request.required or request.preferred) if request is not None else None
        failed: list[tuple[str, str, str]] = []
        for fname in _flavor_names(cq):
            found = _tas_flavor(view, fname)
            flavor, topo_name, levels = found if found is not None else ({}, "", None)
            if levels is None or level not in levels:
                continue  # not topology-aware, or without the level: the per-pod-set checks said so
            node_labels = dict((flavor.get("spec") or {}).get("nodeLabels") or {})
            trees = view.empty_trees(topo_name, tuple(levels), node_labels)
            outcome, message = group_fit(trees, members, flavor, placement_gates)
            if outcome == OK:
                failed = []
                break
            failed.append((fname, outcome, message))
        if not failed:
            continue
        first, second = members
        what = (f"PodSet group \"{group}\" ({first.name}: {first.count} pod(s), {second.name}: {second.count} "
                f"pod(s))")
        if any(outcome == WARN for _, outcome, _ in failed):
            verdict.warnings.append(f"{what} fits in ClusterQueue \"{cq_name}\" only if unhealthy nodes recover")
            continue
        verdict.errors.append(plain(
            annotation_path(paths.get(first.name, "spec"), ANN_GROUP_NAME),
            f"{what} can never be admitted by ClusterQueue \"{cq_name}\" even on an empty cluster: "
            + "; ".join(f"flavor \"{f}\": {m}" for f, _, m in failed),
            f"a group's pod sets are placed together in one {level} domain: lower the workers' count or "
            "per-pod requests, or ask for a wider level"))
    return verdict


def _summed_quota_errors(job: Obj, kind: str, cq_name: str, cq: Obj, quota: QuotaState,
                         sums: Mapping[str, int]) -> list[FieldError]:
    """The whole job's requests against the most its ClusterQueue could ever get per resource,
    all flavors of the resource group together (nominal + borrowable)."""
    errors = []
    pods = sum(ps.count for ps in _pod_sets_of(job))
    for g_index, group in enumerate((cq.get("spec") or {}).get("resourceGroups") or ()):
        for r in (str(r) for r in group.get("coveredResources") or ()):
            if r not in sums:
                continue
            cap = sum(sum(quota_limits(quota, cq_name, str(fl.get("name")), r)) for fl in group.get("flavors") or ())
            if sums[r] > cap:
                errors.append(plain(
                    "spec", f"the {kind} ({pods} pod(s)) can never be admitted by ClusterQueue \"{cq_name}\" "
                    f"(resourceGroups[{g_index}]): {r} {_fmt(sums[r], r)} for all pod sets together > "
                    f"{_fmt(cap, r)} (every flavor's nominal + borrowable quota)",
                    "lower the replicas or the per-pod requests, or use another queue"))
    return errors
