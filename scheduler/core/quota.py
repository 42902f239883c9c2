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
fungibility, and Kueue's messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.nodes import Taint, Toleration
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

# QuotaReserved=False reasons (Kueue v0.19 UnadmittedWorkloadsObservability).
REASON_WAITING_FOR_QUOTA = "WaitingForQuota"
REASON_EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
REASON_NO_MATCHING_FLAVOR = "NoMatchingFlavor"


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


@dataclass(frozen=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR


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

    def flavor_names(self) -> list[str]:
        return [f.name for g in self.resource_groups for f in g.flavors]

    def covers(self, resource: str) -> bool:
        return any(resource in g.covered_resources for g in self.resource_groups)


@dataclass(frozen=True)
class CohortSpec:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()


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
    reasons: list[str] = field(default_factory=list)
    reason: str = REASON_WAITING_FOR_QUOTA

    def message(self) -> str:
        return ", ".join(sorted(self.reasons))


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
) -> str | None:
    explicit = ps.topology is not None and ps.topology.explicit
    if explicit:
        if not flavor.topology_name:
            if not any(r in group.covered_resources for r in ps.requests):
                return None
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        levels = flavor_levels.get(flavor.name)
        if levels is None:
            return f'Flavor "{flavor.name}" information missing in TAS cache'
        if any(lv not in levels for lv in _requested_levels(ps)):
            return f'Flavor "{flavor.name}" does not contain the requested level'
    elif flavor.topology_name and not tas_only:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    taint = _untolerated(flavor.node_taints, tuple(ps.tolerations) + tuple(flavor.tolerations))
    if taint is not None:
        return f"untolerated taint {taint} in flavor {flavor.name}"
    for key, value in ps.node_selector.items():
        if key in group_label_keys and flavor.node_labels.get(key) != value:
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


def _preemption_possible(cq: ClusterQueueSpec, quota: QuotaState, fr: FlavorResource, val: int) -> bool:
    """Kueue's precondition for trying preemption on a flavor-resource that does not fit."""
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
    return own


def fits_resource_quota(
    cq: ClusterQueueSpec, quota: QuotaState, fr: FlavorResource, assumed: int, request: int, status: _Status
) -> tuple[int, bool]:
    """Kueue ``fitsResourceQuota`` for one flavor-resource: (mode, borrows)."""
    flavor, res = fr
    val = assumed + request
    max_capacity = quota.potential_available(cq.name, fr)
    if val > max_capacity:
        status.reasons.append(
            f"insufficient quota for {res} in flavor {flavor}, previously considered podsets requests "
            f"({format_quantity(assumed, res)}) + current podset request ({format_quantity(request, res)}) "
            f"> maximum capacity ({format_quantity(max_capacity, res)})"
        )
        status.reason = REASON_EXCEEDS_MAX_QUOTA
        return NO_FIT, False
    borrows = quota.borrowing_with(cq.name, fr, val) and quota.has_cohort(cq.name)
    available = quota.available(cq.name, fr)
    if val <= available:
        return FIT, borrows
    # Kueue v0.17's text, also when the borrowing limit is what blocks (Kueue <= v0.9, which
    # HyperPod's older docs show, said "borrowing limit for <res> in flavor <f> exceeded").
    status.reasons.append(
        f"insufficient unused quota for {res} in flavor {flavor}, "
        f"{format_quantity(val - available, res)} more needed"
    )
    if _preemption_possible(cq, quota, fr, val):
        return PREEMPT, borrows
    return NO_FIT, borrows


def assign_flavors(
    workload: WorkloadSpec,
    cq: ClusterQueueSpec,
    quota: QuotaState,
    flavors: Mapping[str, FlavorSpec],
    flavor_levels: Mapping[str, tuple[str, ...]] | None = None,
) -> FlavorAssignment:
    """Choose a flavor per pod set and resource group (Kueue's flavor assigner)."""
    levels = flavor_levels or {}
    tas_only = is_tas_only(cq, flavors)
    assumed: Usage = {}
    results: list[PodSetFlavors] = []
    messages: list[str] = []
    reason = ""
    needs: set[FlavorResource] = set()
    for ps in workload.pod_sets:
        requests = pod_set_requests(ps, cq)
        status = _Status()
        chosen: dict[str, str] = {}
        ps_usage: Usage = {}
        ps_mode = FIT
        ps_borrows = False
        groups_needed: list[tuple[ResourceGroup, list[str]]] = []
        for res in sorted(requests):
            group = next((g for g in cq.resource_groups if res in g.covered_resources), None)
            if group is None:
                status.reasons.append(f"resource {res} unavailable in ClusterQueue")
                status.reason = REASON_NO_MATCHING_FLAVOR
                ps_mode = NO_FIT
                break
            for existing, names in groups_needed:
                if existing is group:
                    names.append(res)
                    break
            else:
                groups_needed.append((group, [res]))
        if ps_mode != NO_FIT:
            for group, resources in groups_needed:
                label_keys = {
                    k for f in group.flavors if f.name in flavors for k in flavors[f.name].node_labels
                }
                best: tuple[int, bool, str, set[FlavorResource]] | None = None
                for fq in group.flavors:
                    spec = flavors.get(fq.name)
                    if spec is None:
                        status.reasons.append(f"flavor {fq.name} not found")
                        continue
                    mismatch = _flavor_mismatch(ps, spec, group, label_keys, tas_only, levels)
                    if mismatch is not None:
                        status.reasons.append(mismatch)
                        continue
                    f_mode, f_borrow, f_needs = FIT, False, set()
                    for res in resources:
                        fr = (fq.name, res)
                        mode, borrow = fits_resource_quota(
                            cq, quota, fr, assumed.get(fr, 0), requests[res], status
                        )
                        if mode == PREEMPT:
                            f_needs.add(fr)
                        f_mode = min(f_mode, mode)
                        f_borrow = f_borrow or borrow
                    if f_mode == NO_FIT:
                        continue
                    if best is None or (f_mode, not f_borrow) > (best[0], not best[1]):
                        best = (f_mode, f_borrow, fq.name, f_needs)
                    if f_mode == FIT and (
                        not f_borrow or cq.flavor_fungibility.when_can_borrow == MAY_STOP_SEARCH
                    ):
                        break
                    if f_mode == PREEMPT and cq.flavor_fungibility.when_can_preempt == MAY_STOP_SEARCH:
                        break
                if best is None:
                    ps_mode = NO_FIT
                    if status.reason == REASON_WAITING_FOR_QUOTA and not any(
                        "quota" in r or "borrowing limit" in r for r in status.reasons
                    ):
                        status.reason = REASON_NO_MATCHING_FLAVOR
                    break
                ps_mode = min(ps_mode, best[0])
                ps_borrows = ps_borrows or best[1]
                needs.update(best[3])
                for res in resources:
                    chosen[res] = best[2]
                    fr = (best[2], res)
                    ps_usage[fr] = ps_usage.get(fr, 0) + requests[res]
        for fr, v in ps_usage.items():
            assumed[fr] = assumed.get(fr, 0) + v
        if ps_mode != FIT:
            messages.append(f"couldn't assign flavors to pod set {ps.name}: {status.message()}")
            if not reason:
                reason = status.reason
        results.append(PodSetFlavors(ps.name, ps.count, chosen, ps_usage, ps_mode, ps_borrows))
    mode = min((p.mode for p in results), default=NO_FIT)
    return FlavorAssignment(
        tuple(results), mode, "; ".join(messages), reason if mode != FIT else "", frozenset(needs)
    )
