"""apps/v1 StatefulSet as Kueue v0.17.0's ``statefulset`` integration handles it
(``pkg/controller/jobs/statefulset/``; docs/design/new-kinds.md): one prebuilt Workload for the
whole set (``statefulset-<name>-<hash>``), one pod set ``main`` of ``replicas`` pods ranked by the
pod ordinal (``apps.kubernetes.io/pod-index``). Not suspended: the webhook stamps the template
with ``pod-suspending-parent: statefulset`` (and, so the pod webhook's object selector finds its
pods, the managed label), the pod webhook holds each pod with Kueue's admission gate, the
controller labels it into the Workload's serving pod group and releases it once the Workload
is admitted. Scaling to 0 releases the Workload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import (
    JobKind,
    Obj,
    PodGroups,
    PodSetSource,
    as_int,
    never_finishes,
    never_ready,
    no_active_pods,
)
from scheduler.adapter.kinds.deployment import stamp_ops
from scheduler.adapter.kinds.shapes import METADATA, POD_TEMPLATE
from scheduler.core.kueue_names import (
    ANN_POD_GROUP_FAST_ADMISSION,
    ANN_POD_GROUP_POD_INDEX_LABEL,
    ANN_POD_GROUP_SERVING,
)
from scheduler.core.workload import DEFAULT_POD_SET

FRAMEWORK = "statefulset"
POD_INDEX = "apps.kubernetes.io/pod-index"


def replicas(statefulset: Obj) -> int:
    return as_int((statefulset.get("spec") or {}).get("replicas"), 1)


def pod_sets(statefulset: Obj) -> list[PodSetSource]:
    """``main``: replicas pods, the template's spec, ranked by the pod ordinal."""
    template = (statefulset.get("spec") or {}).get("template") or {}
    return [PodSetSource(DEFAULT_POD_SET, replicas(statefulset), template, ("spec", "template"), POD_INDEX,
                         spec_only=True)]


def owner_name(pod: Obj) -> str | None:
    """The StatefulSet controlling a pod (its controller owner reference)."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") is True and ref.get("apiVersion") == "apps/v1" and ref.get("kind") == "StatefulSet":
            return str(ref.get("name") or "") or None
    return None


def group_count(statefulset: Obj) -> int:
    return 1 if replicas(statefulset) > 0 else 0


def pod_role(_pod: Obj, statefulset: Obj) -> tuple[int, str, int]:
    return 0, DEFAULT_POD_SET, replicas(statefulset)


def template_defaults(statefulset: Obj, ops: list[dict[str, Any]], _priority: str | None) -> None:
    """Kueue's statefulset webhook ``Default``: the template marked as held by its parent."""
    labels: Mapping[str, str] = {}
    stamp_ops(statefulset, ops, labels, FRAMEWORK, with_labels=False)


STATEFULSET = JobKind(
    group="apps", version="v1", kind="StatefulSet", plural="statefulsets", framework=FRAMEWORK, pod_sets=pod_sets,
    finish_state=never_finishes, active_pods=no_active_pods, pods_ready=never_ready,
    shape={"metadata": METADATA, "spec": {"replicas": "int", "template": POD_TEMPLATE}}, suspend_path=None,
    rank_label=POD_INDEX, single_pod_set=True,
    pod_groups=PodGroups(owner_name=owner_name, group_count=group_count, pod_role=pod_role,
                         template_defaults=template_defaults, single_group=True,
                         pod_annotations={ANN_POD_GROUP_FAST_ADMISSION: "true", ANN_POD_GROUP_SERVING: "true",
                                          ANN_POD_GROUP_POD_INDEX_LABEL: POD_INDEX}),
)
