"""Does an object run pods? The default deny's question for a queued object of a kind toposched
does not govern (``admission/governance.py``): one that runs pods outside the queue is a gap
and is refused; one that runs nothing (a Service, a ConfigMap a Helm chart's common labels
reached) is let through with a warning.

Kubernetes' own pod-creating kinds are known by name. A kind nobody here knows (a CRD) is
judged by its object, the only thing the webhook sees of it: a pod template anywhere in it
(``containers`` / ``initContainers`` lists, ``podTemplate``, ``podSpec``, ``jobTemplate``, a
``template`` with a ``spec``) says it describes pods. The object is a tenant's, so the walk is
bounded; one too deep or too large to read through counts as running pods (fail closed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Kubernetes' built-in kinds that create pods: (group, kind).
POD_CREATING: frozenset[tuple[str, str]] = frozenset({
    ("", "Pod"), ("", "ReplicationController"), ("apps", "ReplicaSet"), ("apps", "DaemonSet"),
    ("apps", "Deployment"), ("apps", "StatefulSet"), ("batch", "Job"), ("batch", "CronJob"),
})

# Built-in kinds that hold a pod template and run nothing: a PodTemplate, a StatefulSet's or a
# DaemonSet's ControllerRevision (its controller copies the template's labels onto it).
HOLDS_TEMPLATE_ONLY: frozenset[tuple[str, str]] = frozenset({("", "PodTemplate"), ("apps", "ControllerRevision")})

# Keys whose value describes containers or pods, wherever they sit.
_CONTAINER_LISTS = frozenset({"containers", "initContainers"})
_TEMPLATES = frozenset({"podTemplate", "podSpec", "jobTemplate"})

MAX_DEPTH = 40  # deeper than any pod template Kubernetes defines (a CronJob's containers: 6)
MAX_NODES = 20_000  # mappings and lists visited; a 1.5 MB object of tiny maps has more

TOO_LARGE = "(the object is too deep or too large to look through for pod templates)"


def _describes_pods(key: str, value: Any) -> bool:
    if key in _CONTAINER_LISTS:
        return isinstance(value, list)
    if key in _TEMPLATES:
        return isinstance(value, Mapping)
    return key == "template" and isinstance(value, Mapping) and isinstance(value.get("spec"), Mapping)


def pod_template_path(obj: Mapping[str, Any]) -> str | None:
    """The path of the first pod template in ``obj`` outside ``metadata`` and ``status``
    (``spec.workers[0].template``), :data:`TOO_LARGE` when the walk runs past its bounds, None
    when there is none."""
    stack: list[tuple[str, str, Any, int]] = [(k, k, v, 1) for k, v in reversed(list(obj.items()))
                                              if k not in ("metadata", "status", "apiVersion", "kind")]
    visited = 0
    while stack:
        path, key, value, depth = stack.pop()
        if _describes_pods(key, value):
            return path
        if not isinstance(value, (Mapping, list)):
            continue
        visited += 1
        if visited > MAX_NODES or depth >= MAX_DEPTH:
            return TOO_LARGE
        if isinstance(value, Mapping):
            stack.extend((f"{path}.{k}", k, v, depth + 1) for k, v in reversed(list(value.items()))
                         if isinstance(k, str))
        else:
            stack.extend((f"{path}[{i}]", "", v, depth + 1) for i, v in reversed(list(enumerate(value))))
    return None
