"""The pods of admitted workloads left bound to a node whose Node object is gone.

Nothing runs such a pod any more once its machine is gone, yet its object stays ``Running`` until
kube-controller-manager's pod GC force-deletes it, and only then does the Job controller create
the rank again: the pod GC waits 40 s (``quarantineTime``) for its node informer to catch up
before it asks the API server whether the node really is gone. A rank on a deleted node thus
came back only after that wait (issue 34: 63 s, against 6.6 s for a node HyperPod labels
unhealthy), after toposched had already moved its slot to a spare node in the domain.

toposched deletes such a pod itself (grace period 0, as the pod GC does) when, checked against
the API server and not the watch cache:

1. the Node object is gone: a GET of it answers 404 (what the pod GC acts on, without waiting
   for an informer);
2. no kubelet of that name is alive: its Lease in ``kube-node-lease`` has not been renewed for
   a whole ``leaseDurationSeconds`` (a kubelet renews it every quarter of that), or it has been
   absent for at least ``lease_absent_s`` (default 15 s). A running kubelet recreates its Lease
   within one renew interval (10 s by default) after the garbage collector removes it with its
   Node, so a kubelet that still runs, and could still run the pod, keeps its pod.

Why no rank runs twice: a pod of a Job is replaced only once its object is gone (or
terminating), and this deletes only pods that no kubelet runs: a kubelet that could still run it
would have renewed its Lease. A kubelet cut off from the API server for longer than its Lease
cannot be told from a dead one; Kubernetes' pod GC deletes its pods after 40 s all the same (a
deleted Node object is Kubernetes' statement that the machine is gone), and HyperPod deletes a
Node only when it replaces the instance. Only pods of Workloads toposched admitted and that
still hold their quota are touched; every deletion is an Event on the Workload naming the node
and the evidence (reason ``PodOfDeletedNodeDeleted``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.core.workload import ANN_WORKLOAD
from scheduler.k8s.clock import parse_timestamp
from scheduler.k8s.informer import LEASES, NODES, PODS, object_key
from scheduler.kube.cache import ClusterCache
from scheduler.kube.writer import Obj, Writer

log = logging.getLogger(__name__)
Clock = Callable[[], dt.datetime]

NODE_LEASE_NAMESPACE = "kube-node-lease"
# A kubelet renews its Lease every quarter of leaseDurationSeconds (40 s by default: every 10 s)
# and recreates it within a renew interval when the garbage collector has removed it with the
# Node; an absent Lease is believed only after this long.
DEFAULT_LEASE_ABSENT_S = 15.0
DEFAULT_LEASE_DURATION_S = 40  # the kubelet's default nodeLeaseDurationSeconds
REASON = "PodOfDeletedNodeDeleted"


class DeletedNodePods:
    def __init__(self, cache: ClusterCache, writer: Writer, clock: Clock,
                 lease_absent_s: float = DEFAULT_LEASE_ABSENT_S) -> None:
        self.cache = cache
        self.writer = writer
        self.clock = clock
        self.lease_absent_s = lease_absent_s
        self._lease_absent_since: dict[str, dt.datetime] = {}  # node name -> first seen without a Lease
        # uids of the pods deleted here: a watch event sent before the deletion may put one back
        # in the cache for a moment, and it is neither deleted nor reported twice.
        self._deleted: set[str] = set()

    def release(self, gone: Collection[str], holding: Iterable[Obj]) -> list[str]:
        """Delete the pods of ``holding`` Workloads bound to a node named in ``gone`` (Node
        objects the cache no longer has) once the API server confirms no kubelet can run them;
        returns the names of the pods deleted."""
        if not gone:
            self._lease_absent_since.clear()
            self._deleted.clear()
            return []
        workloads = {object_key(wl): wl for wl in holding}
        verdicts: dict[str, str | None] = {}  # node -> the evidence that no kubelet runs it (None: not shown)
        deleted = []
        for pod in self.cache.pods.items():
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            meta = pod.get("metadata") or {}
            if node not in gone or meta.get("uid") in self._deleted:
                continue
            wl = workloads.get(f"{meta.get('namespace')}/{(meta.get('annotations') or {}).get(ANN_WORKLOAD)}")
            if wl is None:
                continue  # not a pod of a Workload toposched admitted: the pod GC's
            if node not in verdicts:
                try:
                    verdicts[node] = self._no_kubelet(node)
                except ApiException as exc:  # unreadable (RBAC, API server): left to the pod GC
                    log.warning("cannot tell whether node %s still has a kubelet (HTTP %s): its pods are left to "
                                "Kubernetes' pod GC", node, exc.status)
                    verdicts[node] = None
            evidence = verdicts[node]
            if evidence is None:
                continue
            if not self.writer.delete(PODS, meta["name"], meta.get("namespace"), gracePeriodSeconds=0):
                continue  # not leading
            self.cache.forget(self.cache.pods, pod)
            self._deleted.add(str(meta.get("uid")))
            deleted.append(str(meta["name"]))
            message = (f"Deleted pod {meta['name']} bound to node {node}: {evidence}, so no kubelet runs it; its "
                       "job controller creates it again on the node that replaced it")
            log.info("workload %s: %s", object_key(wl), message,
                     extra={"workload": object_key(wl), "node": node, "decision": "released"})
            self.writer.event(wl, "Normal", REASON, message)
        for node in set(self._lease_absent_since) - set(gone):
            del self._lease_absent_since[node]
        return deleted

    def _no_kubelet(self, node: str) -> str | None:
        """Why no kubelet can run pods on ``node`` (asked of the API server), or None."""
        try:
            self.writer.api.get(NODES, node)
            return None  # back (or the cache was behind): not ours to touch
        except ApiException as exc:
            if exc.status != 404:
                raise
        now = self.clock()
        try:
            lease = self.writer.api.get(LEASES, node, NODE_LEASE_NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise
            since = self._lease_absent_since.setdefault(node, now)
            if (now - since).total_seconds() < self.lease_absent_s:
                return None
            return (f"the Node object is gone and its Lease {NODE_LEASE_NAMESPACE}/{node} has been gone for "
                    f"{(now - since).total_seconds():.0f}s (a running kubelet recreates it within its renew interval)")
        self._lease_absent_since.pop(node, None)
        return lease_expired(lease, node, now)


def lease_expired(lease: Mapping[str, Any], node: str, now: dt.datetime) -> str | None:
    """The evidence when the Lease was not renewed for a whole lease duration, else None."""
    spec = lease.get("spec") or {}
    renewed = parse_timestamp(spec.get("renewTime")) or parse_timestamp(spec.get("acquireTime"))
    try:
        duration = int(spec.get("leaseDurationSeconds") or DEFAULT_LEASE_DURATION_S)
    except (TypeError, ValueError):
        duration = DEFAULT_LEASE_DURATION_S
    if renewed is None or (now - renewed).total_seconds() <= duration:
        return None
    return (f"the Node object is gone and its Lease {NODE_LEASE_NAMESPACE}/{node} was last renewed "
            f"{(now - renewed).total_seconds():.0f}s ago (its duration is {duration}s)")
