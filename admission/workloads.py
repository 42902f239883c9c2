"""Validation of Kueue Workloads at the door (``/validate-kueue-x-k8s-io-v1beta2-workload``).

Whoever creates a Workload (a tenant with Kueue's batch-admin rights, an external framework,
Kueue's own controller when it runs side by side) is held to the same rules, in this order:

1. the annotations only the controller writes (``admission/owned.py``);
2. Kueue's schema and webhook rules (``scheduler.adapter.workload_checks``, the same checks the
   controller applies before it admits anything), on CREATE and whenever the spec changes, with
   Kueue's and the API server's messages; and Kueue's update rules (pod sets, queue and priority
   class immutable while the Workload holds quota);
3. toposched does better than Kueue: a Workload's ``spec.priority`` must be the value of its
   WorkloadPriorityClass (or 0 without a class), checked when the priority or the class is set
   or changed, so a tenant cannot give itself any priority it likes. Kueue's controller writes
   exactly that value (and updates it when the class's value changes), so it is never refused.

The controller's own writes never reach this webhook (``matchConditions`` exclude its username,
``admission/configs.py``): a webhook outage cannot stop admission.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from admission.owned import owned_key_errors, who
from admission.view import ClusterView
from scheduler.adapter.manifest.fielderrors import FieldError, Verdict, forbidden
from scheduler.adapter.workload_checks import FieldProblem, update_problems, workload_problems

WPC_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"  # v1beta1 priorityClassSource


def field_error(problem: FieldProblem) -> FieldError:
    """The adapter's problem as the webhook's field error, rendered the same (values as JSON)."""
    body = str(replace(problem, fix=""))[len(problem.path) + 2:]
    return FieldError(problem.path, "", body, fix=problem.fix)


def _wpc_name(spec: Mapping[str, Any], api_version: str) -> tuple[str | None, bool]:
    """(the WorkloadPriorityClass named, whether a class of another kind is named)."""
    if api_version.endswith("/v1beta1"):
        name = spec.get("priorityClassName")
        if not name:
            return None, False
        return (str(name), False) if spec.get("priorityClassSource") == WPC_SOURCE else (None, True)
    ref = spec.get("priorityClassRef")
    if not isinstance(ref, Mapping) or not ref.get("name"):
        return None, False
    if ref.get("kind") == "WorkloadPriorityClass":
        return str(ref["name"]), False
    return None, True


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = obj.get("spec") if obj is not None else None
    return spec if isinstance(spec, Mapping) else {}


def priority_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView | None,
                    username: str) -> list[FieldError]:
    """``spec.priority`` is the value its WorkloadPriorityClass gives (0 without a class)."""
    spec = _spec(obj)
    api_version = str(obj.get("apiVersion") or "")
    old_spec = _spec(old)
    fields = ("priority", "priorityClassRef", "priorityClassName", "priorityClassSource")
    if old is not None and all(spec.get(f) == old_spec.get(f) for f in fields):
        return []  # nothing about the priority changed (the class's value may have moved meanwhile)
    priority = spec.get("priority")
    name, other_kind = _wpc_name(spec, api_version)
    if other_kind or (priority is not None and not isinstance(priority, int)):
        return []  # a PriorityClass: not in the webhook's view (docs/security.md); a wrong type: the schema says
    if name is None:
        if not priority:
            return []
        return [forbidden("spec.priority", f"a Workload without a priority class has priority 0, not {priority} "
                          f"({who(username)} is not toposched's controller)",
                          "name a WorkloadPriorityClass in spec.priorityClassRef and set spec.priority to its value")]
    wpc = view.priority_class(name) if view is not None else None
    if wpc is None:
        return [FieldError("spec.priorityClassRef.name", "Not found", "", name,
                           f"create WorkloadPriorityClass \"{name}\" (kubectl get workloadpriorityclasses) or name "
                           "an existing one")] if view is not None else []
    value = wpc.get("value") or 0
    if priority == value:
        return []
    return [forbidden("spec.priority", f"WorkloadPriorityClass \"{name}\" gives priority {value}, not {priority} "
                      f"({who(username)} is not toposched's controller)", f"set spec.priority to {value}")]


def validate_workload(obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView | None,
                      username: str, controller_users: Collection[str]) -> Verdict:
    """The decision on one Workload CREATE (``old`` None) or UPDATE."""
    errors = owned_key_errors(obj, old, username, controller_users)
    if old is None or obj.get("spec") != old.get("spec"):
        errors += [field_error(p) for p in workload_problems(obj)]
    if old is not None:
        errors += [field_error(p) for p in update_problems(obj, old)]
    if not errors and username not in controller_users:
        errors += priority_errors(obj, old, view, username)
    return Verdict(errors)
