"""The extender's decisions on plain data: which nodes a pod may take, how to rank them, and
the slot book that makes binding atomic.

No Kubernetes client and no I/O here (the HTTP server and the informers live in
:mod:`scheduler.extender.server`). Everything is keyed by plain values so the unit tests drive
it with dicts:

- a *group* is ``(namespace, workload name, pod set name)``;
- a group's *assignment* is the decoded ``topologyAssignment`` of its pod set: a map from a
  domain (one value per assignment level; with hostname-only levels: the hostname) to the
  number of pods assigned there;
- a group's *occupants* are its pods that hold a slot: non-terminal pods bound to a node (seen
  by the informer) plus in-flight reservations made by ``bind`` (pod uid -> node name); the book
  also keeps the bound ones counted per node, so a decision reads one entry per occupied node,
  not one per pod (an 800-pod gang on 100 nodes: 100 entries).

A slot of domain ``d`` is free for pod ``p`` when ``assigned[d]`` exceeds the number of
occupants other than ``p`` on nodes of ``d`` (core-contracts: "assigned count exceeds the number
of non-terminal pods of that workload+podset already bound (or being bound) there").

Thread safety: :class:`SlotBook` takes its own lock around every read-modify-write, so the
HTTP server may call it from many threads; :meth:`SlotBook.reserve` is the one atomic
check-and-take that guarantees two pods never take one slot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from scheduler.core.assignment import AssignmentFormatError, decode_topology_assignment
from scheduler.core.health import DEFAULT_POLICY, Health, HealthPolicy, node_health
from scheduler.core.kueue_names import ANN_POD_INDEX_OFFSET, LABEL_PREBUILT_WORKLOAD
from scheduler.core.nodes import HOSTNAME_LABEL, NodeInfo
from scheduler.core.topology import DEFAULT_HYPERPOD_LEVELS
from scheduler.core.topology_request import TopologyRequestError, request_from_kueue
from scheduler.core.workload import (
    ANN_ROLE_HASH,
    ANN_WORKLOAD,
    DEFAULT_POD_SET,
    LABEL_PODSET,
    SCHEDULER_NAME,
)

MAX_SCORE = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority

# Levels used to judge compactness in prioritize when the workload's Topology is not known:
# every HyperPod level above the hostname.
COMPACT_LEVELS: tuple[str, ...] = tuple(lv for lv in DEFAULT_HYPERPOD_LEVELS if lv != HOSTNAME_LABEL)

Group = tuple[str, str, str]  # (namespace, workload, pod set)
Domain = tuple[str, ...]


# ---- pods and workloads as the extender sees them ------------------------------------------


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


def _group_role(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """A pod of a pod group (a LeaderWorkerSet group): Kueue's role-hash annotation names its
    pod set (``leader``/``worker``/``main``), set with the prebuilt-workload label."""
    return annotations.get(ANN_ROLE_HASH) if labels.get(LABEL_PREBUILT_WORKLOAD) else None


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
        workload=annotations.get(ANN_WORKLOAD) or labels.get(LABEL_PREBUILT_WORKLOAD) or None,
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


def _condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return cond  # type: ignore[no-any-return]
    return None


def workload_view(obj: Mapping[str, Any]) -> WorkloadView:
    """A Kueue Workload dict (v1beta2, v1beta1 assignment shapes both accepted)."""
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace") or "default", meta.get("name") or ""
    status = obj.get("status") or {}
    admission = status.get("admission")
    admitted_cond = _condition(obj, "Admitted")
    finished = _condition(obj, "Finished")
    reason = ""
    if not admission:
        reason = "has no status.admission yet"
    elif admitted_cond is None or admitted_cond.get("status") != "True":
        reason = "is not Admitted (condition Admitted is not True)"
    elif finished is not None and finished.get("status") == "True":
        reason = "is Finished"
    elif (_condition(obj, "Evicted") or {}).get("status") == "True":
        reason = "is being evicted (condition Evicted is True)"
    pod_sets: dict[str, Assignment] = {}
    errors: dict[str, str] = {}
    rules = {str(ps.get("name") or DEFAULT_POD_SET): _rank_rule(ps.get("topologyRequest"))
             for ps in (obj.get("spec") or {}).get("podSets") or ()}
    for psa in (admission or {}).get("podSetAssignments") or ():
        ps_name = psa.get("name") or DEFAULT_POD_SET
        ta = psa.get("topologyAssignment")
        if not ta:
            continue
        try:
            levels, domains = decode_topology_assignment(ta)
        except AssignmentFormatError as exc:
            errors[ps_name] = str(exc)
            continue
        counts: dict[Domain, int] = {}
        for d in domains:
            counts[d.values] = counts.get(d.values, 0) + d.count
        flavors = sorted({str(f) for f in (psa.get("flavors") or {}).values()})
        pod_sets[ps_name] = Assignment(levels, counts, rules.get(ps_name), flavors[0] if flavors else "")
    return WorkloadView(ns, name, not reason, reason, pod_sets, errors)


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


# ---- results --------------------------------------------------------------------------------


@dataclass
class FilterOutcome:
    passed: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""
    ours: bool = False  # False: pass-through (not a toposched workload pod)
    statuses: dict[str, NodeStatus] = field(default_factory=dict)  # failed or unresolvable node -> why


@dataclass(frozen=True)
class Reservation:
    group: Group
    node: str
    uid: str
    at: float
    confirmed: bool = False  # the API server accepted the binding


class SlotTaken(Exception):
    """``reserve`` refused: the message says which slot and why (returned to kube-scheduler)."""


# ---- filter statuses ----------------------------------------------------------------------------


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
class _FilterRun:
    """What one filter call decides against (read once, under the lock)."""

    wl: str
    pod_set: str
    assignment: Assignment
    occupied: Mapping[str, int]  # node -> the group's other pods there (bound or reserved)
    used: Mapping[Domain, int]
    planned: Domain | None
    rank: int | None
    hosts: Mapping[str, str] | None  # the fast path's node -> hostname map
    payload_nodes: Mapping[str, NodeInfo] | None
    detail: bool  # list unassigned nodes (small requests only)
    not_assigned: NodeVerdict


def _worth_a_verdict(run: _FilterRun, names: Sequence[str]) -> Sequence[str]:
    """The names :func:`_record` may keep. On the fast path (hostname-only assignment, cached
    nodes) a large request does not list unassigned nodes, so a cached node whose hostname is
    not assigned is dropped here by one lookup instead of a full verdict (10,000-node requests
    carry a few hundred assigned ones at most); kube-scheduler's order is kept."""
    if run.hosts is None or run.detail:
        return names
    hosts, assigned = run.hosts, {dom[0] for dom in run.assignment.counts}
    return [n for n in names if (host := hosts.get(n)) is None or host in assigned]


