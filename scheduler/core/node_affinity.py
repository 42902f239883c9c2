"""A pod's node affinity as plain data, and Kubernetes' matching rules for it.

TAS reads ``spec.affinity.nodeAffinity`` of the pod template (Kueue ``findTopologyAssignment``):

- ``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``: a node counts when ANY
  term matches; a term matches when ALL its ``matchExpressions`` and ``matchFields`` do; an empty
  term matches nothing (``k8s.io/component-helpers`` nodeaffinity). Kueue filters nodes with it
  only when hostname is the lowest topology level (exclusion reason ``affinity``).
- ``preferredDuringSchedulingIgnoredDuringExecution``: a node's score is the sum of the weights
  of the terms it matches; Kueue (``TASRespectNodeAffinityPreferred``, v0.18+) sums the scores of
  a domain's nodes and orders domains by it first.

Operators: ``In``, ``NotIn`` (also true when the label is absent), ``Exists``, ``DoesNotExist``,
``Gt`` / ``Lt`` (integer comparison; a non-integer label never matches). ``matchFields`` supports
``metadata.name`` with ``In`` / ``NotIn``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
NODE_NAME_FIELD = "metadata.name"


class NodeAffinityError(ValueError):
    """A node selector requirement Kubernetes would reject (unknown operator, bad values)."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        """Whether a label (or field) ``value`` (None: absent) satisfies the requirement."""
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        number = _int_or_none(value)
        if number is None:
            return False
        bound = int(self.values[0])
        return number > bound if self.operator == "Gt" else number < bound


@dataclass(frozen=True)
class Term:
    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        return all(r.matches(labels.get(r.key)) for r in self.match_expressions) and all(
            r.matches(node_name if r.key == NODE_NAME_FIELD else None) for r in self.match_fields
        )


@dataclass(frozen=True)
class NodeAffinity:
    required: tuple[Term, ...] | None = None  # None: no required node affinity
    preferred: tuple[tuple[int, Term], ...] = ()  # (weight, term)

    def required_match(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.required is None:
            return True
        return any(t.matches(labels, node_name) for t in self.required)

    def preferred_score(self, labels: Mapping[str, str], node_name: str) -> int:
        return sum(w for w, t in self.preferred if t.matches(labels, node_name))


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _object(raw: Any, where: str, *, null_ok: bool = True) -> Mapping[str, Any]:
    """``raw`` when it is an object (an absent field, None, reads as an empty one where
    ``null_ok``); otherwise the API server's refusal: a hand-written or fuzzed spec may hold a
    null, a string or a list anywhere."""
    if raw is None and null_ok:
        return {}
    if not isinstance(raw, Mapping):
        raise NodeAffinityError(f"{where}: Invalid value: {_type_name(raw)}: must be an object")
    return raw


def _type_name(raw: Any) -> str:
    return "null" if raw is None else type(raw).__name__


def _list(raw: Any, where: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list | tuple):
        raise NodeAffinityError(f"{where}: Invalid value: {_type_name(raw)}: must be a list")
    return list(raw)


def _requirement(raw: Any, where: str) -> Requirement:
    raw = _object(raw, where, null_ok=False)
    op = str(raw.get("operator", ""))
    if op not in OPERATORS:
        raise NodeAffinityError(f"{where}.operator: Unsupported value: {op!r}")
    values = tuple(str(v) for v in raw.get("values") or ())
    if op in ("In", "NotIn") and not values:
        raise NodeAffinityError(f"{where}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'")
    if op in ("Exists", "DoesNotExist") and values:
        raise NodeAffinityError(f"{where}.values: Forbidden: may not be specified when `operator` is 'Exists' or "
                                "'DoesNotExist'")
    if op in ("Gt", "Lt") and (len(values) != 1 or _int_or_none(values[0]) is None):
        raise NodeAffinityError(f"{where}.values: Required value: must be specified single value when `operator` "
                                "is 'Lt' or 'Gt'")
    return Requirement(str(raw.get("key", "")), op, values)


def _term(raw: Any, where: str) -> Term:
    raw = _object(raw, where)
    exprs = tuple(_requirement(r, f"{where}.matchExpressions[{i}]")
                  for i, r in enumerate(_list(raw.get("matchExpressions"), f"{where}.matchExpressions")))
    fields = tuple(_requirement(r, f"{where}.matchFields[{i}]")
                   for i, r in enumerate(_list(raw.get("matchFields"), f"{where}.matchFields")))
    return Term(exprs, fields)


def node_affinity_from_k8s(affinity: Mapping[str, Any] | None) -> NodeAffinity | None:
    """A pod spec's ``affinity`` -> :class:`NodeAffinity` (None without node affinity).
    Raises :class:`NodeAffinityError` on a requirement the API server would refuse."""
    base = "spec.affinity.nodeAffinity"
    node = _object(_object(affinity, "spec.affinity").get("nodeAffinity"), base)
    if not node:
        return None
    req_raw = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = None
    if req_raw is not None:
        where = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = _list(_object(req_raw, f"{base}.requiredDuringSchedulingIgnoredDuringExecution")
                      .get("nodeSelectorTerms"), where)
        required = tuple(_term(t, f"{where}[{i}]") for i, t in enumerate(terms))
    preferred = []
    where = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, raw_item in enumerate(_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"), where)):
        item = _object(raw_item, f"{where}[{i}]", null_ok=False)
        weight = item.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise NodeAffinityError(f"{where}[{i}].weight: Invalid value: {weight!r}: must be an integer")
        if weight == 0:  # a zero weight adds nothing (Kubernetes skips such terms)
            continue
        preferred.append((weight, _term(item.get("preference"),
                                        f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference")))
    if required is None and not preferred:
        return None
    return NodeAffinity(required, tuple(preferred))

