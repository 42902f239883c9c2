"""Kubernetes' strategic merge patch for a batch/v1 JobTemplateSpec, the subset the Kubeflow
Trainer applies to a runtime's replicated job for each TrainJob ``runtimePatches`` entry
(``strategicpatch.StrategicMergePatch(..., batchv1.JobTemplateSpec{})`` in Trainer v2.2.0
``pkg/runtime/core/trainingruntime.go``): maps merge, the lists Kubernetes declares with a merge
key (containers, initContainers and volumes by ``name``, env by ``name``, volumeMounts by
``mountPath``, schedulingGates, imagePullSecrets, resourceClaims by ``name``, ports by
``containerPort``) merge entry by entry, every other list is replaced. (The JSON merge patch,
RFC 7386, is ``base.merge_patched``.)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# list field -> merge key, as the Kubernetes API types declare them (patchMergeKey).
LIST_MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "env": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath", "schedulingGates": "name",
    "imagePullSecrets": "name", "resourceClaims": "name", "ports": "containerPort", "hostAliases": "ip",
}


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, Mapping) or key not in item:
            out.append(copy.deepcopy(item))
            continue
        for i, existing in enumerate(out):
            if isinstance(existing, Mapping) and existing.get(key) == item[key]:
                out[i] = strategic_merged(existing, item)
                break
        else:
            out.append(copy.deepcopy(dict(item)))
    return out


def strategic_merged(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with ``patch`` strategically merged (the subset described in the module doc)."""
    out = copy.deepcopy(dict(obj))
    for key, value in patch.items():
        current = out.get(key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = strategic_merged(current, value)
        elif isinstance(value, list) and isinstance(current, list) and key in LIST_MERGE_KEYS:
            out[key] = _merge_list(current, value, LIST_MERGE_KEYS[key])
        else:
            out[key] = copy.deepcopy(value)
    return out
