"""Kueue's flavor assigner (``pkg/scheduler/flavorassigner``) for one workload: flavors tried
in order per resource group, node-label / taint / TAS compatibility, the fit rule with
borrowing, flavor fungibility, and Kueue's messages.

Its steps, per pod set: group the requested resources by resource group
(:func:`_resources_by_group`), then per group try each flavor (:func:`_flavor_mismatch`, then
:func:`_try_flavor` with :func:`fits_resource_quota`) until flavor fungibility stops the search
(:func:`_stop_search`). Every passed-over flavor leaves a
:class:`~scheduler.core.reasons.Rejection` (a code and Kueue's message). The quota it reads is
``core/kueue/quota.py``'s :class:`~scheduler.core.kueue.quota.QuotaState`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum

from scheduler.core.kueue.quota import (
    NEVER,
    PREEMPTION_OVER_BORROWING,
    TRY_NEXT_FLAVOR,
    ClusterQueueSpec,
    FlavorFungibility,
    FlavorResource,
    FlavorSpec,
    QuotaState,
    ResourceGroup,
    Usage,
)
from scheduler.core.nodes import Taint, Toleration
from scheduler.core.reasons import QUOTA_REJECTIONS, FlavorRejection, PendingReason, Rejection, flavors_message
from scheduler.core.resources import PODS, format_quantity
from scheduler.core.workload import PodSetSpec, WorkloadSpec


class Mode(IntEnum):
    """How a workload (or a pod set, or one flavor-resource) fits, worst first (Kueue: NoFit <
    Preempt < Fit): the worst over the parts is ``min``."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


@dataclass
class _Status:
    """What one pod set's flavor search ran into (Kueue's flavorassigner ``Status``)."""

    rejections: list[Rejection] = field(default_factory=list)
    reason: PendingReason = PendingReason.WAITING_FOR_QUOTA

    def reject(self, code: FlavorRejection, **fields: object) -> None:
        self.rejections.append(Rejection.of(code, **fields))

    def rejected_for_quota(self) -> bool:
        return any(r.code in QUOTA_REJECTIONS for r in self.rejections)

    def message(self) -> str:
        return ", ".join(sorted(r.message for r in self.rejections))


@dataclass(frozen=True)
class PodSetFlavors:
    """Flavor per requested resource of one pod set, and the quota it takes."""

    name: str
    count: int
    flavors: Mapping[str, str]  # resource -> flavor
    usage: Mapping[FlavorResource, int]  # requests x count (+ pods when covered)
    mode: Mode
    borrows: bool


@dataclass(frozen=True)
class FlavorAssignment:
    pod_sets: tuple[PodSetFlavors, ...]
    mode: Mode  # worst over pod sets; NO_FIT when any pod set has no flavor
    message: str  # "couldn't assign flavors to pod set <ps>: ..." or ""
    reason: str  # QuotaReserved=False reason when mode is not FIT
    # flavor-resources whose quota needs preemption (mode PREEMPT)
    needs_preemption: frozenset[FlavorResource] = frozenset()

    @property
    def usage(self) -> Usage:
        out: Usage = {}
        for ps in self.pod_sets:
            for fr, v in ps.usage.items():
                out[fr] = out.get(fr, 0) + v
        return out

    @property
    def borrows(self) -> bool:
        return any(ps.borrows for ps in self.pod_sets)


def pod_set_requests(ps: PodSetSpec, cq: ClusterQueueSpec) -> dict[str, int]:
    """Total requests of a pod set for quota: per-pod x count; ``pods`` only when the CQ covers it."""
    out = {r: v * ps.count for r, v in ps.requests.items() if v}
    if cq.covers(PODS):
        out[PODS] = out.get(PODS, 0) + ps.count
    return out


def _untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def is_tas_only(cq: ClusterQueueSpec, flavors: Mapping[str, FlavorSpec]) -> bool:
    names = cq.flavor_names()
    return bool(names) and all(n in flavors and flavors[n].topology_name for n in names)


