"""ClusterQueue / Cohort quota: resource groups, flavors, borrowing and lending, usage.

Kueue's model (``pkg/cache/scheduler/resource_node.go``), restated:

* Every ClusterQueue and every Cohort is a *node* with its own quotas per
  (flavor, resource): ``nominalQuota``, optional ``borrowingLimit`` (None = unlimited),
  optional ``lendingLimit`` (None = lend everything).
* ``subtree_quota(node)`` = own nominal + what the children lend to it (a child lends
  ``subtree - local``, where ``local = max(0, subtree - lendingLimit)`` is kept back).
* Usage of a ClusterQueue counts against its local (un-lendable) quota first; the rest is
  "stored in" the parent, recursively (``add_usage`` bubbles up).
* ``available(cq)`` = local free + what the parent can still give, capped by the
  borrowing limit; ``potential_available(cq)`` is the same with no usage at all.

A CQ whose ``cohort`` names no Cohort object gets an implicit, quota-less root cohort, and so
does a Cohort whose ``parent`` does not exist (Kueue does both). A parent cycle is broken at
the node that closes it and reported in :attr:`QuotaState.cycles`.

:func:`assign_flavors` is Kueue's flavor assigner for one workload: flavors tried in order per
resource group, node-label / taint / TAS compatibility, the fit rule with borrowing, flavor
fungibility, and Kueue's messages. Its steps, per pod set: group the requested resources by
resource group (:func:`_resources_by_group`), then per group try each flavor
(:func:`_flavor_mismatch`, then :func:`_try_flavor` with :func:`fits_resource_quota`) until
flavor fungibility stops the search (:func:`_stop_search`). Every passed-over flavor leaves a
:class:`~scheduler.core.reasons.Rejection` (a code and Kueue's message).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.nodes import Taint, Toleration
from scheduler.core.reasons import QUOTA_REJECTIONS, FlavorRejection, PendingReason, Rejection, flavors_message
from scheduler.core.resources import PODS, format_quantity
from scheduler.core.selectors import EVERYTHING, LabelSelector
from scheduler.core.workload import PodSetSpec, WorkloadSpec

FlavorResource = tuple[str, str]  # (flavor, resource)

# Policy enums (Kueue spellings).
NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
ANY = "Any"
STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"
MAY_STOP_SEARCH = "MayStopSearch"
TRY_NEXT_FLAVOR = "TryNextFlavor"
STOP_NONE = "None"
STOP_HOLD = "Hold"
STOP_HOLD_AND_DRAIN = "HoldAndDrain"

# Flavor assignment modes, worst first (Kueue: NoFit < Preempt < Fit).
NO_FIT = 0
PREEMPT = 1
FIT = 2

@dataclass(frozen=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    name: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]  # in the order they are tried


@dataclass(frozen=True)
class PreemptionPolicy:
    within_cluster_queue: str = NEVER  # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = NEVER  # Never | LowerPriority | Any
    borrow_within_cohort: str = NEVER  # Never | LowerPriority
    max_priority_threshold: int | None = None


PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"


@dataclass(frozen=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None  # None = BorrowingOverPreemption (Kueue v0.17 ``isPreferred``)


@dataclass(frozen=True)
class ClusterQueueSpec:
    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None
    queueing_strategy: str = BEST_EFFORT_FIFO
    namespace_selector: LabelSelector = EVERYTHING  # NOTHING for a null selector
    preemption: PreemptionPolicy = PreemptionPolicy()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    stop_policy: str = STOP_NONE
    # Being deleted (deletionTimestamp set): admits nothing new; Kueue's resource-in-use
    # finalizer keeps the object until its admitted workloads are gone.
    terminating: bool = False
    # ``spec.fairSharing.weight`` (Kueue default 1; 0 = always at a disadvantage).
    fair_weight: float = 1.0
    # ``spec.admissionScope.admissionMode`` (Admission Fair Sharing, core/afs.py); "" = absent.
    admission_mode: str = ""

    def flavor_names(self) -> list[str]:
        return [f.name for g in self.resource_groups for f in g.flavors]

    def covers(self, resource: str) -> bool:
        return any(resource in g.covered_resources for g in self.resource_groups)


@dataclass(frozen=True)
class CohortSpec:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: float = 1.0  # ``spec.fairSharing.weight``


@dataclass(frozen=True)
class FlavorSpec:
    """A ResourceFlavor: node labels/taints/tolerations and (TAS) the topology name."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None


