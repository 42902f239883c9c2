"""Reading the files commands take: nodes, pods, jobs/workloads, topologies, cluster descriptions.

One reader for ``toposched place``, ``topology`` and ``simulate`` (and, on the bytes of a
request, gRPC ``Place``/``GetTopology``/``Simulate``), so every door answers a bad file with the
same line. Accepts what ``kubectl get ... -o yaml|json`` prints (a ``List`` with ``items``),
multi-document YAML, or a single object; UTF-8, or UTF-16/32 with a byte-order mark (what
Windows PowerShell's ``>`` writes).

Every file is bounded before anything walks it: at most :data:`MAX_FILE_BYTES` read (so
``/dev/zero`` or an endless pipe ends with an error, not a hang), YAML at most
:data:`MAX_YAML_BYTES` (it costs ~50x its size in memory), no NUL bytes (binary),
nesting at most :data:`MAX_DEPTH` levels and at most :data:`MAX_VALUES` values once YAML
aliases are expanded (a "billion laughs" file is refused, not expanded). Every problem
becomes a :class:`UserError` with one line naming the file, the place in it, the field and
the fix.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from scheduler.adapter.kinds.workloads import EXPECTED_KINDS, is_placeable, workload_from_manifest
from scheduler.core.config import DEFAULT_KUEUE_RELEASE
from scheduler.core.fakecluster import generate_nodes
from scheduler.core.nodes import NodeInfo, PodInfo, node_from_k8s, pod_from_k8s
from scheduler.core.resources import QuantityError
from scheduler.core.topology import DEFAULT_TOPOLOGY_NAME
from scheduler.core.topology_request import TopologyRequestError
from scheduler.core.workload import WorkloadFormatError, WorkloadSpec
from scheduler.errors import UserError

T = TypeVar("T")

# Reading costs memory: JSON about 7 times its size (json.loads), YAML about 50 times (PyYAML's
# node graph, even with libyaml: 38 MB of `kubectl get pods -o yaml` took 1.9 GB and 2 min, its
# JSON 0.3 GB and 2 s). So JSON may be 64 MiB (some 30,000 pods with their env and labels), YAML
# 16 MiB; a bigger YAML file is refused with the advice to give JSON.
MAX_FILE_BYTES = 64 * 2**20
MAX_YAML_BYTES = 16 * 2**20
# A Kubernetes object nests about 20 levels deep, a List adds two; the webhook's bound.
MAX_DEPTH = 100
# Values (scalars and containers) once YAML aliases are expanded: 64 MiB of JSON holds about 3.5
# million; more can only come from aliases, which readers downstream would copy out.
MAX_VALUES = 5_000_000
_CHUNK = 1 << 20

NODES_EXPECTED = "Node objects (kubectl get nodes -o yaml) or a cluster description (examples/clusters/)"
PODS_EXPECTED = "Pod objects (kubectl get pods -A -o yaml)"
TOPOLOGY_EXPECTED = "a Kueue Topology (spec.levels[].nodeLabel)"

# A check of a raw object before it is read, by its kind: its error lines (e.g. the webhook's
# shape gate and annotation rules, which live in a higher layer and are passed in by the CLI
# and the gRPC servicer).
ObjectCheck = Callable[[str, Mapping[str, Any]], list[str]]
ManifestCheck = Callable[[Mapping[str, Any]], list[str]]


# ---------------------------------------------------------------------------- bytes -> text


def read_bytes(path: Path | str, what: str = "file") -> bytes:
    """The file's bytes, at most :data:`MAX_FILE_BYTES`; a binary file is refused at its
    first NUL byte (so ``/dev/zero`` costs one chunk)."""
    path = Path(path)
    chunks: list[bytes] = []
    total = 0
    try:
        with path.open("rb") as stream:  # also FIFOs and process substitution: <(kubectl get ...)
            while True:
                chunk = stream.read(_CHUNK)
                if not chunk:
                    break
                if not chunks:
                    _encoding(chunk, what, path)  # refuses binary before reading on
                total += len(chunk)
                if total > MAX_FILE_BYTES:
                    raise UserError(f"{what} {path}: larger than {MAX_FILE_BYTES // 2**20} MiB; give a smaller "
                                    "file (e.g. only the namespaces or nodes that matter)")
                chunks.append(chunk)
    except FileNotFoundError as exc:
        raise UserError(f"{what} {path}: no such file") from exc
    except IsADirectoryError as exc:
        raise UserError(f"{what} {path}: is a directory; give a file") from exc
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot read ({exc.strerror or exc})") from exc
    return b"".join(chunks)


_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def _encoding(head: bytes, what: str, path: Path | str) -> str:
    """The codec of text starting with ``head``: a byte-order mark's, UTF-16 without one (every
    other byte 0 in ASCII text), else UTF-8; UserError for binary (a NUL byte in UTF-8)."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    pairs = [head[i:i + 2] for i in range(0, min(len(head), 64) - 1, 2)]
    for zero_first, codec in ((True, "utf-16-be"), (False, "utf-16-le")):  # ASCII text, every other byte 0
        if pairs and all(0 < p[zero_first] < 128 and p[not zero_first] == 0 for p in pairs):
            return codec
    nul = head.find(b"\0")
    if nul >= 0:
        raise UserError(f"{what} {path}: not a text file (a NUL byte at offset {nul}); give YAML or JSON text")
    return "utf-8"


