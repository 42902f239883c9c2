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


def _requirement(raw: Mapping[str, Any], where: str) -> Requirement:
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


def _term(raw: Mapping[str, Any] | None, where: str) -> Term:
    raw = raw or {}
    exprs = tuple(_requirement(r, f"{where}.matchExpressions[{i}]")
                  for i, r in enumerate(raw.get("matchExpressions") or ()))
    fields = tuple(_requirement(r, f"{where}.matchFields[{i}]") for i, r in enumerate(raw.get("matchFields") or ()))
    return Term(exprs, fields)


def node_affinity_from_k8s(affinity: Mapping[str, Any] | None) -> NodeAffinity | None:
    """A pod spec's ``affinity`` -> :class:`NodeAffinity` (None without node affinity).
    Raises :class:`NodeAffinityError` on a requirement the API server would refuse."""
    node = (affinity or {}).get("nodeAffinity") or {}
    if not node:
        return None
    base = "spec.affinity.nodeAffinity"
    req_raw = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = None
    if req_raw is not None:
        where = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        required = tuple(_term(t, f"{where}[{i}]") for i, t in enumerate(req_raw.get("nodeSelectorTerms") or ()))
    preferred = []
    for i, item in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
        weight = int(item.get("weight", 0))
        if weight == 0:  # a zero weight adds nothing (Kubernetes skips such terms)
            continue
        preferred.append((weight, _term(item.get("preference"),
                                        f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference")))
    if required is None and not preferred:
        return None
    return NodeAffinity(required, tuple(preferred))

