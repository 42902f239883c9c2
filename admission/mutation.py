"""Mutation of batch/v1 Jobs, JobSets, PyTorchJobs, MPIJobs and LeaderWorkerSets: plain dicts
in, an RFC 6902 JSON Patch (list of ops) out. No I/O.

At CREATE only (as Kueue's job webhooks), for a job managed by a queue:

* LocalQueue defaulting (Kueue v0.17 GA): a Job without ``kueue.x-k8s.io/queue-name`` in a
  namespace that has a LocalQueue named ``default`` gets the label ``default``.
* ``spec.suspend: true`` (``spec.runPolicy.suspend`` for a PyTorchJob or MPIJob) — the
  controller unsuspends it when the Workload is admitted. A LeaderWorkerSet has no suspend:
  as Kueue's LWS webhook, its pod templates get ``kueue.x-k8s.io/pod-suspending-parent`` and
  ``kueue.x-k8s.io/pod-group-serving`` (and ``kueue.x-k8s.io/pod-index-offset: "1"`` on the
  workers when there is a leader and no PodSet group), the WorkloadPriorityClass label when the
  LWS has one; its pods are then held by the extender until their group's Workload is admitted.
* ``schedulerName: toposched`` in every pod template (a Job's ``spec.template``, each of a
  JobSet's ``spec.replicatedJobs[i].template.spec.template``) — the second kube-scheduler
  profile with the extender binds its pods.
* A Job created by a JobSet (controller owner reference to a JobSet) is left alone: its JobSet
  is the managed object, as Kueue skips jobs whose parent it manages.
* default priority, as Kueue's ``WorkloadPriorityClassDefaulting`` (alpha, off in v0.17-v0.19,
  on in v0.20; ``jobframework.ApplyDefaultWorkloadPriorityClass``): with the gate on, no
  ``kueue.x-k8s.io/priority-class`` label and a WorkloadPriorityClass named ``default`` ->
  the label ``default`` is added. Gate off: nothing is added (priority stays Kueue's 0).

Applying the patch and mutating again yields ``[]`` (reinvocationPolicy IfNeeded).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.view import ClusterView
from scheduler.core.config import FeatureGates
from scheduler.core.kueue_names import ANN_POD_INDEX_OFFSET, ANN_POD_SUSPENDING_PARENT
from scheduler.core.topology_request import ANN_GROUP_NAME
from scheduler.core.workload import (
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    SCHEDULER_NAME,
    owned_by_managed_parent,
)

NO_OVERRIDES = FeatureGates()  # Kueue's defaults (v0.17), for callers without a Configuration
DEFAULT_LOCAL_QUEUE = "default"
DEFAULT_PRIORITY_CLASS = "default"
# Kueue's pod-group constants (pkg/controller/jobs/pod/constants) the LWS webhook writes.
ANN_POD_GROUP_SERVING = "kueue.x-k8s.io/pod-group-serving"
LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
RUN_POLICY_KINDS = ("PyTorchJob", "MPIJob")
REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}


def escape(key: str) -> str:
    """RFC 6901 JSON Pointer token."""
    return key.replace("~", "~0").replace("/", "~1")


@dataclass
class Mutation:
    patch: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _set_label(job: Mapping[str, Any], ops: list[dict[str, Any]], key: str, value: str) -> None:
    labels = (job.get("metadata") or {}).get("labels")
    pending = [o for o in ops if o["path"] == "/metadata/labels"]
    if labels is None and not pending:
        ops.append({"op": "add", "path": "/metadata/labels", "value": {key: value}})
    elif pending:
        pending[0]["value"][key] = value
    else:
        ops.append({"op": "add", "path": f"/metadata/labels/{escape(key)}", "value": value})


def pod_template_paths(obj: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(JSON pointer, pod template) of every pod template of a Job, JobSet, PyTorchJob, MPIJob or
    LeaderWorkerSet (leader first)."""
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind == "JobSet":
        return [(f"/spec/replicatedJobs/{i}/template/spec/template",
                 ((rj.get("template") or {}).get("spec") or {}).get("template") or {})
                for i, rj in enumerate(spec.get("replicatedJobs") or ())]
    if kind in REPLICA_SPECS:
        field = REPLICA_SPECS[str(kind)]
        return [(f"/spec/{field}/{escape(t)}/template", (rs or {}).get("template") or {})
                for t, rs in sorted((spec.get(field) or {}).items())]
    if kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        return [(f"/spec/leaderWorkerTemplate/{name}", lwt[name] or {})
                for name in ("leaderTemplate", "workerTemplate") if lwt.get(name) is not None]
    return [("/spec/template", spec.get("template") or {})]


def suspend_path(obj: Mapping[str, Any]) -> tuple[str, bool]:
    """(JSON pointer of the suspend flag, whether it is set): ``spec.runPolicy.suspend`` for
    Kubeflow jobs, ``spec.suspend`` for Jobs and JobSets."""
    spec = obj.get("spec") or {}
    if obj.get("kind") in RUN_POLICY_KINDS:
        return "/spec/runPolicy/suspend", (spec.get("runPolicy") or {}).get("suspend") is True
    return "/spec/suspend", spec.get("suspend") is True