def decode_text(data: bytes, what: str = "file", path: Path | str = "") -> str:
    """Bytes -> text (see :func:`_encoding`), or UserError naming the first bad byte."""
    codec = _encoding(data[:_CHUNK], what, path)
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {path}: not {codec.upper().removesuffix('-SIG')} text (byte "
                        f"0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8") from exc
    if codec == "utf-8" and "\0" in text:
        raise UserError(f"{what} {path}: not a text file (a NUL byte at offset {text.index(chr(0))}); "
                        "give YAML or JSON text")
    return text


def read_text(path: Path | str, what: str = "file") -> str:
    """:func:`read_bytes` then :func:`decode_text`."""
    return decode_text(read_bytes(path, what), what, path)


# ---------------------------------------------------------------------------- text -> objects


class _TooBig(Exception):
    """``deep``: past :data:`MAX_DEPTH` levels; else past :data:`MAX_VALUES` values."""

    def __init__(self, deep: bool) -> None:
        super().__init__()
        self.deep = deep


def _measure(value: Any, depth: int, memo: dict[int, tuple[int, int]], budget: list[int]) -> int:
    """The nesting depth below ``value``; raises :class:`_TooBig` past :data:`MAX_DEPTH` levels
    or :data:`MAX_VALUES` values counted with aliases expanded (a container shared through an
    alias is walked once: its size is remembered)."""
    if not isinstance(value, dict | list):
        budget[0] -= 1
        return 0
    seen = memo.get(id(value))
    if seen is not None:
        size, below = seen
        budget[0] -= size
        if budget[0] < 0 or depth + below > MAX_DEPTH:
            raise _TooBig(deep=budget[0] >= 0)
        return below
    if depth > MAX_DEPTH:
        raise _TooBig(deep=True)
    before = budget[0]
    below = 0
    for child in value.values() if isinstance(value, dict) else value:
        below = max(below, 1 + _measure(child, depth + 1, memo, budget))
        if budget[0] < 0:
            raise _TooBig(deep=False)
    budget[0] -= 1
    memo[id(value)] = (before - budget[0], below)
    return below


def _bounded(docs: list[Any], what: str, path: Path | str) -> None:
    memo: dict[int, tuple[int, int]] = {}
    budget = [MAX_VALUES]
    try:
        for doc in docs:
            _measure(doc, 1, memo, budget)
    except _TooBig as exc:
        if exc.deep:
            raise UserError(f"{what} {path}: nests deeper than {MAX_DEPTH} levels; a Kubernetes object nests about "
                            "20 levels deep") from None
        raise UserError(f"{what} {path}: holds more than {MAX_VALUES:,} values once its YAML aliases (*name) are "
                        "expanded; write the objects out in full, or give fewer") from None


