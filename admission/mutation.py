"""Mutation of the governed job kinds (the job-kind registry, ``scheduler/adapter/kinds``):
plain dicts in, an RFC 6902 JSON Patch (list of ops) out. No I/O.

At CREATE only (as Kueue's job webhooks), for a job managed by a queue:

* LocalQueue defaulting (Kueue v0.17 GA): a job without ``kueue.x-k8s.io/queue-name`` in a
  namespace that has a LocalQueue named ``default`` gets the label ``default``.
* A suspendable kind is created suspended (its kind's ``suspend_path``: ``spec.suspend``,
  ``spec.runPolicy.suspend`` for the Kubeflow jobs): the controller unsuspends it when the
  Workload is admitted. A kind held per pod group (the LeaderWorkerSet) is not suspended: as
  Kueue's webhook for it, its pod templates get the pod-group annotations (its kind module's
  ``template_defaults``); its pods are then held by the extender until their group's
  Workload is admitted.
* ``schedulerName: toposched`` in every pod template the kind has a pod set for: the second
  kube-scheduler profile with the extender binds its pods.
* A child its governed parent created (a JobSet's Jobs, a launcher Job) is left alone: its
  parent is the managed object, as Kueue skips jobs whose ancestor it manages. Resolved, not
  assumed: only when the controller owner reference names an object that exists with that uid,
  is of a governed kind and is itself queued (``scheduler/adapter/kinds/ownership.py``); a
  forged reference leaves the job queued like any other. An owner that cannot be read raises
  ``OwnerUnreadable`` (the review refuses: retry).
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
from scheduler.adapter.kinds import workload_slicing as slicing
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.ownership import managed_ancestor
from scheduler.adapter.kinds.registry import KINDS, kind_or_job
from scheduler.adapter.manifest.annotations import NO_OVERRIDES
from scheduler.core.config import FeatureGates
from scheduler.core.workload import LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME, SCHEDULER_NAME

DEFAULT_LOCAL_QUEUE = "default"
DEFAULT_PRIORITY_CLASS = "default"


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


def mutate_job(job: Mapping[str, Any], operation: str, view: ClusterView | None,
               scheduler_name: str = SCHEDULER_NAME, default_queue: bool = True,
               kind: JobKind | None = None, gates: FeatureGates = NO_OVERRIDES) -> Mutation:
    """The mutation of one object of a governed kind (``kind``; else read from the object).
    ``gates``: the Kueue Configuration's feature gates (WorkloadPriorityClassDefaulting)."""
    kind = kind or kind_or_job(job)
    out = Mutation()
    if operation != "CREATE" or kind.skipped(job):
        return out  # (a RayJob on an existing cluster is not managed: Kueue suspends it for good, toposched not)
    if managed_ancestor(job, view.owners if view else None, KINDS).ancestor is not None:
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
    if kind.pod_groups is not None:
        kind.pod_groups.template_defaults(job, ops, _priority(job, ops))
    else:
        _suspend(kind, job, ops)
    if kind.create_defaults is not None:
        kind.create_defaults(job, ops, _labels_after(job, ops))
    scheduler_names(kind, job, ops, out.warnings, scheduler_name)
    elastic_gate(kind, job, ops, gates)
    return out


def elastic_gate(kind: JobKind, job: Mapping[str, Any], ops: list[dict[str, Any]], gates: FeatureGates) -> None:
    """Kueue v0.19.2's job webhook Default for an elastic job (``applyWorkloadSliceSchedulingGate``,
    the RayCluster webhook's): the scheduling gate ``kueue.x-k8s.io/elastic-job`` in each pod
    template, lifted by the controller's elastic ungater (``kube/elastic.py``) as the job's
    admitted slice grants."""
    if not (slicing.supported(kind.group, kind.kind) and slicing.enabled(job, gates)):
        return
    for path in slicing.template_paths(kind.group, kind.kind, job):
        template: Any = job
        for step in path:
            template = template[int(step)] if isinstance(template, list) else (template or {}).get(step)
        spec = template.get("spec") if isinstance(template, Mapping) else None
        if not isinstance(spec, Mapping):
            continue
        current = spec.get("schedulingGates")
        if isinstance(current, list) and any(isinstance(g, Mapping) and g.get("name") == slicing.SCHEDULING_GATE
                                             for g in current):
            continue
        where = "/" + "/".join(escape(p) for p in (*path, "spec", "schedulingGates"))
        if isinstance(current, list):
            ops.append({"op": "add", "path": f"{where}/-", "value": {"name": slicing.SCHEDULING_GATE}})
        else:
            ops.append({"op": "add", "path": where, "value": [{"name": slicing.SCHEDULING_GATE}]})


def _suspend(kind: JobKind, job: Mapping[str, Any], ops: list[dict[str, Any]]) -> None:
    """``true`` at the kind's suspend path, creating the missing objects on the way (a
    PyTorchJob without ``spec.runPolicy``)."""
    if kind.suspend_path is None or kind.is_suspended(job):
        return
    value: Any = job
    for depth, step in enumerate(kind.suspend_path):
        child = value.get(step) if isinstance(value, Mapping) else None
        if not isinstance(child, Mapping) or depth == len(kind.suspend_path) - 1:
            rest = kind.suspend_path[depth + 1:]
            leaf: Any = True
            for name in reversed(rest):
                leaf = {name: leaf}
            ops.append({"op": "add", "path": "/" + "/".join(escape(p) for p in kind.suspend_path[:depth + 1]),
                        "value": leaf})
            return
        value = child


def _labels_after(job: Mapping[str, Any], ops: list[dict[str, Any]]) -> dict[str, str]:
    """The object's labels with this mutation's label ops applied."""
    return dict((apply_patch({"metadata": dict(job.get("metadata") or {})},
                             [o for o in ops if o["path"].startswith("/metadata/labels")])["metadata"]
                 .get("labels")) or {})


def _priority(job: Mapping[str, Any], ops: list[dict[str, Any]]) -> str | None:
    """The WorkloadPriorityClass label: the job's own, or the one defaulted by this mutation."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    added = next((o["value"] for o in ops if o["path"] == "/metadata/labels"), None) or {}
    found = labels.get(LABEL_PRIORITY_CLASS) or added.get(LABEL_PRIORITY_CLASS) or next(
        (o["value"] for o in ops if o["path"] == f"/metadata/labels/{escape(LABEL_PRIORITY_CLASS)}"), None)
    return str(found) if found else None


def scheduler_names(kind: JobKind, job: Mapping[str, Any], ops: list[dict[str, Any]], warnings: list[str],
                    scheduler_name: str, warn_any: bool = False) -> None:
    """``schedulerName`` on every pod template of a pod set; a warning when another scheduler was
    named (``warn_any``, on UPDATE: also the default one, which a tenant wrote to leave the queue)."""
    for pointer, template in kind.template_paths(job):
        pod_spec = template.get("spec")
        current = (pod_spec or {}).get("schedulerName")
        if current == scheduler_name:
            continue
        if pod_spec is None:
            ops.append({"op": "add", "path": f"{pointer}/spec", "value": {"schedulerName": scheduler_name}})
        else:
            ops.append({"op": "add", "path": f"{pointer}/spec/schedulerName", "value": scheduler_name})
        if warn_any or (current and current != "default-scheduler"):
            field = pointer.strip("/").replace("/", ".") + ".spec.schedulerName"
            shown = repr(current) if current else "(unset)"
            warnings.append(f"toposched: {field} {shown} replaced by "
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