Usage = dict[FlavorResource, int]

_CQ = "cq:"
_CO = "cohort:"


def cq_node(name: str) -> str:
    """The :class:`QuotaState` node of ClusterQueue ``name``."""
    return _CQ + name


def cohort_node(name: str) -> str:
    """The :class:`QuotaState` node of Cohort ``name``."""
    return _CO + name


class QuotaState:
    """Quotas and usage of every ClusterQueue and Cohort (mutable; :meth:`clone` for what-ifs)."""

    def __init__(
        self, cluster_queues: Iterable[ClusterQueueSpec], cohorts: Iterable[CohortSpec] = ()
    ) -> None:
        self.quotas: dict[str, dict[FlavorResource, ResourceQuota]] = {}
        self.parent: dict[str, str | None] = {}
        self.children: dict[str, list[str]] = {}
        self.cycles: set[str] = set()
        self.usage: dict[str, Usage] = {}
        self.subtree: dict[str, dict[FlavorResource, int]] = {}
        declared = {c.name: c for c in cohorts}
        for co in declared.values():
            self._add_node(_CO + co.name, co.resource_groups)
        for co in declared.values():
            if co.parent:
                self._ensure_cohort(co.parent)
                self.parent[_CO + co.name] = _CO + co.parent
        for cq in cluster_queues:
            node = _CQ + cq.name
            self._add_node(node, cq.resource_groups)
            if cq.cohort:
                self._ensure_cohort(cq.cohort)
                self.parent[node] = _CO + cq.cohort
        self._break_cycles()
        for node, par in self.parent.items():
            if par is not None:
                self.children.setdefault(par, []).append(node)
        for kids in self.children.values():
            kids.sort()
        for root in sorted(n for n, p in self.parent.items() if p is None):
            self._compute_subtree(root)

    # ------------------------------------------------------------------ building
    def _add_node(self, node: str, groups: Sequence[ResourceGroup]) -> None:
        quotas: dict[FlavorResource, ResourceQuota] = {}
        for group in groups:
            for flavor in group.flavors:
                for res, quota in flavor.resources.items():
                    quotas[(flavor.name, res)] = quota
        self.quotas[node] = quotas
        self.parent.setdefault(node, None)
        self.usage[node] = {}

    def _ensure_cohort(self, name: str) -> None:
        if _CO + name not in self.quotas:
            self._add_node(_CO + name, ())

    def _break_cycles(self) -> None:
        for start in sorted(self.parent):
            seen: list[str] = []
            node: str | None = start
            while node is not None and node not in seen:
                seen.append(node)
                node = self.parent[node]
            if node is not None:  # ``node`` closes a cycle: cut its parent link
                self.cycles.update(seen[seen.index(node) :])
                self.parent[node] = None

    def _compute_subtree(self, node: str) -> None:
        sub = {fr: q.nominal for fr, q in self.quotas[node].items()}
        for child in self.children.get(node, ()):
            self._compute_subtree(child)
            for fr, amount in self.subtree[child].items():
                sub[fr] = sub.get(fr, 0) + amount - self._local(child, fr)
        self.subtree[node] = sub

    def clone(self) -> QuotaState:
        other = QuotaState.__new__(QuotaState)
        other.__dict__.update(self.__dict__)
        other.usage = {n: dict(u) for n, u in self.usage.items()}
        return other

    # ------------------------------------------------------------------ queries
    def _local(self, node: str, fr: FlavorResource) -> int:
        quota = self.quotas[node].get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree[node].get(fr, 0) - quota.lending_limit)

    def _local_available(self, node: str, fr: FlavorResource) -> int:
        return max(0, self._local(node, fr) - self.usage[node].get(fr, 0))

    def _available(self, node: str, fr: FlavorResource) -> int:
        par = self.parent[node]
        if par is None:
            return self.subtree[node].get(fr, 0) - self.usage[node].get(fr, 0)
        parent_available = self._available(par, fr)
        quota = self.quotas[node].get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            local = self._local(node, fr)
            stored_in_parent = self.subtree[node].get(fr, 0) - local
            used_in_parent = max(0, self.usage[node].get(fr, 0) - local)
            parent_available = min(
                parent_available, stored_in_parent - used_in_parent + quota.borrowing_limit
            )
        return self._local_available(node, fr) + parent_available

    def _potential(self, node: str, fr: FlavorResource) -> int:
        par = self.parent[node]
        if par is None:
            return self.subtree[node].get(fr, 0)
        avail = self._local(node, fr) + self._potential(par, fr)
        quota = self.quotas[node].get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            avail = min(avail, self.subtree[node].get(fr, 0) + quota.borrowing_limit)
        return avail

    def potential_of(self, node: str, fr: FlavorResource) -> int:
        """:meth:`potential_available` of any node (``cq_node`` / ``cohort_node``)."""
        return self._potential(node, fr)

    def available(self, cq: str, fr: FlavorResource) -> int:
        """Quota the CQ can still use in ``fr`` (own unused nominal + borrowable)."""
        return self._available(_CQ + cq, fr)

    def potential_available(self, cq: str, fr: FlavorResource) -> int:
        """Maximum the CQ could ever use in ``fr`` (no usage anywhere), borrowing limits applied."""
        return self._potential(_CQ + cq, fr)

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        quota = self.quotas[_CQ + cq].get(fr)
        return quota.nominal if quota else 0

    def quota(self, cq: str, fr: FlavorResource) -> ResourceQuota | None:
        return self.quotas[_CQ + cq].get(fr)

    def used(self, cq: str, fr: FlavorResource) -> int:
        return self.usage[_CQ + cq].get(fr, 0)

    def under_cycle(self, cq: str) -> bool:
        """The ClusterQueue's cohort chain runs into a parent cycle (Kueue's
        ``HasCycle(cq.Parent())``): Kueue's scheduler never admits into it."""
        node: str | None = _CQ + cq
        while node is not None:
            if node in self.cycles:
                return True
            node = self.parent.get(node)
        return False

    def has_cohort(self, cq: str) -> bool:
        return self.parent.get(_CQ + cq) is not None

    def borrowing(self, cq: str, fr: FlavorResource) -> bool:
        """The CQ uses more than its own nominal quota in ``fr`` (Kueue ``Borrowing``)."""
        node = _CQ + cq
        return self.parent[node] is not None and self.usage[node].get(fr, 0) > self.subtree[node].get(fr, 0)

    def borrowing_with(self, cq: str, fr: FlavorResource, extra: int) -> bool:
        node = _CQ + cq
        return self.usage[node].get(fr, 0) + extra > self.subtree[node].get(fr, 0)

    def root_of(self, cq: str) -> str:
        node = _CQ + cq
        while (par := self.parent[node]) is not None:
            node = par
        return node

    def cluster_queues_in_tree(self, cq: str) -> list[str]:
        """Every ClusterQueue under the same root cohort as ``cq`` (sorted, ``cq`` included)."""
        root = self.root_of(cq)
        out: list[str] = []
        stack = [root]
        while stack:
            node = stack.pop()
            if node.startswith(_CQ):
                out.append(node[len(_CQ) :])
            stack.extend(self.children.get(node, ()))
        return sorted(out)

    def cohort_name(self, cq: str) -> str | None:
        par = self.parent.get(_CQ + cq)
        return par[len(_CO) :] if par else None

    def path(self, cq: str) -> str:
        """Kueue's preemptor/preemptee path: ``/<root cohort>/.../<cq>``."""
        parts: list[str] = []
        node: str | None = _CQ + cq
        while node is not None:
            parts.append(node.split(":", 1)[1])
            node = self.parent[node]
        return "/" + "/".join(reversed(parts))

    # ------------------------------------------------------------------ usage
    def _add(self, node: str, fr: FlavorResource, value: int) -> None:
        local_available = self._local_available(node, fr)
        self.usage[node][fr] = self.usage[node].get(fr, 0) + value
        par = self.parent[node]
        if par is not None and value > local_available:
            self._add(par, fr, value - local_available)

    def _remove(self, node: str, fr: FlavorResource, value: int) -> None:
        stored_in_parent = self.usage[node].get(fr, 0) - self._local(node, fr)
        self.usage[node][fr] = self.usage[node].get(fr, 0) - value
        par = self.parent[node]
        if stored_in_parent <= 0 or par is None:
            return
        self._remove(par, fr, min(value, stored_in_parent))

    def add_usage(self, cq: str, usage: Mapping[FlavorResource, int]) -> None:
        for fr, value in sorted(usage.items()):
            if value:
                self._add(_CQ + cq, fr, value)

    def remove_usage(self, cq: str, usage: Mapping[FlavorResource, int]) -> None:
        for fr, value in sorted(usage.items()):
            if value:
                self._remove(_CQ + cq, fr, value)

    def fits(self, cq: str, usage: Mapping[FlavorResource, int], allow_borrowing: bool = True) -> bool:
        """Kueue ``workloadFits``: every flavor-resource within ``available`` and, without
        borrowing, within the CQ's own nominal quota."""
        for fr, value in usage.items():
            if value <= 0:
                continue
            if not allow_borrowing and self.borrowing_with(cq, fr, value):
                return False
            if value > self.available(cq, fr):
                return False
        return True


