"""Reading the YAML files commands take: nodes, pods, jobs/workloads, topologies.

Accepts what ``kubectl get ... -o yaml`` prints (a ``List`` with ``items``), multi-document
YAML, or a single object. Every problem becomes a :class:`UserError` with one line naming the
file and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from scheduler.adapter.kinds.workloads import EXPECTED_KINDS, is_placeable, workload_from_manifest
from scheduler.core.nodes import NodeInfo, PodInfo, node_from_k8s, pod_from_k8s
from scheduler.core.resources import QuantityError
from scheduler.core.topology import DEFAULT_TOPOLOGY_NAME
from scheduler.core.topology_request import TopologyRequestError
from scheduler.core.workload import WorkloadFormatError, WorkloadSpec
from scheduler.errors import UserError

T = TypeVar("T")


def load_documents(path: Path | str, what: str = "file") -> list[tuple[str, dict[str, Any]]]:
    """All objects in ``path`` as (location, object); ``List`` kinds are flattened."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError as exc:
        raise UserError(f"{what} {path}: no such file") from exc
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot read ({exc.strerror})") from exc
    return parse_documents(text, what, path)


def parse_documents(text: str, what: str, path: Path | str) -> list[tuple[str, dict[str, Any]]]:
    """:func:`load_documents` on text already read; ``what path`` starts every message (the
    gRPC API passes e.g. ``("field", "workload.manifest")``)."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise UserError(f"{what} {path}: not valid YAML{where}: {problem}") from exc
    out: list[tuple[str, dict[str, Any]]] = []
    for d, doc in enumerate(docs):
        if doc is None:
            continue
        loc = f"document {d + 1}" if len(docs) > 1 else ""
        if not isinstance(doc, Mapping):
            raise UserError(f"{what} {path}: {loc or 'top level'}: expected a Kubernetes object (a mapping)")
        kind = str(doc.get("kind") or "")
        if kind == "List" or (kind.endswith("List") and "items" in doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise UserError(f"{what} {path}: {loc + ' ' if loc else ''}items: expected a list")
            for i, item in enumerate(items):
                at = f"{loc + ' ' if loc else ''}items[{i}]"
                if not isinstance(item, Mapping):
                    raise UserError(f"{what} {path}: {at}: expected a Kubernetes object (a mapping)")
                out.append((at, dict(item)))
        else:
            out.append((loc, dict(doc)))
    return out


def _prefix(what: str, path: Path | str, loc: str) -> str:
    return f"{what} {path}: {loc + ': ' if loc else ''}"


def load_nodes(path: Path | str) -> list[NodeInfo]:
    return nodes_from_documents(load_documents(path, "nodes file"), "nodes file", path)


def nodes_from_documents(docs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str) -> list[NodeInfo]:
    return _objects_of_kind(docs, what, path, "Node", node_from_k8s, "status.allocatable")


def load_pods(path: Path | str) -> list[PodInfo]:
    return pods_from_documents(load_documents(path, "pods file"), "pods file", path)


def pods_from_documents(docs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str) -> list[PodInfo]:
    return _objects_of_kind(docs, what, path, "Pod", pod_from_k8s, "spec.containers[].resources")


def _objects_of_kind(docs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str, kind: str,
                     convert: Callable[[Mapping[str, Any]], T], quantities_at: str) -> list[T]:
    """Each document converted; the first bad one is the user's error, named by its place in
    the file and the field (``quantities_at``: where a bad quantity of this kind sits)."""
    located = []
    for loc, obj in docs:
        pre = _prefix(what, path, loc)
        got = obj.get("kind", kind)
        if got != kind:
            raise UserError(f"{pre}kind: expected {kind}, got {got!r}")
        if not (obj.get("metadata") or {}).get("name"):
            raise UserError(f"{pre}metadata.name: missing")
        located.append((pre, obj))
    return convert_objects(located, kind, convert, quantities_at)


def convert_objects(located: Iterable[tuple[str, Mapping[str, Any]]], kind: str,
                    convert: Callable[[Mapping[str, Any]], T], quantities_at: str) -> list[T]:
    """Each object converted; the first bad one is the user's error, after its ``prefix`` (which
    names where the object sits, ending in ": ") and the field (``quantities_at``: where a bad
    quantity of this kind sits)."""
    out = []
    for pre, obj in located:
        try:
            out.append(convert(obj))
        except QuantityError as exc:
            raise UserError(f"{pre}{quantities_at}: {exc}") from exc
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise UserError(f"{pre}malformed {kind} ({exc})") from exc
    return out


def load_topology(path: Path | str) -> tuple[str, tuple[str, ...]]:
    """A Kueue Topology -> (name, levels)."""
    return topology_from_documents(load_documents(path, "topology file"), "topology file", path)


def topology_from_documents(docs: list[tuple[str, dict[str, Any]]], what: str,
                            path: Path | str) -> tuple[str, tuple[str, ...]]:
    objs = [(loc, o) for loc, o in docs if o.get("kind") == "Topology"]
    if not objs:
        raise UserError(f"{what} {path}: kind: no Topology object found")
    loc, obj = objs[0]
    pre = _prefix(what, path, loc)
    name = str((obj.get("metadata") or {}).get("name") or DEFAULT_TOPOLOGY_NAME)
    levels = (obj.get("spec") or {}).get("levels")
    if not isinstance(levels, list) or not levels:
        raise UserError(f"{pre}spec.levels: must list at least one level")
    out = []
    for i, level in enumerate(levels):
        label = level.get("nodeLabel") if isinstance(level, Mapping) else None
        if not isinstance(label, str) or not label:
            raise UserError(f"{pre}spec.levels[{i}].nodeLabel: missing")
        out.append(label)
    if len(set(out)) != len(out):
        raise UserError(f"{pre}spec.levels: items must be unique")
    if "kubernetes.io/hostname" in out[:-1]:
        raise UserError(f"{pre}spec.levels: kubernetes.io/hostname may only be the last level")
    return name, tuple(out)


# A check of the raw manifest before it is read (e.g. the webhook's annotation rules, which live
# in a higher layer and are passed in by the CLI and the gRPC servicer): its error lines.
ManifestCheck = Callable[[Mapping[str, Any]], list[str]]


def load_workload(path: Path | str, check: ManifestCheck | None = None) -> WorkloadSpec:
    """The first managed object in the file: an object of a governed kind (the job-kind
    registry) or a Kueue Workload."""
    return workload_from_documents(load_documents(path, "workload file"), "workload file", path, check)


def workload_from_documents(objs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str,
                            check: ManifestCheck | None = None) -> WorkloadSpec:
    if not objs:
        raise UserError(f"{what} {path}: empty; expected {EXPECTED_KINDS}")
    loc, obj = next(((loc, o) for loc, o in objs if is_placeable(o)), objs[0])
    pre = _prefix(what, path, loc)
    errors = check(obj) if check is not None else []
    if errors:
        raise UserError(f"{pre}{errors[0]}")
    try:
        return workload_from_manifest(obj, [o for _, o in objs])  # (a TrainJob's runtime may be in the file)
    except (WorkloadFormatError, TopologyRequestError) as exc:
        raise UserError(f"{pre}{exc}") from exc
    except QuantityError as exc:
        raise UserError(f"{pre}spec.template.spec.containers[].resources: {exc}") from exc
    except (TypeError, AttributeError, ValueError, KeyError) as exc:
        raise UserError(f"{pre}malformed {obj.get('kind')} ({exc})") from exc
