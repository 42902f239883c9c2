"""Job integrations: how a kind of job becomes a Workload, and how it is started/stopped.

Only batch/v1 Job is implemented. JobSet and Kubeflow PyTorchJob plug in by implementing
:class:`JobIntegration` (pod sets from replicated jobs / replica specs, suspend field path,
finished conditions) and registering in :data:`INTEGRATIONS`; nothing else in the controller
knows a job's kind.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.core.workload import (
    ANN_GROUP_NAME,
    ANN_PREFERRED,
    ANN_REQUIRED,
    ANN_SLICE_CONSTRAINTS,
    ANN_SLICE_REQUIRED,
    ANN_SLICE_SIZE,
    ANN_UNCONSTRAINED,
    ANN_WORKLOAD,
    DEFAULT_POD_SET,
    JOB_COMPLETION_INDEX,
    LABEL_PODSET,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    job_pod_count,
    kueue_workload_name,
)
from scheduler.kube.informer import JOBS, Resource

LABEL_JOB_UID = "kueue.x-k8s.io/job-uid"
# HyperPod auto-resume (on the job's metadata).
ANN_AUTO_RESUME = "sagemaker.amazonaws.com/enable-job-auto-resume"
ANN_MAX_RETRY = "sagemaker.amazonaws.com/job-max-retry-count"


@dataclass(frozen=True)
class PodSetStart:
    """What the controller injects into one pod set's template when it starts the job."""

    name: str
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # e.g. the unconstrained-topology annotation Kueue adds for implicit TAS, so the pods are
    # recognised as TAS pods (counted once, from the assignment) and not as foreign usage.
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FinishState:
    finished: bool
    reason: str = ""
    message: str = ""


class JobIntegration(Protocol):
    kind: str
    group: str
    resource: Resource

    def pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]: ...
    def is_suspended(self, job: Mapping[str, Any]) -> bool: ...
    def start_patch(
        self, job: Mapping[str, Any], workload_name: str, pod_sets: list[PodSetStart]
    ) -> dict[str, Any]: ...
    def stop_patch(self, job: Mapping[str, Any]) -> dict[str, Any]: ...
    def restore_patch(self, job: Mapping[str, Any],
                      original_pod_sets: list[Mapping[str, Any]]) -> dict[str, Any] | None: ...
    def finish_state(self, job: Mapping[str, Any]) -> FinishState: ...
    def active_pods(self, job: Mapping[str, Any]) -> int: ...
    def can_restore(self, job: Mapping[str, Any]) -> bool: ...


def topology_request_from_template(template: Mapping[str, Any], pod_index_label: str | None) -> dict[str, Any] | None:
    """Kueue's ``PodSetTopologyRequest`` from pod-template annotations (jobframework rules)."""
    ann = (template.get("metadata") or {}).get("annotations") or {}
    req: dict[str, Any] = {}
    if ann.get(ANN_REQUIRED):
        req["required"] = ann[ANN_REQUIRED]
    elif ann.get(ANN_PREFERRED):
        req["preferred"] = ann[ANN_PREFERRED]
    elif ANN_UNCONSTRAINED in ann:
        req["unconstrained"] = str(ann[ANN_UNCONSTRAINED]).lower() == "true"
    if ANN_SLICE_REQUIRED in ann:
        req["podSetSliceRequiredTopology"] = ann[ANN_SLICE_REQUIRED]
        try:
            req["podSetSliceSize"] = int(ann.get(ANN_SLICE_SIZE, ""))
        except ValueError:
            pass
    if ANN_SLICE_CONSTRAINTS in ann:
        import json

        try:
            req["podsetSliceRequiredTopologyConstraints"] = json.loads(ann[ANN_SLICE_CONSTRAINTS])
        except ValueError:
            pass
    if ann.get(ANN_GROUP_NAME) and ("required" in req or "preferred" in req):
        req["podSetGroupName"] = ann[ANN_GROUP_NAME]
    if pod_index_label:
        req["podIndexLabel"] = pod_index_label
    return req or None


