"""Which priority classes a namespace may use (issue 39 item 9): the one rule the controller
(``kube/lookups.py`` resolving a job's priority), the Workload webhook (``admission/workloads.py``)
and the job webhook (``admission/validation.py``) apply.

A tenant's priority comes from a WorkloadPriorityClass or a PriorityClass that exists and that
its namespace may use:

- the class exists (kube-apiserver's Priority admission plugin refuses a pod naming a missing
  PriorityClass; Kueue's controller creates no Workload for a missing WorkloadPriorityClass);
- Kubernetes' system classes (``system-node-critical``, ``system-cluster-critical``, values above
  one billion that preempt cluster components) are honoured only in ``kube-system`` or in a
  namespace with a ResourceQuota whose ``scopeSelector`` covers the class (scopeName
  ``PriorityClass``). That is the rule kube-apiserver applies to pods once the admin lists the
  class under the ResourceQuota plugin's ``limitedResources`` (Kubernetes' recommended setup for
  critical pods since 1.17, when the Priority plugin stopped restricting them to kube-system).
  toposched cannot read the API server's admission configuration, so it always applies it to the
  system classes: a Workload is judged before any pod exists, so the pod-level rule would come
  too late to stop a preemption;
- when the Namespace carries ``toposched.io/allowed-priority-classes`` (a comma-separated list of
  class names, written by the admin: tenants cannot update Namespace objects), only those.
  A LocalQueue is not a place for it: Kueue's ``localqueue-editor-role`` lets tenants write
  their LocalQueues.

Pure functions on plain dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ANN_ALLOWED_CLASSES = "toposched.io/allowed-priority-classes"
SYSTEM_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
SYSTEM_NAMESPACE = "kube-system"
NOT_FOUND = "PriorityClassNotFound"
NOT_ALLOWED = "PriorityClassNotAllowed"


@dataclass(frozen=True)
class ClassRefused:
    """Why a namespace may not use a class: an Event reason (``NOT_FOUND`` / ``NOT_ALLOWED``), the
    message (the class named) and the fix, for the controller's Event and the webhook's field error."""

    reason: str
    message: str
    fix: str

    @property
    def event(self) -> str:
        """The controller's Event message: what is wrong, then the fix."""
        return f"{self.message}; {self.fix}"


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = obj.get("metadata") if obj is not None else None
    return meta if isinstance(meta, Mapping) else {}


def allowed_classes(namespace_obj: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The admin's allow-list on the Namespace, None when there is none."""
    annotations = _meta(namespace_obj).get("annotations")
    raw = annotations.get(ANN_ALLOWED_CLASSES) if isinstance(annotations, Mapping) else None
    if not isinstance(raw, str):
        return None
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def quota_covers(quota: Mapping[str, Any], class_name: str) -> bool:
    """The ResourceQuota's scopeSelector selects pods of ``class_name`` by scope PriorityClass
    (core/v1 ScopedResourceSelectorRequirement: In, NotIn, Exists, DoesNotExist)."""
    spec = quota.get("spec")
    selector = spec.get("scopeSelector") if isinstance(spec, Mapping) else None
    expressions = selector.get("matchExpressions") if isinstance(selector, Mapping) else None
    matched = False
    for expr in expressions if isinstance(expressions, list) else ():
        if not isinstance(expr, Mapping) or expr.get("scopeName") != "PriorityClass":
            continue
        raw = expr.get("values")
        values: list[Any] = raw if isinstance(raw, list) else []
        operator = expr.get("operator")
        hit = (operator == "In" and class_name in values) or (operator == "NotIn" and class_name not in values) \
            or operator == "Exists"
        if not hit:
            return False  # the expressions of one selector are ANDed
        matched = True
    return matched


def class_refused(kind: str, name: str, found: Mapping[str, Any] | None, namespace: str,
                  namespace_obj: Mapping[str, Any] | None, quotas: Iterable[Mapping[str, Any]],
                  where: str) -> ClassRefused | None:
    """Whether ``namespace`` may use the class ``name`` of ``kind`` (``PriorityClass`` or
    ``WorkloadPriorityClass``; ``found``: the class object, None when it does not exist);
    ``quotas``: the namespace's ResourceQuotas; ``where``: the field that names the class (for
    the fix). None: it may."""
    listing = "priorityclasses" if kind == "PriorityClass" else "workloadpriorityclasses"
    if found is None:
        return ClassRefused(NOT_FOUND, f"{kind} \"{name}\" not found",
                            f"create it (kubectl get {listing} lists the existing ones) or fix {where}")
    allowed = allowed_classes(namespace_obj)
    if allowed is not None and name not in allowed:
        names = ", ".join(sorted(allowed)) or "none"
        return ClassRefused(NOT_ALLOWED, f"{kind} \"{name}\" is not one namespace \"{namespace}\" may use "
                            f"(annotation {ANN_ALLOWED_CLASSES} on the Namespace allows: {names})",
                            "name one of the allowed classes, or ask an admin to add it to the Namespace's annotation")
    if kind == "PriorityClass" and name in SYSTEM_CLASSES and namespace != SYSTEM_NAMESPACE \
            and not any(quota_covers(q, name) for q in quotas):
        return ClassRefused(NOT_ALLOWED, f"PriorityClass \"{name}\" is reserved for system components: namespace "
                            f"\"{namespace}\" has no ResourceQuota whose scopeSelector covers it "
                            "(scopeName: PriorityClass)",
                            "name a PriorityClass or WorkloadPriorityClass of your own, or ask an admin for a "
                            "ResourceQuota with that scope in the namespace")
    return None


def class_value(found: Mapping[str, Any]) -> int:
    value = found.get("value")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def template_priority_class(job: Mapping[str, Any]) -> str | None:
    """The PriorityClass a job's pod template names (``spec.template.spec.priorityClassName``):
    the class Kueue reads when the job has no WorkloadPriorityClass label. None when there is
    none, or when the fields are not of Kubernetes' types (a kind whose spec has no
    ``template``, or a body no API server sends)."""
    spec = job.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    name = pod_spec.get("priorityClassName") if isinstance(pod_spec, Mapping) else None
    return name if isinstance(name, str) and name else None