def _requested_levels(ps: PodSetSpec) -> list[str]:
    req = ps.topology
    if req is None:
        return []
    levels = [lv for lv in (req.required, req.preferred) if lv]
    levels.extend(c.level for c in req.slice_constraints)
    return levels


def _flavor_mismatch(
    ps: PodSetSpec,
    flavor: FlavorSpec,
    group: ResourceGroup,
    group_label_keys: set[str],
    tas_only: bool,
    flavor_levels: Mapping[str, tuple[str, ...]],
) -> Rejection | None:
    """Filter step: why ``flavor`` cannot serve this pod set at all (TAS support and levels,
    taints, node labels), or None when it can."""
    explicit = ps.topology is not None and ps.topology.explicit
    if explicit:
        if not flavor.topology_name:
            if not any(r in group.covered_resources for r in ps.requests):
                return None
            return Rejection.of(FlavorRejection.NO_TAS_SUPPORT, flavor=flavor.name)
        levels = flavor_levels.get(flavor.name)
        if levels is None:
            return Rejection.of(FlavorRejection.TAS_INFO_MISSING, flavor=flavor.name)
        if any(lv not in levels for lv in _requested_levels(ps)):
            return Rejection.of(FlavorRejection.LEVEL_MISSING, flavor=flavor.name)
    elif flavor.topology_name and not tas_only:
        return Rejection.of(FlavorRejection.TAS_ONLY, flavor=flavor.name)
    taint = _untolerated(flavor.node_taints, tuple(ps.tolerations) + tuple(flavor.tolerations))
    if taint is not None:
        return Rejection.of(FlavorRejection.UNTOLERATED_TAINT, taint=taint, flavor=flavor.name)
    for key, value in ps.node_selector.items():
        if key in group_label_keys and flavor.node_labels.get(key) != value:
            return Rejection.of(FlavorRejection.NODE_AFFINITY, flavor=flavor.name)
    return None


def _preemption_possible(
    cq: ClusterQueueSpec, quota: QuotaState, fr: FlavorResource, val: int, fair_sharing: bool = False
) -> bool:
    """Kueue's precondition for trying preemption on a flavor-resource that does not fit. With
    fair sharing, ``reclaimWithinCohort`` alone allows preempting while borrowing (Kueue's
    ``canPreemptWhileBorrowing``)."""
    policy = cq.preemption
    own = policy.within_cluster_queue != NEVER and quota.used(cq.name, fr) > 0
    if val <= quota.nominal(cq.name, fr):
        if own:
            return True
        if policy.reclaim_within_cohort != NEVER and quota.has_cohort(cq.name):
            return any(
                quota.borrowing(other, fr)
                for other in quota.cluster_queues_in_tree(cq.name)
                if other != cq.name
            )
        return False
    # Over nominal: only with borrowWithinCohort (or own-CQ preemption while borrowing).
    if policy.borrow_within_cohort != NEVER and policy.reclaim_within_cohort != NEVER:
        return True
    if fair_sharing and policy.reclaim_within_cohort != NEVER:
        return True
    return own


def fits_resource_quota(
    cq: ClusterQueueSpec,
    quota: QuotaState,
    fr: FlavorResource,
    assumed: int,
    request: int,
    status: _Status,
    fair_sharing: bool = False,
) -> tuple[Mode, bool]:
    """Kueue ``fitsResourceQuota`` for one flavor-resource: (mode, borrows)."""
    flavor, res = fr
    val = assumed + request
    max_capacity = quota.potential_available(cq.name, fr)
    if val > max_capacity:
        status.reject(
            FlavorRejection.EXCEEDS_MAX_CAPACITY,
            resource=res,
            flavor=flavor,
            assumed=format_quantity(assumed, res),
            request=format_quantity(request, res),
            capacity=format_quantity(max_capacity, res),
        )
        status.reason = PendingReason.EXCEEDS_MAX_QUOTA
        return Mode.NO_FIT, False
    borrows = quota.borrowing_with(cq.name, fr, val) and quota.has_cohort(cq.name)
    available = quota.available(cq.name, fr)
    if val <= available:
        return Mode.FIT, borrows
    status.reject(
        FlavorRejection.INSUFFICIENT_UNUSED_QUOTA,
        resource=res,
        flavor=flavor,
        missing=format_quantity(val - available, res),
    )
    if _preemption_possible(cq, quota, fr, val, fair_sharing):
        return Mode.PREEMPT, borrows
    return Mode.NO_FIT, borrows


