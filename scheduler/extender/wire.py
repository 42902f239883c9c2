"""Decoding extender/v1 request bodies, bounded: bytes in, typed arguments or a :class:`WireError`.

kube-scheduler always sends well-formed bodies; anything else reaching the port (a probe, a
scanner, a bug) must still get an answer, and must never get a pod through the filter
unchecked. So the body is read once here, within size and nesting limits, and every field
the decisions read is checked for the type Kubernetes gives it; the error names the field
(``Pod.metadata.labels[team]: must be a string``). After decoding, the decisions may assume
those types.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A core/v1 Pod nests about 20 levels deep, a NodeList item fewer; the body adds two. Anything
# deeper is not a request kube-scheduler sends, and refusing it keeps every walk (including
# json.dumps of an echoed node list) far from Python's recursion limit.
MAX_JSON_DEPTH = 64


class WireError(ValueError):
    """A request the extender cannot decode; ``field`` is the offending field's path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


_CONTAINERS = frozenset({dict, list})


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a decoded JSON value (``json.loads`` output: plain dicts and lists),
    walked without recursion; stops past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.values() if type(item) is dict else item
        # The children's types are collected in C first: a list of scalars (NodeNames: 100 to
        # 10,000 names) is then skipped without a Python step per name.
        if _CONTAINERS.isdisjoint(set(map(type, children))):
            continue
        stack.extend((child, depth + 1) for child in children if type(child) in _CONTAINERS)
    return deepest


def decode_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object (an empty body is ``{}``)."""
    try:
        body = json.loads(raw or b"{}")
    except RecursionError:
        raise WireError("", f"request body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # also UnicodeDecodeError
        raise WireError("", f"request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise WireError("", f"request body is a JSON {type(body).__name__}, not an object")
    if _depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise WireError("", f"request body nests deeper than {MAX_JSON_DEPTH} levels")
    return body


def field(obj: Mapping[str, Any], name: str) -> Any:
    """Go-style case-insensitive field lookup (``Pod``, ``pod``, ``POD`` ...): the extender/v1
    structs have no JSON tags, and Go's decoder matches keys case-insensitively."""
    if name in obj:
        return obj[name]
    lower = name.lower()
    for key, value in obj.items():
        if key.lower() == lower:
            return value
    return None


# ---- type checks ------------------------------------------------------------------------------
def _object(value: Any, path: str, *, optional: bool = True) -> Mapping[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise WireError(path, f"must be an object, not {_type(value)}")
    return value


def _string(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WireError(path, f"must be a string, not {_type(value)}")
    return value


def _string_map(value: Any, path: str) -> None:
    for key, item in _object(value, path).items():
        if not isinstance(item, str):
            raise WireError(f"{path}[{key}]", f"must be a string, not {_type(item)}")


def _list(value: Any, path: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise WireError(path, f"must be a list, not {_type(value)}")
    return value


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def check_pod(pod: Any, path: str = "Pod") -> Mapping[str, Any]:
    """The pod, once every field the extender reads has its Kubernetes type."""
    checked = _object(pod, path, optional=False)
    meta = _object(checked.get("metadata"), f"{path}.metadata")
    for key in ("name", "namespace", "uid"):
        _string(meta.get(key), f"{path}.metadata.{key}")
    _string_map(meta.get("labels"), f"{path}.metadata.labels")
    _string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    for index, ref in enumerate(_list(meta.get("ownerReferences"), f"{path}.metadata.ownerReferences")):
        ref_path = f"{path}.metadata.ownerReferences[{index}]"
        ref = _object(ref, ref_path, optional=False)
        for key in ("apiVersion", "kind", "name", "uid"):
            _string(ref.get(key), f"{ref_path}.{key}")
        if not isinstance(ref.get("controller"), bool | None):
            raise WireError(f"{ref_path}.controller", f"must be a boolean, not {_type(ref.get('controller'))}")
    spec = _object(checked.get("spec"), f"{path}.spec")
    for key in ("schedulerName", "nodeName"):
        _string(spec.get(key), f"{path}.spec.{key}")
    _string(_object(checked.get("status"), f"{path}.status").get("phase"), f"{path}.status.phase")
    return checked


# ---- requests ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class FilterArgs:
    """extender/v1 ``ExtenderArgs``: the pod and its candidate nodes, either by name
    (nodeCacheCapable) or as full Node objects."""

    pod: Mapping[str, Any]
    names: list[str]
    items: list[Mapping[str, Any]] | None  # the Node objects sent; None when names were sent

    @property
    def cache_capable(self) -> bool:
        return self.items is None

    @classmethod
    def decode(cls, args: Mapping[str, Any]) -> FilterArgs:
        pod = check_pod(field(args, "Pod"))
        names_in = field(args, "NodeNames")
        if names_in is not None:
            if type(names_in) is list and set(map(type, names_in)) <= {str}:  # the types gathered in C
                return cls(pod, names_in, None)  # the usual body: no per-name path to format
            names = [_string(n, f"NodeNames[{i}]") for i, n in enumerate(_list(names_in, "NodeNames"))]
            return cls(pod, names, None)
        node_list = _object(field(args, "Nodes"), "Nodes")
        items: list[Mapping[str, Any]] = []
        names = []
        for index, item in enumerate(_list(node_list.get("items"), "Nodes.items")):
            node = _object(item, f"Nodes.items[{index}]", optional=False)
            meta = _object(node.get("metadata"), f"Nodes.items[{index}].metadata")
            names.append(_string(meta.get("name"), f"Nodes.items[{index}].metadata.name"))
            _string_map(meta.get("labels"), f"Nodes.items[{index}].metadata.labels")
            items.append(node)
        return cls(pod, names, items)


@dataclass(frozen=True)
class BindingArgs:
    """extender/v1 ``ExtenderBindingArgs``."""

    namespace: str
    name: str
    uid: str
    node: str

    @classmethod
    def decode(cls, args: Mapping[str, Any]) -> BindingArgs:
        values = {key: _string(field(args, key), key) for key in ("PodNamespace", "PodName", "PodUID", "Node")}
        for key in ("PodName", "Node"):
            if not values[key]:
                raise WireError(key, "is required")
        return cls(values["PodNamespace"] or "default", values["PodName"], values["PodUID"], values["Node"])
