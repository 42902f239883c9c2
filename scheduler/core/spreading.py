"""Kueue's topology spreading (``TASTopologySpreading``, alpha in the v0.20 cycle), as plain data.

Restated from Kueue's main branch (``pkg/util/tas/spreading.go``, ``spreading_validation.go``,
``pkg/cache/scheduler/tas_spreading.go``, ``tas_spread_tree_count.go``; late 2026). The feature
changed shape several times before v0.20 (KEP-13746); this is the shape of those files:

- Pod template annotation ``kueue.x-k8s.io/podset-topology-spreading``, a JSON object::

    {"workloadLabelSelectors": [{"key": "app", "operator": "In", "values": ["svc"]}],
     "rules": [{"topologyKey": "<level>", "maxShareAllowingPlacement": "0.5",
                "enforcementMode": "Required" | "Preferred"}]}

  One or two rules; ``enforcementMode`` defaults to Required; the share is a quantity strictly
  between 0 and 1, compared in milli units. Without selectors the Workloads of the same job
  (label ``kueue.x-k8s.io/job-uid``) are the group.
- Counting (per flavor, per PodSet group: ``podset-group-name`` or else the pod set name): the
  admitted Workloads of the namespace whose labels match (the Workload itself excluded), each
  counted once in ``total`` and once in every domain it occupies at a rule's level and in that
  domain's parent.
- A domain is over its share when ``count x 1000 > share(milli) x count of its parent`` (the
  total at the top level): Required rules drop such domains and their subtrees; both modes order
  domains (used and under the share, unused, over the share by count) ahead of capacity.
  Only required requests are spread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from scheduler.core.kueue_names import LABEL_JOB_UID

ANN_SPREADING = "kueue.x-k8s.io/podset-topology-spreading"
REQUIRED, PREFERRED = "Required", "Preferred"
MIN_RULES, MAX_RULES = 1, 2
MAX_SELECTORS = 1  # alpha: a single "In" requirement

_QUANTITY = re.compile(r"^([+-]?[0-9]*\.?[0-9]+)(m?)$")


class SpreadingError(ValueError):
    """An annotation value the scheduler cannot use at all (Kueue's parse errors). ``part``
    says which of Kueue's error kinds it is: ``rules`` (rule count), ``selectors`` (a selector
    that is not a label selector requirement) or ``json`` (anything else)."""

    def __init__(self, message: str, part: str = "json") -> None:
        super().__init__(message)
        self.part = part


@dataclass(frozen=True)
class SpreadingRule:
    topology_key: str
    max_share_milli: int  # maxShareAllowingPlacement in milli units (rounded up, as ScaledValue)
    mode: str = REQUIRED
    share_text: str = ""  # as written (for messages)

    def exceeds(self, count: int, parent_count: int) -> bool:
        """Over the share: no more groups may go here (total 0 is never over: cold start)."""
        return count * 1000 > self.max_share_milli * parent_count


@dataclass(frozen=True)
class SpreadingSpec:
    selectors: tuple[tuple[str, str, tuple[str, ...]], ...]  # (key, operator, values)
    rules: tuple[SpreadingRule, ...]

    def matches(self, labels: Mapping[str, str], job_uid: str) -> bool:
        """Whether a Workload with ``labels`` belongs to the group; without selectors, the
        Workloads of the job ``job_uid``."""
        if not self.selectors:
            return bool(job_uid) and labels.get(LABEL_JOB_UID) == job_uid
        return all(op == "In" and labels.get(key) in values for key, op, values in self.selectors)


@dataclass(frozen=True)
class SpreadCounts:
    """Matching Workloads per domain (full value path) and in total, for one PodSet group."""

    total: int = 0
    by_domain: Mapping[tuple[str, ...], int] = field(default_factory=dict)


def group_key(pod_set_name: str, group_name: str | None) -> str:
    """Kueue's ``GroupKeyForPodSet``: the PodSet group name, else the pod set's own name."""
    return f"podsetgroup/{group_name}" if group_name else f"podset/{pod_set_name}"


def _milli(raw: Any) -> tuple[int, str]:
    text = str(raw) if isinstance(raw, (int, float, str)) and not isinstance(raw, bool) else ""
    match = _QUANTITY.match(text.strip())
    if not match:
        raise SpreadingError(f"failed to parse topology spreading annotation: quantities must match the regular "
                             f"expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {raw!r}")
    try:
        value = Decimal(match.group(1)) * (Decimal(1) if match.group(2) else Decimal(1000))
    except InvalidOperation as exc:
        raise SpreadingError(f"failed to parse topology spreading annotation: {raw!r}") from exc
    return int(value.to_integral_value(rounding=ROUND_CEILING)), text


def _rule(raw: Any) -> SpreadingRule:
    if not isinstance(raw, Mapping):
        raise SpreadingError("failed to parse topology spreading annotation: each rule must be an object")
    milli, text = _milli(raw.get("maxShareAllowingPlacement", "0"))
    return SpreadingRule(str(raw.get("topologyKey", "")), milli, str(raw.get("enforcementMode") or REQUIRED), text)


def _selector(raw: Any) -> tuple[str, str, tuple[str, ...]]:
    values = (raw.get("values") or []) if isinstance(raw, Mapping) else None
    if not isinstance(values, list):
        raise SpreadingError("topology spreading workloadLabelSelectors is not a valid label selector", "selectors")
    return str(raw.get("key", "")), str(raw.get("operator", "")), tuple(str(v) for v in values)


def parse_spreading(text: str) -> SpreadingSpec:
    """Kueue's ``ParseSpreadingAnnotation``: what makes the value unusable raises
    :class:`SpreadingError`; the webhook's per-field checks are in ``scheduler.adapter.manifest.spreading``."""
    try:
        doc = json.loads(text)
    except RecursionError as exc:  # a hostile value nested thousands deep
        raise SpreadingError("failed to parse topology spreading annotation: nested too deeply") from exc
    except ValueError as exc:
        raise SpreadingError(f"failed to parse topology spreading annotation: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise SpreadingError("failed to parse topology spreading annotation: not a JSON object")
    rules = doc.get("rules") or []
    if not isinstance(rules, list) or not MIN_RULES <= len(rules) <= MAX_RULES:
        count = len(rules) if isinstance(rules, list) else 0
        raise SpreadingError(f"topology spreading rules must contain between 1 and 2 entries: got {count}", "rules")
    raw_selectors = doc.get("workloadLabelSelectors") or []
    if not isinstance(raw_selectors, list):
        raise SpreadingError("topology spreading workloadLabelSelectors is not a valid label selector", "selectors")
    selectors = tuple(_selector(s) for s in raw_selectors)
    return SpreadingSpec(selectors, tuple(_rule(r) for r in rules))


def spreading_from_annotations(annotations: Mapping[str, Any]) -> SpreadingSpec | None:
    """The pod template's spreading spec; None when absent or unusable (the webhook refuses
    an invalid one at creation; the scheduler then ignores it)."""
    text = annotations.get(ANN_SPREADING)
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse_spreading(text)
    except SpreadingError:
        return None


@dataclass(frozen=True)
class GroupOccupancy:
    """One admitted Workload as spreading counts it: its namespace, labels, and per PodSet
    group the leaf domains (full value paths) its pods occupy on the flavor."""

    key: str
    namespace: str
    labels: Mapping[str, str]
    leaves_by_group: Mapping[str, tuple[tuple[str, ...], ...]]


def count_spread(spec: SpreadingSpec, group: str, namespace: str, job_uid: str, self_key: str,
                 levels: tuple[str, ...], others: Iterable[GroupOccupancy]) -> SpreadCounts:
    """Kueue's ``topologySpreadCountsForFlavor`` for one group: matching admitted Workloads of
    the namespace (the Workload itself excluded), each once in the total and once per domain
    it occupies at a rule's level (and that domain's parent)."""
    rule_levels = sorted({levels.index(r.topology_key) for r in spec.rules if r.topology_key in levels})
    total = 0
    by_domain: dict[tuple[str, ...], int] = {}
    for other in others:
        if other.key == self_key or other.namespace != namespace or not spec.matches(other.labels, job_uid):
            continue
        occupied: set[tuple[str, ...]] = set()
        for leaf in other.leaves_by_group.get(group, ()):
            for lvl in rule_levels:
                occupied.add(leaf[: lvl + 1])
                if lvl > 0:
                    occupied.add(leaf[:lvl])
        if not occupied:
            continue
        total += 1
        for path in occupied:
            by_domain[path] = by_domain.get(path, 0) + 1
    return SpreadCounts(total, by_domain)
