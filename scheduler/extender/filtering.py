"""The filter step, kube-scheduler Filter style: which of the offered nodes a pod may take, and
for the others why not (a :class:`NodeStatus` with our reason). Pure: it reads the cache and the
occupancy as the slot book hands them over under its lock, and writes nothing.

One check decides (:meth:`FilterRun.passing`): a node passes when it is known, its assignment
domain has a free slot this pod may take (:attr:`FilterRun.free`: the rank's domain, if the pod
has one) and it is healthy. :meth:`FilterRun.verdict` only explains a node that does not pass,
in kube-scheduler's order: the first check that fails decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.core.health import Health
from scheduler.core.nodes import NodeInfo
from scheduler.extender.cache import ExtenderCache
from scheduler.extender.occupancy import Occupancy, used_slots
from scheduler.extender.workload_view import Assignment, Domain, Group, PodRef


class NodeStatus(StrEnum):
    """Why a node passes or not (kube-scheduler's Filter status, with our reason); the message
    kube-scheduler shows is rendered next to it in :class:`NodeVerdict`."""

    PASSES = "Passes"
    NOT_CACHED = "NotCached"  # failed: retried once the informer has the node
    NOT_ASSIGNED = "NotAssigned"  # unresolvable: the node is outside the topology assignment
    UNHEALTHY = "Unhealthy"  # unresolvable
    SLOTS_TAKEN = "SlotsTaken"  # failed: a slot frees when a sibling pod goes
    RANK_ELSEWHERE = "RankElsewhere"  # failed: the pod's rank belongs to another assigned domain


UNRESOLVABLE = frozenset({NodeStatus.NOT_ASSIGNED, NodeStatus.UNHEALTHY})


@dataclass(frozen=True)
class NodeVerdict:
    status: NodeStatus
    message: str = ""


PASSES = NodeVerdict(NodeStatus.PASSES)
NOT_CACHED = NodeVerdict(NodeStatus.NOT_CACHED, "node not yet in the toposched extender's cache")


@dataclass
class FilterOutcome:
    passed: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""
    ours: bool = False  # False: pass-through (not a toposched workload pod)
    statuses: dict[str, NodeStatus] = field(default_factory=dict)  # failed or unresolvable node -> why


def rank_domain(pod: PodRef, assignment: Assignment, used: Mapping[Domain, int]) -> tuple[Domain | None, int | None]:
    """Kueue's rank-based ordering: the domain a ranked pod belongs in, so neighbouring ranks
    (NCCL ring and tree neighbours) share the lowest domains. None (any assigned slot) when the
    pod has no usable rank, or its domain has no free slot left because pods already there do
    not follow the rank order (e.g. after a node was replaced): then, like Kueue, fill the free
    slots greedily."""
    rule = assignment.rank_rule
    if rule is None:
        return None, None
    rank = rule.rank_of(pod.labels, assignment.total, pod.index_offset)
    if rank is None:
        return None, None
    dom = assignment.domain_of_rank(rank)
    if dom is None or used.get(dom, 0) >= assignment.counts[dom]:
        return None, rank
    return dom, rank


class FilterRun:
    """What one filter call decides against (read once, under the slot book's lock)."""

    def __init__(self, cache: ExtenderCache, occupancy: Occupancy, pod: PodRef, group: Group,
                 assignment: Assignment, payload_nodes: Mapping[str, NodeInfo] | None, detail: bool) -> None:
        self.cache = cache
        self.wl, self.pod_set = f"{group[0]}/{group[1]}", group[2]
        self.assignment = assignment
        self.occupied = occupancy.occupied(group, pod.uid)  # node -> the group's other pods there
        self.used = used_slots(cache, assignment, self.occupied)
        self.planned, self.rank = rank_domain(pod, assignment, self.used)
        # The assigned domains with a free slot this pod may take.
        self.free = frozenset(dom for dom, count in assignment.counts.items()
                              if self.used.get(dom, 0) < count and self.planned in (None, dom))
        # Fast path (the common case at scale): a hostname-only assignment and cached nodes,
        # whose domain is their hostname and whose health was judged at upsert; most names are
        # not assigned and are settled by one dict lookup each.
        self.hosts = cache.hostnames if payload_nodes is None and assignment.hostname_only else None
        self.payload_nodes = payload_nodes
        self.detail = detail  # list unassigned nodes (small requests only)
        self.not_assigned = NodeVerdict(NodeStatus.NOT_ASSIGNED,
                                        f"not in the topology assignment of workload {self.wl} pod set {self.pod_set}")

    def _seen(self, name: str) -> tuple[Domain | None, Health] | None:
        """The node's assignment domain and health, or None when it is not known."""
        host = self.hosts.get(name) if self.hosts is not None else None
        if host is not None:
            dom: Domain | None = (host,)
            return (dom if dom in self.assignment.counts else None), self.cache.health[name]
        node = self.payload_nodes.get(name) if self.payload_nodes is not None else self.cache.nodes.get(name)
        if node is None:
            return None
        cached = self.cache.health.get(name) if self.payload_nodes is None else None
        return self.assignment.domain_of(node), cached if cached is not None else self.cache.node_health(node)

    def passing(self, names: Sequence[str]) -> list[str]:
        """The one check, in kube-scheduler's order: known, a free slot in its domain, healthy."""
        free = self.free
        if self.hosts is not None:  # fast path: the same check, one lookup per name
            hosts, health = self.hosts, self.cache.health
            return [name for name in names
                    if (host := hosts.get(name)) is not None and (host,) in free and health[name].healthy]
        return [name for name in names
                if (seen := self._seen(name)) is not None and seen[0] in free and seen[1].healthy]

    def verdict(self, name: str) -> NodeVerdict:
        """Why one node does not pass (PASSES when it does): the first check that fails."""
        seen = self._seen(name)
        if seen is None:
            return NOT_CACHED
        dom, health = seen
        if dom is None:
            return self.not_assigned
        if not health.healthy:
            return NodeVerdict(NodeStatus.UNHEALTHY, f"unhealthy: {health.reason}")
        if dom in self.free:
            return PASSES
        assigned = self.assignment.counts[dom]
        if self.used.get(dom, 0) >= assigned:
            return NodeVerdict(NodeStatus.SLOTS_TAKEN, f"all {assigned} slot(s) of workload {self.wl} pod set "
                                                       f"{self.pod_set} on {'/'.join(dom)} are taken")
        assert self.planned is not None  # a free slot outside ``free`` is another rank's
        return NodeVerdict(NodeStatus.RANK_ELSEWHERE,
                           f"rank {self.rank} of workload {self.wl} pod set {self.pod_set} goes to "
                           f"{'/'.join(self.planned)} (ranks fill the assigned domains in order)")

    def worth_a_verdict(self, names: Sequence[str]) -> Sequence[str]:
        """The names a verdict may be kept for. On the fast path a large request does not list
        unassigned nodes, so a cached node whose hostname is not assigned is dropped here by one
        lookup instead of a full verdict (10,000-node requests carry a few hundred assigned ones
        at most); kube-scheduler's order is kept."""
        if self.hosts is None or self.detail:
            return names
        hosts, assigned = self.hosts, {dom[0] for dom in self.assignment.counts}
        return [n for n in names if (host := hosts.get(n)) is None or host in assigned]

    def outcome(self, names: Sequence[str], choosing: bool) -> FilterOutcome:
        """The nodes that pass, in kube-scheduler's order, and why each other one fails (failed,
        or unresolvable), with the Error that retries the pod when only full slots stand in the
        way. ``choosing`` (one node will be chosen): when some pass, the others' reasons are not
        sent (kube-scheduler counts an absent node as unschedulable for this cycle, and with a
        node chosen its diagnosis is not read; it is when no node passes, and then every reason
        is sent)."""
        if choosing:
            passed = self.passing(names)
            if passed:
                return FilterOutcome(passed, ours=True)
        worth = self.worth_a_verdict(names)
        out = FilterOutcome([] if choosing else self.passing(worth), ours=True)
        passing = set(out.passed)
        for name in worth:
            if name not in passing:
                verdict = self.verdict(name)
                assert verdict.status is not NodeStatus.PASSES, name  # the one check passed it
                _record(out, name, verdict, self.detail)
        out.error = self._full_slots_error(out)
        return out

    def _full_slots_error(self, out: FilterOutcome) -> str:
        """When only full slots stand in the way, an Error (not all-failed) for the pod. A slot is
        freed by a pod deletion that kube-scheduler may see before our informer does: an all-failed
        answer would park the pod until an unrelated event or the 5-minute flush, an Error sends it
        to backoff (1-10 s) and it asks again."""
        full = [n for n in out.failed if out.statuses.get(n) is NodeStatus.SLOTS_TAKEN]
        if out.passed or not full:
            return ""
        unhealthy = sorted(f"{n} ({why})" for n, why in out.unresolvable.items()
                           if out.statuses.get(n) is NodeStatus.UNHEALTHY)
        return (f"all slots of workload {self.wl} pod set {self.pod_set} on its healthy assigned nodes are taken "
                f"({', '.join(sorted(full)[:5])}{' ...' if len(full) > 5 else ''})"
                + (f"; {'; '.join(unhealthy[:5])}" if unhealthy else "") + "; retrying")


def _record(out: FilterOutcome, name: str, verdict: NodeVerdict, detail: bool) -> None:
    status = verdict.status
    if status in UNRESOLVABLE:
        if status is NodeStatus.NOT_ASSIGNED and not detail:
            return
        out.unresolvable[name] = verdict.message
        out.statuses[name] = status
    else:
        out.failed[name] = verdict.message
        out.statuses[name] = status
