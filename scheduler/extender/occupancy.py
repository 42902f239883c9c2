"""Who holds a slot: per group, its pods bound to a node (seen by the informer) and the
reservations of pods being bound (pod uid -> node). The bound ones are also counted per node, so
a decision reads one entry per occupied node, not one per pod (an 800-pod gang on 100 nodes: 100
entries). Plain data, no lock: the slot book (book.py) holds the one lock around it.

A slot of domain ``d`` is free for pod ``p`` when ``assigned[d]`` exceeds the number of
occupants other than ``p`` on nodes of ``d`` (core-contracts: "assigned count exceeds the number
of non-terminal pods of that workload+podset already bound (or being bound) there").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.extender.cache import ExtenderCache
from scheduler.extender.workload_view import Assignment, Domain, Group, PodRef


@dataclass(frozen=True)
class Reservation:
    group: Group
    node: str
    uid: str
    at: float
    confirmed: bool = False  # the API server accepted the binding (or kube-scheduler binds it)


class SlotTaken(Exception):
    """A reservation refused: the message says which slot and why (returned to kube-scheduler)."""


class Occupancy:
    def __init__(self) -> None:
        self.bound: dict[Group, dict[str, str]] = {}  # group -> uid -> node (informer view)
        self.bound_nodes: dict[Group, dict[str, int]] = {}  # group -> node -> pods in self.bound
        self.pod_group: dict[str, Group | None] = {}  # uid -> group (None: not ours)
        self.pod_names: dict[tuple[str, str], str] = {}  # (ns, name) -> uid
        self.reservations: dict[str, Reservation] = {}  # uid -> in-flight or unobserved binding

    def observe(self, uid: str, namespace: str, name: str, group: Group | None, node: str | None,
                terminal: bool) -> None:
        """A pod as the informer sees it now (ADDED/MODIFIED)."""
        self.pod_group[uid] = group
        self.pod_names[(namespace, name)] = uid
        if group is None:
            return
        if node and not terminal:
            self.set_bound(group, uid, node)
            self.reservations.pop(uid, None)  # the informer caught up with our bind
        else:
            self.set_bound(group, uid, None)
            if terminal:
                self.reservations.pop(uid, None)

    def forget(self, uid: str, namespace: str, name: str, group: Group | None) -> None:
        """The pod was deleted."""
        group = self.pod_group.pop(uid, None) or group
        if self.pod_names.get((namespace, name)) == uid:
            del self.pod_names[(namespace, name)]
        self.reservations.pop(uid, None)
        if group is not None:
            self.set_bound(group, uid, None)

    def remember(self, uid: str, namespace: str, name: str, group: Group | None) -> None:
        """A pod seen in a filter/prioritize request (so bind, which only gets names, knows its
        group even before the informer delivers the pod)."""
        self.pod_group[uid] = group
        self.pod_names.setdefault((namespace, name), uid)

    def set_bound(self, group: Group, uid: str, node: str | None) -> None:
        """Pod ``uid`` of ``group`` is bound to ``node`` (None: holds no node), in both
        :attr:`bound` and :attr:`bound_nodes`."""
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

    def expire(self, now: float, ttl_s: float) -> None:
        """Confirmed reservations the informer never showed bound are dropped after ``ttl_s``."""
        stale = [uid for uid, r in self.reservations.items() if r.confirmed and now - r.at > ttl_s]
        for uid in stale:
            del self.reservations[uid]

    def occupied(self, group: Group, exclude_uid: str) -> dict[str, int]:
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


def used_slots(cache: ExtenderCache, assignment: Assignment, occupied: Mapping[str, int]) -> dict[Domain, int]:
    """Occupied slots per assignment domain, from :meth:`Occupancy.occupied`."""
    used: dict[Domain, int] = {}
    for node_name, k in occupied.items():
        dom = cache.node_domain(node_name, assignment)
        if dom is not None:
            used[dom] = used.get(dom, 0) + k
    return used


def take_slot(cache: ExtenderCache, occupancy: Occupancy, group: Group, uid: str, node_name: str,
              now: float, confirmed: bool = False) -> Reservation:
    """The reserve step: a slot on ``node_name`` for pod ``uid`` of ``group``, recorded, or
    :class:`SlotTaken` when the node has no free slot for it (or the workload is not admitted,
    the node is outside the assignment or unhealthy)."""
    assignment, problem = cache.resolve(PodRef(group[0], "", uid, workload=group[1]), group)
    if assignment is None:
        raise SlotTaken(problem)
    dom = cache.node_domain(node_name, assignment)
    wl = f"{group[0]}/{group[1]}"
    if dom is None:
        raise SlotTaken(f"node {node_name} is not in the topology assignment of workload {wl} pod set {group[2]}")
    health = cache.health.get(node_name)
    if health is not None and not health.healthy:
        raise SlotTaken(f"node {node_name} is unhealthy: {health.reason}")
    used = used_slots(cache, assignment, occupancy.occupied(group, uid))
    assigned = assignment.counts[dom]
    if used.get(dom, 0) >= assigned:
        raise SlotTaken(
            f"all {assigned} slot(s) of workload {wl} pod set {group[2]} on "
            f"{'/'.join(dom)} are taken (a sibling was bound there first); retrying"
        )
    res = Reservation(group, node_name, uid, now, confirmed)
    occupancy.reservations[uid] = res
    return res
