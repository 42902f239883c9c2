"""apps/v1 Deployment as Kueue v0.17.0's ``deployment`` integration handles it
(``pkg/controller/jobs/deployment/``; docs/design/new-kinds.md): no Workload of its own and no
suspend. The webhook stamps the pod template (``pod-suspending-parent: deployment``, the managed
label, the queue and priority-class labels), so each pod the ReplicaSet creates is a
**single-pod Workload** of the pod integration, admitted and placed one by one (a serving
Deployment is never a gang). ``toposched place`` places one of its pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import JobKind, Obj, PodSetSource, never_finishes, never_ready, no_active_pods
from scheduler.adapter.kinds.pod import pod_pod_set
from scheduler.adapter.kinds.shapes import METADATA, POD_TEMPLATE
from scheduler.core.kueue_names import ANN_POD_SUSPENDING_PARENT, LABEL_MANAGED, MANAGED_VALUE
from scheduler.core.workload import DEFAULT_POD_SET, LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME

FRAMEWORK = "deployment"


def pod_sets(deployment: Obj) -> list[PodSetSource]:
    """One pod's: the Workload each of its pods gets."""
    template = (deployment.get("spec") or {}).get("template") or {}
    one = pod_pod_set(template, DEFAULT_POD_SET, 1)
    return [PodSetSource(one.name, 1, one.template, ("spec", "template"), one.pod_index_label, spec_only=True)]


def stamp_ops(obj: Obj, ops: list[dict[str, Any]], labels: Mapping[str, str], parent: str,
              with_labels: bool) -> None:
    """JSON patch ops putting ``pod-suspending-parent: <parent>``, the managed label (and,
    ``with_labels``, the queue and priority-class labels) on ``spec.template``'s metadata."""
    template = (obj.get("spec") or {}).get("template") or {}
    meta = template.get("metadata") or {}
    annotations = {**(meta.get("annotations") or {}), ANN_POD_SUSPENDING_PARENT: parent}
    new_labels = dict(meta.get("labels") or {})
    new_labels[LABEL_MANAGED] = MANAGED_VALUE
    if with_labels:
        for key in (LABEL_QUEUE_NAME, LABEL_PRIORITY_CLASS):
            if labels.get(key):
                new_labels[key] = labels[key]
    if "metadata" not in template:
        ops.append({"op": "add", "path": "/spec/template/metadata", "value": {}})
    if annotations != (meta.get("annotations") or {}):
        ops.append({"op": "add", "path": "/spec/template/metadata/annotations", "value": annotations})
    if new_labels != (meta.get("labels") or {}):
        ops.append({"op": "add", "path": "/spec/template/metadata/labels", "value": new_labels})


def create_defaults(deployment: Obj, ops: list[dict[str, Any]], labels: Mapping[str, str]) -> None:
    """Kueue's deployment webhook ``Default``."""
    stamp_ops(deployment, ops, labels, FRAMEWORK, with_labels=True)


DEPLOYMENT = JobKind(
    group="apps", version="v1", kind="Deployment", plural="deployments", framework=FRAMEWORK, pod_sets=pod_sets,
    finish_state=never_finishes, active_pods=no_active_pods, pods_ready=never_ready,
    shape={"metadata": METADATA, "spec": {"replicas": "int", "template": POD_TEMPLATE}}, suspend_path=None,
    create_defaults=create_defaults, single_pod_set=True,
)
