"""Structure-aware mutation of Kubernetes objects, for fuzzing the doors that read them.

Random JSON rarely reaches the fields a reader walks (``levels: [null]`` needs a Topology with
a ``levels`` list to begin with). Here each case starts from a valid object of the kind and
changes one to three places in it the way a hostile or careless author would: a null, a
scalar of the wrong type, a string where a list goes, a list where an object goes, a null
item in a list, nesting 5 to 120 levels deep, thousands of items, a deleted or a strange key.

The engine takes a ``pick(sequence) -> item`` callable, so the same mutations serve the
hypothesis tests in the suite (``pick`` draws from hypothesis: cases shrink) and the long runs
of ``scripts/bench/fuzz_inputs.py`` (``pick`` is ``random.Random.choice``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")
Pick = Callable[[Sequence[T]], T]
Path_ = tuple[str | int, ...]

ROOT = Path(__file__).resolve().parents[1]
WRONG_SCALARS: tuple[Any, ...] = (None, True, False, 0, -1, 7, 2**31, 2**64, -(2**63), 1.5, float("nan"),
                                  float("inf"), "", "x", "three", "-1", "1e3", "²", " 4 ", ".nan", "0x10")
CONTAINERS: tuple[Any, ...] = ([], [None], ["x"], [1], [[]], {}, {"a": None}, {"": ""}, "[]", "a,b")
STRANGE_KEYS = ("", "²", "x" * 300, "metadata", "spec", "kueue.x-k8s.io/queue-name", "__proto__")
MUTATIONS = ("scalar", "container", "null item", "deep", "huge", "delete", "strange key")


def paths_of(value: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every place in ``value`` (the root excluded), parents before children, in a stable order."""
    out: list[Path_] = []
    if isinstance(value, dict):
        for key in value:
            out.append((*prefix, key))
            out.extend(paths_of(value[key], (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.append((*prefix, index))
            out.extend(paths_of(item, (*prefix, index)))
    return out


def _get(value: Any, path: Path_) -> Any:
    for step in path:
        value = value[step]
    return value


def _nest(value: Any, depth: int, pick: Pick[Any]) -> Any:
    for _ in range(depth):
        value = [value] if pick((True, False)) else {"a": value}
    return value


def _huge(value: Any, pick: Pick[Any], sizes: Sequence[int]) -> Any:
    size = pick(sizes)
    if isinstance(value, list) and value:
        return [value[0]] * size  # one item many times: the reader walks each, JSON writes each
    if isinstance(value, dict):
        return {**value, **{f"k{i}": "v" for i in range(size)}}
    if isinstance(value, str):
        return value * max(1, size * 5 // max(len(value), 1))
    return pick((["x"] * size, "x" * size * 5, 10**400))


HUGE = (1_000, 20_000)  # item counts of the "huge" mutation (strings: five characters per item)


def mutate_at(obj: Any, path: Path_, mutation: str, pick: Pick[Any], huge: Sequence[int] = HUGE) -> None:
    """Apply ``mutation`` to the place ``path`` of ``obj`` (in place)."""
    parent, key = _get(obj, path[:-1]), path[-1]
    old = parent[key]
    if mutation == "scalar":
        parent[key] = pick(WRONG_SCALARS)
    elif mutation == "container":
        parent[key] = copy.deepcopy(pick(CONTAINERS))
    elif mutation == "null item":
        if isinstance(old, list):
            old.insert(pick(range(len(old) + 1)), pick((None, "x", 3, [], True)))
        elif isinstance(old, dict):
            old[pick(STRANGE_KEYS)] = None
        else:
            parent[key] = [None]
    elif mutation == "deep":
        parent[key] = _nest(old, pick((5, 40, 99, 120)), pick)
    elif mutation == "huge":
        parent[key] = _huge(old, pick, huge)
    elif mutation == "delete":
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
    elif mutation == "strange key" and isinstance(parent, dict):
        parent[pick(STRANGE_KEYS)] = parent.pop(key)


def mutated(seed: Any, pick: Pick[Any], most: int = 3, huge: Sequence[int] = HUGE) -> Any:
    """A deep copy of ``seed`` with 1..``most`` mutations at places of the seed (a place an
    earlier mutation removed is skipped)."""
    obj = copy.deepcopy(seed)
    paths = paths_of(seed)
    grown = False
    for _ in range(pick(range(1, most + 1))):
        if not paths:
            break
        path, mutation = pick(paths), pick(MUTATIONS)
        if mutation == "huge":
            if grown:  # one per case: huge inside huge (shared items) would be gigabytes of JSON
                continue
            grown = True
        try:
            mutate_at(obj, path, mutation, pick, huge)
        except (KeyError, IndexError, TypeError, AttributeError):  # a place changed before
            continue
    return obj


# ---------------------------------------------------------------------------- seeds


def _docs(relative: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / relative).read_text()) if d]


OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "uid": "u-1", "controller": False}
POD_EXTRAS = {"initContainers": [{"name": "init", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
              "nodeSelector": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"},
              "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                  {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}}}


def _enrich(value: Any) -> None:
    """Give every pod spec the fields readers walk that the examples leave out (init containers,
    tolerations, a node selector, node affinity), so the mutations reach them too."""
    if isinstance(value, dict):
        if isinstance(value.get("containers"), list):
            for key, extra in POD_EXTRAS.items():
                value.setdefault(key, copy.deepcopy(extra))
        for item in value.values():
            _enrich(item)
    elif isinstance(value, list):
        for item in value:
            _enrich(item)


def example_objects() -> dict[str, dict[str, Any]]:
    """One valid object per kind from examples/ (jobs moved to namespace team-a, queue ``lq``,
    as the unit tests' cluster view has them, with an owner reference and fuller pod specs),
    by kind."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((ROOT / "examples" / "jobs").glob("*.yaml")):
        for doc in _docs(str(path.relative_to(ROOT))):
            doc["metadata"]["namespace"] = "team-a"
            doc["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "lq"
            doc["metadata"]["ownerReferences"] = [dict(OWNER)]
            _enrich(doc)
            out.setdefault(doc["kind"], doc)
    for doc in _docs("examples/kueue/hyperpod-queues.yaml"):
        out.setdefault(doc["kind"], doc)
    return out


def generic_object(kind: str) -> dict[str, Any]:
    """A seed for a kind without an example: metadata and a spec with a little of everything."""
    return {"kind": kind, "metadata": {"name": "x", "namespace": "team-a", "annotations": {"a": "b"},
                                       "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "ownerReferences": [dict(OWNER)]},
            "spec": {"count": 1, "items": [{"name": "a", "template": {"spec": {"containers": [{"name": "c"}]}}}]}}


def review_body(obj: Any, kind: str, operation: str, old: Any = None) -> bytes:
    """An AdmissionReview as the API server would send it (JSON; NaN and Infinity as Python's
    json writes them, which the webhook's decoder reads too)."""
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "fuzz", "kind": {"kind": kind}, "operation": operation, "namespace": "team-a", "object": obj,
        "oldObject": old}}).encode()


INTERNAL = ("internal error", "could not validate")


def is_queued(obj: Any) -> bool:
    labels = ((obj.get("metadata") if isinstance(obj, dict) else None) or {})
    labels = labels.get("labels") if isinstance(labels, dict) else None
    return isinstance(labels, dict) and bool(labels.get("kueue.x-k8s.io/queue-name"))


def outcome(out: dict[str, Any], queued: bool) -> str:
    """``fail-open`` (a queued object let through although its validation failed), ``internal``
    (an internal-error refusal, or another object's validation skipped), or ``decided``."""
    resp = out.get("response") or {}
    texts = [str((resp.get("status") or {}).get("message", ""))] + [str(w) for w in resp.get("warnings") or ()]
    if resp.get("allowed") and queued and any("validation skipped" in t for t in texts):
        return "fail-open"
    if any(marker in t for t in texts for marker in INTERNAL):
        return "internal"
    return "decided"
