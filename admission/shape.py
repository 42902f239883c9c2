"""The shape gate: the fields the webhook reads must have the types Kubernetes gives them.

The API server decodes built-in kinds into typed structs before it calls a webhook, and CRDs
are checked against their structural schemas, so a review from a healthy API server always
passes. The gate is there for everything else (a hand-made request, a CRD installed without
its schema): it turns "a label value is a number" into one field error that names the field,
instead of an exception somewhere in validation. After the gate, mutation and validation may
assume the types below.

A schema is plain data (``scheduler/adapter/kinds/shapes.py``); each governed kind declares its
own in its kind module, the Kueue objects' are here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.fielderrors import OMIT, FieldError, invalid
from scheduler.adapter.kinds.registry import KINDS
from scheduler.adapter.kinds.shapes import MAP, METADATA, STRING_MAP
from scheduler.core.resources import parse_quantity

_STRING_MAP = STRING_MAP
_METADATA = METADATA
_LEVELS = [{"nodeLabel": "str"}]
_FLAVOR_QUOTAS = [{"name": "str", "resources": [{"name": "str", "nominalQuota": "quantity",
                                                 "borrowingLimit": "quantity", "lendingLimit": "quantity"}]}]

SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    **{kind.kind: kind.shape for kind in KINDS},  # each governed kind declares its own (scheduler/adapter/kinds)
    "Topology": {"metadata": _METADATA, "spec": {"levels": _LEVELS}},
    "ResourceFlavor": {"metadata": _METADATA, "spec": {"nodeLabels": _STRING_MAP, "topologyName": "str",
                                                       "nodeTaints": [{}], "tolerations": [{}]}},
    "ClusterQueue": {"metadata": _METADATA, "spec": {
        "cohort": "str", "cohortName": "str", "namespaceSelector": {}, "preemption": {}, "queueingStrategy": "str",
        "stopPolicy": "str", "flavorFungibility": {},
        "resourceGroups": [{"coveredResources": ["str"], "flavors": _FLAVOR_QUOTAS}]}},
    "LocalQueue": {"metadata": _METADATA, "spec": {"clusterQueue": "str", "stopPolicy": "str"}},
}

_TYPE_WORDS = {"str": "a string", "bool": "a boolean", "int": "an integer",
               "quantity": "a quantity (a string such as \"8\" or \"64Gi\", or a number)"}


def _is(value: Any, type_name: str) -> bool:
    if type_name == "str":
        return isinstance(value, str)
    if type_name == "bool":
        return isinstance(value, bool)
    if type_name == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return False
    try:  # quantity: what the API server would have parsed
        parse_quantity(value, "")
    except (ValueError, ArithmeticError):
        return False
    return True


def _walk(value: Any, schema: Any, path: str, errors: list[FieldError]) -> None:
    if value is None:
        return  # absent or null: the validation proper decides whether it is required
    if isinstance(schema, str):
        if not _is(value, schema):
            errors.append(invalid(path, _shown(value), f"must be {_TYPE_WORDS[schema]}"))
        return
    if isinstance(schema, list):
        if not isinstance(value, list):
            errors.append(invalid(path, _shown(value), "must be a list"))
            return
        for index, item in enumerate(value):
            _walk(item, schema[0], f"{path}[{index}]", errors)
        return
    if not isinstance(value, Mapping):
        errors.append(invalid(path, _shown(value), "must be an object"))
        return
    if MAP in schema:
        for key, item in value.items():
            if item is None and isinstance(schema[MAP], str):  # a map's value is never optional
                errors.append(invalid(f"{path}[{key}]", None, f"must be {_TYPE_WORDS[schema[MAP]]}"))
                continue
            _walk(item, schema[MAP], f"{path}[{key}]", errors)
        return
    for key, sub in schema.items():
        _walk(value.get(key), sub, f"{path}.{key}" if path else key, errors)


def _shown(value: Any) -> Any:
    """The value as a field error prints it: scalars as they are, containers by their type."""
    if isinstance(value, Mapping):
        return OMIT
    if isinstance(value, list):
        return OMIT
    return value


def shape_errors(kind: str, obj: Any, root: str = "object") -> list[FieldError]:
    """Field errors for every field the webhook reads that has the wrong type (at most 20).
    Paths are the object's own (``metadata.labels[team]``); ``root`` names the object itself."""
    if obj is not None and not isinstance(obj, Mapping):
        return [invalid(root, _shown(obj), "must be an object")]
    errors: list[FieldError] = []
    _walk(obj, SCHEMAS.get(kind, {"metadata": _METADATA}), "", errors)
    return errors[:20]
