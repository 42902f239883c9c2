"""Node failures of admitted workloads (the controller's health watcher).

For every workload that holds a reservation, the nodes of its assignment are checked with
``node_health`` (one function, one answer) through a debounced :class:`FailureTracker`.

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

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException

from scheduler.core.assignment import encode_v1beta2
from scheduler.core.failures import (
    EVICTION_REASON,
    FailureTracker,
    multiple_failures_message,
    no_replacement_message,
    pods_per_node,
    replace_failed_nodes,
)
from scheduler.core.health import node_health
from scheduler.core.nodes import node_from_k8s
from scheduler.core.workload import ANN_WORKLOAD, slice_levels_of, topology_request_from_workload
from scheduler.kube import status as st
from scheduler.kube.informer import PODS, WORKLOADS
from scheduler.kube.jobs import ANN_AUTO_RESUME, ANN_MAX_RETRY
from scheduler.kube.snapshot import admitted_placements, core_nodes, core_pods, flavor_trees

if TYPE_CHECKING:
    from scheduler.kube.controller import Controller

log = logging.getLogger(__name__)
ANN_RETRIES = "toposched.dev/node-failure-retries"
ANN_RETRY_KEY = "toposched.dev/node-failure-counted"
DEFAULT_MAX_RETRIES = 1  # HyperPod CLI default when --auto-resume is set without --max-retry


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


def reservation_key(workload: Mapping[str, Any]) -> str:
    cond = st.find_condition(workload, st.QUOTA_RESERVED) or {}
    return str(cond.get("lastTransitionTime", ""))


class NodeFailureHandler:
    def __init__(self, controller: Controller, grace_s: float = 3.0) -> None:
        self.controller = controller
        self.tracker = FailureTracker(grace_s=grace_s)

    def observe_nodes(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        nodes = {n["metadata"]["name"]: n for n in self.controller.cache.nodes.items()}
        for name, obj in nodes.items():
            self.tracker.observe(name, node_health(node_from_k8s(obj)).healthy, now)
        for name in list(self.tracker.unhealthy_since):
            if name not in nodes:
                self.tracker.observe_deleted(name)
        return nodes

    def run(self) -> None:
        """One pass over the workloads holding a reservation."""
        from scheduler.kube.controller import has_reservation, is_finished

        nodes = self.observe_nodes()
        now = time.monotonic()
        holding = [wl for wl in self.controller.cache.workloads.items()
                   if has_reservation(wl) and not st.condition_true(wl, st.EVICTED) and not is_finished(wl)]
        for wl in holding:
            assigned: dict[str, int] = {}
            for placement, _per_pod, _flavor in admitted_placements(wl):
                for host, count in pods_per_node(placement).items():
                    assigned[host] = assigned.get(host, 0) + count
            for host in assigned:
                if host not in nodes and host not in self.tracker.deleted:
                    self.tracker.observe_deleted(host)
            failed = self.tracker.failed_among(assigned, now)
            if not failed:
                continue
            if self._hot_swap(wl, failed, nodes, holding):
                continue
            message = multiple_failures_message(failed) if len(failed) > 1 else no_replacement_message(failed)
            self.evict(wl, message)

    # ------------------------------------------------------------------ hot swap
    def _hot_swap(self, wl: dict[str, Any], failed: list[str], nodes: Mapping[str, Any], holding: list[Any]) -> bool:
        """Move the pods of every failed node to healthy nodes inside the workload's request
        (all of them or none); False when that is not possible and the workload must go."""
        ctl = self.controller
        cache = ctl.cache
        topologies = {t["metadata"]["name"]: t for t in cache.topologies.items()}
        trees = flavor_trees(cache.flavors.items(), topologies, core_nodes(nodes.values()),
                             core_pods(cache.pods.items()), holding)
        spec_sets = {ps["name"]: ps for ps in (wl.get("spec") or {}).get("podSets") or ()}
        admission = dict((wl.get("status") or {}).get("admission") or {})
        new_psas = []
        replaced = False
        labels_of = {n: ((nodes.get(n) or {}).get("metadata") or {}).get("labels") or {}
                     for n in failed if n in nodes}
        for psa, (placement, per_pod, flavor) in zip(admission.get("podSetAssignments") or (),
                                                      admitted_placements(wl), strict=False):
            if not set(failed) & set(pods_per_node(placement)):
                new_psas.append(psa)
                continue
            tree = trees.get(flavor)
            request = topology_request_from_workload((spec_sets.get(psa["name"]) or {}).get("topologyRequest"))
            if tree is None:
                return False
            new = replace_failed_nodes(tree, placement, per_pod, failed, request.required if request else None,
                                       labels_of, slice_levels_of(request))
            if new is None:
                return False
            new_psas.append({**psa, "topologyAssignment": encode_v1beta2(new)})
            replaced = True
        if not replaced:
            return False
        updated = ctl._patch_status(wl, {"admission": {**admission, "podSetAssignments": new_psas}})
        if updated is None:
            return True  # stale copy: the next reconcile looks again
        for node in failed:
            self._delete_pods_on(wl, node)
        names = ", ".join(failed)
        ctl.events.record(wl, "Normal", "NodeReplaced",
                          f"Replaced unhealthy node{'s' if len(failed) > 1 else ''} {names} within the workload's "
                          "topology domain")
        ctl._notify("replaced", wl, {"failedNode": failed[0], "failedNodes": failed})
        log.info("workload %s/%s: replaced failed node(s) %s", wl["metadata"]["namespace"], wl["metadata"]["name"],
                 names)
        return True

    def _delete_pods_on(self, wl: Mapping[str, Any], node: str) -> None:
        ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        for pod in self.controller.cache.pods.items():
            meta = pod.get("metadata") or {}
            if meta.get("namespace") != ns or (pod.get("spec") or {}).get("nodeName") != node:
                continue
            if (meta.get("annotations") or {}).get(ANN_WORKLOAD) != name:
                continue
            try:
                self.controller.api.delete(PODS, meta["name"], ns, gracePeriodSeconds=0)
            except ApiException as exc:
                if exc.status != 404:
                    raise

    # ------------------------------------------------------------------ eviction + retries
    def evict(self, wl: dict[str, Any], message: str) -> None:
        ctl = self.controller
        enabled, limit = auto_resume(wl)
        if enabled and not self._count_retry(wl):
            return  # could not persist the count: do not act on an uncounted failure
        fresh = ctl.cache.workloads.get(f"{wl['metadata']['namespace']}/{wl['metadata']['name']}") or wl
        if ctl.evict(fresh, EVICTION_REASON, message):
            ctl.events.record(fresh, "Warning", "EvictedDueToNodeFailures", message)
            ctl._notify("evicted", fresh, {"reason": EVICTION_REASON, "message": message})
            log.info("workload %s/%s evicted: %s", fresh["metadata"]["namespace"], fresh["metadata"]["name"], message)

    def _count_retry(self, wl: dict[str, Any]) -> bool:
        """Persist one retry for this reservation, exactly once (idempotent across restarts)."""
        key = reservation_key(wl)
        ann = (wl.get("metadata") or {}).get("annotations") or {}
        if ann.get(ANN_RETRY_KEY) == key:
            return True
        meta = wl["metadata"]
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {
            ANN_RETRIES: str(retries_used(wl) + 1), ANN_RETRY_KEY: key}}}
        try:
            updated = self.controller.api.merge_patch(WORKLOADS, meta["name"], patch, meta["namespace"])
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        self.controller.cache.write_through(self.controller.cache.workloads, updated)
        return True

    def requeue_or_fail(self, wl: Mapping[str, Any]) -> tuple[bool, str | None]:
        """After a NodeFailures eviction: (requeue?, failure message when retries are used up)."""
        evicted = st.find_condition(wl, st.EVICTED) or {}
        if evicted.get("reason") != EVICTION_REASON:
            return True, None
        enabled, limit = auto_resume(wl)
        if not enabled:
            return True, None
        used = retries_used(wl)
        if used > limit:
            return False, (f"exceeded the maximum number of auto-resume retries ({limit}) after node failures; "
                           f"last: {evicted.get('message', '')}")
        return True, None
