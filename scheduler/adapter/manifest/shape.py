"""The shape gate: the fields the webhook reads must have the types Kubernetes gives them.

The API server decodes built-in kinds into typed structs before it calls a webhook, and CRDs
are checked against their structural schemas, so a review from a healthy API server always
passes. The gate is there for everything else (a hand-made request, a CRD installed without
its schema): it turns "a label value is a number" into one field error that names the field,
instead of an exception somewhere in validation. After the gate, mutation and validation may
assume the types below.

A schema is plain data (``scheduler/adapter/kinds/shapes.py``); each governed kind declares its
own in its kind module, the Kueue objects' and the files' (Node, Pod) are here.

Every error names the field, the type it must have and the fix (``spec.levels[0]: Invalid
value: null: must be an object; remove the null item or write it as an object``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.registry import KINDS
from scheduler.adapter.kinds.shapes import CONTAINER, MAP, STRING_MAP, TOLERATION, TOP
from scheduler.adapter.manifest.fielderrors import OMIT, FieldError, invalid, too_many
from scheduler.core.resources import quantity_float

INT32_MAX = 2**31 - 1

_TAINT = {"key": "str", "value": "str", "effect": "str"}
# Kueue's CRD bounds (kubebuilder MaxItems of apis/kueue/v1beta2), so a request the API server
# would refuse for its size is refused here before anything walks it.
_LEVELS = [{"nodeLabel": "str"}, 16]
_FLAVOR_QUOTAS = [{"name": "str", "resources": [{"name": "str", "nominalQuota": "quantity",
                                                 "borrowingLimit": "quantity", "lendingLimit": "quantity"}, 64]}, 64]
SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    **{kind.kind: kind.shape for kind in KINDS},  # each governed kind declares its own (scheduler/adapter/kinds)
    "Topology": {**TOP, "spec": {"levels": _LEVELS}},
    "ResourceFlavor": {**TOP, "spec": {"nodeLabels": STRING_MAP, "topologyName": "str",
                                        "nodeTaints": [_TAINT, 8], "tolerations": [TOLERATION, 8]}},
    "ClusterQueue": {**TOP, "spec": {
        "cohort": "str", "cohortName": "str", "namespaceSelector": {}, "preemption": {}, "queueingStrategy": "str",
        "stopPolicy": "str", "flavorFungibility": {},
        "resourceGroups": [{"coveredResources": ["str", 64], "flavors": _FLAVOR_QUOTAS}, 16]}},
    "LocalQueue": {**TOP, "spec": {"clusterQueue": "str", "stopPolicy": "str"}},
    # Workloads: Kueue's rules read the rest (scheduler/adapter/workload_checks.py); the status'
    # conditions are read on UPDATE of the old object (does it hold quota?).
    "Workload": {**TOP, "spec": {}, "status": {"conditions": [{"type": "str", "status": "str"}]}},
    # The objects `toposched place` and `topology` read from files (kubectl get nodes/pods):
    # quantities are left to the reader, whose messages name the bad quantity and its field.
    "Node": {**TOP, "spec": {"taints": [_TAINT], "unschedulable": "bool"},
             "status": {"allocatable": {}, "capacity": {}, "conditions": [
                 {"type": "str", "status": "str", "reason": "str", "message": "str"}]}},
    "Pod": {**TOP, "spec": {"nodeName": "str", "containers": [CONTAINER], "initContainers": [CONTAINER],
                             "overhead": {}},
            "status": {"phase": "str"}},
}

_TYPE_WORDS = {"str": "a string", "bool": "a boolean", "int": "an integer", "count": "an integer",
               "quantity": "a quantity (a string such as \"8\" or \"64Gi\", or a number)",
               "object": "an object", "list": "a list"}
_FIXES = {"str": "write it as a string (in quotes if it looks like a number or a boolean)",
          "bool": "write true or false, without quotes", "int": "write a whole number without quotes",
          "count": "write a whole number without quotes, e.g. 4",
          "quantity": "write a quantity such as \"8\", \"500m\" or \"64Gi\"",
          "object": "write it as an object (key: value), or remove it",
          "list": "write it as a list (one \"- item\" per line), or remove it"}


def _type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    return "list" if isinstance(schema, list) else "object"


def _is(value: Any, type_name: str) -> bool:
    if type_name == "str":
        return isinstance(value, str)
    if type_name == "bool":
        return isinstance(value, bool)
    if type_name in ("int", "count"):
        return isinstance(value, int) and not isinstance(value, bool)
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return False
    try:  # quantity: what the API server would have parsed (its sign is checked apart)
        quantity_float(value)
    except (ValueError, ArithmeticError):
        return False
    return True


def _wrong_type(path: str, value: Any, schema: Any) -> FieldError:
    name = _type_name(schema)
    return invalid(path, _shown(value), f"must be {_TYPE_WORDS[name]}", _FIXES[name])


MAX_ERRORS = 20


def _walk(value: Any, schema: Any, path: str, errors: list[FieldError]) -> None:
    if value is None or len(errors) >= MAX_ERRORS:
        return  # absent or null: the validation proper decides whether it is required
    if isinstance(schema, str):
        if not _is(value, schema):
            errors.append(_wrong_type(path, value, schema))
        elif schema == "quantity" and quantity_float(value) < 0:
            errors.append(invalid(path, _shown(value), "must be greater than or equal to 0", "remove the minus sign"))
        elif schema == "count" and not 0 <= value <= INT32_MAX:
            errors.append(invalid(path, value, "must be greater than or equal to 0" if value < 0 else
                                  f"must be less than or equal to {INT32_MAX}",
                                  "write the number of pods (or replicas) the job runs"))
        return
    if isinstance(schema, list):
        if not isinstance(value, list):
            errors.append(_wrong_type(path, value, schema))
            return
        most = schema[1] if len(schema) > 1 else None
        if most is not None and len(value) > most:
            errors.append(too_many(path, len(value), most, f"list at most {most} items"))
            return
        if schema[0] == "str" and all(isinstance(item, str) for item in value):
            return  # the common case (finalizers, args) without a path per item
        for index, item in enumerate(value):
            if item is None:  # a list item is never optional: nothing reads a null item
                name = _type_name(schema[0])
                errors.append(invalid(f"{path}[{index}]", None, f"must be {_TYPE_WORDS[name]}",
                                      f"remove the null item or write it as {_TYPE_WORDS[name].split(' (')[0]}"))
                continue
            _walk(item, schema[0], f"{path}[{index}]", errors)
        return
    if not isinstance(value, Mapping):
        errors.append(_wrong_type(path, value, schema))
        return
    if MAP in schema:
        if schema[MAP] == "str" and all(isinstance(item, str) for item in value.values()):
            return  # labels and annotations: no path per entry when every value is a string
        for key, item in value.items():
            if item is None and isinstance(schema[MAP], str):  # a map's value is never optional
                errors.append(_wrong_type(f"{path}[{key}]", None, schema[MAP]))
                continue
            _walk(item, schema[MAP], f"{path}[{key}]", errors)
        return
    for key, sub in schema.items():
        _walk(value.get(key), sub, f"{path}.{key}" if path else key, errors)


def _shown(value: Any) -> Any:
    """The value as a field error prints it: scalars as they are (long strings cut), containers
    by their type."""
    if isinstance(value, Mapping | list):
        return OMIT
    if isinstance(value, str) and len(value) > 64:
        return value[:61] + "..."
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return OMIT
    return value


def shape_errors(kind: str, obj: Any, root: str = "object") -> list[FieldError]:
    """Field errors for every field the webhook reads that has the wrong type or too many
    items (at most :data:`MAX_ERRORS`). Paths are the object's own (``metadata.labels[team]``);
    ``root`` names the object itself."""
    if obj is not None and not isinstance(obj, Mapping):
        return [_wrong_type(root, obj, {})]
    errors: list[FieldError] = []
    _walk(obj, SCHEMAS.get(kind, TOP), "", errors)
    return errors[:MAX_ERRORS]


def object_errors(kind: str, obj: Any) -> list[str]:
    """:func:`shape_errors` as lines: the check ``toposched place``/``topology`` and the gRPC
    API run on each object of a file before reading it (scheduler.adapter.files.ObjectCheck)."""
    return [str(e) for e in shape_errors(kind, obj)]
