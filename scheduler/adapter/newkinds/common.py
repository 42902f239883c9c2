"""What the new kinds share: Kueue's label/annotation names they read or write, the pod-set
builder, the finish state, and the merge patch of a list of named templates."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.kinds.workloads import topology_request_from_template

# Kueue v0.17.0 pkg/controller/jobs/pod/constants and apis/kueue/v1beta2 (pod integration, TAS).
GATE_ADMISSION = "kueue.x-k8s.io/admission"
GATE_TOPOLOGY = "kueue.x-k8s.io/topology"
GATE_ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
LABEL_MANAGED = "kueue.x-k8s.io/managed"
MANAGED_VALUE = "true"
FINALIZER_MANAGED = "kueue.x-k8s.io/managed"
LABEL_POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
ANN_POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
ANN_POD_GROUP_FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
ANN_POD_GROUP_SERVING = "kueue.x-k8s.io/pod-group-serving"
ANN_RETRIABLE_IN_GROUP = "kueue.x-k8s.io/retriable-in-group"
ANN_IS_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"
LABEL_POD_GROUP_POD_INDEX = "kueue.x-k8s.io/pod-group-pod-index"
ANN_POD_GROUP_POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index-label"
ANN_JOB_OWNER_GVK = "kueue.x-k8s.io/job-owner-gvk"
ANN_JOB_OWNER_NAME = "kueue.x-k8s.io/job-owner-name"
CONDITION_TERMINATION_TARGET = "TerminationTarget"


@dataclass(frozen=True)
class FinishState:
    """Kueue's ``Finished(ctx) (message, success, finished)`` of a job: ``reason`` is the
    Workload's Finished reason (``Succeeded`` / ``Failed``) once finished."""

    finished: bool
    reason: str = ""
    message: str = ""


NOT_FINISHED = FinishState(False)


def finished(success: bool, message: str) -> FinishState:
    return FinishState(True, "Succeeded" if success else "Failed", message)


def pod_set(name: str, count: int, template: Mapping[str, Any], pod_index_label: str | None = None,
            sub_group: tuple[str, int] | None = None) -> dict[str, Any]:
    """Kueue's ``PodSet``: the template copied whole, ``topologyRequest`` from its annotations
    (with the rank label, when the kind has one). Raises ``TopologyRequestError`` for a
    malformed annotation (Kueue then creates no Workload)."""
    copied = copy.deepcopy(dict(template))
    out: dict[str, Any] = {"name": name, "count": count, "template": copied}
    request = topology_request_from_template(copied, pod_index_label, sub_group)
    if request:
        out["topologyRequest"] = request
    return out


def conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in (obj.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)}


def condition_true(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    cond = conditions(obj).get(kind)
    return cond if cond is not None and cond.get("status") == "True" else None


def as_int(value: Any, default: int) -> int:
    """A count field: absent -> ``default``; JSON numbers and numeric strings accepted (the
    HyperPod CLI writes integers where Kubernetes types would have strings)."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)
