"""Nodes and pods as the core sees them: frozen plain data, converted once from API objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.kueue_names import LABEL_PREBUILT_WORKLOAD
from scheduler.core.resources import add, resources_from_k8s
from scheduler.core.topology_request import (
    ANN_PREFERRED,
    ANN_REQUIRED,
    ANN_SLICE_CONSTRAINTS,
    ANN_SLICE_REQUIRED,
    ANN_UNCONSTRAINED,
)

HOSTNAME_LABEL = "kubernetes.io/hostname"

# A pod is a TAS pod (Kueue pkg/util/tas IsTAS) iff it carries one of these annotations.
TAS_POD_ANNOTATIONS = (ANN_REQUIRED, ANN_PREFERRED, ANN_SLICE_REQUIRED, ANN_SLICE_CONSTRAINTS, ANN_UNCONSTRAINED)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 ToleratesTaint semantics."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if not self.key and self.operator != "Exists":
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True)
class NodeCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    conditions: tuple[NodeCondition, ...] = ()
    unschedulable: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)

    def condition(self, type_: str) -> NodeCondition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    @property
    def ready(self) -> bool:
        cond = self.condition("Ready")
        return cond is not None and cond.status == "True"


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    uid: str = ""
    node_name: str | None = None
    phase: str = "Pending"
    requests: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def is_tas(self) -> bool:
        """Counted from its Workload's assignment, not as foreign usage: a pod with a TAS
        annotation, or a pod-group pod (an LWS group's) named by Kueue's prebuilt-workload label
        (or annotation: where Kueue v0.19's WorkloadIdentifierAnnotations and toposched's
        controller under it write it)."""
        return any(key in self.annotations for key in TAS_POD_ANNOTATIONS) or LABEL_PREBUILT_WORKLOAD in self.labels \
            or LABEL_PREBUILT_WORKLOAD in self.annotations


def _taints_from_k8s(items: Sequence[Mapping[str, Any]] | None) -> tuple[Taint, ...]:
    return tuple(
        Taint(key=t.get("key", ""), value=t.get("value", "") or "", effect=t.get("effect", ""))
        for t in items or ()
    )


def tolerations_from_k8s(items: Sequence[Mapping[str, Any]] | None) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            key=t.get("key", "") or "",
            operator=t.get("operator", "Equal") or "Equal",
            value=t.get("value", "") or "",
            effect=t.get("effect", "") or "",
        )
        for t in items or ()
    )


def node_from_k8s(obj: Mapping[str, Any]) -> NodeInfo:
    """A core/v1 Node as a dict (``kubectl get node -o json`` shape) -> :class:`NodeInfo`."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return NodeInfo(
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        allocatable=resources_from_k8s(status.get("allocatable") or status.get("capacity")),
        taints=_taints_from_k8s(spec.get("taints")),
        conditions=tuple(
            NodeCondition(
                type=c.get("type", ""),
                status=c.get("status", ""),
                reason=c.get("reason", "") or "",
                message=c.get("message", "") or "",
            )
            for c in status.get("conditions") or ()
        ),
        unschedulable=bool(spec.get("unschedulable", False)),
    )


def pod_spec_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests of a pod spec, as kube-scheduler and Kueue compute them
    (component-helpers' ``PodRequests``, which Kueue v0.17.0 and v0.19.2 both call).

    max(sum of app containers + restartable (sidecar) init containers, each plain init
    container) + overhead. Limits stand in for missing requests, as the API server defaults.
    Pod-level ``spec.resources.requests`` (KEP-2837, PodLevelResources) replace the containers'
    sum for the resources a pod may declare at pod level (cpu, memory, hugepages-*), as
    component-helpers v0.35 (Kueue v0.17.0's) and v0.36 (v0.19.2's) do; a pod-level limit alone
    is not a request here (Kueue v0.19 turns it into one: ``pod_level_limits_as_requests``).
    """

    def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
        res = container.get("resources") or {}
        merged = dict(res.get("limits") or {})
        merged.update(res.get("requests") or {})
        return resources_from_k8s(merged)

    app: dict[str, int] = {}
    for container in spec.get("containers") or ():
        app = add(app, container_requests(container))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        req = container_requests(container)
        if container.get("restartPolicy") == "Always":
            sidecars = add(sidecars, req)
            app = add(app, req)
            continue
        running = add(sidecars, req)
        for name, amount in running.items():
            init_peak[name] = max(init_peak.get(name, 0), amount)
    effective = dict(app)
    for name, amount in init_peak.items():
        effective[name] = max(effective.get(name, 0), amount)
    effective.update(_pod_level_requests(spec))
    return add(effective, resources_from_k8s(spec.get("overhead")))


def is_pod_level_resource(name: str) -> bool:
    """component-helpers' ``IsSupportedPodLevelResource``: cpu, memory and huge pages."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _pod_level_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    pod_resources = spec.get("resources")
    if not isinstance(pod_resources, Mapping):
        return {}
    requests = pod_resources.get("requests")
    if not isinstance(requests, Mapping):
        return {}
    return resources_from_k8s({k: v for k, v in requests.items() if is_pod_level_resource(str(k))})


def pod_level_limits_as_requests(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue v0.19's ``UseLimitsAsMissingRequestsInPod`` at pod level (#12334, not in v0.17.0):
    a pod-level limit with no pod-level request of the same resource is that request. Returns
    the pod spec with it (a copy; ``spec`` itself when there is nothing to add)."""
    pod_resources = spec.get("resources")
    if not isinstance(pod_resources, Mapping) or not isinstance(pod_resources.get("limits"), Mapping):
        return dict(spec)
    requests = dict(pod_resources.get("requests") or {})
    missing = {k: v for k, v in pod_resources["limits"].items() if k not in requests}
    if not missing:
        return dict(spec)
    return {**spec, "resources": {**pod_resources, "requests": {**requests, **missing}}}


def pod_from_k8s(obj: Mapping[str, Any]) -> PodInfo:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return PodInfo(
        namespace=meta.get("namespace", "default"),
        name=meta["name"],
        uid=meta.get("uid", ""),
        node_name=spec.get("nodeName") or None,
        phase=status.get("phase", "Pending") or "Pending",
        requests=pod_spec_requests(spec),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        deleting=bool(meta.get("deletionTimestamp")),
    )