def _passing_hosts(run: _FilterRun, names: Sequence[str], health: Mapping[str, Health]) -> list[str]:
    """The names :meth:`SlotBook._filter_node` passes on the fast path (hostname-only
    assignment, cached nodes), in kube-scheduler's order: a cached node whose hostname domain
    has a free slot, is the rank's planned domain (if any) and is healthy."""
    hosts, counts, used, planned = run.hosts or {}, run.assignment.counts, run.used, run.planned
    free = {dom for dom, count in counts.items() if used.get(dom, 0) < count and planned in (None, dom)}
    return [name for name in names
            if (host := hosts.get(name)) is not None and (host,) in free and health[name].healthy]


def _record(out: FilterOutcome, name: str, verdict: NodeVerdict, detail: bool) -> None:
    status = verdict.status
    if status is NodeStatus.PASSES:
        out.passed.append(name)
    elif status in UNRESOLVABLE:
        if status is NodeStatus.NOT_ASSIGNED and not detail:
            return
        out.unresolvable[name] = verdict.message
        out.statuses[name] = status
    else:
        out.failed[name] = verdict.message
        out.statuses[name] = status


def _full_slots_error(run: _FilterRun, out: FilterOutcome) -> str:
    """When only full slots stand in the way, an Error (not all-failed) for the pod. A slot is
    freed by a pod deletion that kube-scheduler may see before our informer does: an all-failed
    answer would park the pod until an unrelated event or the 5-minute flush, an Error sends it
    to backoff (1-10 s) and it asks again."""
    full = [n for n in out.failed if out.statuses.get(n) is NodeStatus.SLOTS_TAKEN]
    if out.passed or not full:
        return ""
    unhealthy = sorted(f"{n} ({why})" for n, why in out.unresolvable.items()
                       if out.statuses.get(n) is NodeStatus.UNHEALTHY)
    return (f"all slots of workload {run.wl} pod set {run.pod_set} on its healthy assigned nodes are taken "
            f"({', '.join(sorted(full)[:5])}{' ...' if len(full) > 5 else ''})"
            + (f"; {'; '.join(unhealthy[:5])}" if unhealthy else "") + "; retrying")


