"""The building blocks of the shape gate's schemas (scheduler/adapter/manifest/shape.py): the types Kubernetes
gives the fields the webhook reads. Each kind module composes its own schema from these.

A schema is plain data: a type name (``str``, ``bool``, ``int``, ``count``, ``quantity``), a
``dict`` of field -> schema (an object with those optional fields), ``[schema]`` or
``[schema, most]`` (a list of such items, at most ``most`` of them: the CRD's ``maxItems``), or
``{MAP: schema}`` (an object with any keys whose values have that schema).
"""

from __future__ import annotations

from typing import Any

MAP = "*"  # the key of a map schema: {MAP: value schema}

STRING_MAP = {MAP: "str"}
QUANTITIES = {MAP: "quantity"}
OWNER_REFERENCE = {"apiVersion": "str", "kind": "str", "name": "str", "uid": "str", "controller": "bool",
                   "blockOwnerDeletion": "bool"}
METADATA: dict[str, Any] = {"name": "str", "generateName": "str", "namespace": "str", "uid": "str",
                            "resourceVersion": "str", "labels": STRING_MAP, "annotations": STRING_MAP,
                            "ownerReferences": [OWNER_REFERENCE], "finalizers": ["str"], "deletionTimestamp": "str"}
TOP: dict[str, Any] = {"apiVersion": "str", "kind": "str", "metadata": METADATA}  # every object's head
RESOURCES = {"requests": QUANTITIES, "limits": QUANTITIES}
CONTAINER = {"name": "str", "image": "str", "restartPolicy": "str", "resources": RESOURCES}
TOLERATION = {"key": "str", "operator": "str", "value": "str", "effect": "str", "tolerationSeconds": "int"}
POD_TEMPLATE: dict[str, Any] = {
    "metadata": METADATA,
    "spec": {"containers": [CONTAINER], "initContainers": [CONTAINER], "schedulerName": "str",
             "priorityClassName": "str", "nodeSelector": STRING_MAP, "tolerations": [TOLERATION],
             "schedulingGates": [{"name": "str"}], "overhead": QUANTITIES, "affinity": {},
             "resources": RESOURCES},  # pod-level resources (PodLevelResources): charged
}
JOB_SPEC: dict[str, Any] = {"parallelism": "count", "completions": "count", "completionMode": "str",
                            "suspend": "bool", "template": POD_TEMPLATE}


def replica_specs(field: str) -> dict[str, Any]:
    """A Kubeflow job: ``spec.runPolicy.suspend`` and a map of replica type -> replica spec."""
    return {**TOP, "spec": {"runPolicy": {"suspend": "bool"}, field: {
        MAP: {"replicas": "count", "template": POD_TEMPLATE}}}}
