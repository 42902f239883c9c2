"""Kueue's webhook checks of ``kueue.x-k8s.io/podset-topology-spreading`` (gate
``TASTopologySpreading``), restated from Kueue's ``validateTopologySpreadingAnnotation`` and
the spreading part of ``ValidatePodSetGroupingTopology`` (jobframework, Kueue main, late 2026).

While the gate is off the annotation is inert: the scheduler ignores it and the webhook does
not look at it, so an admin can annotate jobs before turning the gate on (Kueue's choice).
With the gate on, the value is read by core's parser (the one the scheduler uses) and each
field is checked with Kueue's words, plus what to do about it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.manifest.fielderrors import (
    OMIT,
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_many,
)
from scheduler.adapter.manifest.labelkeys import label_key_problems
from scheduler.core.spreading import (
    ANN_SPREADING,
    MAX_SELECTORS,
    PREFERRED,
    REQUIRED,
    SpreadingError,
    SpreadingRule,
    parse_spreading,
)
from scheduler.core.topology_request import ANN_REQUIRED

EXAMPLE = ('{"rules": [{"topologyKey": "topology.k8s.aws/network-node-layer-3", '
           '"maxShareAllowingPlacement": "0.5"}]}')


def _share_text(rule: SpreadingRule) -> str:
    """The share as ``resource.Quantity.String()`` prints it (``1``, ``1500m``)."""
    milli = rule.max_share_milli
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _parse_error(err: SpreadingError, path: str, value: str) -> FieldError:
    if err.part == "rules":
        return invalid(path, value, str(err), f"give one or two rules, e.g. {EXAMPLE}")
    if err.part == "selectors":
        return invalid(f"{path}.workloadLabelSelectors", value, str(err),
                       'give a list of one requirement, e.g. [{"key": "app", "operator": "In", "values": ["train"]}]')
    return invalid(path, value, f"must be a valid JSON object: {err}", f"write a JSON object such as {EXAMPLE}")


def spreading_errors(values: Mapping[str, str], annotations_path: str) -> list[FieldError]:
    """The field errors of one pod template's spreading annotation (gate on). ``values``: the
    template's bounded annotation values."""
    value = values.get(ANN_SPREADING)
    if value is None:
        return []
    path = f"{annotations_path}[{ANN_SPREADING}]"
    if ANN_REQUIRED not in values:
        # Spreading counts a group as one domain per rule level: only a required placement is that.
        return [forbidden(path, f"may only be set together with '{ANN_REQUIRED}'",
                          f"add {ANN_REQUIRED} (spreading needs a required level), or remove the spreading annotation")]
    try:
        spec = parse_spreading(value)
    except SpreadingError as err:
        return [_parse_error(err, path, value)]
    errs: list[FieldError] = []
    sel_path = f"{path}.workloadLabelSelectors"
    if len(spec.selectors) > MAX_SELECTORS:
        errs.append(too_many(sel_path, len(spec.selectors), MAX_SELECTORS, "keep one requirement (alpha)"))
    for i, (key, operator, wanted) in enumerate(spec.selectors):
        entry = f"{sel_path}[{i}]"
        errs += [invalid(f"{entry}.key", key, p, "use a Workload label key") for p in label_key_problems(key)]
        if operator != "In":
            errs.append(not_supported(f"{entry}.operator", operator, ("In",), 'use "In" (alpha)'))
            continue
        if not wanted:
            errs.append(required(f"{entry}.values", 'must contain at least one value for the "In" operator',
                                 "list the label values of the Workloads to spread"))
    seen: dict[str, int] = {}
    for i, rule in enumerate(spec.rules):
        entry = f"{path}.rules[{i}]"
        errs += [invalid(f"{entry}.topologyKey", rule.topology_key, p,
                         "set it to a level of the Topology, e.g. \"topology.k8s.aws/network-node-layer-3\"")
                 for p in label_key_problems(rule.topology_key)]
        if not 0 < rule.max_share_milli < 1000:
            errs.append(invalid(f"{entry}.maxShareAllowingPlacement", _share_text(rule),
                                "must be greater than 0 and less than 1", 'use a share such as "0.5"'))
        if rule.mode not in (REQUIRED, PREFERRED):
            errs.append(not_supported(f"{entry}.enforcementMode", rule.mode, (REQUIRED, PREFERRED),
                                      f"use {REQUIRED} (the default) or {PREFERRED}"))
        if rule.topology_key in seen:
            errs.append(duplicate(f"{entry}.topologyKey", f"{rule.topology_key} (also at index "
                                  f"{seen[rule.topology_key]})", "give each rule a different level"))
        else:
            seen[rule.topology_key] = i
    return errs


def group_spreading_errors(group: str, first: tuple[str, Mapping[str, Any]],
                           second: tuple[str, Mapping[str, Any]]) -> list[FieldError]:
    """The two pod sets of a PodSet group (annotations path, annotations) must carry the same
    spreading annotation, or neither (gate on)."""
    if first[1].get(ANN_SPREADING) == second[1].get(ANN_SPREADING):
        return []
    template = (f"must specify the same '{ANN_SPREADING}' annotation as '{{}}' in group '{group}', "
                "or neither pod set may specify it")
    return [invalid(a[0], OMIT, template.format(b[0]), "copy one pod set's spreading annotation to the other")
            for a, b in ((first, second), (second, first))]
