"""Kueue v0.20's PreemptionConfig priority-class selectors (``preemptorPriorityClassSelector`` on a
rule, ``priority.matchNames`` / ``notMatchNames`` on a candidate selector) honoured by
core/preemption/rules.py: before issue 41 toposched kept them and ignored them, so a rule matched
more workloads than Kueue's does.

Kueue's own cases: ``pkg/scheduler/preemption/config/filters/priority_test.go``
(``TestPriorityClassFilter_Matches``; ``filters.MatchesPriorityClassSelector``) and
``pkg/scheduler/preemption/config/evaluator.go`` (``matchesPreemptor``: the label selector,
then the class selector), Kueue main at v0.20."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.core.preemption.rules import (
    ALWAYS,
    WITHIN_CLUSTER_QUEUE,
    CandidateSelector,
    PreemptionConfigSpec,
    PriorityClassSelector,
    Rule,
    select_candidates,
)
from scheduler.core.workload import WorkloadSpec

from ._admission import admitted, cq, wl


@pytest.mark.parametrize(("match", "not_match", "cls", "want"), [
    # TestPriorityClassFilter_Matches, case by case (a Workload's class: its priorityClassRef.name).
    (("low-priority", "very-low-priority"), (), "low-priority", True),  # matching WorkloadPriorityClass
    (("low-priority", "very-low-priority"), (), "very-low-priority", True),  # matching Pod PriorityClass
    (("low-priority", "very-low-priority"), (), "high-priority", False),  # non-matching class rejected
    (("low-priority",), (), None, False),  # MatchNames only: nil PriorityClassRef rejected
    ((), ("high-priority", "critical-priority"), "high-priority", False),  # excluded class rejected
    ((), ("high-priority", "critical-priority"), "critical-priority", False),
    ((), ("high-priority",), "low-priority", True),  # non-excluded class matches
    ((), ("high-priority",), None, True),  # NotMatchNames only: nil PriorityClassRef matches
    (("low-priority", "very-low-priority"), ("high-priority",), "low-priority", True),
    (("low-priority", "very-low-priority"), ("low-priority",), "low-priority", False),  # in both lists
    (("low-priority",), ("high-priority",), None, False),  # nil ref rejected: MatchNames is non-empty
])
def test_priority_class_selector_as_kueues_filter(match: tuple[str, ...], not_match: tuple[str, ...],
                                                  cls: str | None, want: bool) -> None:
    assert PriorityClassSelector(match, not_match).matches(cls) is want


def _classed(spec: WorkloadSpec, cls: str | None) -> WorkloadSpec:
    return replace(spec, priority_class=cls)


def _selected(rule: Rule, preemptor: WorkloadSpec) -> list[str]:
    config = PreemptionConfigSpec("default-config", (rule,))
    adm = [admitted(_classed(wl("a1"), "low-priority"), "a", "default"),
           admitted(_classed(wl("a2"), "high-priority"), "a", "default"),
           admitted(wl("a3"), "a", "default")]
    got = select_candidates(config, (ALWAYS,), preemptor, "a", preemptor.priority, adm, lambda w: w.spec.priority,
                            {"a": cq("a", cohort="all")}, {})
    return sorted(k.split("/")[1] for k in got)


def test_a_rule_applies_only_to_preemptors_of_the_selected_classes() -> None:
    rule = Rule("only-urgent", ALWAYS, (CandidateSelector(WITHIN_CLUSTER_QUEUE),),
                preemptor_priority_classes=PriorityClassSelector(("urgent",)))
    assert _selected(rule, _classed(wl("incoming"), "urgent")) == ["a1", "a2", "a3"]
    assert _selected(rule, _classed(wl("incoming"), "batch")) == []  # main: every preemptor matched
    assert _selected(rule, wl("incoming")) == []  # no class: not in matchNames


def test_a_candidate_selector_keeps_only_candidates_of_the_selected_classes() -> None:
    keep_low = CandidateSelector(WITHIN_CLUSTER_QUEUE, priority_classes=PriorityClassSelector(("low-priority",)))
    assert _selected(Rule("low", ALWAYS, (keep_low,)), wl("incoming")) == ["a1"]
    spare_high = CandidateSelector(WITHIN_CLUSTER_QUEUE, priority_classes=PriorityClassSelector((), ("high-priority",)))
    assert _selected(Rule("not-high", ALWAYS, (spare_high,)), wl("incoming")) == ["a1", "a3"]