# ---------------------------------------------------------------------- flavor assignment


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
    mode: int
    borrows: bool


@dataclass(frozen=True)
class FlavorAssignment:
    pod_sets: tuple[PodSetFlavors, ...]
    mode: int  # worst over pod sets; NO_FIT when any pod set has no flavor
    message: str  # "couldn't assign flavors to pod set <ps>: ..." or ""
    reason: str  # QuotaReserved=False reason when mode != FIT
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
) -> tuple[int, bool]:
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
        return NO_FIT, False
    borrows = quota.borrowing_with(cq.name, fr, val) and quota.has_cohort(cq.name)
    available = quota.available(cq.name, fr)
    if val <= available:
        return FIT, borrows
    status.reject(
        FlavorRejection.INSUFFICIENT_UNUSED_QUOTA,
        resource=res,
        flavor=flavor,
        missing=format_quantity(val - available, res),
    )
    if _preemption_possible(cq, quota, fr, val, fair_sharing):
        return PREEMPT, borrows
    return NO_FIT, borrows


# Kueue's preemption possibilities per flavor-resource (``SimulatePreemption``), ranked as its
# ``preemptionMode``: no candidates < preempt (a victim in the ClusterQueue) < reclaim.
NO_CANDIDATES = 1
PREEMPT_IN_QUEUE = 2
RECLAIM = 3
_FIT_RANK = 4
# (flavor-resource, quantity) -> one of the ranks above: the cycle's preemption simulation.
PreemptionOracle = Callable[[FlavorResource, int], int]


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


