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

from kubernetes.client.exceptions import ApiException

from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.cluster import admitted_placements, core_nodes, flavor_trees
from scheduler.adapter.kinds.pod import owned_by_single_pod
from scheduler.adapter.kinds.workloads import ANN_AUTO_RESUME, ANN_MAX_RETRY
from scheduler.adapter.objects import VersionMemo
from scheduler.adapter.owned import ANN_RETRIES, ANN_RETRY_KEY
from scheduler.adapter.pod_ownership import usage_pods
from scheduler.core.assignment import encode_v1beta2
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy, node_health
from scheduler.core.kueue.admitted import TASUsage
from scheduler.core.kueue.failures import (
    EVICTION_REASON,
    EvictForNodeFailure,
    FailureTracker,
    HoldForNodeStorm,
    NodeFailureDecision,
    PlacedWorkload,
    ReplaceNodes,
    Storm,
    StormPolicy,
    apply_replacement,
    failure_kind,
    held_nodes,
    node_failure_decisions,
    storm_groups,
    storms,
)
from scheduler.core.nodes import HOSTNAME_LABEL, node_from_k8s
from scheduler.core.topology_request import request_from_kueue
from scheduler.core.workload import ANN_WORKLOAD
from scheduler.k8s.informer import PODS, object_key
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.cache import ClusterCache
from scheduler.kube.eviction import evict
from scheduler.kube.gone_nodes import DEFAULT_LEASE_ABSENT_S, DeletedNodePods
from scheduler.kube.isolation import Isolation
from scheduler.kube.writer import Obj, Writer

log = logging.getLogger(__name__)
DEFAULT_MAX_RETRIES = 1  # HyperPod CLI default when --auto-resume is set without --max-retry
# A node nobody can reach (Ready=Unknown) gets as long as Kubernetes gives a pod on it before
# evicting it (the DefaultTolerationSeconds admission plugin's 300 s toleration of
# node.kubernetes.io/unreachable): a partition often heals, its pods may still be running, and
# acting sooner gains nothing, since a replacement waits for the old pod to terminate anyway.
DEFAULT_UNREACHABLE_GRACE_S = 300.0
# The condition a held Workload carries while an eviction storm lasts (not a Kueue type:
# domain-prefixed, as third-party condition types on Kueue objects should be).
HELD_CONDITION = "toposched.dev/NodeFailuresHeld"
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


def host_of(node: Mapping[str, Any]) -> str:
    """The name a topology assignment gives this node: its hostname label, else its name."""
    meta = node.get("metadata") or {}
    return str((meta.get("labels") or {}).get(HOSTNAME_LABEL) or meta["name"])


def placed_workload(workload: Mapping[str, Any]) -> PlacedWorkload:
    """A Workload object as the failure decision's input (its topology assignments)."""
    requests = {ps["name"]: request_from_kueue(ps.get("topologyRequest"))
                for ps in (workload.get("spec") or {}).get("podSets") or ()}
    tas = tuple(TASUsage(flavor, placement, per_pod) for placement, per_pod, flavor in admitted_placements(workload))
    meta = workload["metadata"]
    return PlacedWorkload(f"{meta['namespace']}/{meta['name']}", tas, requests, owned_by_single_pod(workload))


