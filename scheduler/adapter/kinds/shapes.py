"""The building blocks of the shape gate's schemas (admission/shape.py): the types Kubernetes
gives the fields the webhook reads. Each kind module composes its own schema from these.

A schema is plain data: a type name (``str``, ``bool``, ``int``, ``quantity``), a ``dict`` of
field -> schema (an object with those optional fields), ``[schema]`` (a list of such items),
or ``{MAP: schema}`` (an object with any keys whose values have that schema).
"""

from __future__ import annotations

from typing import Any

MAP = "*"  # the key of a map schema: {MAP: value schema}

STRING_MAP = {MAP: "str"}
QUANTITIES = {MAP: "quantity"}
METADATA: dict[str, Any] = {"name": "str", "generateName": "str", "namespace": "str", "labels": STRING_MAP,
                            "annotations": STRING_MAP}
CONTAINER = {"name": "str", "resources": {"requests": QUANTITIES, "limits": QUANTITIES}}
POD_TEMPLATE: dict[str, Any] = {
    "metadata": METADATA,
    "spec": {"containers": [CONTAINER], "initContainers": [CONTAINER], "schedulerName": "str",
             "priorityClassName": "str", "nodeSelector": STRING_MAP, "tolerations": [{}], "schedulingGates": [{}]},
}
JOB_SPEC: dict[str, Any] = {"parallelism": "int", "completions": "int", "completionMode": "str", "suspend": "bool",
                            "template": POD_TEMPLATE}


def replica_specs(field: str) -> dict[str, Any]:
    """A Kubeflow job: ``spec.runPolicy.suspend`` and a map of replica type -> replica spec."""
    return {"metadata": METADATA, "spec": {"runPolicy": {"suspend": "bool"}, field: {
        MAP: {"replicas": "int", "template": POD_TEMPLATE}}}}