@dataclass(frozen=True)
class _FlavorChoice:
    """A flavor that can take a resource group's requests (FIT or PREEMPT)."""

    mode: int
    borrows: bool
    flavor: str
    needs_preemption: frozenset[FlavorResource]
    preemption: int = PREEMPT_IN_QUEUE  # for mode PREEMPT: what the oracle found

    @property
    def rank(self) -> int:
        return _FIT_RANK if self.mode == FIT else self.preemption

    def better_than(self, other: _FlavorChoice | None, preference: str | None = None) -> bool:
        """Kueue's ``isPreferred``: a better mode (fit > reclaim > preempt > no candidates), then
        not borrowing (``PreemptionOverBorrowing``: not borrowing first); the first flavor on ties."""
        if other is None:
            return True
        if preference == PREEMPTION_OVER_BORROWING:
            return (not self.borrows, self.rank) > (not other.borrows, other.rank)
        return (self.rank, not self.borrows) > (other.rank, not other.borrows)


def _resources_by_group(
    requests: Mapping[str, int], cq: ClusterQueueSpec, status: _Status
) -> list[tuple[ResourceGroup, list[str]]] | None:
    """The requested resources grouped by the CQ's resource group covering them (groups in
    the order their first resource sorts), or None when some resource is in no group."""
    groups: list[tuple[ResourceGroup, list[str]]] = []
    for res in sorted(requests):
        group = next((g for g in cq.resource_groups if res in g.covered_resources), None)
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
    mode, borrows, needs, preemption = FIT, False, set(), RECLAIM
    for res in resources:
        fr = (flavor, res)
        res_mode, res_borrows = fits_resource_quota(
            ctx.cq, ctx.quota, fr, assumed.get(fr, 0), requests[res], status, ctx.fair_sharing
        )
        if res_mode == PREEMPT:
            needs.add(fr)
            found = ctx.oracle(fr, assumed.get(fr, 0) + requests[res]) if ctx.oracle else PREEMPT_IN_QUEUE
            preemption = min(preemption, found)
        mode = min(mode, res_mode)
        borrows = borrows or res_borrows
    if mode == NO_FIT:
        return None
    return _FlavorChoice(mode, borrows, flavor, frozenset(needs), preemption if mode == PREEMPT else PREEMPT_IN_QUEUE)


