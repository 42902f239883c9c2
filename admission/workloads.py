"""Validation of Kueue Workloads at the door (``/validate-kueue-x-k8s-io-v1beta2-workload``).

Whoever creates a Workload (a tenant with Kueue's batch-admin rights, an external framework,
Kueue's own controller when it runs side by side) is held to the same rules, in this order:

1. the annotations only the controller writes (``admission/owned.py``);
2. Kueue's schema and webhook rules (``scheduler.adapter.workload_checks``, the same checks the
   controller applies before it admits anything), on CREATE and whenever the spec changes, with
   Kueue's and the API server's messages; and Kueue's update rules (pod sets, queue and priority
   class immutable while the Workload holds quota);
3. toposched does better than Kueue: a Workload's ``spec.priority`` must be the value of the
   WorkloadPriorityClass or PriorityClass it names (or 0 without a class), a class that exists
   and that its namespace may use (``scheduler/adapter/priority_policy.py``: the Namespace's
   allow-list, system classes only in kube-system or under a ResourceQuota scoped to them),
   checked when the priority or the class is set or changed, so a tenant cannot give itself any
   priority it likes. Kueue's controller writes exactly that value (and updates it when the
   class's value changes), so it is never refused for it.

The controller's own writes never reach this webhook (``matchConditions`` exclude its username,
``admission/configs.py``): a webhook outage cannot stop admission.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from admission.owned import owned_key_errors, who
from admission.view import ClusterView
from scheduler.adapter.manifest import gated_by
from scheduler.adapter.manifest.annotations import NO_OVERRIDES
from scheduler.adapter.manifest.fielderrors import FieldError, Verdict, forbidden
from scheduler.adapter.priority_policy import NOT_FOUND, class_refused, class_value
from scheduler.adapter.workload_checks import FieldProblem, update_problems, workload_problems
from scheduler.core.config import FeatureGates

WPC_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"  # v1beta1 priorityClassSource


def field_error(problem: FieldProblem) -> FieldError:
    """The adapter's problem as the webhook's field error, rendered the same (values as JSON)."""
    body = str(replace(problem, fix=""))[len(problem.path) + 2:]
    return FieldError(problem.path, "", body, fix=problem.fix)


def _class_ref(spec: Mapping[str, Any], api_version: str) -> tuple[str, str, str] | None:
    """(kind, name, field) of the class the Workload names (``WorkloadPriorityClass`` or
    ``PriorityClass``), None without one."""
    if api_version.endswith("/v1beta1"):
        name = spec.get("priorityClassName")
        if not name:
            return None
        kind = "WorkloadPriorityClass" if spec.get("priorityClassSource") == WPC_SOURCE else "PriorityClass"
        return kind, str(name), "spec.priorityClassName"
    ref = spec.get("priorityClassRef")
    if not isinstance(ref, Mapping) or not ref.get("name"):
        return None
    kind = "WorkloadPriorityClass" if ref.get("kind") == "WorkloadPriorityClass" else "PriorityClass"
    return kind, str(ref["name"]), "spec.priorityClassRef.name"


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = obj.get("spec") if obj is not None else None
    return spec if isinstance(spec, Mapping) else {}


def class_in_view(view: ClusterView, kind: str, name: str) -> Mapping[str, Any] | None:
    return view.priority_class(name) if kind == "WorkloadPriorityClass" else view.pod_priority_class(name)


def class_error(view: ClusterView, kind: str, name: str, namespace: str, path: str) -> FieldError | None:
    """The field error when ``namespace`` may not use the class (scheduler/adapter/priority_policy.py:
    it must exist, be on the Namespace's allow-list if it has one, and a system class needs
    kube-system or a ResourceQuota scoped to it); the job webhook asks the same."""
    found = class_in_view(view, kind, name)
    refused = class_refused(kind, name, found, namespace, view.namespace(namespace),
                            view.quotas(namespace) if found is not None else (), path)
    if refused is None:
        return None
    if refused.reason == NOT_FOUND:
        return FieldError(path, "Not found", "", name, refused.fix)
    return forbidden(path, refused.message, refused.fix)


def priority_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView | None,
                    username: str) -> list[FieldError]:
    """``spec.priority`` is the value of the class the Workload names (0 without one), a class
    that exists and that the Workload's namespace may use. A wrong value is refused, not
    corrected: a validating webhook cannot rewrite the object, and a silent fix would hide from
    the writer that it asked for a priority it may not have. Kueue's controller writes the
    class's value, so its Workloads pass."""
    spec = _spec(obj)
    api_version = str(obj.get("apiVersion") or "")
    old_spec = _spec(old)
    fields = ("priority", "priorityClassRef", "priorityClassName", "priorityClassSource")
    if old is not None and all(spec.get(f) == old_spec.get(f) for f in fields):
        return []  # nothing about the priority changed (the class's value may have moved meanwhile)
    priority = spec.get("priority")
    if priority is not None and not isinstance(priority, int):
        return []  # a wrong type: the schema says
    ref = _class_ref(spec, api_version)
    if ref is None:
        if not priority:
            return []
        return [forbidden("spec.priority", f"a Workload without a priority class has priority 0, not {priority} "
                          f"({who(username)} is not toposched's controller)",
                          "name a WorkloadPriorityClass in spec.priorityClassRef and set spec.priority to its value")]
    if view is None:
        return []
    kind, name, path = ref
    namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
    refused = class_error(view, kind, name, namespace, path)
    if refused is not None:
        return [refused]
    found = class_in_view(view, kind, name)
    value = class_value(found) if found is not None else 0
    if priority == value:
        return []
    return [forbidden("spec.priority", f"{kind} \"{name}\" gives priority {value}, not {priority} "
                      f"({who(username)} is not toposched's controller)", f"set spec.priority to {value}")]


def validate_workload(obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView | None,
                      username: str, controller_users: Collection[str],
                      gates: FeatureGates = NO_OVERRIDES) -> Verdict:
    """The decision on one Workload CREATE (``old`` None) or UPDATE. The admission-gated-by
    annotation follows Kueue's rules for everyone (a Workload created directly may carry it;
    names may only be removed later: scheduler/adapter/manifest/gated_by.py)."""
    errors = owned_key_errors(obj, old, username, controller_users)
    errors += gated_by.create_errors(obj, gates) if old is None else gated_by.update_errors(old, obj, gates)
    if old is None or obj.get("spec") != old.get("spec"):
        errors += [field_error(p) for p in workload_problems(obj, gates.release)]
    if old is not None:
        errors += [field_error(p) for p in update_problems(obj, old)]
    if not errors and username not in controller_users:
        errors += priority_errors(obj, old, view, username)
    return Verdict(errors)