def parse_documents(text: str, what: str, path: Path | str,
                    expected: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """All objects in ``text`` as (location, object); ``List`` kinds are flattened. ``what
    path`` starts every message (the gRPC API passes e.g. ``("field", "workload.manifest")``).
    ``expected``: what the file should hold; given, a file with no document at all is an error
    that says it is empty."""
    docs = _load(text, what, path)
    _bounded(docs, what, path)
    out: list[tuple[str, dict[str, Any]]] = []
    docs = [d for d in docs if d is not None]
    if not docs and expected is not None:
        raise UserError(f"{what} {path}: the file is empty; expected {expected}")
    for d, doc in enumerate(docs):
        loc = f"document {d + 1}" if len(docs) > 1 else ""
        if not isinstance(doc, Mapping):
            raise UserError(f"{what} {path}: {loc or 'top level'}: expected a Kubernetes object (a mapping), "
                            f"got {_type_word(doc)}")
        kind = doc.get("kind")
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise UserError(f"{what} {path}: {loc + ' ' if loc else ''}items: expected a list, got "
                                f"{_type_word(items)}")
            implied = kind.removesuffix("List")  # a typed list (NodeList) may leave its items' kind out
            for i, item in enumerate(items):
                at = f"{loc + ' ' if loc else ''}items[{i}]"
                if not isinstance(item, Mapping):
                    raise UserError(f"{what} {path}: {at}: expected a Kubernetes object (a mapping), got "
                                    f"{_type_word(item)}")
                if implied and item.get("kind", implied) != implied:
                    raise UserError(f"{what} {path}: {at}: kind: a {item.get('kind')!r} inside a {kind}; a {kind} "
                                    f"holds {implied} objects only")
                out.append((at, {"kind": implied, **item} if implied else dict(item)))
        else:
            out.append((loc, dict(doc)))
    return out


def _load(text: str, what: str, path: Path | str) -> list[Any]:
    if text.lstrip()[:1] in ("{", "["):  # JSON (kubectl -o json): the fast decoder first
        try:
            return [json.loads(text)]
        except RecursionError:
            raise UserError(f"{what} {path}: nests deeper than {MAX_DEPTH} levels; a Kubernetes object nests "
                            "about 20 levels deep") from None
        except ValueError:
            pass  # YAML flow style, or broken: YAML's parser says where
    if len(text) > MAX_YAML_BYTES:
        raise UserError(f"{what} {path}: {len(text) / 2**20:.1f} MiB of YAML, over the {MAX_YAML_BYTES // 2**20} MiB "
                        "YAML is read up to (it takes about 50 times its size in memory); give JSON (kubectl get ... "
                        f"-o json, up to {MAX_FILE_BYTES // 2**20} MiB) or fewer objects")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return list(yaml.load_all(text, Loader=loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise UserError(f"{what} {path}: not valid JSON or YAML{where}: {problem}") from exc
    except RecursionError:
        raise UserError(f"{what} {path}: nests deeper than {MAX_DEPTH} levels; a Kubernetes object nests about 20 "
                        "levels deep") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp with month 13
        raise UserError(f"{what} {path}: not valid YAML: {exc}") from exc


def _type_word(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else type(value).__name__


def load_documents(path: Path | str, what: str = "file",
                   expected: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """All objects in the file at ``path`` (see :func:`parse_documents`)."""
    return parse_documents(read_text(path, what), what, path, expected)


def load_data(path: Path | str, what: str, expected: str) -> Any:
    """The one YAML/JSON document of a file that is not a Kubernetes object (a trace, a
    Configuration), bounded as every file."""
    return parse_data(read_text(path, what), what, path, expected)


def parse_data(text: str, what: str, path: Path | str, expected: str) -> Any:
    """:func:`load_data` on text already read."""
    docs = _load(text, what, path)
    _bounded(docs, what, path)
    docs = [d for d in docs if d is not None]
    if not docs:
        raise UserError(f"{what} {path}: the file is empty; expected {expected}")
    if len(docs) > 1:
        raise UserError(f"{what} {path}: {len(docs)} YAML documents; expected one, {expected}")
    return docs[0]


def _prefix(what: str, path: Path | str, loc: str) -> str:
    return f"{what} {path}: {loc + ': ' if loc else ''}"


def _name_of(obj: Mapping[str, Any]) -> Any:
    meta = obj.get("metadata")
    return meta.get("name") if isinstance(meta, Mapping) else None


def _where(loc: str, obj: Mapping[str, Any]) -> str:
    """``items[3] (n-1)``: the place of a listed object in the file and, when it has one, its name."""
    name = _name_of(obj)
    return f"{loc} ({name})" if loc and isinstance(name, str) and name else loc


# ---------------------------------------------------------------------------- objects of a kind


def objects_of_kind(docs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str, kind: str,
                    expected: str, check: ObjectCheck | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The objects of ``docs``, which must all be ``kind`` (a typed List's items may omit it)
    and named, each with the prefix its errors start with (``nodes file f: items[3] (n-1): ``).
    ``check``: the caller's check of each object (its first error line is the error)."""
    if not docs:
        raise UserError(f"{what} {path}: no {kind} objects in it; expected {expected}")
    out = []
    for loc, obj in docs:
        pre = _prefix(what, path, _where(loc, obj))
        got = obj.get("kind", kind)
        if got != kind:
            raise UserError(f"{pre}kind: expected {expected}, got {got!r}")
        if not isinstance(_name_of(obj), str) or not _name_of(obj):
            raise UserError(f"{pre}metadata.name: Required value; every {kind} has a name")
        errors = check(kind, obj) if check is not None else []
        if errors:
            raise UserError(f"{pre}{errors[0]}")
        out.append((pre, obj))
    return out


def _is_cluster_description(docs: list[tuple[str, dict[str, Any]]]) -> bool:
    return len(docs) == 1 and "kind" not in docs[0][1] and "layers" in docs[0][1]


def node_objects(docs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str,
                 check: ObjectCheck | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The Node objects of a node file: ``kubectl get nodes`` output or a cluster description
    (``examples/clusters/``, expanded by :func:`generate_nodes`), each named once."""
    if _is_cluster_description(docs):
        try:
            generated = generate_nodes(docs[0][1])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UserError(f"{what} {path}: {exc}") from exc
        docs = [(f"generated node {i}", n) for i, n in enumerate(generated)]
    located = objects_of_kind(docs, what, path, "Node", NODES_EXPECTED, check)
    first: dict[str, str] = {}
    for pre, obj in located:
        name = _name_of(obj)
        if name in first:
            raise UserError(f"{pre}metadata.name: Duplicate value: {json.dumps(name)} (also {first[name]}); list "
                            "each node once (a repeated node would count its capacity twice)")
        first[name] = pre.removeprefix(f"{what} {path}: ").removesuffix(": ") or "above"
    return located


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
        except (KeyError, TypeError, AttributeError, ValueError, ArithmeticError) as exc:
            raise UserError(f"{pre}malformed {kind} ({exc.__class__.__name__}: {exc})") from exc
    return out


def load_node_objects(path: Path | str, what: str = "nodes file",
                      check: ObjectCheck | None = None) -> list[tuple[str, dict[str, Any]]]:
    return node_objects(load_documents(path, what, NODES_EXPECTED), what, path, check)


def load_nodes(path: Path | str, check: ObjectCheck | None = None, what: str = "nodes file") -> list[NodeInfo]:
    return nodes_from_documents(load_documents(path, what, NODES_EXPECTED), what, path, check)


def nodes_from_documents(docs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str,
                         check: ObjectCheck | None = None) -> list[NodeInfo]:
    return convert_objects(node_objects(docs, what, path, check), "Node", node_from_k8s, "status.allocatable")


def load_pod_objects(path: Path | str, what: str = "pods file",
                     check: ObjectCheck | None = None) -> list[tuple[str, dict[str, Any]]]:
    return objects_of_kind(load_documents(path, what, PODS_EXPECTED), what, path, "Pod", PODS_EXPECTED, check)


def load_pods(path: Path | str, check: ObjectCheck | None = None) -> list[PodInfo]:
    return pods_from_documents(load_documents(path, "pods file", PODS_EXPECTED), "pods file", path, check)


def pods_from_documents(docs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str,
                        check: ObjectCheck | None = None) -> list[PodInfo]:
    located = objects_of_kind(docs, what, path, "Pod", PODS_EXPECTED, check)
    return convert_objects(located, "Pod", pod_from_k8s, "spec.containers[].resources")


def load_topology(path: Path | str) -> tuple[str, tuple[str, ...]]:
    """A Kueue Topology -> (name, levels)."""
    return topology_from_documents(load_documents(path, "topology file", TOPOLOGY_EXPECTED), "topology file", path)


def topology_from_documents(docs: list[tuple[str, dict[str, Any]]], what: str,
                            path: Path | str) -> tuple[str, tuple[str, ...]]:
    if not docs:
        raise UserError(f"{what} {path}: the file is empty; expected {TOPOLOGY_EXPECTED}")
    objs = [(loc, o) for loc, o in docs if o.get("kind") == "Topology"]
    if not objs:
        kinds = sorted({str(o.get("kind") or "(none)") for _, o in docs})
        raise UserError(f"{what} {path}: kind: expected {TOPOLOGY_EXPECTED}, got {', '.join(kinds)}")
    loc, obj = objs[0]
    pre = _prefix(what, path, loc)
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    spec = obj.get("spec")
    levels = spec.get("levels") if isinstance(spec, Mapping) else None
    if not isinstance(levels, list) or not levels:
        raise UserError(f"{pre}spec.levels: must list at least one level")
    out = []
    for i, level in enumerate(levels):
        label = level.get("nodeLabel") if isinstance(level, Mapping) else None
        if not isinstance(label, str) or not label:
            raise UserError(f"{pre}spec.levels[{i}].nodeLabel: Required value; a node label key such as "
                            "topology.k8s.aws/network-node-layer-1")
        out.append(label)
    if len(set(out)) != len(out):
        raise UserError(f"{pre}spec.levels: items must be unique")
    if "kubernetes.io/hostname" in out[:-1]:
        raise UserError(f"{pre}spec.levels: kubernetes.io/hostname may only be the last level")
    return str(name) if isinstance(name, str) and name else DEFAULT_TOPOLOGY_NAME, tuple(out)


def load_workload(path: Path | str, check: ManifestCheck | None = None,
                  release: str = DEFAULT_KUEUE_RELEASE) -> WorkloadSpec:
    """The first managed object in the file: an object of a governed kind (the job-kind
    registry) or a Kueue Workload, charged as Kueue ``release`` charges it."""
    return workload_from_documents(load_documents(path, "workload file", EXPECTED_KINDS), "workload file", path,
                                   check, release)


def workload_from_documents(objs: list[tuple[str, dict[str, Any]]], what: str, path: Path | str,
                            check: ManifestCheck | None = None, release: str = DEFAULT_KUEUE_RELEASE) -> WorkloadSpec:
    if not objs:
        raise UserError(f"{what} {path}: the file is empty; expected {EXPECTED_KINDS}")
    loc, obj = next(((loc, o) for loc, o in objs if is_placeable(o)), objs[0])
    pre = _prefix(what, path, loc)
    errors = check(obj) if check is not None else []
    if errors:
        raise UserError(f"{pre}{errors[0]}")
    try:
        spec = workload_from_manifest(obj, [o for _, o in objs], release)  # (a TrainJob's runtime may be in the file)
    except (WorkloadFormatError, TopologyRequestError) as exc:
        raise UserError(f"{pre}{exc}") from exc
    except QuantityError as exc:
        raise UserError(f"{pre}spec.template.spec.containers[].resources: {exc}") from exc
    except (TypeError, AttributeError, ValueError, KeyError, ArithmeticError) as exc:
        raise UserError(f"{pre}malformed {obj.get('kind')} ({exc.__class__.__name__}: {exc})") from exc
    for i, pod_set in enumerate(spec.pod_sets):
        if pod_set.count < 0:
            raise UserError(f"{pre}pod set {i} ({pod_set.name}): count {pod_set.count}: must be greater than or "
                            "equal to 0; write the number of pods (or replicas) the job runs")
    return spec
