"""Node failures of admitted workloads: debounced detection and single-node replacement.

Detection is a pure state machine over observations (node -> healthy?) with an explicit
clock. A node counts as *failed* only after it has been continuously unhealthy for
``grace_s``: a node whose labels flap healthy/unhealthy several times a second never reaches
that, so flapping causes no eviction storm (documented in docs/health.md). A deleted node is
failed at once (Kueue: node deleted -> immediate).

Replacement (Kueue's hot swap, ``TASFailedNodeReplacement``): with the lowest level being
hostname, each failed node's pods are moved to other healthy nodes inside the domain the
request requires (the required level's domain of the remaining pods; for preferred, the
narrowest level at which a replacement exists, climbing). Unchanged pods stay where they are.

Decisions: :func:`node_failure_decisions` turns (placed workloads, the record of unhealthy
nodes, the trees) into :class:`ReplaceNodes` or :class:`EvictForNodeFailure`, and
:func:`apply_replacement` is the one transformation of a placement by a replacement. The
controller (``scheduler.kube.nodefailures``) and the simulator (``scheduler.sim.engine``) both
call these two, so they cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.core.health import FAULT_LABELS, HEALTH_STATUS_LABEL, HEALTH_TAINT_KEY, UNSCHEDULABLE_STATUSES
from scheduler.core.kueue.admitted import TASUsage
from scheduler.core.kueue.podsready import backoff_s
from scheduler.core.nodes import HOSTNAME_LABEL, NodeInfo
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.core.resources import Resources, with_pod_slot
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import TopologyRequest, slice_levels_of

EVICTION_REASON = "NodeFailures"


def no_replacement_message(nodes: Iterable[str]) -> str:
    """Kueue's message when the single replacement attempt fails (FailFast)."""
    return f"Workload was evicted as there was no replacement for unhealthy node(s): {','.join(sorted(nodes))}"


def multiple_failures_message(nodes: Iterable[str]) -> str:
    return ("Workload eviction triggered due to multiple TAS assigned node failures, including: "
            + ",".join(sorted(nodes)))


@dataclass(frozen=True)
class RequeueBackoff:
    """The wait before a workload evicted for node failures may be admitted again.

    The first NodeFailures requeue of a workload is immediate, as Kueue v0.17 requeues it
    (``jobframework`` sets Requeued at once for NodeFailures, with no ``requeueState``): one node
    failure must not cost a job a minute. From the second on, Kueue's
    ``waitForPodsReady.requeuingStrategy`` applies (``backoffBaseSeconds`` 60,
    ``backoffMaxSeconds`` 3600, no ``backoffLimitCount``): the n-th requeue waits
    ``base * 2^(n-2)`` seconds, capped at ``max``, so a workload that keeps landing on failing
    nodes cannot loop (Kueue adds a 0.01% jitter; toposched is deterministic)."""

    base_s: float = 60.0
    max_s: float = 3600.0

    def delay_s(self, count: int) -> float:
        # The first requeue is free; then Kueue's backoff, one step behind (core.podsready).
        return backoff_s(count - 1, self.base_s, self.max_s)


UNREACHABLE = "unreachable"  # Ready=Unknown (or no Ready condition), taint node.kubernetes.io/unreachable
EXPLICIT = "explicit"  # a verdict: HyperPod health label / fault label / HMA taint, NotReady, cordon...
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def failure_kind(node: NodeInfo) -> str:
    """Why an unhealthy node is unhealthy, for the grace it gets. A node nobody can reach may
    still run its pods (a network partition), so it is given the longer grace; an explicit
    verdict (HyperPod's ``Unschedulable*`` health label, a fault label, the HMA taint) wins
    over an unreachable Ready condition: the node is known bad."""
    if node.labels.get(HEALTH_STATUS_LABEL, "") in UNSCHEDULABLE_STATUSES \
            or any(node.labels.get(label) for label in FAULT_LABELS) \
            or any(t.key == HEALTH_TAINT_KEY for t in node.taints):
        return EXPLICIT
    ready = node.condition("Ready")
    if ready is None or ready.status == "Unknown" or any(t.key == UNREACHABLE_TAINT for t in node.taints):
        return UNREACHABLE
    return EXPLICIT


