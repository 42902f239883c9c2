"""Kueue's ``PreemptionConfig`` (``kueue.x-k8s.io/v1alpha1``), toposched's ``PreemptionLimit``
(``toposched.io/v1alpha1``) and the ClusterQueues that reference the configs ->
:class:`scheduler.core.preemption.rules.ConfiguredPreemption`.

A ClusterQueue names its PreemptionConfig with the annotation
``kueue.x-k8s.io/preemption-config-name``, as Kueue v0.20 does (its alpha has no ClusterQueue
field). An object the CRD would refuse, or with a field Kueue's type (or toposched's) does not
have, is left out and named in :attr:`Configured.problems` with the field's path (one bad object
never stops the others; an unknown field is never ignored, since a rule without it would match
more workloads than Kueue's); a ClusterQueue naming a PreemptionConfig that does not exist gets
no rules, as in Kueue, and a problem line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.objects import ClusterObjects, Obj, name_of
from scheduler.adapter.preemption_checks import field_errors
from scheduler.core.preemption.rules import (
    BOOSTED,
    CandidateSelector,
    ConfiguredPreemption,
    LimitSpec,
    NumericLabel,
    PreemptionConfigSpec,
    PreemptionEvent,
    PriorityClassSelector,
    Rule,
)
from scheduler.core.selectors import EVERYTHING, LabelSelector, selector_from_k8s
from scheduler.models import preemption as m
from scheduler.models import preemption_limit as ml

# Not a field of Kueue's ClusterQueue (the KEP's beta plans one): a ClusterQueue carrying it is told.
SPEC_FIELD = "preemptionConfigName"
T = TypeVar("T")


@dataclass(frozen=True)
class Configured:
    rules: ConfiguredPreemption
    problems: tuple[str, ...] = ()


def _selector(model: m.LabelSelector | None) -> LabelSelector | None:
    return None if model is None else selector_from_k8s(model.model_dump(by_alias=True))


def _classes(model: m.PriorityClassSelector | None) -> PriorityClassSelector | None:
    if model is None or not (model.match_names or model.not_match_names):
        return None  # omitted or empty: any priority class
    return PriorityClassSelector(tuple(model.match_names), tuple(model.not_match_names))


def _candidate(sel: m.CandidateSelector) -> CandidateSelector:
    prio = sel.priority
    return CandidateSelector(
        scope=sel.scope,
        numeric_labels=tuple(NumericLabel(n.key, n.fallback_value, n.comparison, n.min_value, n.max_value)
                             for n in sel.numeric_labels),
        priority_comparison=prio.comparison if prio is not None else None,
        priority_mode=(prio.mode if prio is not None else None) or BOOSTED,
        cluster_queue_selector=_selector(sel.cluster_queue_selector),
        label_selector=_selector(sel.label_selector),
        priority_classes=_classes(prio),
    )


def config_spec(obj: Obj) -> PreemptionConfigSpec:
    """One PreemptionConfig (raises pydantic's ValidationError when the CRD would refuse it or
    it has a field Kueue v0.20's type does not)."""
    model = m.PreemptionConfig.model_validate(obj)
    rules = tuple(Rule(r.name, r.activation_policy.trigger, tuple(_candidate(s) for s in r.candidate_selectors),
                       _selector(r.preemptor_selector) or EVERYTHING, _classes(r.preemptor_priority_class_selector))
                  for r in model.spec.rules)
    return PreemptionConfigSpec(model.metadata.name, rules, dict(model.metadata.labels))


def limit_spec(obj: Obj) -> LimitSpec:
    model = ml.PreemptionLimit.model_validate(obj)
    s = model.spec
    return LimitSpec(model.metadata.name, s.scope, s.limit, float(s.limit_window_seconds),
                     _selector(s.config_selector), _selector(s.cluster_queue_selector))


def config_name_of(cluster_queue: Obj) -> str:
    """The PreemptionConfig a ClusterQueue references ("" none): Kueue's alpha annotation."""
    meta: Mapping[str, Any] = cluster_queue.get("metadata") or {}
    return str((meta.get("annotations") or {}).get(m.ANN_PREEMPTION_CONFIG_NAME) or "")


def _problem(kind: str, obj: Obj, exc: ValidationError) -> str:
    return f"{kind} {name_of(obj)}: {field_errors(kind, exc)[0]}; it is not applied until it is fixed"


def _spec_or_problem(kind: str, convert: Callable[[Obj], T]) -> Callable[[Obj], T | str]:
    def one(obj: Obj) -> T | str:
        try:
            return convert(obj)
        except ValidationError as exc:
            return _problem(kind, obj, exc)
    return one


def configured_preemption(objects: ClusterObjects, events: Sequence[PreemptionEvent] = (),
                          caches: SnapshotCaches | None = None) -> Configured:
    """The rules of ``objects`` with the evictions ``events`` (``caches``: a builder's, which
    keeps each unchanged object's conversion)."""
    caches = caches if caches is not None else SnapshotCaches()
    problems: list[str] = []
    configs: dict[str, PreemptionConfigSpec] = {}
    for spec in caches.preemption_configs.convert(objects.preemption_configs,
                                                  _spec_or_problem("PreemptionConfig", config_spec)):
        if isinstance(spec, str):
            problems.append(spec)
        else:
            configs[spec.name] = spec
    limits: list[LimitSpec] = []
    for limit in caches.preemption_limits.convert(objects.preemption_limits,
                                                  _spec_or_problem("PreemptionLimit", limit_spec)):
        if isinstance(limit, str):
            problems.append(limit)
        else:
            limits.append(limit)
    cq_config: dict[str, str] = {}
    cq_labels: dict[str, Mapping[str, str]] = {}
    for cq in objects.cluster_queues:
        name = name_of(cq)
        cq_labels[name] = dict((cq.get("metadata") or {}).get("labels") or {})
        if SPEC_FIELD in (cq.get("spec") or {}):
            problems.append(f"ClusterQueue {name}: spec.{SPEC_FIELD} is not a field of Kueue's ClusterQueue and is "
                            f"not read; name the PreemptionConfig with the annotation {m.ANN_PREEMPTION_CONFIG_NAME}")
        config = config_name_of(cq)
        if not config:
            continue
        if config not in configs:
            problems.append(f"ClusterQueue {name}: PreemptionConfig {config} does not exist (or is not applied); "
                            "its domain clearing uses spec.preemption only")
            continue
        cq_config[name] = config
    rules = ConfiguredPreemption(configs, cq_config, cq_labels, tuple(sorted(limits, key=lambda lim: lim.name)),
                                 tuple(events))
    return Configured(rules, tuple(problems))
