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

Flavor assignment (Kueue's flavor assigner) is ``core/kueue/flavorassigner.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.nodes import Taint, Toleration
from scheduler.core.selectors import EVERYTHING, LabelSelector

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
    # ``spec.admissionScope.admissionMode`` (Admission Fair Sharing, core/kueue/afs.py); "" = absent.
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
