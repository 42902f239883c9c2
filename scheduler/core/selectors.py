"""Kubernetes label selectors (``metav1.LabelSelector``) as plain data.

Used for ``ClusterQueue.spec.namespaceSelector``: Kueue treats a *null* selector as "no
namespace matches" and ``{}`` as "every namespace"; :data:`NOTHING` and :data:`EVERYTHING`
are those two.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return False  # unknown operators never match (the API server rejects them)


@dataclass(frozen=True)
class LabelSelector:
    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()
    # ``matches_nothing`` models a null selector (Kueue: no namespace is allowed).
    matches_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.matches_nothing:
            return False
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(req.matches(labels) for req in self.match_expressions)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(matches_nothing=True)


def selector_from_k8s(raw: Mapping[str, Any] | None) -> LabelSelector:
    """``None`` -> :data:`NOTHING`; ``{}`` -> :data:`EVERYTHING`."""
    if raw is None:
        return NOTHING
    exprs = tuple(
        Requirement(
            str(e.get("key", "")), str(e.get("operator", "")), tuple(str(v) for v in e.get("values") or ())
        )
        for e in raw.get("matchExpressions") or ()
    )
    return LabelSelector(dict(raw.get("matchLabels") or {}), exprs)