class PreemptionMode(IntEnum):
    """Kueue's preemption possibilities per flavor-resource (``SimulatePreemption``), ranked as
    its ``preemptionMode``: no candidates < preempt (a victim in the ClusterQueue) < reclaim <
    fit (no preemption needed)."""

    NO_CANDIDATES = 1
    PREEMPT_IN_QUEUE = 2
    RECLAIM = 3
    FIT = 4


# (flavor-resource, quantity) -> what preempting would find: the cycle's preemption simulation.
PreemptionOracle = Callable[[FlavorResource, int], PreemptionMode]


@dataclass(frozen=True)
class _Assigner:
    """What every step of one workload's flavor assignment looks at."""

    cq: ClusterQueueSpec
    quota: QuotaState
    flavors: Mapping[str, FlavorSpec]
    levels: Mapping[str, tuple[str, ...]]
    tas_only: bool
    oracle: PreemptionOracle | None = None
    fair_sharing: bool = False
    ignore_undeclared: bool = False  # resources.quotaCheckStrategy: IgnoreUndeclared (v0.19)


@dataclass(frozen=True)
class _FlavorChoice:
    """A flavor that can take a resource group's requests (FIT or PREEMPT)."""

    mode: Mode
    borrows: bool
    flavor: str
    needs_preemption: frozenset[FlavorResource]
    preemption: PreemptionMode = PreemptionMode.PREEMPT_IN_QUEUE  # for mode PREEMPT: what the oracle found

    @property
    def rank(self) -> PreemptionMode:
        return PreemptionMode.FIT if self.mode == Mode.FIT else self.preemption

    def better_than(self, other: _FlavorChoice | None, preference: str | None = None) -> bool:
        """Kueue's ``isPreferred``: a better mode (fit > reclaim > preempt > no candidates), then
        not borrowing (``PreemptionOverBorrowing``: not borrowing first); the first flavor on ties."""
        if other is None:
            return True
        if preference == PREEMPTION_OVER_BORROWING:
            return (not self.borrows, self.rank) > (not other.borrows, other.rank)
        return (self.rank, not self.borrows) > (other.rank, not other.borrows)


def _resources_by_group(
    requests: Mapping[str, int], cq: ClusterQueueSpec, status: _Status, ignore_undeclared: bool = False
) -> list[tuple[ResourceGroup, list[str]]] | None:
    """The requested resources grouped by the CQ's resource group covering them (groups in
    the order their first resource sorts), or None when some resource is in no group.
    ``ignore_undeclared`` (Kueue v0.19's ``IgnoreUndeclared``): such a resource is left out of
    the quota check, and of the usage, instead."""
    groups: list[tuple[ResourceGroup, list[str]]] = []
    for res in sorted(requests):
        group = next((g for g in cq.resource_groups if res in g.covered_resources), None)
        if group is None and ignore_undeclared:
            continue
        if group is None:
            status.reject(FlavorRejection.RESOURCE_NOT_COVERED, resource=res)
            status.reason = PendingReason.NO_MATCHING_FLAVOR
            return None
        for existing, names in groups:
            if existing is group:
                names.append(res)
                break
        else:
            groups.append((group, [res]))
    return groups


