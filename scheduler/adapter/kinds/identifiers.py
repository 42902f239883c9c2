"""Where a pod's Workload identifiers live (Kueue's WorkloadIdentifierAnnotations: beta, on
since v0.18, so under ``--kueue-version v0.19``; not in v0.17): the pod-group name
(``kueue.x-k8s.io/pod-group-name``) and the prebuilt Workload's name
(``kueue.x-k8s.io/prebuilt-workload-name``) are labels in v0.17; with the gate Kueue writes them
as annotations of the same keys and reads the annotation first, the label after.

Kueue v0.19.2: ``pkg/util/pod/pod.go GetPodGroupName``, ``pkg/controller/jobs/pod/
pod_controller.go SetPodGroupName``, ``pkg/controller/jobframework/utils.go
PrebuiltWorkloadNameFor`` / ``SetPrebuiltWorkloadName`` (a name longer than a label value may be
goes to the annotation even with the gate off). Pure functions on object dicts; every reader and
writer of these keys in the controller and the webhook asks :class:`Identifiers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.core.config import FeatureGates
from scheduler.core.kueue_names import LABEL_POD_GROUP_NAME, LABEL_PREBUILT_WORKLOAD

GATE = "WorkloadIdentifierAnnotations"
# Same keys as the labels (Kueue's GroupNameAnnotation, PrebuiltWorkloadAnnotation).
ANN_POD_GROUP_NAME = LABEL_POD_GROUP_NAME
ANN_PREBUILT_WORKLOAD = LABEL_PREBUILT_WORKLOAD
LABEL_VALUE_MAX = 63  # validation.LabelValueMaxLength


def _meta_map(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    value = meta.get(where) if isinstance(meta, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Identifiers:
    """``annotations``: the gate is on."""

    annotations: bool = False

    def group_name(self, obj: Mapping[str, Any]) -> str:
        """``GetPodGroupName``: with the gate the annotation, then the label; without, the label."""
        if self.annotations:
            name = _str(_meta_map(obj, "annotations").get(ANN_POD_GROUP_NAME))
            if name:
                return name
        return _str(_meta_map(obj, "labels").get(LABEL_POD_GROUP_NAME))

    def group_name_path(self, obj: Mapping[str, Any]) -> str:
        """Where the group name was read from (``getGroupNamePath``)."""
        if self.annotations and _str(_meta_map(obj, "annotations").get(ANN_POD_GROUP_NAME)):
            return f"metadata.annotations[{ANN_POD_GROUP_NAME}]"
        return f"metadata.labels[{LABEL_POD_GROUP_NAME}]"

    def prebuilt_workload(self, obj: Mapping[str, Any]) -> str:
        """``PrebuiltWorkloadNameFor``."""
        label = _str(_meta_map(obj, "labels").get(LABEL_PREBUILT_WORKLOAD))
        annotation = _str(_meta_map(obj, "annotations").get(ANN_PREBUILT_WORKLOAD))
        if self.annotations:
            return annotation or label
        return label or (annotation if len(annotation) > LABEL_VALUE_MAX else "")

    def stamp(self, name: str) -> tuple[dict[str, str], dict[str, str]]:
        """(labels, annotations) naming a pod's group and prebuilt Workload ``name``, as Kueue's
        ``SetPodGroupName`` and ``SetPrebuiltWorkloadName`` write them."""
        if self.annotations:
            return {}, {ANN_POD_GROUP_NAME: name, ANN_PREBUILT_WORKLOAD: name}
        if len(name) > LABEL_VALUE_MAX:
            return {LABEL_POD_GROUP_NAME: name}, {ANN_PREBUILT_WORKLOAD: name}
        return {LABEL_POD_GROUP_NAME: name, LABEL_PREBUILT_WORKLOAD: name}, {}


LABELS_ONLY = Identifiers()


def identifiers(gates: FeatureGates) -> Identifiers:
    return Identifiers(gates.enabled(GATE))
