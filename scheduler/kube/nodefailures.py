"""Node failures of admitted workloads (the controller's health watcher).

The shell only records: every node's health (``node_health``, one function, one answer) goes
into a :class:`FailureTracker` (name -> first seen unhealthy, on the injected clock; deleted
nodes), as Kueue keeps ``status.unhealthyNodes``. What to do is decided by the pure
``core.failures.node_failure_decisions`` (the simulator calls the same), and this module
writes the decisions through the :class:`~scheduler.kube.writer.Writer`:

- Hostname-level assignment and a replacement inside the domain the request requires (for
  slices: each failed node's own slice domain) for every failed node: the assignment is
  rewritten (hot swap, like Kueue's ``TASFailedNodeReplacement``) and the workload's pods on
  the failed nodes are deleted so the Job controller recreates them; the extender places them
  on the new slots. Pods elsewhere keep running. Kueue replaces one failed node and evicts
  when several fail together; toposched replaces several (``replace_failed_nodes``, all or
  none) and evicts with Kueue's message only when they cannot all be replaced.
- Otherwise the workload is evicted with reason ``NodeFailures`` and Kueue's message; the
  controller's eviction phase suspends the Job, waits until its pods are gone (so a pod never
  runs twice), and requeues it.

HyperPod auto-resume (``sagemaker.amazonaws.com/enable-job-auto-resume: "true"`` and
``sagemaker.amazonaws.com/job-max-retry-count``): every NodeFailures eviction counts one retry,
persisted on the Workload (annotation ``toposched.dev/node-failure-retries``, keyed by the
reservation it ended so a restarted controller neither loses nor double-counts it). When
the retries are used up the workload is finished as Failed instead of being requeued.
Without the annotations Kueue's behaviour holds: requeue at once, no limit.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.adapter.cluster import admitted_placements, core_nodes, core_pods, flavor_trees
from scheduler.core.assignment import encode_v1beta2
from scheduler.core.failures import (
    EVICTION_REASON,
    EvictForNodeFailure,
    FailureTracker,
    PlacedWorkload,
    ReplaceNodes,
    apply_replacement,
    node_failure_decisions,
)
from scheduler.core.health import node_health
from scheduler.core.nodes import node_from_k8s
from scheduler.core.preemption import TASUsage
from scheduler.core.topology_request import request_from_kueue
from scheduler.core.workload import ANN_WORKLOAD
from scheduler.kube import status as st
from scheduler.kube.cache import ClusterCache
from scheduler.kube.eviction import evict
from scheduler.kube.jobs import ANN_AUTO_RESUME, ANN_MAX_RETRY
from scheduler.kube.writer import Obj, Writer

log = logging.getLogger(__name__)
ANN_RETRIES = "toposched.dev/node-failure-retries"
ANN_RETRY_KEY = "toposched.dev/node-failure-counted"
DEFAULT_MAX_RETRIES = 1  # HyperPod CLI default when --auto-resume is set without --max-retry
Clock = Callable[[], dt.datetime]


def auto_resume(workload: Mapping[str, Any]) -> tuple[bool, int]:
    ann = (workload.get("metadata") or {}).get("annotations") or {}
    enabled = str(ann.get(ANN_AUTO_RESUME, "")).lower() == "true"
    try:
        limit = int(ann.get(ANN_MAX_RETRY, DEFAULT_MAX_RETRIES))
    except ValueError:
        limit = DEFAULT_MAX_RETRIES
    return enabled, max(limit, 0)


def retries_used(workload: Mapping[str, Any]) -> int:
    ann = (workload.get("metadata") or {}).get("annotations") or {}
    try:
        return int(ann.get(ANN_RETRIES, 0))
    except ValueError:
        return 0


def _cluster_queue(wl: Mapping[str, Any]) -> str:
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def reservation_key(workload: Mapping[str, Any]) -> str:
    cond = st.find_condition(workload, st.QUOTA_RESERVED) or {}
    return str(cond.get("lastTransitionTime", ""))


def requeue_or_fail(workload: Mapping[str, Any]) -> tuple[bool, str | None]:
    """After a NodeFailures eviction: (requeue?, failure message when retries are used up)."""
    evicted = st.find_condition(workload, st.EVICTED) or {}
    if evicted.get("reason") != EVICTION_REASON:
        return True, None
    enabled, limit = auto_resume(workload)
    if not enabled:
        return True, None
    used = retries_used(workload)
    if used > limit:
        return False, (f"exceeded the maximum number of auto-resume retries ({limit}) after node failures; "
                       f"last: {evicted.get('message', '')}")
    return True, None


def placed_workload(workload: Mapping[str, Any]) -> PlacedWorkload:
    """A Workload object as the failure decision's input (its topology assignments)."""
    requests = {ps["name"]: request_from_kueue(ps.get("topologyRequest"))
                for ps in (workload.get("spec") or {}).get("podSets") or ()}
    tas = tuple(TASUsage(flavor, placement, per_pod) for placement, per_pod, flavor in admitted_placements(workload))
    meta = workload["metadata"]
    return PlacedWorkload(f"{meta['namespace']}/{meta['name']}", tas, requests)


