"""Phase 1 of the controller's pass: one Workload per queued job (Kueue naming, owner
reference), one per LeaderWorkerSet or StatefulSet group (``kube/podgroups.py``), one per pod
or pod group (``kube/podintegration.py``)."""

from __future__ import annotations

import logging
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.workloads import workload_for_job
from scheduler.adapter.priority_policy import ClassRefused
from scheduler.adapter.workload_checks import workload_problems
from scheduler.core.config import DEFAULT_KUEUE_RELEASE
from scheduler.core.topology_request import TopologyRequestError
from scheduler.core.workload import LABEL_QUEUE_NAME, WorkloadFormatError
from scheduler.k8s.informer import WORKLOADS, object_key
from scheduler.kube import workload_index as wi
from scheduler.kube.invalid import invalid_message
from scheduler.kube.phase import PassState, Shared
from scheduler.kube.podgroups import PodGroupPhases
from scheduler.kube.podintegration import PodIntegration
from scheduler.kube.prebuilt import Prebuilt

log = logging.getLogger(__name__)
Obj = dict[str, Any]


class EnsureWorkloads:
    def __init__(self, shared: Shared, pod_groups: PodGroupPhases, pod_integration: PodIntegration | None,
                 admission_gated_by: bool = False, release: str = DEFAULT_KUEUE_RELEASE,
                 prebuilt: Prebuilt | None = None) -> None:
        self.s = shared
        self.prebuilt = prebuilt
        self.admission_gated_by = admission_gated_by  # Kueue's AdmissionGatedBy gate
        self.release = release  # whose Workload rules (its cap on pod sets) a new Workload must pass
        self.pod_groups = pod_groups
        self.pod_integration = pod_integration

    def run(self, _state: PassState | None = None) -> None:
        s = self.s
        workloads = s.cache.workloads
        s.isolation.for_each("ensure_workloads", [entry for uid, entry in s.lookups.job_index().items()
                                                  if wi.owned_by(workloads, uid) is None],
                             lambda entry: self._ensure(*entry), subject=lambda entry: entry[1], concurrent=True)
        self.pod_groups.ensure()
        self.pod_groups.label_pods()
        if self.pod_integration is not None:
            self.pod_integration.ensure()

    def _ensure(self, integration: JobKind, job: Obj) -> None:
        s = self.s
        if (job.get("metadata") or {}).get("deletionTimestamp"):
            return
        if not (job.get("metadata") or {}).get("labels", {}).get(LABEL_QUEUE_NAME):
            return
        ownership = s.lookups.ownership(job)
        if ownership.ancestor is not None:
            return  # governed through its queued parent (a JobSet's Job, an mpi-operator launcher)
        if integration.finish_state(job).finished:
            return
        if self.prebuilt is not None and self.prebuilt.handles(integration, job):
            return  # it runs under the Workload it names (a MultiKueue manager's copy), never a new one
        priority = s.lookups.resolve_priority(job)
        if isinstance(priority, ClassRefused):  # held: a class that is missing or its namespace may not use
            s.writer.event(job, "Warning", priority.reason, priority.event)
            return
        try:
            body = workload_for_job(integration, job, priority[0], priority[1], s.lookups.related,
                                    self.admission_gated_by)
        except (TopologyRequestError, WorkloadFormatError) as exc:  # as Kueue's reconciler: no Workload, retried
            s.writer.event(job, "Warning", "CreatedWorkloadFailed", str(exc)[:500])
            return
        if ownership.unhonoured:
            s.writer.event(job, "Warning", "OwnerReferenceNotHonoured",
                           f"{ownership.unhonoured}: queued on its own like any other {integration.kind}")
        problems = workload_problems(body, self.release)
        if problems:  # what the API server would refuse under Kueue's CRD: never written
            s.writer.event(job, "Warning", "CreatedWorkloadFailed", invalid_message(problems))
            return
        self._create(job, body, integration.kind)

    def _create(self, job: Obj, body: Obj, kind: str) -> None:
        s = self.s

        def failed(exc: ApiException) -> None:
            log.warning("creating workload for %s failed: %s", object_key(job), exc.body)
            s.writer.event(job, "Warning", "CreatedWorkloadFailed", str(exc.body)[:500])

        created = s.writer.create(WORKLOADS, body, job["metadata"]["namespace"], s.cache.workloads, failed)
        if created is not None:
            s.writer.event(job, "Normal", "CreatedWorkload",
                           f"Created Workload: {created['metadata']['namespace']}/{created['metadata']['name']}")
            meta = job.get("metadata") or {}  # Kueue v0.19's workload_creation_latency_seconds reads these
            s.writer.notify("created", created, {"jobKind": kind, "jobCreated": meta.get("creationTimestamp"),
                                                 "jobGeneration": meta.get("generation")})
