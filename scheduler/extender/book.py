"""The slot book: the one lock of the extender, around the cache (cache.py) and the occupants
(occupancy.py). Each verb takes the lock and runs a pure step, as kube-scheduler's framework
runs its plugins on a snapshot: filter (filtering.py) and score (scoring.py) decide and write
nothing; reserve (occupancy.take_slot) is the one atomic check-and-take that guarantees two
pods never take one slot, called by bind, or (``choose_node``) by the server right after filter.

No Kubernetes client and no I/O here (the HTTP server and the informers live in
:mod:`scheduler.extender.server`); the unit tests drive it with dicts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from scheduler.core.health import DEFAULT_POLICY, Health, HealthPolicy
from scheduler.core.nodes import NodeInfo
from scheduler.core.workload import SCHEDULER_NAME
from scheduler.extender import scoring
from scheduler.extender.cache import COMPACT_LEVELS, ExtenderCache
from scheduler.extender.filtering import FilterOutcome, FilterRun
from scheduler.extender.occupancy import Occupancy, Reservation, SlotTaken, take_slot
from scheduler.extender.workload_view import Group, PodRef, WorkloadView


class SlotBook:
    """Nodes, workload assignments and slot occupancy; every verb reads them under one lock."""

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
        self.reservation_ttl_s = reservation_ttl_s
        # Above this many candidate nodes, nodes outside the assignment are left out of
        # FailedAndUnresolvableNodes: kube-scheduler treats a node absent from the statuses as
        # UnschedulableAndUnresolvable anyway (framework.NewDefaultNodeToStatus), and a
        # 5,000-entry map is most of the request's cost on both sides.
        self.unassigned_detail_max = unassigned_detail_max
        self.clock = clock
        # kube-scheduler binds (no bindVerb): filter passes one node, the most compact free one,
        # and the server reserves its slot for the pod there and then (reserve_chosen).
        # kube-scheduler's scheduling cycle is serial and a single feasible node is taken without
        # scoring, so the next pod's filter sees the slot taken; the reservation holds until the
        # informer shows the pod bound (or deleted), or expires after reservation_ttl_s. Without
        # it (the extender binds) filter offers every free assigned node and bind reserves.
        self.choose_node = choose_node
        self.lock = threading.RLock()
        self.cache = ExtenderCache(health_policy, compact_levels)
        self.occupants = Occupancy()

    # ---- what tests and /stats read --------------------------------------------------------
    @property
    def host_nodes(self) -> dict[str, str]:
        return self.cache.host_nodes

    @property
    def bound(self) -> dict[Group, dict[str, str]]:
        return self.occupants.bound

    @property
    def bound_nodes(self) -> dict[Group, dict[str, int]]:
        return self.occupants.bound_nodes

    @property
    def reservations(self) -> dict[str, Reservation]:
        return self.occupants.reservations

    # ---- informer feed ------------------------------------------------------------------
    def upsert_node(self, node: NodeInfo) -> Health:
        health = self.cache.node_health(node)
        with self.lock:
            self.cache.upsert_node(node, health)
        return health

    def delete_node(self, name: str) -> None:
        with self.lock:
            self.cache.delete_node(name)

    def upsert_flavor(self, name: str, topology_name: str | None) -> None:
        with self.lock:
            self.cache.upsert_flavor(name, topology_name)

    def delete_flavor(self, name: str) -> None:
        with self.lock:
            self.cache.flavor_topologies.pop(name, None)

    def upsert_topology(self, name: str, levels: Sequence[str]) -> None:
        with self.lock:
            self.cache.topology_levels[name] = tuple(levels)

    def delete_topology(self, name: str) -> None:
        with self.lock:
            self.cache.topology_levels.pop(name, None)

    def upsert_workload(self, view: WorkloadView) -> None:
        with self.lock:
            self.cache.workloads[(view.namespace, view.name)] = view

    def delete_workload(self, namespace: str, name: str) -> None:
        with self.lock:
            self.cache.workloads.pop((namespace, name), None)

    def _group_of(self, pod: PodRef) -> Group | None:
        return pod.group if pod.scheduler_name == self.scheduler_name else None

    def observe_pod(self, pod: PodRef) -> None:
        """A pod as the informer sees it now (ADDED/MODIFIED)."""
        group = self._group_of(pod)
        with self.lock:
            self.occupants.observe(pod.uid, pod.namespace, pod.name, group, pod.node_name, pod.terminal)

    def forget_pod(self, pod: PodRef) -> None:
        """The pod was deleted."""
        group = self._group_of(pod)
        with self.lock:
            self.occupants.forget(pod.uid, pod.namespace, pod.name, group)

    def remember(self, pod: PodRef) -> Group | None:
        """Record a pod seen in a filter/prioritize request (so bind, which only gets names,
        knows its group even before the informer delivers the pod)."""
        group = self._group_of(pod)
        with self.lock:
            self.occupants.remember(pod.uid, pod.namespace, pod.name, group)
        return group

    def group_for(self, uid: str) -> tuple[bool, Group | None]:
        """(known, group) for a pod uid."""
        with self.lock:
            if uid in self.occupants.pod_group:
                return True, self.occupants.pod_group[uid]
            return False, None

    def _occupied(self, group: Group, exclude_uid: str) -> dict[str, int]:
        return self.occupants.occupied(group, exclude_uid)

    # ---- filter ---------------------------------------------------------------------------
    def filter(
        self, pod: PodRef, names: Sequence[str], payload_nodes: Mapping[str, NodeInfo] | None = None
    ) -> FilterOutcome:
        """Nodes the pod may take (filtering.py); with ``choose_node``, the one most compact of
        them. Writes nothing: the slot of a chosen node is taken by :func:`reserve_chosen`.
        ``payload_nodes``: the nodes kube-scheduler sent in full (nodeCacheCapable=false);
        otherwise the informer's nodes are used."""
        group = self.remember(pod)
        if group is None:
            return FilterOutcome(list(names))
        with self.lock:
            self.occupants.expire(self.clock(), self.reservation_ttl_s)
            assignment, problem = self.cache.resolve(pod, group)
            if assignment is None:
                # Not admitted / not seen yet: an Error makes kube-scheduler retry the pod after
                # its backoff (1 s .. 10 s) instead of parking it until an unrelated cluster event.
                return FilterOutcome([], error=problem, ours=True)
            run = FilterRun(self.cache, self.occupants, pod, group, assignment, payload_nodes,
                            len(names) <= self.unassigned_detail_max)
            out = run.outcome(names, self.choose_node)
            if self.choose_node and len(out.passed) > 1:
                out.passed = [scoring.most_compact(self.cache, assignment, out.passed, run.occupied, run.used)]
            return out

    # ---- prioritize ---------------------------------------------------------------------
    def prioritize(self, pod: PodRef, names: Sequence[str]) -> list[tuple[str, int]]:
        """Scores 0..10 (scoring.py). Pass-through pods get an empty list (no opinion)."""
        group = self.remember(pod)
        if group is None:
            return []
        with self.lock:
            assignment, _ = self.cache.resolve(pod, group)
            if assignment is None:
                return [(n, 0) for n in names]
            return scoring.scores(self.cache, assignment, self.occupants.occupied(group, pod.uid), names)

    # ---- reserve ----------------------------------------------------------------------------
    def reserve(self, uid: str, node_name: str, *, confirmed: bool = False) -> Reservation | None:
        """Atomically take a slot on ``node_name`` for pod ``uid`` (before binding it, or, with
        ``confirmed``, for a node filter chose and kube-scheduler binds).

        Returns None for pods that are not ours (bind them without accounting). Raises
        :class:`SlotTaken` when the node has no free slot for the pod's group (or the pod's
        workload is not admitted), so the caller answers kube-scheduler with an Error and the
        pod is retried."""
        with self.lock:
            group = self.occupants.pod_group.get(uid)
            if group is None:
                return None
            now = self.clock()
            self.occupants.expire(now, self.reservation_ttl_s)
            return take_slot(self.cache, self.occupants, group, uid, node_name, now, confirmed)

    def confirm(self, res: Reservation) -> None:
        """The API server accepted the binding: keep the slot until the informer shows the pod."""
        with self.lock:
            current = self.occupants.reservations.get(res.uid)
            if current is not None and current.node == res.node:
                self.occupants.reservations[res.uid] = Reservation(res.group, res.node, res.uid, self.clock(), True)

    def release(self, res: Reservation) -> None:
        """The binding failed: give the slot back."""
        with self.lock:
            current = self.occupants.reservations.get(res.uid)
            if current is not None and current.node == res.node and not current.confirmed:
                del self.occupants.reservations[res.uid]

    # ---- introspection --------------------------------------------------------------------
    def occupancy(self, group: Group) -> dict[str, int]:
        """Occupied slots per node for a group (tests, /debug)."""
        with self.lock:
            return self.occupants.occupied(group, "")

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {
                "nodes": len(self.cache.nodes),
                "workloads": len(self.cache.workloads),
                "groups": len(self.occupants.bound),
                "reservations": len(self.occupants.reservations),
            }


def reserve_chosen(book: SlotBook, pod: PodRef, out: FilterOutcome) -> FilterOutcome:
    """The reserve step after a filter that chose a node (``choose_node``): the chosen node's
    slot held for the pod, or, when another pod took it meanwhile, an Error that retries it."""
    if not (book.choose_node and out.ours and out.passed):
        return out
    try:
        book.reserve(pod.uid, out.passed[0], confirmed=True)
    except SlotTaken as exc:
        return FilterOutcome([], error=str(exc), ours=True)
    return out