def mutate_job(job: Mapping[str, Any], operation: str, view: ClusterView | None,
               scheduler_name: str = SCHEDULER_NAME, default_queue: bool = True,
               gates: FeatureGates = NO_OVERRIDES) -> Mutation:
    """The mutation of one Job or JobSet (``kind`` tells which; a Job when absent). ``gates``:
    the Kueue Configuration's feature gates (WorkloadPriorityClassDefaulting)."""
    out = Mutation()
    if operation != "CREATE" or owned_by_managed_parent(job):
        return out
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    namespace = str(meta.get("namespace") or "default")
    ops = out.patch
    if not labels.get(LABEL_QUEUE_NAME):
        if not (default_queue and view is not None and view.local_queue(namespace, DEFAULT_LOCAL_QUEUE, live=False)):
            return out  # not managed: untouched
        _set_label(job, ops, LABEL_QUEUE_NAME, DEFAULT_LOCAL_QUEUE)
        out.warnings.append(f"toposched: no {LABEL_QUEUE_NAME} label; sent to LocalQueue "
                            f"\"{DEFAULT_LOCAL_QUEUE}\" of namespace \"{namespace}\" (LocalQueue defaulting)")
    if (gates.enabled("WorkloadPriorityClassDefaulting") and not labels.get(LABEL_PRIORITY_CLASS)
            and view is not None and view.priority_class(DEFAULT_PRIORITY_CLASS, live=False)):
        _set_label(job, ops, LABEL_PRIORITY_CLASS, DEFAULT_PRIORITY_CLASS)
    if job.get("kind") == "LeaderWorkerSet":
        _lws_pod_template_defaults(job, ops)
    else:
        _suspend(job, ops)
    _scheduler_names(job, ops, out.warnings, scheduler_name)
    return out


def _suspend(job: Mapping[str, Any], ops: list[dict[str, Any]]) -> None:
    pointer, suspended = suspend_path(job)
    if not suspended:
        if pointer == "/spec/runPolicy/suspend" and "runPolicy" not in (job.get("spec") or {}):
            ops.append({"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}})
        else:
            ops.append({"op": "add", "path": pointer, "value": True})


def _lws_pod_template_defaults(lws: Mapping[str, Any], ops: list[dict[str, Any]]) -> None:
    """Kueue's LWS webhook ``podTemplateSpecDefault`` on the leader and worker templates (the
    WorkloadPriorityClass label: the LWS's own, or the one defaulted by this mutation)."""
    labels = (lws.get("metadata") or {}).get("labels") or {}
    added = next((o["value"] for o in ops if o["path"] == "/metadata/labels"), None) or {}
    priority = labels.get(LABEL_PRIORITY_CLASS) or added.get(LABEL_PRIORITY_CLASS) or next(
        (o["value"] for o in ops if o["path"] == "/metadata/labels/kueue.x-k8s.io~1priority-class"), None)
    for pointer, template in pod_template_paths(lws):
        meta = template.get("metadata") or {}
        annotations = dict(meta.get("annotations") or {})
        wanted = {ANN_POD_SUSPENDING_PARENT: LWS_FRAMEWORK, ANN_POD_GROUP_SERVING: "true"}
        has_leader = ((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("leaderTemplate") is not None
        if pointer.endswith("workerTemplate") and has_leader and ANN_GROUP_NAME not in annotations:
            wanted[ANN_POD_INDEX_OFFSET] = "1"
        new_labels = dict(meta.get("labels") or {})
        if priority:
            new_labels[LABEL_PRIORITY_CLASS] = priority
        if "metadata" not in template:
            ops.append({"op": "add", "path": f"{pointer}/metadata", "value": {}})
        if new_labels != (meta.get("labels") or {}):
            ops.append({"op": "add", "path": f"{pointer}/metadata/labels", "value": new_labels})
        if {**annotations, **wanted} != annotations:
            ops.append({"op": "add", "path": f"{pointer}/metadata/annotations", "value": {**annotations, **wanted}})


def _scheduler_names(job: Mapping[str, Any], ops: list[dict[str, Any]], warnings: list[str],
                     scheduler_name: str) -> None:
    for pointer, template in pod_template_paths(job):
        pod_spec = template.get("spec")
        current = (pod_spec or {}).get("schedulerName")
        if current == scheduler_name:
            continue
        if pod_spec is None:
            ops.append({"op": "add", "path": f"{pointer}/spec", "value": {"schedulerName": scheduler_name}})
        else:
            ops.append({"op": "add", "path": f"{pointer}/spec/schedulerName", "value": scheduler_name})
        if current and current != "default-scheduler":
            field = pointer.strip("/").replace("/", ".") + ".spec.schedulerName"
            warnings.append(f"toposched: {field} {current!r} replaced by "
                            f"{scheduler_name!r} (jobs of a Kueue queue are placed by toposched)")


def apply_patch(obj: Mapping[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply the ``add`` ops this module emits (tests and the benchmark; not a general RFC 6902)."""
    out = copy.deepcopy(dict(obj))
    for op in ops:
        assert op["op"] == "add", op
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = out
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        target[parts[-1]] = copy.deepcopy(op["value"])
    return out
