"""Hold the domain a compact wait waits for (issue 17 items 2 and 6; ``--placement-policy
reserve-compact``, off by default).

A workload in its bounded wait for a compact placement (core/beyond/compactness.py) holds no capacity by
itself, so the workloads queued after it fill the room it waits for, and it ends up preempting
them or relaxing. With the policy on, the waiter *reserves* one domain of its compact level:

* the domain is chosen once (:func:`choose_domain`: most free capacity its pods can use, then
  most capacity held by lower-priority or already evicted workloads, which frees soonest; ties
  by domain path) and kept on the Workload (annotation :data:`ANN_RESERVED_DOMAIN`, the
  :class:`DomainTarget` encoding of the sticky preemption target plus the wait's end), so later
  cycles and a restarted controller hold the same domain;
* it binds only the workloads the waiter goes before in Kueue's admission order (lower
  priority, or equal priority queued later): a higher-priority workload ignores it;
* a bound workload is first placed with the whole domain left out (steered away); when it fits
  nowhere else it may use what the waiter cannot use there (capacity beyond the waiter's pods:
  node fragments too small for one of its pods), never the waiter's share. An admin who turned
  the hold on wants the room to grow until the waiter fits, but no capacity idle that the
  waiter could never take. When even that does not fit, the bound workload stays pending with
  :data:`HELD_REASON` (it does not preempt for room the cluster does have);
* it ends when the waiter is admitted, stops waiting for another reason, or its wait runs out
  (``until``, checked against ``Snapshot.now``; nothing needs to remove the annotation first).

Pure: plain data in, a narrowed copy of the tree out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.core.beyond.domain_target import DomainTarget, parse_target
from scheduler.core.resources import with_pod_slot
from scheduler.core.topology import IntArray, TopologyTree
from scheduler.core.workload import PodSetSpec, json_object_annotation

ANN_RESERVED_DOMAIN = "toposched.io/reserved-domain"
HELD_REASON = "CapacityHeldForCompactPlacement"


@dataclass(frozen=True)
class Reservation:
    """``holder`` (a pending workload, "ns/name") holds ``target`` for ``pod_set`` until ``until``."""

    holder: str
    priority: int
    queued_at: float
    target: DomainTarget
    until: float
    pod_set: PodSetSpec

    def encode(self) -> str:
        data = json.loads(self.target.encode())
        data["until"] = self.until
        return json.dumps(data, sort_keys=True)

    @property
    def order(self) -> tuple[int, float, str]:
        """The holder's place in Kueue's order (higher priority, then earlier, then by key)."""
        return -self.priority, self.queued_at, self.holder

    def binds(self, key: str, priority: int, queued_at: float) -> bool:
        """Whether the workload ``key`` is held back: the holder goes before it in Kueue's order."""
        if key == self.holder:
            return False
        return self.order < (-priority, queued_at, key)

    def describe(self) -> str:
        return f"{self.holder} (priority {self.priority}) in {self.target.level}={self.target.name}"


def parse_reserved(annotations: Mapping[str, str]) -> tuple[DomainTarget, float] | None:
    """The held domain and the wait's end recorded on a Workload, or None (absent or malformed)."""
    target = parse_target(annotations, ANN_RESERVED_DOMAIN)
    data = json_object_annotation(annotations, ANN_RESERVED_DOMAIN)
    until = data.get("until") if data is not None else None
    if target is None or not isinstance(until, int | float) or isinstance(until, bool):
        return None
    return target, float(until)


def domain_index(tree: TopologyTree, target: DomainTarget) -> int | None:
    """The index of ``target``'s domain at its level of ``tree``, or None when the tree has no such domain."""
    if not tree.has_level(target.level):
        return None
    level = tree.level_index(target.level)
    path = tuple(target.selector.get(name, "") for name in tree.levels[: level + 1])
    try:
        return tree.paths[level].index(path)
    except ValueError:
        return None


def _leaves(tree: TopologyTree, level: int, domain: int) -> IntArray:
    return np.nonzero(tree.ancestors_array(level) == domain)[0]


def _pods_per_leaf(tree: TopologyTree, pod_set: PodSetSpec, free: IntArray) -> IntArray:
    return tree.leaf_fit(with_pod_slot(pod_set.requests), pod_set.node_selector, pod_set.tolerations,
                         free=free).counts


def can_ever_hold(tree: TopologyTree, target: DomainTarget, pod_set: PodSetSpec) -> bool:
    """The domain exists and, empty, fits every pod of the pod set (a failed node can make it too small)."""
    d = domain_index(tree, target)
    if d is None:
        return False
    leaves = _leaves(tree, tree.level_index(target.level), d)
    return int(_pods_per_leaf(tree, pod_set, tree.allocatable)[leaves].sum()) >= pod_set.count


def choose_domain(tree: TopologyTree, soon: TopologyTree, level: int, pod_set: PodSetSpec) -> int | None:
    """The domain of ``level`` to hold for ``pod_set``: among those that fit it when empty, the
    most of its pods on free capacity (``tree``), then on ``soon`` (``tree`` with the capacity of
    workloads that free soonest given back), then the first by path. None when none can hold it."""
    count = pod_set.count
    sums = tree.subtree_sums(_pods_per_leaf(tree, pod_set, tree.free))[level]
    later = soon.subtree_sums(_pods_per_leaf(soon, pod_set, soon.free))[level]
    ever = tree.subtree_sums(_pods_per_leaf(tree, pod_set, tree.allocatable))[level]
    ranked = [(-min(count, int(sums[d])), -min(count, int(later[d])), d)
              for d in range(tree.domain_count(level)) if int(ever[d]) >= count]
    return min(ranked)[2] if ranked else None


def hold(tree: TopologyTree, reservations: Sequence[Reservation], whole: bool) -> TopologyTree:
    """A copy of ``tree`` without what ``reservations`` hold, taken in Kueue's order of their
    holders: ``whole``: every leaf of each held domain (steer away); else, on those leaves, the
    capacity of as many of the holder's pods as fit, up to its pod count (leaf by leaf in name
    order), the rest staying usable."""
    out = tree.clone()
    for r in sorted(reservations, key=lambda r: r.order):
        d = domain_index(tree, r.target)
        if d is None:
            continue
        leaves = _leaves(tree, tree.level_index(r.target.level), d)
        if whole:
            out.free[leaves] = np.minimum(out.free[leaves], 0)
            continue
        counts = _pods_per_leaf(out, r.pod_set, out.free)
        vec = out.request_vector(with_pod_slot(r.pod_set.requests))
        left = r.pod_set.count
        for leaf in leaves:
            take = min(int(counts[leaf]), left)
            out.free[leaf] -= take * vec
            left -= take
            if left == 0:
                break
    return out


def held_message(pod_set: str, holders: Sequence[Reservation]) -> str:
    """Why a bound workload waits (stable across cycles: no remaining time in it)."""
    names = "; ".join(r.describe() for r in holders)
    return (f"pod set {pod_set}: the free capacity it fits in is held for a workload waiting for a compact "
            f"placement ({names}); it is released when that workload is admitted or its wait ends "
            "(--placement-policy reserve-compact)")