class NodeFailureHandler:
    def __init__(self, cache: ClusterCache, writer: Writer, clock: Clock, grace_s: float = 3.0,
                 isolation: Isolation | None = None, unreachable_grace_s: float = DEFAULT_UNREACHABLE_GRACE_S,
                 storm_policy: StormPolicy | None = None, health_policy: HealthPolicy = DEFAULT_POLICY,
                 caches: SnapshotCaches | None = None, prefix_runs: bool = False,
                 deleted_node_lease_absent_s: float | None = DEFAULT_LEASE_ABSENT_S,
                 skip_pod_owned: bool = False, overlapping_flavors: bool = False) -> None:
        """``caches``: the controller's conversions (the snapshot reads the same nodes and trees).
        ``prefix_runs``: TASAssignmentsEncodingByHostnamePrefix, the rewritten assignment's encoding.
        ``deleted_node_lease_absent_s``: the pods of admitted workloads on a deleted node are
        deleted once no kubelet can run them (kube/gone_nodes.py), an absent Lease believed after
        this long; None: never, Kubernetes' pod GC deletes them. ``skip_pod_owned``:
        SkipReassignmentForPodOwnedWorkloads (a plain Pod's Workload is neither moved nor evicted).
        ``overlapping_flavors``: TASHandleOverlappingFlavors (the snapshot's rule for the trees)."""
        self.cache = cache
        self.skip_pod_owned = skip_pod_owned
        self.overlapping_flavors = overlapping_flavors
        self.caches = caches if caches is not None else SnapshotCaches()
        self.prefix_runs = prefix_runs
        self.health_policy = health_policy  # the placement's: one answer to "is it healthy?"
        self.writer = writer
        self.clock = clock
        self.isolation = isolation if isolation is not None else Isolation(writer, clock)
        self.tracker = FailureTracker(grace_s=grace_s, unreachable_grace_s=unreachable_grace_s)
        self.storm_policy = storm_policy if storm_policy is not None else StormPolicy()
        self.storms: dict[str, Storm] = {}  # groups holding node-failure actions now
        # The labels each node had when last seen: a node deleted with a workload's pods on it
        # still names its topology domain, so the hot swap stays inside the domain the started
        # Job's nodeSelector pins (a replacement elsewhere could never be scheduled).
        self.last_labels: dict[str, Mapping[str, str]] = {}
        self.last_names: dict[str, str] = {}  # host -> the name of its node when last seen
        self.gone_pods = (DeletedNodePods(cache, writer, clock, deleted_node_lease_absent_s)
                          if deleted_node_lease_absent_s is not None else None)
        # (host, healthy, failure kind) per node, reused while the node is unchanged: judging
        # every node on every pass was a quarter of the pass on Kueue's 640-node perf test.
        self._verdicts: VersionMemo[tuple[str, bool, str]] = VersionMemo()
        # Each holding Workload's decoded assignment and its hosts, reused while the Workload is
        # unchanged: decoding every admitted Workload on every pass was a quarter of the
        # controller's CPU in a burst of 1,100 jobs (docs/performance.md, issue 34).
        self._placed: dict[str, tuple[tuple[str, str], PlacedWorkload, frozenset[str]]] = {}

    def record_nodes(self, now: float) -> dict[str, Obj]:
        """Record every node's health (and nodes that are gone); returns the nodes by host.

        Keyed as placement keys them: by the ``kubernetes.io/hostname`` label value (the
        node's name without one), since that is what a topology assignment names. Kueue's
        perf runner names a node ``node-b0-r0-n0`` and labels it ``hostname=node-0``: keyed by
        name, every assigned host looked deleted and was evicted at once, in a loop. Judged
        with the placement's own ``node_health``; a value several nodes carry is unhealthy
        only when all of them are (the assignment cannot say which one it meant)."""
        nodes: dict[str, Obj] = {}
        verdicts: dict[str, tuple[bool, str]] = {}
        objs = self.cache.nodes.items()
        for obj, (host, healthy, kind) in zip(objs, self._verdicts.convert(objs, self._judge), strict=True):
            if host not in verdicts or (healthy and not verdicts[host][0]):
                nodes[host] = obj
                verdicts[host] = (healthy, kind)
        for host, (healthy, kind) in verdicts.items():
            self.tracker.observe(host, healthy, now, kind)
            self.last_labels[host] = (nodes[host].get("metadata") or {}).get("labels") or {}
            self.last_names[host] = str(nodes[host]["metadata"]["name"])
        for host in list(self.tracker.unhealthy_since):
            if host not in nodes:
                self.tracker.observe_deleted(host)
        return nodes

    def _judge(self, node: Mapping[str, Any]) -> tuple[str, bool, str]:
        info = node_from_k8s(node)
        return host_of(node), node_health(info, self.health_policy).healthy, failure_kind(info)

    def run(self) -> None:
        """One pass over the workloads holding a reservation: record, decide, write. A workload
        that cannot be read or written is reported (``isolation``) and the others go on."""
        now = self.clock().timestamp()
        nodes = self.record_nodes(now)
        holding = [wl for wl in wi.holding(self.cache.workloads) if not st.condition_true(wl, st.EVICTED)]
        readable: list[Obj] = []
        placed: dict[str, tuple[PlacedWorkload, Obj]] = {}

        def consider(wl: Obj) -> None:
            workload, hosts = self._placed_workload(wl)
            readable.append(wl)
            for host in hosts:
                if host not in nodes and host not in self.tracker.deleted:
                    self.tracker.observe_deleted(host)
            if self.tracker.failed_among(hosts, now):
                placed[workload.key] = (workload, wl)

        self.isolation.for_each("node_failures", holding, consider, workload_of=lambda wl: wl)
        if len(self._placed) > 2 * len(holding) + 1024:  # released or gone
            keep = {object_key(wl) for wl in holding}
            self._placed = {k: v for k, v in self._placed.items() if k in keep}
        self._watch_storms(nodes, now)
        held = held_nodes(self.storms)
        self.isolation.for_each("node_failures", [wl for wl in holding if st.condition_true(wl, HELD_CONDITION)
                                                  and object_key(wl) not in placed], self._resume,
                                workload_of=lambda wl: wl)
        if placed:  # the trees are built only when some assigned node has failed
            def apply(decision: NodeFailureDecision) -> None:
                wl = placed[decision.workload][1]
                if isinstance(decision, HoldForNodeStorm):
                    self.hold(wl, decision)
                    return
                wl = self._resume(wl)
                if isinstance(decision, ReplaceNodes):
                    self.replace(wl, decision)
                else:
                    self.evict(wl, decision)

            decisions = self._decide([w for w, _ in placed.values()], nodes, readable, now, held)
            self.isolation.for_each("node_failures", decisions, apply, subject=lambda d: placed[d.workload][1],
                                    workload_of=lambda d: placed[d.workload][1])
        if self.gone_pods is not None:
            # After the replacements: a rank's slot has moved before its pod is deleted, so the
            # pod the Job controller creates again finds its new node at once.
            existing = {str(n["metadata"]["name"]) for n in self.cache.nodes.items()}
            gone = {self.last_names.get(host, host) for host in self.tracker.deleted} - existing
            self.gone_pods.release(gone, wi.holding(self.cache.workloads))

    def _placed_workload(self, wl: Obj) -> tuple[PlacedWorkload, frozenset[str]]:
        """The Workload's assignment as the decision reads it and its hosts, decoded again only
        when the Workload changed (a new resourceVersion, or another object of that name)."""
        meta = wl.get("metadata") or {}
        key, stamp = object_key(wl), (str(meta.get("resourceVersion") or ""), str(meta.get("uid") or ""))
        hit = self._placed.get(key)
        if hit is not None and hit[0] == stamp and stamp[0]:
            return hit[1], hit[2]
        workload = placed_workload(wl)
        hosts = frozenset(workload.assigned_nodes())
        self._placed[key] = (stamp, workload, hosts)
        return workload, hosts

    def _decide(self, workloads: Sequence[PlacedWorkload], nodes: Mapping[str, Obj], holding: list[Obj],
                now: float, held: Mapping[str, Storm]) -> list[NodeFailureDecision]:
        topologies = {t["metadata"]["name"]: t for t in self.cache.topologies.items()}
        caches = self.caches
        trees = flavor_trees(self.cache.flavors.items(), topologies, core_nodes(self.cache.nodes.items(), caches.nodes),
                             usage_pods(self.cache.pods.items(), holding, self.cache.owner_links(), caches.pods),
                             holding, self.health_policy, caches.trees,
                             caches.admitted, self.overlapping_flavors)
        labels = {name: ((obj.get("metadata") or {}).get("labels") or {}) for name, obj in nodes.items()}
        gone = {name: self.last_labels[name] for name in self.tracker.deleted if name in self.last_labels}
        return node_failure_decisions(workloads, self.tracker, trees, now, {**gone, **labels}, held=held,
                                      skip_pod_owned=self.skip_pod_owned)

    # ------------------------------------------------------------------ eviction-storm guard
    def node_groups(self, nodes: Mapping[str, Obj]) -> dict[str, list[str]]:
        """Each flavor's nodes (those carrying its nodeLabels) and all nodes: the groups the
        storm guard watches, as the node lifecycle controller watches each zone."""
        labels = {name: ((obj.get("metadata") or {}).get("labels") or {}) for name, obj in nodes.items()}
        selectors = {f["metadata"]["name"]: ((f.get("spec") or {}).get("nodeLabels") or {})
                     for f in self.cache.flavors.items()}
        return storm_groups(labels, selectors)

    def _watch_storms(self, nodes: Mapping[str, Obj], now: float) -> None:
        current = storms(self.node_groups(nodes), self.tracker, now, self.storm_policy, self.storms)
        for group in sorted(set(current) - set(self.storms)):
            log.warning("eviction storm in %s: %s", group, current[group].message)
        for group in sorted(set(self.storms) - set(current)):
            log.warning("eviction storm in %s is over: node-failure evictions and replacements resume", group)
        self.storms = current

    def hold(self, wl: Obj, decision: HoldForNodeStorm) -> None:
        """A Warning Event on the Workload and the held condition (written when it changes)."""
        cond = st.find_condition(wl, HELD_CONDITION) or {}
        if (cond.get("status"), cond.get("message")) == ("True", decision.message):
            return
        log.warning("workload %s: node failure of %s held: %s", decision.workload, ", ".join(decision.failed_nodes),
                    decision.message)
        conditions = st.set_condition(st.conditions_of(wl), HELD_CONDITION, "True", "EvictionStorm", decision.message,
                                      self.clock())
        if self.writer.patch_workload_status(wl, {"conditions": conditions}) is not None:
            self.writer.event(wl, "Warning", "NodeFailuresHeld", decision.message)

    def _resume(self, wl: Obj) -> Obj:
        """The held condition set False (the storm is over); the Workload to go on with."""
        if not st.condition_true(wl, HELD_CONDITION):
            return wl
        conditions = st.set_condition(st.conditions_of(wl), HELD_CONDITION, "False", "StormOver",
                                      "the share of unhealthy nodes dropped: node-failure handling resumed",
                                      self.clock())
        return self.writer.patch_workload_status(wl, {"conditions": conditions}) or wl

    # ------------------------------------------------------------------ hot swap
    def replace(self, wl: Obj, decision: ReplaceNodes) -> None:
        """Hot swap in two steps, so a rank never runs twice: first the workload's pods on the
        failed nodes are deleted gracefully and awaited (terminated, or their node object gone);
        only then is the assignment rewritten. Until then the recreated pods have no slot: the
        extender places a pod only on its assignment's healthy nodes with a free slot, and the
        assignment still names the failed node (unhealthy) and full healthy ones. A partitioned
        node's pod may still run; it is never given a second copy while the API still has it."""
        terminating = self._terminate_pods_on(wl, decision.failed_nodes)
        if terminating:
            log.info("workload %s: waiting for %s to terminate before replacing %s", decision.workload,
                     ", ".join(terminating), ", ".join(decision.failed_nodes))
            return
        admission = dict((wl.get("status") or {}).get("admission") or {})
        placements = {p.name: p for p, _per_pod, _flavor in admitted_placements(wl)}
        moved = {p.name for p in decision.placements}
        psas = [{**psa, "topologyAssignment": encode_v1beta2(apply_replacement(placements[psa["name"]], decision),
                                                             split_by_hostname_prefix=self.prefix_runs)}
                if psa.get("name") in moved and psa["name"] in placements else psa
                for psa in admission.get("podSetAssignments") or ()]
        updated = self.writer.patch_workload_status(wl, {"admission": {**admission, "podSetAssignments": psas}})
        if updated is None:
            return  # stale copy (or not leading): the next reconcile looks again
        failed = list(decision.failed_nodes)
        names = ", ".join(failed)
        self.writer.event(wl, "Normal", "NodeReplaced",
                          f"Replaced unhealthy node{'s' if len(failed) > 1 else ''} {names} within the workload's "
                          "topology domain")
        self.writer.notify("replaced", wl, {"failedNode": failed[0], "failedNodes": failed})
        log.info("workload %s: replaced failed node(s) %s", decision.workload, names,
                 extra={"workload": decision.workload, "node": names, "decision": "replaced",
                        "queue": _cluster_queue(wl)})

    def _terminate_pods_on(self, wl: Mapping[str, Any], nodes: Sequence[str]) -> list[str]:
        """Delete (gracefully) the workload's pods on ``nodes`` whose node object still exists;
        the names of those still there afterwards (asked of the API server, not the cache)."""
        ns, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        names = {n["metadata"]["name"] for n in self.cache.nodes.items() if host_of(n) in nodes}
        remaining = []
        for pod in self.cache.pods.items():
            meta = pod.get("metadata") or {}
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if meta.get("namespace") != ns or node not in names:
                continue  # another's, or its node object is gone: deleted once no kubelet runs it (gone_nodes)
            if (meta.get("annotations") or {}).get(ANN_WORKLOAD) != name:
                continue
            if not meta.get("deletionTimestamp"):
                self.writer.delete_pod(meta["name"], ns)
            if self._still_there(pod):
                remaining.append(f"pod {meta['name']}")
        return remaining

    def _still_there(self, pod: Obj) -> bool:
        meta = pod["metadata"]
        try:
            current = self.writer.api.get(PODS, meta["name"], meta["namespace"])
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.cache.forget(self.cache.pods, pod)
            return False
        return str((current.get("metadata") or {}).get("uid")) == str(meta.get("uid"))

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