def _stop_search(choice: _FlavorChoice, fungibility: FlavorFungibility) -> bool:
    """Kueue's flavor fungibility (``shouldTryNextFlavor`` negated): take ``choice`` without
    trying later flavors unless it needs preemption under ``whenCanPreempt: TryNextFlavor``,
    or borrows under ``whenCanBorrow: TryNextFlavor`` (either one sends the search on), or
    the preemption it needs has no candidates."""
    if choice.mode == PREEMPT and (fungibility.when_can_preempt == TRY_NEXT_FLAVOR
                                   or choice.preemption == NO_CANDIDATES):
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
    mode, borrows = FIT, False
    needs: set[FlavorResource] = set()
    groups = _resources_by_group(requests, ctx.cq, status)
    for group, resources in groups or ():
        best = _choose_flavor(ctx, ps, group, resources, requests, assumed, status)
        if best is None:
            mode = NO_FIT
            break
        mode = min(mode, best.mode)
        borrows = borrows or best.borrows
        needs.update(best.needs_preemption)
        for res in resources:
            chosen[res] = best.flavor
            fr = (best.flavor, res)
            usage[fr] = usage.get(fr, 0) + requests[res]
    if groups is None:
        mode = NO_FIT
    return _PodSetOutcome(PodSetFlavors(ps.name, ps.count, chosen, usage, mode, borrows), status, needs)


def assign_flavors(
    workload: WorkloadSpec,
    cq: ClusterQueueSpec,
    quota: QuotaState,
    flavors: Mapping[str, FlavorSpec],
    flavor_levels: Mapping[str, tuple[str, ...]] | None = None,
    oracle: PreemptionOracle | None = None,
    fair_sharing: bool = False,
) -> FlavorAssignment:
    """Choose a flavor per pod set and resource group (Kueue's flavor assigner). Later pod
    sets see the quota the earlier ones take (``assumed``)."""
    ctx = _Assigner(cq, quota, flavors, flavor_levels or {}, is_tas_only(cq, flavors), oracle, fair_sharing)
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
        if outcome.flavors.mode != FIT:
            messages.append(flavors_message(ps.name, outcome.status.message()))
            if reason is None:
                reason = outcome.status.reason
        results.append(outcome.flavors)
    mode = min((p.mode for p in results), default=NO_FIT)
    return FlavorAssignment(
        tuple(results),
        mode,
        "; ".join(messages),
        reason.value if reason is not None and mode != FIT else "",
        frozenset(needs),
    )
