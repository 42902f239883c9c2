"""Mutation of batch/v1 Jobs: plain dicts in, an RFC 6902 JSON Patch (list of ops) out. No I/O.

At CREATE only (as Kueue's job webhook), for a Job managed by a queue:

* LocalQueue defaulting (Kueue v0.17 GA): a Job without ``kueue.x-k8s.io/queue-name`` in a
  namespace that has a LocalQueue named ``default`` gets the label ``default``.
* ``spec.suspend: true`` — the controller unsuspends it when the Workload is admitted.
* ``spec.template.spec.schedulerName: toposched`` — the second kube-scheduler profile with
  the extender binds its pods.
* implicit default priority: no ``kueue.x-k8s.io/priority-class`` label and a
  WorkloadPriorityClass named ``default`` exists -> the label ``default`` is added, so the
  Workload carries an explicit, visible priority (Kueue's WorkloadPriorityClassDefaulting
  uses the same name; without such a WPC the priority stays Kueue's default, 0).

Applying the patch and mutating again yields ``[]`` (reinvocationPolicy IfNeeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.view import ClusterView
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
               scheduler_name: str = SCHEDULER_NAME, default_queue: bool = True) -> Mutation:
    out = Mutation()
    if operation != "CREATE":
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
    if (not labels.get(LABEL_PRIORITY_CLASS) and view is not None
            and view.priority_class(DEFAULT_PRIORITY_CLASS, live=False)):
        _set_label(job, ops, LABEL_PRIORITY_CLASS, DEFAULT_PRIORITY_CLASS)
    spec = job.get("spec") or {}
    if spec.get("suspend") is not True:
        ops.append({"op": "add", "path": "/spec/suspend", "value": True})
    pod_spec = (spec.get("template") or {}).get("spec")
    current = (pod_spec or {}).get("schedulerName")
    if current != scheduler_name:
        if pod_spec is None:
            ops.append({"op": "add", "path": "/spec/template/spec", "value": {"schedulerName": scheduler_name}})
        else:
            ops.append({"op": "add", "path": "/spec/template/spec/schedulerName", "value": scheduler_name})
        if current and current != "default-scheduler":
            out.warnings.append(f"toposched: spec.template.spec.schedulerName {current!r} replaced by "
                                f"{scheduler_name!r} (jobs of a Kueue queue are placed by toposched)")
    return out


def apply_patch(obj: Mapping[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply the ``add`` ops this module emits (tests and the benchmark; not a general RFC 6902)."""
    import copy

    out = copy.deepcopy(dict(obj))
    for op in ops:
        assert op["op"] == "add", op
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = out
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = copy.deepcopy(op["value"])
    return out