class BatchJob:
    kind = "Job"
    group = "batch"
    resource = JOBS

    def pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        ps: dict[str, Any] = {"name": DEFAULT_POD_SET, "count": job_pod_count(job), "template": template}
        request = topology_request_from_template(template, JOB_COMPLETION_INDEX)
        if request:
            ps["topologyRequest"] = request
        return [ps]

    def is_suspended(self, job: Mapping[str, Any]) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def start_patch(self, job: Mapping[str, Any], workload_name: str, pod_sets: list[PodSetStart]) -> dict[str, Any]:
        """Unsuspend with the flavor's node selectors (and the domain selector for required
        placement), the workload annotation and the podset label: one merge patch, applied
        while the Job is still suspended, which is when its template may change."""
        start = pod_sets[0]
        template = (job.get("spec") or {}).get("template") or {}
        selector = {**((template.get("spec") or {}).get("nodeSelector") or {}), **start.node_selector}
        spec_patch: dict[str, Any] = {"nodeSelector": selector}
        if start.tolerations:
            existing = list((template.get("spec") or {}).get("tolerations") or [])
            spec_patch["tolerations"] = existing + [dict(t) for t in start.tolerations if dict(t) not in existing]
        return {
            "spec": {
                "suspend": False,
                "template": {
                    "metadata": {"annotations": {**start.annotations, ANN_WORKLOAD: workload_name},
                                 "labels": {LABEL_PODSET: start.name}},
                    "spec": spec_patch,
                },
            }
        }

    def stop_patch(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """Suspend only: the API server refuses template changes while the Job has a
        startTime; the template is restored once the Job controller has cleared it."""
        return {"spec": {"suspend": True}}

    def restore_patch(self, job: Mapping[str, Any],
                      original_pod_sets: list[Mapping[str, Any]]) -> dict[str, Any] | None:
        """Restore the template as it was before start (Kueue restores from the Workload's pod
        set templates), or None when there is nothing to restore. Valid only while suspended
        with no ``status.startTime``."""
        original = (original_pod_sets[0].get("template") or {}) if original_pod_sets else {}
        current = (job.get("spec") or {}).get("template") or {}
        ospec, cspec = original.get("spec") or {}, current.get("spec") or {}
        cmeta = current.get("metadata") or {}
        spec_patch: dict[str, Any] = {}
        if (cspec.get("nodeSelector") or {}) != (ospec.get("nodeSelector") or {}):
            spec_patch["nodeSelector"] = ospec.get("nodeSelector") or None
        if (cspec.get("tolerations") or []) != (ospec.get("tolerations") or []):
            spec_patch["tolerations"] = ospec.get("tolerations") or None
        meta_patch: dict[str, Any] = {}
        original_ann = (original.get("metadata") or {}).get("annotations") or {}
        stale = {k: None for k in (cmeta.get("annotations") or {})
                 if k in (ANN_WORKLOAD, ANN_UNCONSTRAINED) and k not in original_ann}
        if stale:
            meta_patch["annotations"] = stale
        if LABEL_PODSET in (cmeta.get("labels") or {}):
            meta_patch["labels"] = {LABEL_PODSET: None}
        template: dict[str, Any] = {}
        if spec_patch:
            template["spec"] = spec_patch
        if meta_patch:
            template["metadata"] = meta_patch
        return {"spec": {"template": template}} if template else None

    def can_restore(self, job: Mapping[str, Any]) -> bool:
        """Suspended, no pods left, and ``status.startTime`` cleared by the Job controller:
        the template may change and nothing of the previous run is still going."""
        status = job.get("status") or {}
        return self.is_suspended(job) and not status.get("startTime") and self.active_pods(job) == 0

    def finish_state(self, job: Mapping[str, Any]) -> FinishState:
        for cond in (job.get("status") or {}).get("conditions") or ():
            if cond.get("status") != "True":
                continue
            if cond.get("type") == "Complete":
                return FinishState(True, "Succeeded", "Job finished successfully")
            if cond.get("type") == "Failed":
                return FinishState(True, "Failed", cond.get("message") or "Job failed")
        return FinishState(False)

    def active_pods(self, job: Mapping[str, Any]) -> int:
        status = job.get("status") or {}
        return int(status.get("active") or 0) + int(status.get("terminating") or 0)


INTEGRATIONS: dict[str, JobIntegration] = {"batch/Job": BatchJob()}


def workload_for_job(integration: JobIntegration, job: Mapping[str, Any], priority: int,
                     priority_class_ref: Mapping[str, str] | None) -> dict[str, Any]:
    """The Workload Kueue's job reconciler would create for ``job`` (v1beta2)."""
    meta = job["metadata"]
    name = kueue_workload_name(integration.kind, integration.group, meta["name"], meta["uid"])
    spec: dict[str, Any] = {
        "queueName": (meta.get("labels") or {}).get(LABEL_QUEUE_NAME, ""),
        "podSets": integration.pod_sets(job),
        "priority": priority,
        "active": True,
    }
    if priority_class_ref:
        spec["priorityClassRef"] = dict(priority_class_ref)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k in (ANN_AUTO_RESUME, ANN_MAX_RETRY)}
    body: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "labels": {LABEL_JOB_UID: meta["uid"]},
            "ownerReferences": [{
                "apiVersion": f"{integration.group}/v1" if integration.group else "v1",
                "kind": integration.kind, "name": meta["name"], "uid": meta["uid"],
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": spec,
    }
    if annotations:
        body["metadata"]["annotations"] = annotations
    if (meta.get("labels") or {}).get(LABEL_PRIORITY_CLASS):
        body["metadata"]["labels"][LABEL_PRIORITY_CLASS] = meta["labels"][LABEL_PRIORITY_CLASS]
    return body