def _try_flavor(
    ctx: _Assigner,
    flavor: str,
    resources: Sequence[str],
    requests: Mapping[str, int],
    assumed: Usage,
    status: _Status,
) -> _FlavorChoice | None:
    """Quota step for one flavor: the worst mode over the group's resources, or None (NO_FIT)."""
    mode, borrows, needs, preemption = Mode.FIT, False, set(), PreemptionMode.RECLAIM
    for res in resources:
        fr = (flavor, res)
        res_mode, res_borrows = fits_resource_quota(
            ctx.cq, ctx.quota, fr, assumed.get(fr, 0), requests[res], status, ctx.fair_sharing
        )
        if res_mode == Mode.PREEMPT:
            needs.add(fr)
            found = (ctx.oracle(fr, assumed.get(fr, 0) + requests[res]) if ctx.oracle
                     else PreemptionMode.PREEMPT_IN_QUEUE)
            preemption = min(preemption, found)
        mode = min(mode, res_mode)
        borrows = borrows or res_borrows
    if mode == Mode.NO_FIT:
        return None
    found_preemption = preemption if mode == Mode.PREEMPT else PreemptionMode.PREEMPT_IN_QUEUE
    return _FlavorChoice(mode, borrows, flavor, frozenset(needs), found_preemption)


def _stop_search(choice: _FlavorChoice, fungibility: FlavorFungibility) -> bool:
    """Kueue's flavor fungibility (``shouldTryNextFlavor`` negated): take ``choice`` without
    trying later flavors unless it needs preemption under ``whenCanPreempt: TryNextFlavor``,
    or borrows under ``whenCanBorrow: TryNextFlavor`` (either one sends the search on), or
    the preemption it needs has no candidates."""
    if choice.mode == Mode.PREEMPT and (fungibility.when_can_preempt == TRY_NEXT_FLAVOR
                                        or choice.preemption == PreemptionMode.NO_CANDIDATES):
        return False
    return not (choice.borrows and fungibility.when_can_borrow == TRY_NEXT_FLAVOR)


def _choose_flavor(
    ctx: _Assigner,
    ps: PodSetSpec,
    group: ResourceGroup,
    resources: Sequence[str],
    requests: Mapping[str, int],
    assumed: Usage,
    status: _Status,
) -> _FlavorChoice | None:
    """The flavor of ``group`` for this pod set's ``resources`` (flavors tried in order)."""
    label_keys = {k for f in group.flavors if f.name in ctx.flavors for k in ctx.flavors[f.name].node_labels}
    best: _FlavorChoice | None = None
    for fq in group.flavors:
        spec = ctx.flavors.get(fq.name)
        if spec is None:
            status.reject(FlavorRejection.FLAVOR_NOT_FOUND, flavor=fq.name)
            continue
        mismatch = _flavor_mismatch(ps, spec, group, label_keys, ctx.tas_only, ctx.levels)
        if mismatch is not None:
            status.rejections.append(mismatch)
            continue
        choice = _try_flavor(ctx, fq.name, resources, requests, assumed, status)
        if choice is None:
            continue
        if choice.better_than(best, ctx.cq.flavor_fungibility.preference):
            best = choice
        if _stop_search(choice, ctx.cq.flavor_fungibility):
            break
    if best is None and status.reason == PendingReason.WAITING_FOR_QUOTA and not status.rejected_for_quota():
        status.reason = PendingReason.NO_MATCHING_FLAVOR
    return best


@dataclass
class _PodSetOutcome:
    flavors: PodSetFlavors
    status: _Status
    needs_preemption: set[FlavorResource]


def _assign_pod_set(ctx: _Assigner, ps: PodSetSpec, assumed: Usage) -> _PodSetOutcome:
    """One pod set: a flavor per resource group, stopping at the first group with none. The
    usage and preemption needs of the groups before a failing one are kept (as Kueue does)."""
    requests = pod_set_requests(ps, ctx.cq)
    status = _Status()
    chosen: dict[str, str] = {}
    usage: Usage = {}
    mode, borrows = Mode.FIT, False
    needs: set[FlavorResource] = set()
    groups = _resources_by_group(requests, ctx.cq, status, ctx.ignore_undeclared)
    for group, resources in groups or ():
        best = _choose_flavor(ctx, ps, group, resources, requests, assumed, status)
        if best is None:
            mode = Mode.NO_FIT
            break
        mode = min(mode, best.mode)
        borrows = borrows or best.borrows
        needs.update(best.needs_preemption)
        for res in resources:
            chosen[res] = best.flavor
            fr = (best.flavor, res)
            usage[fr] = usage.get(fr, 0) + requests[res]
    if groups is None:
        mode = Mode.NO_FIT
    return _PodSetOutcome(PodSetFlavors(ps.name, ps.count, chosen, usage, mode, borrows), status, needs)