@dataclass
class FailureTracker:
    """The record of unhealthy nodes: since when each has been unhealthy (seconds on the
    caller's clock), which of them are unreachable rather than known bad, and which assigned
    nodes are gone. Recording only; what to do about a failed node is
    :func:`node_failure_decisions`' business.

    ``grace_s``: how long a known-bad node must stay unhealthy; ``unreachable_grace_s``: the
    same for an unreachable one (longer: a partition often heals, and the pod may still run)."""

    grace_s: float = 3.0
    unhealthy_since: dict[str, float] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    unreachable_grace_s: float | None = None  # None: the same as grace_s
    unreachable: set[str] = field(default_factory=set)

    def observe(self, node: str, healthy: bool, now: float, kind: str = EXPLICIT) -> None:
        self.deleted.discard(node)
        if healthy:
            self.unhealthy_since.pop(node, None)
            self.unreachable.discard(node)
            return
        self.unhealthy_since.setdefault(node, now)
        if kind == UNREACHABLE:
            self.unreachable.add(node)
        else:
            self.unreachable.discard(node)

    def observe_deleted(self, node: str) -> None:
        self.unhealthy_since.pop(node, None)
        self.unreachable.discard(node)
        self.deleted.add(node)

    def grace_for(self, node: str) -> float:
        if node in self.unreachable and self.unreachable_grace_s is not None:
            return self.unreachable_grace_s
        return self.grace_s

    def failed(self, node: str, now: float) -> bool:
        if node in self.deleted:
            return True
        since = self.unhealthy_since.get(node)
        return since is not None and now - since >= self.grace_for(node)

    def failed_among(self, nodes: Iterable[str], now: float) -> list[str]:
        return sorted(n for n in nodes if self.failed(n, now))


# ---------------------------------------------------------------------- eviction-storm guard


@dataclass(frozen=True)
class StormPolicy:
    """The node lifecycle controller's unhealthy-zone rule, applied to node-failure evictions
    and replacements: when more than ``threshold`` of a group's nodes (a flavor's nodes, or all
    nodes) turned unhealthy within ``window_s`` — and at least ``min_failed`` of them, as KCM
    needs more than two not-ready nodes — the failure is more likely the control plane's view
    (a partition, a monitoring outage) than the nodes: hold, and resume only when the share of
    unhealthy nodes is back at or below the threshold."""

    threshold: float = 0.55  # kube-controller-manager --unhealthy-zone-threshold
    window_s: float = 120.0
    min_failed: int = 3


@dataclass(frozen=True)
class Storm:
    group: str
    unhealthy: tuple[str, ...]
    total: int
    policy: StormPolicy

    @property
    def message(self) -> str:
        return (f"node-failure evictions and replacements are held: {len(self.unhealthy)} of {self.total} nodes of "
                f"{self.group} are unhealthy (more than {self.policy.threshold:.0%} failed within "
                f"{self.policy.window_s:.0f}s), as the node lifecycle controller holds evictions in an unhealthy "
                "zone; they resume when the share drops")


def storms(groups: Mapping[str, Iterable[str]], tracker: FailureTracker, now: float, policy: StormPolicy,
           holding: Iterable[str] = ()) -> dict[str, Storm]:
    """The groups where node failures are held now. A group starts holding when more than the
    threshold of its nodes turned unhealthy within the window; one already ``holding`` keeps
    holding while more than the threshold of its nodes are unhealthy, however long ago they
    failed (a long partition must not end the hold by outlasting the window)."""
    held = set(holding)
    out: dict[str, Storm] = {}
    for group, members in groups.items():
        nodes = sorted(set(members))
        if not nodes:
            continue
        unhealthy = [n for n in nodes if n in tracker.unhealthy_since]
        counted = unhealthy if group in held else [n for n in unhealthy
                                                   if now - tracker.unhealthy_since[n] <= policy.window_s]
        if len(counted) >= policy.min_failed and len(counted) / len(nodes) > policy.threshold:
            out[group] = Storm(group, tuple(unhealthy), len(nodes), policy)
    return out


ALL_NODES = "all nodes"