class NodeFailureHandler:
    def __init__(self, cache: ClusterCache, writer: Writer, clock: Clock, grace_s: float = 3.0) -> None:
        self.cache = cache
        self.writer = writer
        self.clock = clock
        self.tracker = FailureTracker(grace_s=grace_s)

    def record_nodes(self, now: float) -> dict[str, Obj]:
        """Record every node's health (and nodes that are gone); returns the nodes by name."""
        nodes = {n["metadata"]["name"]: n for n in self.cache.nodes.items()}
        for name, obj in nodes.items():
            self.tracker.observe(name, node_health(node_from_k8s(obj)).healthy, now)
        for name in list(self.tracker.unhealthy_since):
            if name not in nodes:
                self.tracker.observe_deleted(name)
        return nodes

    def run(self) -> None:
        """One pass over the workloads holding a reservation: record, decide, write."""
        now = self.clock().timestamp()
        nodes = self.record_nodes(now)
        holding = [wl for wl in self.cache.workloads.items()
                   if st.has_reservation(wl) and not st.condition_true(wl, st.EVICTED) and not st.is_finished(wl)]
        placed = {}
        for wl in holding:
            workload = placed_workload(wl)
            for host in workload.assigned_nodes():
                if host not in nodes and host not in self.tracker.deleted:
                    self.tracker.observe_deleted(host)
            if self.tracker.failed_among(workload.assigned_nodes(), now):
                placed[workload.key] = (workload, wl)
        if not placed:
            return  # the trees are built only when some assigned node has failed
        for decision in self._decide([w for w, _ in placed.values()], nodes, holding, now):
            wl = placed[decision.workload][1]
            if isinstance(decision, ReplaceNodes):
                self.replace(wl, decision)
            else:
                self.evict(wl, decision)

    def _decide(self, workloads: Sequence[PlacedWorkload], nodes: Mapping[str, Obj], holding: list[Obj],
                now: float) -> list[ReplaceNodes | EvictForNodeFailure]:
        topologies = {t["metadata"]["name"]: t for t in self.cache.topologies.items()}
        trees = flavor_trees(self.cache.flavors.items(), topologies, core_nodes(nodes.values()),
                             core_pods(self.cache.pods.items()), holding)
        labels = {name: ((obj.get("metadata") or {}).get("labels") or {}) for name, obj in nodes.items()}
        return node_failure_decisions(workloads, self.tracker, trees, now, labels)

    # ------------------------------------------------------------------ hot swap
    def replace(self, wl: Obj, decision: ReplaceNodes) -> None:
        """Rewrite the assignment, then delete the workload's pods on the failed nodes so the
        Job controller recreates them (the extender places them on the new slots)."""
        admission = dict((wl.get("status") or {}).get("admission") or {})
        placements = {p.name: p for p, _per_pod, _flavor in admitted_placements(wl)}
        moved = {p.name for p in decision.placements}
        psas = [{**psa, "topologyAssignment": encode_v1beta2(apply_replacement(placements[psa["name"]], decision))}
                if psa.get("name") in moved and psa["name"] in placements else psa
                for psa in admission.get("podSetAssignments") or ()]
        updated = self.writer.patch_workload_status(wl, {"admission": {**admission, "podSetAssignments": psas}})
        if updated is None:
            return  # stale copy (or not leading): the next reconcile looks again
        failed = list(decision.failed_nodes)
        for node in failed:
            self._delete_pods_on(wl, node)
        names = ", ".join(failed)
        self.writer.event(wl, "Normal", "NodeReplaced",
                          f"Replaced unhealthy node{'s' if len(failed) > 1 else ''} {names} within the workload's "
                          "topology domain")
        self.writer.notify("replaced", wl, {"failedNode": failed[0], "failedNodes": failed})
        log.info("workload %s: replaced failed node(s) %s", decision.workload, names,
                 extra={"workload": decision.workload, "node": names, "decision": "replaced",
                        "queue": _cluster_queue(wl)})

    def _delete_pods_on(self, wl: Mapping[str, Any], node: str) -> None:
        ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        for pod in self.cache.pods.items():
            meta = pod.get("metadata") or {}
            if meta.get("namespace") != ns or (pod.get("spec") or {}).get("nodeName") != node:
                continue
            if (meta.get("annotations") or {}).get(ANN_WORKLOAD) != name:
                continue
            self.writer.delete_pod(meta["name"], ns)

    # ------------------------------------------------------------------ eviction + retries
    def evict(self, wl: Obj, decision: EvictForNodeFailure) -> None:
        enabled, _limit = auto_resume(wl)
        if enabled and not self._count_retry(wl):
            return  # could not persist the count: do not act on an uncounted failure
        fresh = self.cache.workloads.get(decision.workload) or wl
        if evict(self.writer, fresh, decision.reason, decision.message, self.clock()):
            self.writer.event(fresh, "Warning", "EvictedDueToNodeFailures", decision.message)
            self.writer.notify("evicted", fresh, {"reason": decision.reason, "message": decision.message})
            log.info("workload %s evicted: %s", decision.workload, decision.message,
                     extra={"workload": decision.workload, "node": ", ".join(decision.failed_nodes),
                            "decision": "evicted", "reason": decision.reason, "queue": _cluster_queue(fresh)})

    def _count_retry(self, wl: Obj) -> bool:
        """Persist one retry for this reservation, exactly once (idempotent across restarts)."""
        key = reservation_key(wl)
        ann = (wl.get("metadata") or {}).get("annotations") or {}
        if ann.get(ANN_RETRY_KEY) == key:
            return True
        return self.writer.annotate_workload(wl, {ANN_RETRIES: str(retries_used(wl) + 1), ANN_RETRY_KEY: key}) \
            is not None