# ---- the book -------------------------------------------------------------------------------


class SlotBook:
    """Nodes, workload assignments and slot occupancy; every decision reads it under one lock."""

    def __init__(
        self,
        *,
        scheduler_name: str = SCHEDULER_NAME,
        health_policy: HealthPolicy = DEFAULT_POLICY,
        compact_levels: Sequence[str] = COMPACT_LEVELS,
        reservation_ttl_s: float = 120.0,
        unassigned_detail_max: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        choose_node: bool = False,
    ) -> None:
        self.scheduler_name = scheduler_name
        self.health_policy = health_policy
        self.compact_levels = tuple(compact_levels)
        self.reservation_ttl_s = reservation_ttl_s
        # Above this many candidate nodes, nodes outside the assignment are left out of
        # FailedAndUnresolvableNodes: kube-scheduler treats a node absent from the statuses as
        # UnschedulableAndUnresolvable anyway (framework.NewDefaultNodeToStatus), and a
        # 5,000-entry map is most of the request's cost on both sides.
        self.unassigned_detail_max = unassigned_detail_max
        self.clock = clock
        # kube-scheduler binds (no bindVerb): filter passes one node, the most compact free one,
        # and reserves its slot for the pod there and then. kube-scheduler's scheduling cycle is
        # serial and a single feasible node is taken without scoring, so the next pod's filter
        # sees the slot taken; the reservation holds until the informer shows the pod bound (or
        # deleted), or expires after reservation_ttl_s. Without it (the extender binds) filter
        # offers every free assigned node and bind reserves.
        self.choose_node = choose_node
        self.lock = threading.RLock()
        self.nodes: dict[str, NodeInfo] = {}
        self.health: dict[str, Health] = {}
        self.paths: dict[str, Domain] = {}  # node -> values of compact_levels ("" when absent)
        self.hostnames: dict[str, str] = {}  # node name -> kubernetes.io/hostname label (or name)
        self.host_nodes: dict[str, str] = {}  # the reverse: hostname -> node name
        self.workloads: dict[tuple[str, str], WorkloadView] = {}
        self.bound: dict[Group, dict[str, str]] = {}  # group -> uid -> node (informer view)
        self.bound_nodes: dict[Group, dict[str, int]] = {}  # group -> node -> pods in self.bound
        self.pod_group: dict[str, Group | None] = {}  # uid -> group (None: not ours)
        self.pod_names: dict[tuple[str, str], str] = {}  # (ns, name) -> uid
        self.reservations: dict[str, Reservation] = {}  # uid -> in-flight or unobserved binding
        self.flavor_topologies: dict[str, str] = {}  # ResourceFlavor -> spec.topologyName
        self.topology_levels: dict[str, tuple[str, ...]] = {}  # Topology -> spec.levels (node labels)

    # ---- informer feed ------------------------------------------------------------------
    def upsert_node(self, node: NodeInfo) -> Health:
        health = node_health(node, self.health_policy)
        path = tuple(node.labels.get(level, "") for level in self.compact_levels)
        with self.lock:
            self.nodes[node.name] = node
            self.health[node.name] = health
            self.paths[node.name] = path
            old_host = self.hostnames.get(node.name)
            if old_host is not None and self.host_nodes.get(old_host) == node.name:
                del self.host_nodes[old_host]
            host = self.hostnames[node.name] = node.labels.get(HOSTNAME_LABEL) or node.name
            self.host_nodes[host] = node.name
        return health

    def delete_node(self, name: str) -> None:
        with self.lock:
            self.nodes.pop(name, None)
            self.health.pop(name, None)
            self.paths.pop(name, None)
            host = self.hostnames.pop(name, None)
            if host is not None and self.host_nodes.get(host) == name:
                del self.host_nodes[host]

    def upsert_flavor(self, name: str, topology_name: str | None) -> None:
        with self.lock:
            if topology_name:
                self.flavor_topologies[name] = topology_name
            else:
                self.flavor_topologies.pop(name, None)

    def delete_flavor(self, name: str) -> None:
        with self.lock:
            self.flavor_topologies.pop(name, None)

    def upsert_topology(self, name: str, levels: Sequence[str]) -> None:
        with self.lock:
            self.topology_levels[name] = tuple(levels)

    def delete_topology(self, name: str) -> None:
        with self.lock:
            self.topology_levels.pop(name, None)

    def upsert_workload(self, view: WorkloadView) -> None:
        with self.lock:
            self.workloads[(view.namespace, view.name)] = view

    def delete_workload(self, namespace: str, name: str) -> None:
        with self.lock:
            self.workloads.pop((namespace, name), None)

    def _group_of(self, pod: PodRef) -> Group | None:
        if pod.scheduler_name != self.scheduler_name:
            return None
        return pod.group

    def observe_pod(self, pod: PodRef) -> None:
        """A pod as the informer sees it now (ADDED/MODIFIED)."""
        group = self._group_of(pod)
        with self.lock:
            self.pod_group[pod.uid] = group
            self.pod_names[(pod.namespace, pod.name)] = pod.uid
            if group is None:
                return
            if pod.node_name and not pod.terminal:
                self._set_bound(group, pod.uid, pod.node_name)
                self.reservations.pop(pod.uid, None)  # the informer caught up with our bind
            else:
                self._set_bound(group, pod.uid, None)
                if pod.terminal:
                    self.reservations.pop(pod.uid, None)

    def forget_pod(self, pod: PodRef) -> None:
        """The pod was deleted."""
        with self.lock:
            group = self.pod_group.pop(pod.uid, None) or self._group_of(pod)
            if self.pod_names.get((pod.namespace, pod.name)) == pod.uid:
                del self.pod_names[(pod.namespace, pod.name)]
            self.reservations.pop(pod.uid, None)
            if group is not None:
                self._set_bound(group, pod.uid, None)

    def _set_bound(self, group: Group, uid: str, node: str | None) -> None:
        """Pod ``uid`` of ``group`` is bound to ``node`` (None: holds no node), in both
        :attr:`bound` and :attr:`bound_nodes` (callers hold the lock)."""
        occupants = self.bound.get(group)
        old = occupants.get(uid) if occupants is not None else None
        if old == node:
            return
        counts = self.bound_nodes.setdefault(group, {})
        if occupants is None:
            occupants = self.bound[group] = {}
        if old is not None:
            del occupants[uid]
            if counts[old] > 1:
                counts[old] -= 1
            else:
                del counts[old]
        if node is not None:
            occupants[uid] = node
            counts[node] = counts.get(node, 0) + 1
        if not occupants:
            del self.bound[group], self.bound_nodes[group]

    def remember(self, pod: PodRef) -> Group | None:
        """Record a pod seen in a filter/prioritize request (so bind, which only gets names,
        knows its group even before the informer delivers the pod)."""
        group = self._group_of(pod)
        with self.lock:
            self.pod_group[pod.uid] = group
            self.pod_names.setdefault((pod.namespace, pod.name), pod.uid)
        return group

    def group_for(self, uid: str) -> tuple[bool, Group | None]:
        """(known, group) for a pod uid."""
        with self.lock:
            if uid in self.pod_group:
                return True, self.pod_group[uid]
            return False, None

    # ---- accounting (callers hold the lock) ----------------------------------------------
    def _expire(self, now: float) -> None:
        ttl = self.reservation_ttl_s
        stale = [uid for uid, r in self.reservations.items() if r.confirmed and now - r.at > ttl]
        for uid in stale:
            del self.reservations[uid]

    def _occupied(self, group: Group, exclude_uid: str) -> dict[str, int]:
        """Slots the group's occupants hold per node, the pod ``exclude_uid`` left out: the bound
        pods' counts plus the reservations (a pod both bound and reserved counts once, on its
        reservation's node)."""
        bound = self.bound.get(group) or {}
        counts = dict(self.bound_nodes.get(group) or {})
        held = {uid: r.node for uid, r in self.reservations.items() if r.group == group}
        for uid in {*held, exclude_uid}:
            node = bound.get(uid)
            if node is not None:  # counted once below (reserved) or not at all (excluded)
                counts[node] -= 1
        held.pop(exclude_uid, None)
        for node in held.values():
            counts[node] = counts.get(node, 0) + 1
        return {node: k for node, k in counts.items() if k > 0}

    def _node_domain(self, name: str, assignment: Assignment) -> Domain | None:
        if assignment.hostname_only:
            # assignment.domain_of without the node: its hostname is kept at upsert (an
            # unknown node counts by its name, as kube-scheduler names it)
            key = (self.hostnames.get(name, name),)
            return key if key in assignment.counts else None
        node = self.nodes.get(name)
        return None if node is None else assignment.domain_of(node)

    def _used(self, assignment: Assignment, occupied: Mapping[str, int]) -> dict[Domain, int]:
        """Occupied slots per assignment domain, from :meth:`_occupied`."""
        used: dict[Domain, int] = {}
        for node_name, k in occupied.items():
            dom = self._node_domain(node_name, assignment)
            if dom is not None:
                used[dom] = used.get(dom, 0) + k
        return used

    def _resolve(self, pod: PodRef, group: Group) -> tuple[Assignment | None, str]:
        ns, wl_name, ps = group
        view = self.workloads.get((ns, wl_name))
        if view is None:
            return None, (
                f"workload {ns}/{wl_name} (annotation {ANN_WORKLOAD} of pod {pod.name}) "
                "is not known to the toposched extender yet; retrying"
            )
        if not view.admitted:
            return None, f"workload {ns}/{wl_name} {view.reason}; retrying"
        if ps in view.errors:
            return (
                None,
                f"workload {ns}/{wl_name} pod set {ps}: unreadable topologyAssignment: {view.errors[ps]}",
            )
        assignment = view.pod_sets.get(ps)
        if assignment is None:
            names = ", ".join(sorted(view.pod_sets)) or "none"
            return None, (
                f"workload {ns}/{wl_name} has no topologyAssignment for pod set {ps!r} "
                f"(label {LABEL_PODSET}; pod sets with one: {names})"
            )
        return assignment, ""

    # ---- filter ---------------------------------------------------------------------------
    def filter(
        self, pod: PodRef, names: Sequence[str], payload_nodes: Mapping[str, NodeInfo] | None = None
    ) -> FilterOutcome:
        """Nodes the pod may take. ``payload_nodes``: the nodes kube-scheduler sent in full
        (nodeCacheCapable=false); otherwise the informer's nodes are used. Each node gets a
        :class:`NodeStatus` from :meth:`_filter_node`; the outcome's lists are filled from it."""
        group = self.remember(pod)
        if group is None:
            return FilterOutcome(list(names))
        with self.lock:
            self._expire(self.clock())
            assignment, problem = self._resolve(pod, group)
            if assignment is None:
                # Not admitted / not seen yet: an Error makes kube-scheduler retry the pod after
                # its backoff (1 s .. 10 s) instead of parking it until an unrelated cluster event.
                return FilterOutcome([], error=problem, ours=True)
            run = self._filter_run(pod, group, assignment, payload_nodes, len(names))
            out = FilterOutcome([], ours=True)
            if self.choose_node and run.hosts is not None:
                # One node will be chosen and the others' reasons are not sent: the passing
                # nodes alone, without a verdict each (kube-scheduler waits for this answer).
                out.passed = _passing_hosts(run, names, self.health)
            if not out.passed:
                for name in _worth_a_verdict(run, names):
                    _record(out, name, self._filter_node(run, name), run.detail)
                out.error = _full_slots_error(run, out)
            if self.choose_node and out.passed:
                # The nodes left out are absent from the answer: kube-scheduler counts an absent
                # node as unschedulable for this cycle; the next filter call decides afresh. With
                # a node chosen the failed nodes' reasons are dropped too: the pod is scheduled,
                # so kube-scheduler would read ~60 bytes a node only to discard them (its
                # diagnosis is used when no node is feasible, and then every reason is sent).
                if len(out.passed) > 1:
                    out.passed = [self._most_compact(pod, group, assignment, out.passed, run)]
                out.failed, out.unresolvable, out.statuses = {}, {}, {}
                self.reservations[pod.uid] = Reservation(group, out.passed[0], pod.uid, self.clock(), True)
            return out

    def _filter_run(self, pod: PodRef, group: Group, assignment: Assignment,
                    payload_nodes: Mapping[str, NodeInfo] | None, candidates: int) -> _FilterRun:
        occupied = self._occupied(group, pod.uid)
        used = self._used(assignment, occupied)
        planned, rank = self._rank_domain(pod, assignment, used)
        wl = f"{group[0]}/{group[1]}"
        # Fast path (the common case at scale): hostname-only assignment, cached nodes. Most
        # names are not assigned and are settled by one dict lookup each.
        hosts = self.hostnames if payload_nodes is None and assignment.hostname_only else None
        return _FilterRun(
            wl=wl, pod_set=group[2], assignment=assignment, occupied=occupied, used=used, planned=planned,
            rank=rank,
            hosts=hosts, payload_nodes=payload_nodes, detail=candidates <= self.unassigned_detail_max,
            not_assigned=NodeVerdict(NodeStatus.NOT_ASSIGNED,
                                     f"not in the topology assignment of workload {wl} pod set {group[2]}"))

    def _filter_node(self, run: _FilterRun, name: str) -> NodeVerdict:
        """One node, kube-scheduler Filter style: the first check that fails decides."""
        assignment = run.assignment
        host = run.hosts.get(name) if run.hosts is not None else None
        dom: Domain | None
        if host is not None:
            # Fast path: a cached node of a hostname-only assignment, whose domain is its
            # hostname; its health was judged at upsert (kept with the hostname).
            dom = (host,)
            if dom not in assignment.counts:
                return run.not_assigned
            health = self.health[name]
        else:
            node = run.payload_nodes.get(name) if run.payload_nodes is not None else self.nodes.get(name)
            if node is None:
                return NOT_CACHED
            dom = assignment.domain_of(node)
            if dom is None:
                return run.not_assigned
            cached = self.health.get(name) if run.payload_nodes is None else None
            health = cached if cached is not None else node_health(node, self.health_policy)
        if not health.healthy:
            return NodeVerdict(NodeStatus.UNHEALTHY, f"unhealthy: {health.reason}")
        assigned = assignment.counts[dom]
        if run.used.get(dom, 0) >= assigned:
            return NodeVerdict(NodeStatus.SLOTS_TAKEN, f"all {assigned} slot(s) of workload {run.wl} pod set "
                                                       f"{run.pod_set} on {'/'.join(dom)} are taken")
        if run.planned is not None and dom != run.planned:
            return NodeVerdict(NodeStatus.RANK_ELSEWHERE,
                               f"rank {run.rank} of workload {run.wl} pod set {run.pod_set} goes to "
                               f"{'/'.join(run.planned)} (ranks fill the assigned domains in order)")
        return PASSES

    def _rank_domain(self, pod: PodRef, assignment: Assignment,
                     used: Mapping[Domain, int]) -> tuple[Domain | None, int | None]:
        """Kueue's rank-based ordering: the domain a ranked pod belongs in, so neighbouring ranks
        (NCCL ring and tree neighbours) share the lowest domains. None (any assigned slot) when
        the pod has no usable rank, or its domain has no free slot left because pods already
        there do not follow the rank order (e.g. after a node was replaced): then, like Kueue,
        fill the free slots greedily."""
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

    # ---- prioritize ---------------------------------------------------------------------
    def prioritize(self, pod: PodRef, names: Sequence[str]) -> list[tuple[str, int]]:
        """Scores 0..10: compactness with already placed siblings (deepest shared level of the
        workload's Topology above the hostname, e.g. same layer-3 domain), then free slots of
        the group left in the node's lowest such domain. Pass-through pods get an empty list
        (no opinion)."""
        group = self.remember(pod)
        if group is None:
            return []
        with self.lock:
            assignment, _ = self._resolve(pod, group)
            if assignment is None:
                return [(n, 0) for n in names]
            return self._scores(pod, group, assignment, names)

    def _scores(self, pod: PodRef, group: Group, assignment: Assignment,
                names: Sequence[str]) -> list[tuple[str, int]]:
        """Prioritize's scores (callers hold the lock)."""
        path_of, prefixes, free_by_path, best_free = self._scoring(pod, group, assignment)
        scores: list[tuple[str, int]] = []
        for name in names:
            npath = path_of(name)
            if npath is None or self._node_domain(name, assignment) is None:
                scores.append((name, 0))
                continue
            scores.append((name, _compact_score(npath, prefixes, free_by_path.get(npath, 0), best_free)))
        return scores

    def _most_compact(self, pod: PodRef, group: Group, assignment: Assignment, passed: Sequence[str],
                      run: _FilterRun) -> str:
        """The first of the passed nodes prioritize would score highest (callers hold the lock).
        Every passed node is in the assignment, and nodes of one compact path score alike, so
        each path is scored once. Sharing the deepest compact domain with a sibling scores at
        least 7 and anything else at most 6 (:func:`_compact_score`), so when a passed node
        shares it, only such nodes are scored (the common case while a gang fills a domain)."""
        path_of, prefixes, free_by_path, best_free = self._scoring(pod, group, assignment, run.occupied,
                                                                   run.used)
        deepest = {p for p in prefixes[-1] & free_by_path.keys() if p[-1] != ""} if len(prefixes) > 1 else set()
        if deepest:
            shared = [name for name in passed if path_of(name) in deepest]
            if shared:
                passed = shared
        by_path: dict[Domain | None, int] = {None: 0}
        best_name, best_score = passed[0], -1
        for name in passed:
            npath = path_of(name)
            score = by_path.get(npath)
            if score is None:
                score = by_path[npath] = _compact_score(npath, prefixes, free_by_path.get(npath, 0), best_free)  # type: ignore[arg-type]
            if score > best_score:
                best_name, best_score = name, score
                if score >= MAX_SCORE:  # nothing later can beat it, and the first of the best wins
                    break
        return best_name

    def _scoring(self, pod: PodRef, group: Group, assignment: Assignment,
                 occupied: Mapping[str, int] | None = None, used: Mapping[Domain, int] | None = None,
                 ) -> tuple[Callable[[str], Domain | None], list[set[Domain]], dict[Domain, int], int]:
        """What a compactness score of ``pod``'s candidate nodes needs: the node -> path reader,
        the prefixes its group's other pods occupy, the free slots per path and the most free.
        ``occupied`` (the group's other pods per node) and ``used``: a filter run's, when it has
        them."""
        levels = self.compact_levels_of(assignment)
        path_of = self._path_reader(levels)
        if occupied is None:
            occupied = self._occupied(group, pod.uid)
        if used is None:
            used = self._used(assignment, occupied)
        prefixes = _sibling_prefixes(set(map(path_of, occupied)), len(levels))
        free_by_path = self._free_by_path(assignment, used, levels, path_of)
        return path_of, prefixes, free_by_path, max(free_by_path.values(), default=0)

    def compact_levels_of(self, assignment: Assignment) -> tuple[str, ...]:
        """The levels compactness is judged on: those of the Topology of the pod set's flavor,
        above the hostname."""
        topology = self.flavor_topologies.get(assignment.flavor)
        levels = self.topology_levels.get(topology) if topology else None
        if levels is None:
            # Flavor or Topology not seen (yet, or not readable by the extender): the HyperPod
            # levels this extender always used, which every HyperPod node carries.
            return self.compact_levels
        return tuple(level for level in levels if level != HOSTNAME_LABEL)

    def _path_reader(self, levels: tuple[str, ...]) -> Callable[[str], Domain | None]:
        """node name -> its values of ``levels`` ("" when absent); None for an unknown node."""
        if levels == self.compact_levels:
            return self.paths.get  # precomputed at upsert for the default levels

        def path_of(name: str) -> Domain | None:
            node = self.nodes.get(name)
            return None if node is None else tuple(node.labels.get(level, "") for level in levels)

        return path_of

    def _free_by_path(self, assignment: Assignment, used: Mapping[Domain, int], levels: tuple[str, ...],
                      path_of: Callable[[str], Domain | None]) -> dict[Domain, int]:
        """Free slots of the group per lowest compact domain (summed over the assignment's domains
        in it), given its ``used`` slots per assignment domain."""
        free_by_path: dict[Domain, int] = {}
        for dom, count in assignment.counts.items():
            free = count - used.get(dom, 0)
            if free <= 0:
                continue
            dom_path = self._domain_path(dom, assignment, levels, path_of)
            if dom_path is not None:
                free_by_path[dom_path] = free_by_path.get(dom_path, 0) + free
        return free_by_path

    def _domain_path(self, dom: Domain, assignment: Assignment, levels: tuple[str, ...],
                     path_of: Callable[[str], Domain | None]) -> Domain | None:
        """Compact-level path of an assignment domain (via a node of the domain)."""
        if assignment.hostname_only:  # the domain is a hostname: read the path of its node
            return path_of(self.host_nodes.get(dom[0], dom[0]))
        by_level = dict(zip(assignment.levels, dom, strict=False))
        if all(level in by_level for level in levels):
            return tuple(by_level[level] for level in levels)
        # The assignment stops above the deepest compact level: use any node of the domain.
        for name, node in self.nodes.items():
            if assignment.domain_of(node) == dom:
                return path_of(name)
        return None

    # ---- bind accounting ------------------------------------------------------------------
    def reserve(self, uid: str, node_name: str) -> Reservation | None:
        """Atomically take a slot on ``node_name`` for pod ``uid`` before binding it.

        Returns None for pods that are not ours (bind them without accounting). Raises
        :class:`SlotTaken` when the node has no free slot for the pod's group (or the pod's
        workload is not admitted), so the caller answers kube-scheduler with an Error and the
        pod is retried."""
        with self.lock:
            group = self.pod_group.get(uid)
            if group is None:
                return None
            self._expire(self.clock())
            assignment, problem = self._resolve(PodRef(group[0], "", uid, workload=group[1]), group)
            if assignment is None:
                raise SlotTaken(problem)
            dom = self._node_domain(node_name, assignment)
            wl = f"{group[0]}/{group[1]}"
            if dom is None:
                raise SlotTaken(
                    f"node {node_name} is not in the topology assignment of workload {wl} pod set {group[2]}"
                )
            health = self.health.get(node_name)
            if health is not None and not health.healthy:
                raise SlotTaken(f"node {node_name} is unhealthy: {health.reason}")
            used = self._used(assignment, self._occupied(group, uid))
            assigned = assignment.counts[dom]
            if used.get(dom, 0) >= assigned:
                raise SlotTaken(
                    f"all {assigned} slot(s) of workload {wl} pod set {group[2]} on "
                    f"{'/'.join(dom)} are taken (a sibling was bound there first); retrying"
                )
            res = Reservation(group, node_name, uid, self.clock())
            self.reservations[uid] = res
            return res

    def confirm(self, res: Reservation) -> None:
        """The API server accepted the binding: keep the slot until the informer shows the pod."""
        with self.lock:
            current = self.reservations.get(res.uid)
            if current is not None and current.node == res.node:
                self.reservations[res.uid] = Reservation(res.group, res.node, res.uid, self.clock(), True)

    def release(self, res: Reservation) -> None:
        """The binding failed: give the slot back."""
        with self.lock:
            current = self.reservations.get(res.uid)
            if current is not None and current.node == res.node and not current.confirmed:
                del self.reservations[res.uid]

    # ---- introspection --------------------------------------------------------------------
    def occupancy(self, group: Group) -> dict[str, int]:
        """Occupied slots per node for a group (tests, /debug)."""
        with self.lock:
            return self._occupied(group, "")

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {
                "nodes": len(self.nodes),
                "workloads": len(self.workloads),
                "groups": len(self.bound),
                "reservations": len(self.reservations),
            }