def storm_groups(node_labels: Mapping[str, Mapping[str, str]],
                 flavor_node_labels: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """The groups the storm guard watches, as the node lifecycle controller watches each
    zone: all nodes, and each flavor's nodes (those carrying its ``nodeLabels``; a flavor
    without nodeLabels adds no group). Keys are the names the storm's message shows."""
    groups = {ALL_NODES: sorted(node_labels)}
    for flavor in sorted(flavor_node_labels):
        selector = flavor_node_labels[flavor]
        if selector:
            groups[f"flavor {flavor}"] = sorted(
                n for n, labels in node_labels.items() if all(labels.get(k) == v for k, v in selector.items()))
    return groups


def held_nodes(storms_now: Mapping[str, Storm]) -> dict[str, Storm]:
    """node -> the storm that holds its failure (the first group, by name, when several)."""
    out: dict[str, Storm] = {}
    for group in sorted(storms_now):
        for node in storms_now[group].unhealthy:
            out.setdefault(node, storms_now[group])
    return out


def pods_per_node(pod_set: PodSetPlacement) -> dict[str, int]:
    """Hostname -> pod count of a hostname-level assignment ({} for other levels)."""
    if tuple(pod_set.levels) != (HOSTNAME_LABEL,):
        return {}
    return {d.values[0]: d.count for d in pod_set.domains}


def _with_counts(pod_set: PodSetPlacement, counts: Mapping[str, int], tree: TopologyTree) -> PodSetPlacement:
    def path_of(host: str) -> tuple[str, ...]:
        leaf = tree.leaf_of_node(host)
        return tree.paths[-1][leaf] if leaf is not None else (host,)

    domains = tuple(
        DomainAssignment((host,), count)
        for host, count in sorted(counts.items(), key=lambda kv: path_of(kv[0]))
        if count > 0
    )
    return PodSetPlacement(pod_set.name, pod_set.count, pod_set.levels, domains)


def _fill(leaves: list[int], capacity: Mapping[int, int], missing: int, tree: TopologyTree) -> dict[int, int] | None:
    """Best fit: the tightest single node that takes all ``missing`` pods, else the largest
    nodes first; None when the leaves cannot take them."""
    single = sorted((capacity[leaf], tree.paths[-1][leaf], leaf) for leaf in leaves if capacity[leaf] >= missing)
    if single:
        return {single[0][2]: missing}
    chosen: dict[int, int] = {}
    remaining = missing
    for c, _path, leaf in sorted(((capacity[lf], tree.paths[-1][lf], lf) for lf in leaves if capacity[lf] > 0),
                                 key=lambda t: (-t[0], t[1])):
        take = min(c, remaining)
        chosen[leaf] = take
        remaining -= take
        if remaining == 0:
            return chosen
    return None


def find_replacement(tree: TopologyTree, pod_set: PodSetPlacement, per_pod: Resources, failed_node: str,
                     required_level: str | None, failed_node_labels: Mapping[str, str] | None = None,
                     slice_levels: Sequence[str] = ()) -> PodSetPlacement | None:
    """The assignment with ``failed_node``'s pods moved to healthy nodes, or None.

    ``tree`` must already hold this workload's usage (it is the live snapshot): the freed
    slots of the failed node are not in it anyway (unhealthy nodes are not in the tree).

    ``slice_levels`` (``podset-slice-required-topology`` and the levels of multi-layer slice
    constraints): the failed node's pods may only move inside the failed node's own domain at
    the deepest of these levels, so every slice stays whole in its domain (and therefore inside
    the pod set's required domain, which contains it). That needs the failed node's labels.
    """
    staying = pods_per_node(pod_set)
    missing = staying.pop(failed_node, 0)
    fit = _pods_fitting(tree, per_pod)
    if missing == 0 or not tree.hostname_lowest or fit is None:
        return None
    search = _ReplacementSearch(tree, pod_set, staying, missing, fit, failed_node_labels)
    if slice_levels:
        return _replace_within_slice(search, slice_levels)
    levels = _search_levels(tree, required_level)
    if levels is None:
        return None
    return _climb(search, levels, required=required_level is not None)


@dataclass(frozen=True)
class _ReplacementSearch:
    """One failed node's pods looking for a new home: where the rest of the pod set stays,
    how many pods move, and how many fit on each leaf."""

    tree: TopologyTree
    pod_set: PodSetPlacement
    staying: Mapping[str, int]                     # hostname -> pods that stay there
    missing: int                                   # pods of the failed node to move
    fit: Callable[[int], int]                      # leaf -> how many more pods fit
    failed_node_labels: Mapping[str, str] | None   # None when the node object is gone

    def failed_nodes_domain(self, level: int) -> set[int]:
        """The failed node's own domain at ``level`` (empty when its labels are unknown)."""
        if self.failed_node_labels is None:
            return set()
        path = tuple(self.failed_node_labels.get(lv, "") for lv in self.tree.levels[: level + 1])
        return {i for i, p in enumerate(self.tree.paths[level]) if p == path}

    def candidate_domains(self, level: int, anchor_leaves: Sequence[int]) -> set[int]:
        """Domains at ``level`` the pods may move into: those of the staying pods, else the
        failed node's, else (nothing left anywhere) every domain of the level."""
        domains = {self.tree.ancestor(leaf, level) for leaf in anchor_leaves}
        if not domains:
            domains = self.failed_nodes_domain(level)
        if not domains and not anchor_leaves:
            # Nothing of the workload is left and the failed node is gone: any one domain of the
            # level keeps the request (all the pods together), as Kueue replaces it.
            domains = set(range(self.tree.domain_count(level)))
        return domains

    def place_in(self, level: int, domains: set[int]) -> PodSetPlacement | None:
        """The moved pods inside one of ``domains`` (tightest first), or None if none takes them."""
        tree = self.tree
        leaves_of: dict[int, list[int]] = {}
        for leaf in range(tree.n_leaves):
            domain = tree.ancestor(leaf, level)
            if domain in domains:
                leaves_of.setdefault(domain, []).append(leaf)
        capacity = {leaf: self.fit(leaf) for leaves in leaves_of.values() for leaf in leaves}
        # Tightest domain that takes them all first (BestFit), by value path on ties.
        ranked = sorted(leaves_of, key=lambda d: (sum(capacity[lf] for lf in leaves_of[d]), tree.paths[level][d]))
        for domain in ranked:
            chosen = _fill(leaves_of[domain], capacity, self.missing, tree)
            if chosen is not None:
                return _with_counts(self.pod_set, _moved_to(self.staying, chosen, tree), tree)
        return None


def _replace_within_slice(search: _ReplacementSearch, slice_levels: Sequence[str]) -> PodSetPlacement | None:
    """Slices stay whole: the pods move only inside the failed node's domain at the deepest
    slice level (None when the tree lacks every slice level)."""
    tree = search.tree
    levels = [tree.level_index(lv) for lv in slice_levels if tree.has_level(lv) and lv != HOSTNAME_LABEL]
    if not levels:
        return None
    # Unknown labels (the node object is gone) give no domain: no replacement, evict.
    return search.place_in(max(levels), search.failed_nodes_domain(max(levels)))


def _search_levels(tree: TopologyTree, required_level: str | None) -> list[int] | None:
    """Levels to search, narrowest first: for required, exactly the required level (None when
    the tree cannot express it); for preferred/unconstrained, every level from just above
    hostname up to the top."""
    if required_level is None:
        return list(range(len(tree.levels) - 2, -1, -1))
    if not tree.has_level(required_level) or required_level == HOSTNAME_LABEL:
        return None
    return [tree.level_index(required_level)]


def _climb(search: _ReplacementSearch, levels: Sequence[int], *, required: bool) -> PodSetPlacement | None:
    """The first level (narrowest first) whose single domain of the staying pods takes the
    moved ones. Staying pods spread over several domains break a required request at once and
    send a preferred one a level up."""
    tree = search.tree
    anchor_leaves = [leaf for host in search.staying if (leaf := tree.leaf_of_node(host)) is not None]
    for level in levels:
        domains = search.candidate_domains(level, anchor_leaves)
        if len(domains) != 1 and anchor_leaves:
            if required:
                return None  # the remaining pods already span domains: the request cannot hold
            continue
        placed = search.place_in(level, domains)
        if placed is not None:
            return placed
    return None


def replace_failed_nodes(tree: TopologyTree, pod_set: PodSetPlacement, per_pod: Resources,
                         failed_nodes: Sequence[str], required_level: str | None,
                         labels_of: Mapping[str, Mapping[str, str]] | None = None,
                         slice_levels: Sequence[str] = ()) -> PodSetPlacement | None:
    """:func:`find_replacement` for several nodes failing together (a rack losing power, a
    switch going down): each failed node's pods are moved in turn, and what one move takes is
    reserved in a scratch copy of the tree before the next, so two failed nodes never land on
    the same spare slot. All or nothing: None when any of them cannot be replaced within the
    request. (Kueue evicts the workload as soon as more than one of its nodes fails.)"""
    failed_here = sorted(n for n in failed_nodes if n in pods_per_node(pod_set))
    scratch = tree.clone() if len(failed_here) > 1 else tree
    current = pod_set
    for i, node in enumerate(failed_here):
        new = find_replacement(scratch, current, per_pod, node, required_level,
                               (labels_of or {}).get(node), slice_levels)
        if new is None:
            return None
        if i + 1 < len(failed_here):
            before, after = pods_per_node(current), pods_per_node(new)
            moved = {host: n - before.get(host, 0) for host, n in after.items() if n > before.get(host, 0)}
            scratch.add_usage(PodSetPlacement(pod_set.name, sum(moved.values()), (HOSTNAME_LABEL,),
                                              tuple(DomainAssignment((h,), c) for h, c in sorted(moved.items()))),
                              per_pod)
        current = new
    return current


def _pods_fitting(tree: TopologyTree, per_pod: Resources) -> Callable[[int], int] | None:
    """leaf -> how many more pods of ``per_pod`` (plus a pod slot) fit there; None if it asks nothing."""
    vec = tree.request_vector(with_pod_slot(per_pod))
    requested = vec > 0
    if not requested.any():
        return None
    return lambda leaf: int((np.maximum(tree.free[leaf][requested], 0) // vec[requested]).min())


def _moved_to(counts: Mapping[str, int], chosen: Mapping[int, int], tree: TopologyTree) -> dict[str, int]:
    out = dict(counts)
    for leaf, take in chosen.items():
        host = tree.paths[-1][leaf][-1]
        out[host] = out.get(host, 0) + take
    return out


# ---------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class PlacedWorkload:
    """What the failure decision needs of a workload holding a reservation: its topology
    assignments and, per pod set, the topology request they must keep satisfying."""

    key: str
    tas: tuple[TASUsage, ...]
    requests: Mapping[str, TopologyRequest | None] = field(default_factory=dict)
    # Kueue's ``workload.OwnedBySinglePod``: the Workload of one plain Pod (one owner reference,
    # v1 Pod, not a pod group's): its pod cannot move, the Workload cannot outlive it.
    pod_owned: bool = False

    def assigned_nodes(self) -> set[str]:
        return {host for usage in self.tas for host in pods_per_node(usage.placement)}


@dataclass(frozen=True)
class ReplaceNodes:
    """Move the pods of ``failed_nodes`` as ``placements`` say (only the pod sets that move)."""

    workload: str
    failed_nodes: tuple[str, ...]
    placements: tuple[PodSetPlacement, ...]


@dataclass(frozen=True)
class EvictForNodeFailure:
    """No replacement inside the request for every failed node: evict (reason NodeFailures)."""

    workload: str
    failed_nodes: tuple[str, ...]
    message: str
    reason: str = EVICTION_REASON


@dataclass(frozen=True)
class HoldForNodeStorm:
    """Failed nodes in a group that is storming: neither replace nor evict (yet)."""

    workload: str
    failed_nodes: tuple[str, ...]
    message: str


NodeFailureDecision = ReplaceNodes | EvictForNodeFailure | HoldForNodeStorm


def apply_replacement(placement: PodSetPlacement, decision: ReplaceNodes) -> PodSetPlacement:
    """The pod set's placement after ``decision`` (unchanged when the decision does not move it)."""
    for moved in decision.placements:
        if moved.name == placement.name:
            return moved
    return placement


def eviction_message(failed_nodes: Sequence[str]) -> str:
    """Kueue's words: one failed node without a replacement, or several failing together."""
    return multiple_failures_message(failed_nodes) if len(failed_nodes) > 1 else no_replacement_message(failed_nodes)


def node_failure_decisions(workloads: Sequence[PlacedWorkload], unhealthy: FailureTracker,
                           trees: Mapping[str, TopologyTree], now: float,
                           node_labels: Mapping[str, Mapping[str, str]], *,
                           release_evicted: bool = False,
                           held: Mapping[str, Storm] | None = None,
                           skip_pod_owned: bool = False) -> list[NodeFailureDecision]:
    """Replace-or-evict for every workload with a failed node (unhealthy for the tracker's
    grace, or deleted) in its assignment, in the given order.

    ``trees`` hold every listed workload's usage and are not modified: each replacement is
    reserved in a private copy before the next workload is looked at, so two workloads never
    take the same spare slot. ``release_evicted``: an evicted workload's usage is freed at once
    (the simulator, where pods terminate in no time); the controller keeps it until the pods
    are gone. ``node_labels``: labels of the failed nodes still known (slice domains).
    ``held``: failed nodes inside a storm (:func:`held_nodes`): a workload on one of them is
    held (:class:`HoldForNodeStorm`), its usage left as it is. ``skip_pod_owned``
    (SkipReassignmentForPodOwnedWorkloads, beta on in v0.19): a pod-owned Workload is neither
    moved nor evicted; it keeps its assignment, as Kueue's ``FindTopologyAssignmentsForWorkload``
    keeps it (its pod fails with its node and its Workload finishes with the pod)."""
    scratch = _CopyOnWrite(trees)
    out: list[NodeFailureDecision] = []
    for workload in workloads:
        failed = unhealthy.failed_among(workload.assigned_nodes(), now)
        if not failed or (skip_pod_owned and workload.pod_owned):
            continue
        storm = next((held[n] for n in failed if held and n in held), None)
        if storm is not None:
            out.append(HoldForNodeStorm(workload.key, tuple(failed), storm.message))
            continue
        moved = _replacements(workload, failed, scratch, node_labels)
        if moved is None:
            out.append(EvictForNodeFailure(workload.key, tuple(failed), eviction_message(failed)))
            if release_evicted:
                for usage in workload.tas:
                    if scratch.get(usage.flavor) is not None:
                        scratch.writable(usage.flavor).remove_usage(usage.placement, usage.per_pod)
            continue
        decision = ReplaceNodes(workload.key, tuple(failed), tuple(moved))
        for usage in workload.tas:
            new = apply_replacement(usage.placement, decision)
            if new is not usage.placement:
                tree = scratch.writable(usage.flavor)
                tree.remove_usage(usage.placement, usage.per_pod)
                tree.add_usage(new, usage.per_pod)
        out.append(decision)
    return out


class _CopyOnWrite:
    """The caller's trees, each copied the first time a decision changes its usage."""

    def __init__(self, trees: Mapping[str, TopologyTree]) -> None:
        self._trees = trees
        self._copies: dict[str, TopologyTree] = {}

    def get(self, flavor: str) -> TopologyTree | None:
        return self._copies.get(flavor) or self._trees.get(flavor)

    def writable(self, flavor: str) -> TopologyTree:
        if flavor not in self._copies:
            self._copies[flavor] = self._trees[flavor].clone()
        return self._copies[flavor]


def _replacements(workload: PlacedWorkload, failed: Sequence[str], trees: _CopyOnWrite,
                  node_labels: Mapping[str, Mapping[str, str]]) -> list[PodSetPlacement] | None:
    """The new placement of every pod set on a failed node (all or none), None to evict."""
    moved: list[PodSetPlacement] = []
    for usage in workload.tas:
        if not set(failed) & set(pods_per_node(usage.placement)):
            continue
        tree = trees.get(usage.flavor)
        if tree is None:
            return None
        request = workload.requests.get(usage.placement.name)
        new = replace_failed_nodes(tree, usage.placement, usage.per_pod, failed,
                                   request.required if request else None,
                                   {n: node_labels[n] for n in failed if n in node_labels}, slice_levels_of(request))
        if new is None:
            return None
        moved.append(new)
    return moved or None