def assign_flavors(
    workload: WorkloadSpec,
    cq: ClusterQueueSpec,
    quota: QuotaState,
    flavors: Mapping[str, FlavorSpec],
    flavor_levels: Mapping[str, tuple[str, ...]] | None = None,
    oracle: PreemptionOracle | None = None,
    fair_sharing: bool = False,
    ignore_undeclared: bool = False,
    group_tas_flavors: bool = False,
) -> FlavorAssignment:
    """Choose a flavor per pod set and resource group (Kueue's flavor assigner). Later pod
    sets see the quota the earlier ones take (``assumed``). ``ignore_undeclared``:
    ``KueueConfig.ignore_undeclared_resources``. ``group_tas_flavors`` (Kueue v0.19.1, #13859):
    :func:`with_group_tas_flavors`."""
    ctx = _Assigner(cq, quota, flavors, flavor_levels or {}, is_tas_only(cq, flavors), oracle, fair_sharing,
                    ignore_undeclared)
    assumed: Usage = {}
    results: list[PodSetFlavors] = []
    messages: list[str] = []
    reason: PendingReason | None = None
    needs: set[FlavorResource] = set()
    for ps in workload.pod_sets:
        outcome = _assign_pod_set(ctx, ps, assumed)
        needs.update(outcome.needs_preemption)
        for fr, v in outcome.flavors.usage.items():
            assumed[fr] = assumed.get(fr, 0) + v
        if outcome.flavors.mode != Mode.FIT:
            messages.append(flavors_message(ps.name, outcome.status.message()))
            if reason is None:
                reason = outcome.status.reason
        results.append(outcome.flavors)
    if group_tas_flavors:
        results = with_group_tas_flavors(workload.pod_sets, results, cq, flavors)
    mode = min((p.mode for p in results), default=Mode.NO_FIT)
    return FlavorAssignment(
        tuple(results),
        mode,
        "; ".join(messages),
        reason.value if reason is not None and mode != Mode.FIT else "",
        frozenset(needs),
    )


def with_group_tas_flavors(pod_sets: Sequence[PodSetSpec], results: list[PodSetFlavors], cq: ClusterQueueSpec,
                           flavors: Mapping[str, FlavorSpec]) -> list[PodSetFlavors]:
    """Kueue v0.19.1's ``resolvePodSetFlavors`` (#13859): a pod set of a PodSet group that
    requests nothing (an LWS leader) takes its group's TAS flavors, so it is placed with the
    group; before, it had no flavor (Kueue v0.17.0: "no TAS flavor assigned")."""
    tas = {n for n in cq.flavor_names() if n in flavors and flavors[n].topology_name}
    by_group: dict[str, dict[str, str]] = {}
    for ps, psf in zip(pod_sets, results, strict=True):
        group = ps.topology.group_name if ps.topology else None
        if group:
            by_group.setdefault(group, {}).update({r: f for r, f in psf.flavors.items() if f in tas})
    out = []
    for ps, psf in zip(pod_sets, results, strict=True):
        group = ps.topology.group_name if ps.topology else None
        inherited = by_group.get(group, {}) if group and not ps.requests and not psf.flavors else {}
        # Kueue writes the inherited resources' usage as 0 (the pod set requests none of them)
        out.append(replace(psf, flavors=dict(inherited), usage={(f, r): 0 for r, f in inherited.items()})
                   if inherited else psf)
    return out