def _sibling_prefixes(paths: Iterable[Domain | None], depth_n: int) -> list[set[Domain]]:
    """prefixes[k]: the first k compact-level values of every placed sibling's node."""
    known = [path for path in paths if path is not None]
    return [set()] + [{path[:k] for path in known} for k in range(1, depth_n + 1)]


def _compact_score(npath: Domain, prefixes: Sequence[set[Domain]], free: int, best_free: int) -> int:
    """7 parts affinity (the deepest level shared with a sibling), 3 parts free slots nearby."""
    depth_n = len(prefixes) - 1
    depth = 0
    for k in range(depth_n, 0, -1):
        if npath[:k] in prefixes[k] and npath[k - 1] != "":
            depth = k
            break
    # Exponential in depth: sharing the deepest domain outweighs any number of wider ones.
    affinity = (2**depth - 1) / (2**depth_n - 1) if depth_n else 0.0
    slots = free / best_free if best_free else 0.0
    return max(0, min(MAX_SCORE, round(7 * affinity + 3 * slots)))


def nodes_by_name(
    items: Iterable[Mapping[str, Any]], convert: Callable[[Mapping[str, Any]], NodeInfo]
) -> dict[str, NodeInfo]:
    out: dict[str, NodeInfo] = {}
    for item in items:
        node = convert(item)
        out[node.name] = node
    return out
