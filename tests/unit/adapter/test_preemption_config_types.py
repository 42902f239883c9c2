"""Kueue's PreemptionConfig read as Kueue v0.20's types exactly, toposched's PreemptionLimit as its
own (adapter/preemption_rules.py, adapter/preemption_checks.py): a field the type does not have
is refused with its path and the object is not applied (before issue 41 it was kept and ignored,
so a rule matched more workloads than Kueue's); the CRD's CEL rules hold; the fields Kueue v0.20
added are acted on.

Kueue's source: ``apis/kueue/v1alpha1/preemptionconfig_types.go`` (Kueue main at v0.20: the
newest stored version, with ``preemptorPriorityClassSelector``) and
``pkg/scheduler/preemption/config/filters/priority_test.go`` (``TestNewPriorityFilter``: "Mode
set without Comparison returns build error", "Neither Mode nor Comparison set with MatchNames
succeeds")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.adapter.objects import ClusterObjects
from scheduler.adapter.preemption_checks import config_errors, limit_errors
from scheduler.adapter.preemption_rules import configured_preemption

RULE = {"name": "defrag", "activationPolicy": {"trigger": "Always"},
        "candidateSelectors": [{"scope": "WithinClusterQueue"}]}
CQ = {"metadata": {"name": "cq", "annotations": {"kueue.x-k8s.io/preemption-config-name": "cfg"}}, "spec": {}}


def config(**rule: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig", "metadata": {"name": "cfg"},
            "spec": {"rules": [{**copy.deepcopy(RULE), **rule}]}}


def read(*configs: dict[str, Any], cqs: tuple[dict[str, Any], ...] = (CQ,)) -> Any:
    return configured_preemption(ClusterObjects(cluster_queues=list(cqs), preemption_configs=list(configs)))


@pytest.mark.parametrize(("where", "path"), [
    (lambda c: c["spec"].update(preemptionLimits=[]), "spec.preemptionLimits"),
    (lambda c: c["spec"]["rules"][0].update(maxPreemptions=1), "spec.rules[0].maxPreemptions"),
    # the earlier alpha spelling, gone from Kueue v0.20's type: refused, not read as priority
    (lambda c: c["spec"]["rules"][0]["candidateSelectors"][0].update(relativeWorkloadPriority="LessThan"),
     "spec.rules[0].candidateSelectors[0].relativeWorkloadPriority"),
    (lambda c: c["spec"]["rules"][0].update(preemptorSelector={"matchLabels": {"a": "b"}, "matchFields": {}}),
     "spec.rules[0].preemptorSelector.matchFields"),
    (lambda c: c["spec"]["rules"][0]["activationPolicy"].update(delaySeconds=5),
     "spec.rules[0].activationPolicy.delaySeconds"),
    (lambda c: c["spec"]["rules"][0]["candidateSelectors"][0].update(
        numericLabels=[{"key": "tier", "comparison": "LessThan", "weight": 2}]),
     "spec.rules[0].candidateSelectors[0].numericLabels[0].weight"),
    (lambda c: c.update(status={}), "status"),
])
def test_an_unknown_field_is_refused_with_its_path_and_the_config_is_not_applied(where: Any, path: str) -> None:
    obj = config()
    where(obj)
    errors = [str(e) for e in config_errors(obj)]
    assert len(errors) == 1 and errors[0].startswith(f"{path}: unknown field ")
    assert "Kueue v0.20's PreemptionConfig has no such field" in errors[0]
    got = read(obj)
    assert got.rules.configs == {} and got.rules.cluster_queue_config == {}
    assert any(p.startswith(f"PreemptionConfig cfg: {path}: unknown field") and "not applied" in p
               for p in got.problems)


def test_the_preemptor_priority_class_selector_is_acted_on_not_ignored() -> None:
    """Before issue 41 the selector was kept and ignored: the rule applied to every preemptor."""
    got = read(config(preemptorPriorityClassSelector={"matchNames": ["urgent"]}))
    assert got.problems == ()
    rule = got.rules.configs["cfg"].rules[0]
    assert rule.preemptor_priority_classes is not None
    assert rule.preemptor_priority_classes.matches("urgent") and not rule.preemptor_priority_classes.matches("batch")


def test_a_priority_constraint_of_class_names_alone_is_kueues() -> None:
    """"Neither Mode nor Comparison set with MatchNames succeeds": the class names filter alone."""
    obj = config(candidateSelectors=[{"scope": "WithinClusterQueue", "priority": {"notMatchNames": ["prod"]}}])
    got = read(obj)
    assert got.problems == ()
    sel = got.rules.configs["cfg"].rules[0].candidate_selectors[0]
    assert sel.priority_comparison is None and sel.priority_classes is not None
    assert not sel.priority_classes.matches("prod") and sel.priority_classes.matches(None)


@pytest.mark.parametrize(("selector", "path", "detail"), [
    ({"scope": "WithinClusterQueue", "priority": {"mode": "Base"}},  # Mode set without Comparison
     "spec.rules[0].candidateSelectors[0].priority", "mode and comparison must be specified together"),
    ({"scope": "WithinClusterQueue", "numericLabels": [{"key": "tier", "minValue": 5, "maxValue": 2}]},
     "spec.rules[0].candidateSelectors[0].numericLabels[0]", "minValue must be less than or equal to maxValue"),
])
def test_the_crds_cel_rules_are_checked_with_kueues_messages(selector: dict[str, Any], path: str,
                                                              detail: str) -> None:
    errors = [str(e) for e in config_errors(config(candidateSelectors=[selector]))]
    assert errors == [f"{path}: Invalid value: {detail}; write it as Kueue v0.20's PreemptionConfig defines it"]


def test_rule_names_are_a_map_key_and_list_bounds_hold() -> None:
    obj = config()
    obj["spec"]["rules"].append(copy.deepcopy(RULE))
    assert any("Duplicate value: 'defrag'" in str(e) for e in config_errors(obj))
    many = config(candidateSelectors=[{"scope": "WithinClusterQueue"}] * 33)  # +kubebuilder:validation:MaxItems=32
    assert any(str(e).startswith("spec.rules[0].candidateSelectors: Invalid value") for e in config_errors(many))


def test_a_cluster_queue_names_its_config_by_kueues_annotation_only() -> None:
    """Kueue v0.20's ClusterQueue has no preemptionConfigName field (the annotation is alpha's
    PreemptionConfigNameAnnotation): the field is told, never read."""
    by_field = {"metadata": {"name": "cq"}, "spec": {"preemptionConfigName": "cfg"}}
    got = read(config(), cqs=(by_field,))
    assert got.rules.cluster_queue_config == {}
    assert any("spec.preemptionConfigName is not a field of Kueue's ClusterQueue" in p for p in got.problems)
    assert read(config()).rules.cluster_queue_config == {"cq": "cfg"}


def test_a_preemption_limit_is_toposched_io_and_refuses_unknown_fields() -> None:
    limit = {"apiVersion": "toposched.io/v1alpha1", "kind": "PreemptionLimit", "metadata": {"name": "hourly"},
             "spec": {"scope": "Global", "limit": 3, "limitWindowSeconds": 3600}}
    assert limit_errors(limit) == []
    legacy = {**limit, "apiVersion": "kueue.x-k8s.io/v1alpha1"}
    assert [str(e).split(":")[0] for e in limit_errors(legacy)] == ["apiVersion"]
    extra = copy.deepcopy(limit)
    extra["spec"]["burst"] = 2
    assert [str(e) for e in limit_errors(extra)] == [
        "spec.burst: unknown field 'burst': toposched's PreemptionLimit has no such field; "
        "remove it (toposched never keeps a field it does not act on)"]
