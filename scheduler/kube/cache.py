"""The controller's view of the cluster: one informer per resource it reads.

Writes go through :meth:`ClusterCache.write_through` so the next cycle sees its own results
even before the watch event arrives (otherwise a fast cycle could admit a workload twice or
count freed capacity twice).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.adapter.kinds.registry import KINDS, watched
from scheduler.core.kueue_names import LABEL_MANAGED, LABEL_POD_GROUP_NAME
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s import informer as inf
from scheduler.kube.jobs import resource_of
from scheduler.kube.workload_index import index_workloads

Obj = dict[str, Any]
BUILT_IN_GROUPS = ("batch", "apps")  # served by every API server; the others' CRDs may be missing
# Index of both pod informers: "<namespace>/<pod-group-name label>" (the label is immutable,
# admission/pods.py), so a group's pods are found whatever else a tenant removes from them.
POD_GROUP = "pod-group"
# The kinds some governed kind creates as its children (and a batch Job, which anyone can
# create with an owner reference to a queued parent).
CHILD_FRAMEWORKS = frozenset({"batch/job", *(child for kind in KINDS for child in kind.children)})


def _pod_group(pod: Obj) -> tuple[str, ...]:
    """The group a pod names, in the label and (Kueue's WorkloadIdentifierAnnotations, v0.19)
    the annotation of the same key: both are filed, and the reader keeps the one its gate
    says (``adapter/kinds/identifiers.py``)."""
    meta = pod.get("metadata") or {}
    names = {(meta.get(where) or {}).get(LABEL_POD_GROUP_NAME) for where in ("labels", "annotations")}
    return tuple(sorted(f"{meta.get('namespace')}/{g}" for g in names if g and isinstance(g, str)))


STATEFULSETS = inf.Resource("apps", "v1", "statefulsets")
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"  # the JobSet controller's label on its Jobs
LABEL_LWS_NAME = "leaderworkerset.sigs.k8s.io/name"  # the LWS controller's label on its StatefulSets


@dataclass
class ClusterCache:
    api: inf.Api
    nodes: inf.Informer
    pods: inf.Informer
    namespaces: inf.Informer
    workloads: inf.Informer
    cluster_queues: inf.Informer
    local_queues: inf.Informer
    flavors: inf.Informer
    topologies: inf.Informer
    cohorts: inf.Informer
    workload_priority_classes: inf.Informer
    priority_classes: inf.Informer
    # The queued objects of every watched kind (the job-kind registry), by Kueue framework name.
    jobs: dict[str, inf.Informer]
    # Objects the kinds' pod sets are read from (a TrainJob's runtimes), by kind name.
    related: dict[str, inf.Informer]
    # The pod integration's pods (label kueue.x-k8s.io/managed), finished ones too: a pod's
    # Workload finishes with it (``pods`` leaves finished pods out).
    managed_pods: inf.Informer
    # Kueue's alpha PreemptionConfig, toposched's PreemptionLimit (optional: absent CRDs read as empty).
    preemption_configs: inf.Informer | None = None
    preemption_limits: inf.Informer | None = None
    legacy_preemption_limits: inf.Informer | None = None  # kueue.x-k8s.io's, read to migrate them
    # The objects WITHOUT the queue label of the kinds a governed parent creates (batch Jobs,
    # JobSets, RayClusters), by framework name: a child of a queued ancestor is suspended until
    # that ancestor is admitted, labelled or not (Kueue's shouldSuspendChildJob).
    unqueued: dict[str, inf.Informer] = field(default_factory=dict)
    # The objects between a pod and the job owning its Workload that no other informer holds
    # (a JobSet's Jobs, a LeaderWorkerSet's StatefulSets): adapter.pod_ownership walks them.
    links: list[inf.Informer] = field(default_factory=list)
    # ResourceQuotas: a PriorityClass scope lets a namespace use a system class (adapter.priority_policy).
    resource_quotas: inf.Informer | None = None

    def __post_init__(self) -> None:
        index_workloads(self.workloads)  # scheduler.kube.workload_index: what each phase walks
        for informer in (self.pods, self.managed_pods):
            informer.add_indexer(POD_GROUP, _pod_group)

    @classmethod
    def create(cls, api: inf.Api) -> ClusterCache:
        return cls(
            api=api,
            nodes=inf.Informer(api, inf.NODES),
            # Finished pods free nothing; skipping them keeps the cache small on busy clusters.
            pods=inf.Informer(api, inf.PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed"),
            namespaces=inf.Informer(api, inf.NAMESPACES),
            workloads=inf.Informer(api, inf.WORKLOADS),
            cluster_queues=inf.Informer(api, inf.CLUSTER_QUEUES),
            local_queues=inf.Informer(api, inf.LOCAL_QUEUES),
            flavors=inf.Informer(api, inf.RESOURCE_FLAVORS),
            topologies=inf.Informer(api, inf.TOPOLOGIES),
            cohorts=inf.Informer(api, inf.COHORTS),
            workload_priority_classes=inf.Informer(api, inf.WORKLOAD_PRIORITY_CLASSES),
            priority_classes=inf.Informer(api, inf.PRIORITY_CLASSES),
            # Only the built-in kinds are always served; other kinds' CRDs may be missing.
            jobs={kind.framework: inf.Informer(api, resource_of(kind), label_selector=LABEL_QUEUE_NAME,
                                               optional=kind.group not in BUILT_IN_GROUPS)
                  for kind in watched(KINDS)},
            related={r.kind: inf.Informer(api, inf.Resource(r.group, r.version, r.plural, r.namespaced),
                                          optional=True)
                     for kind in KINDS for r in kind.related},
            managed_pods=inf.Informer(api, inf.PODS, label_selector=LABEL_MANAGED),
            preemption_configs=inf.Informer(api, inf.PREEMPTION_CONFIGS, optional=True),
            preemption_limits=inf.Informer(api, inf.PREEMPTION_LIMITS, optional=True),
            legacy_preemption_limits=inf.Informer(api, inf.LEGACY_PREEMPTION_LIMITS, optional=True),
            unqueued={kind.framework: inf.Informer(api, resource_of(kind), label_selector=f"!{LABEL_QUEUE_NAME}",
                                                   optional=kind.group not in BUILT_IN_GROUPS)
                      for kind in watched(KINDS) if kind.framework in CHILD_FRAMEWORKS and kind.suspendable},
            links=[inf.Informer(api, inf.JOBS, label_selector=LABEL_JOBSET_NAME),
                   inf.Informer(api, STATEFULSETS, label_selector=LABEL_LWS_NAME, optional=True)],
            resource_quotas=inf.Informer(api, inf.RESOURCE_QUOTAS),
        )

    def all(self) -> list[inf.Informer]:
        return [self.nodes, self.pods, self.namespaces, self.workloads, self.cluster_queues, self.local_queues,
                self.flavors, self.topologies, self.cohorts, self.workload_priority_classes,
                self.priority_classes, *self.jobs.values(), *self.related.values(), self.managed_pods,
                *(i for i in (self.preemption_configs, self.preemption_limits, self.legacy_preemption_limits,
                             self.resource_quotas) if i is not None),
                *self.unqueued.values(), *self.links]

    def owner_links(self) -> list[Obj]:
        """The objects a pod's owner chain may pass through on its way to the job that owns its
        Workload: the queued objects of every kind and the links (adapter.pod_ownership)."""
        return [o for informer in (*self.jobs.values(), *self.links) for o in informer.items()]

    def start(self, on_change: Callable[[], None], timeout_s: float = 60) -> None:
        for informer in self.all():
            informer.add_handler(lambda _kind, _obj, _old: on_change())
            informer.start()
        inf.wait_synced(self.all(), timeout_s)

    def stop(self) -> None:
        for informer in self.all():
            informer.stop()

    def write_through(self, informer: inf.Informer, obj: Obj | None) -> None:
        """Put the API server's answer to our write into the cache unless a newer copy is there."""
        if obj:
            informer.put(obj, only_if_newer=True)

    def forget(self, informer: inf.Informer, obj: Obj) -> None:
        informer.remove(inf.object_key(obj))


class Wakeup:
    """Coalesces bursts of watch events into one reconcile."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def __call__(self) -> None:
        self._event.set()

    def wait(self, timeout_s: float) -> bool:
        fired = self._event.wait(timeout_s)
        self._event.clear()
        return fired
