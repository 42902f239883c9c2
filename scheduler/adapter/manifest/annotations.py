"""Kueue's admission checks of one pod template's topology annotations, with Kueue's exact
message fragments (``pkg/controller/jobframework/tas_validation.go``) rendered as Kubernetes
field errors, each followed by ``; <what to do>``; plus toposched's check for unknown
``kueue.x-k8s.io/podset-*`` keys.

The values are read through the codec (:mod:`scheduler.core.topology_request`): the same bounds,
the same integer/boolean/JSON rules and the same words as the controller. Each check below is
one small step over an :class:`_Annotations` and returns the field errors it found.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.kinds.registry import KINDS, spelled_list
from scheduler.adapter.manifest.fielderrors import OMIT, FieldError, duplicate, forbidden, invalid, plain, required
from scheduler.adapter.manifest.labelkeys import label_key_problems
from scheduler.adapter.manifest.spreading import group_spreading_errors, spreading_errors
from scheduler.core.config import FeatureGates
from scheduler.core.spreading import ANN_SPREADING
from scheduler.core.topology_request import (
    ANN_COMPACT_LEVEL,
    ANN_GROUP_NAME,
    ANN_PREFERRED,
    ANN_REQUIRED,
    ANN_SLICE_CONSTRAINTS,
    ANN_SLICE_REQUIRED,
    ANN_SLICE_SIZE,
    ANN_UNCONSTRAINED,
    GO_FALSE,
    GO_TRUE,
    TOPOLOGY_ANNOTATIONS,
    CompactWaitError,
    Reason,
    TopologyRequestError,
    bounded_text,
    compact_wait_from_annotations,
    go_int32,
    render,
    slice_constraints_from_json,
)

PODSET_PREFIX = "kueue.x-k8s.io/podset-"
KNOWN_PODSET_KEYS = (*TOPOLOGY_ANNOTATIONS, ANN_SPREADING)
NO_OVERRIDES = FeatureGates()  # Kueue's defaults, for callers without a Configuration
TEMPLATE_ANNOTATIONS = "spec.template.metadata.annotations"
LEVEL_ANNOTATIONS = (ANN_REQUIRED, ANN_PREFERRED, ANN_UNCONSTRAINED)
CONSTRAINTS_FIX = 'write a JSON array such as [{"topology": "topology.k8s.aws/network-node-layer-3", "size": 8}]'

_GO_UINT64_RE = re.compile(r"^[0-9]+$", re.ASCII)  # str.isdigit() is also true for "²" and "٣"
_OMIT: Any = OMIT


def annotation_path(path: str, key: str) -> str:
    return f"{path}[{key}]"


def level_key_errors(value: str, path: str) -> list[FieldError]:
    return [invalid(path, value, p, "set it to a node label key that is a level of the Topology, "
                    "e.g. \"topology.k8s.aws/network-node-layer-3\"") for p in label_key_problems(value)]


# ---- the annotations under check --------------------------------------------------------------
@dataclass(frozen=True)
class _Annotations:
    values: Mapping[str, str]
    count: int | None  # pods in the pod set, when known
    path: str
    spreading: bool = False  # the TASTopologySpreading gate
    multi_layer: bool = True  # the TASMultiLayerTopology gate (off in Kueue v0.17, on from v0.19)

    def has(self, key: str) -> bool:
        return key in self.values

    def at(self, key: str) -> str:
        return annotation_path(self.path, key)


Check = Callable[[_Annotations], list[FieldError]]


def _bounded_values(ann: Mapping[str, Any], path: str) -> tuple[dict[str, str], list[FieldError]]:
    """The known keys' values as text, or the errors of those that are not strings or too long
    (checked first, so nothing below works on an unbounded value)."""
    values: dict[str, str] = {}
    errs: list[FieldError] = []
    for key in KNOWN_PODSET_KEYS:
        try:
            text = bounded_text(ann, key)
        except TopologyRequestError as exc:
            errs.append(invalid(annotation_path(path, key), _OMIT, exc.message, "shorten it or fix its type"))
            continue
        if text is not None:
            values[key] = text
    return values, errs


def _unknown_keys(keys: list[str], path: str) -> list[FieldError]:
    errs = []
    for key in sorted(k for k in keys if k.startswith(PODSET_PREFIX) and k not in KNOWN_PODSET_KEYS):
        close = difflib.get_close_matches(key, KNOWN_PODSET_KEYS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        errs.append(plain(annotation_path(path, key), f"unknown Kueue pod set annotation {json.dumps(key)}",
                          f"{hint}known keys: {', '.join(KNOWN_PODSET_KEYS)}"))
    return errs


def _one_level_annotation(a: _Annotations) -> list[FieldError]:
    present = [k for k in LEVEL_ANNOTATIONS if a.has(k)]
    if len(present) <= 1:
        return []
    keys = ", ".join(json.dumps(k) for k in LEVEL_ANNOTATIONS)
    return [invalid(a.path, _OMIT, f"must not contain more than one topology annotation: [{keys}]",
                    f"keep exactly one of {', '.join(present)}")]


def _level_keys(a: _Annotations) -> list[FieldError]:
    errs = []
    for key in (ANN_REQUIRED, ANN_PREFERRED, ANN_SLICE_REQUIRED):
        if a.has(key):
            errs.extend(level_key_errors(a.values[key], a.at(key)))
    return errs


def _group_name(a: _Annotations) -> list[FieldError]:
    if not a.has(ANN_GROUP_NAME):
        return []
    errs = []
    group, gpath = a.values[ANN_GROUP_NAME], a.at(ANN_GROUP_NAME)
    if _GO_UINT64_RE.match(group) and int(group) < 2**64:  # Go's strconv.ParseUint(group, 10, 64)
        errs.append(invalid(gpath, group, "must not be a number", "use a name such as \"leader-workers\""))
    for key in (ANN_SLICE_SIZE, ANN_SLICE_REQUIRED):
        if a.has(key):
            errs.append(forbidden(gpath, f"may not be set when '{key}' is specified",
                                  "remove one of the two annotations"))
    if not a.has(ANN_PREFERRED) and not a.has(ANN_REQUIRED):
        errs.append(forbidden(
            gpath, f"may not be set when neither '{ANN_PREFERRED}' nor '{ANN_REQUIRED}' is specified",
            f"add {ANN_REQUIRED} or {ANN_PREFERRED}, or remove the group name"))
    return errs


def _unconstrained(a: _Annotations) -> list[FieldError]:
    value = a.values.get(ANN_UNCONSTRAINED)
    if value is None or value in GO_TRUE or value in GO_FALSE:
        return []
    return [invalid(a.at(ANN_UNCONSTRAINED), value, render(Reason.NOT_BOOLEAN), "use \"true\" or \"false\"")]


def _slice_size(a: _Annotations) -> list[FieldError]:
    text = a.values.get(ANN_SLICE_SIZE)
    if text is None:
        return []
    spath = a.at(ANN_SLICE_SIZE)
    parsed = go_int32(text)
    if parsed is None:
        return [invalid(spath, text, render(Reason.NOT_NUMERIC), "set the number of pods per slice, e.g. \"4\"")]
    if parsed < 1:
        return [invalid(spath, text, "must be greater than or equal to 1",
                        "set the number of pods per slice, at least 1")]
    if a.count is not None and parsed > a.count:
        return [invalid(spath, text, f"must not be greater than pod set count {a.count}",
                        f"use a slice size between 1 and {a.count} (spec.parallelism)")]
    return []


def _slice_pairing(a: _Annotations) -> list[FieldError]:
    if a.has(ANN_SLICE_REQUIRED) and not a.has(ANN_SLICE_SIZE):
        return [required(a.at(ANN_SLICE_SIZE), f"must be set when '{ANN_SLICE_REQUIRED}' is specified",
                         "add the number of pods per slice")]
    if not a.has(ANN_SLICE_REQUIRED) and a.has(ANN_SLICE_SIZE):
        return [forbidden(a.at(ANN_SLICE_SIZE), f"may not be set when '{ANN_SLICE_REQUIRED}' is not specified",
                          f"add {ANN_SLICE_REQUIRED} or remove the slice size")]
    return []


def _constraints(a: _Annotations) -> list[FieldError]:
    if not a.has(ANN_SLICE_CONSTRAINTS):
        return []
    if not a.multi_layer:  # Kueue's jobframework refuses the annotation while its gate is off
        return [forbidden(a.at(ANN_SLICE_CONSTRAINTS),
                          "the TASMultiLayerTopology feature gate must be enabled to use this annotation",
                          f"use {ANN_SLICE_REQUIRED} with {ANN_SLICE_SIZE} (one slice layer), or run toposched as "
                          "Kueue v0.19 (--kueue-version v0.19) or with featureGates TASMultiLayerTopology: true")]
    errs = _constraints_exclusive(a)
    cpath = a.at(ANN_SLICE_CONSTRAINTS)
    text = a.values[ANN_SLICE_CONSTRAINTS]
    try:
        items = [(c.level, c.size) for c in slice_constraints_from_json(text)]
    except TopologyRequestError as exc:
        return [*errs, invalid(cpath, text, exc.message, CONSTRAINTS_FIX)]
    if not 1 <= len(items) <= 3:
        return [*errs, invalid(cpath, text, render(Reason.LAYER_COUNT), CONSTRAINTS_FIX)]
    return errs + _constraint_layers(items, cpath, a.count)


def _constraints_exclusive(a: _Annotations) -> list[FieldError]:
    errs = []
    cpath = a.at(ANN_SLICE_CONSTRAINTS)
    for key in (ANN_SLICE_REQUIRED, ANN_SLICE_SIZE):
        if a.has(key):
            errs.append(forbidden(cpath, f"may not be set when '{key}' is specified",
                                  "use either the constraints list or the single slice annotations"))
    if a.has(ANN_GROUP_NAME):
        errs.append(forbidden(a.at(ANN_GROUP_NAME), f"may not be set when '{ANN_SLICE_CONSTRAINTS}' is specified",
                              "remove one of the two annotations"))
    return errs


def _constraint_layers(items: list[tuple[str, int]], cpath: str, count: int | None) -> list[FieldError]:
    """Each layer: a valid, distinct level key and a size >= 1 dividing its parent's."""
    errs: list[FieldError] = []
    seen: dict[str, int] = {}
    for i, (level, size) in enumerate(items):
        epath = f"{cpath}[{i}]"
        errs.extend(level_key_errors(level, f"{epath}.topology"))
        if size < 1:
            errs.append(invalid(f"{epath}.size", size, "must be greater than or equal to 1",
                                "use a size of at least 1"))
        if level in seen:
            errs.append(duplicate(f"{epath}.topology", f"{level} (also at index {seen[level]})",
                                  "each layer must name a different level"))
        else:
            seen[level] = i
    for i in range(len(items) - 1):
        outer, inner = items[i][1], items[i + 1][1]
        if inner > 0 and outer % inner != 0:
            errs.append(invalid(f"{cpath}[{i + 1}].size", inner, f"must evenly divide the parent layer size {outer}",
                                f"use a divisor of {outer}"))
    if count is not None and items[0][1] > count:
        errs.append(invalid(cpath, items[0][1], f"must not be greater than pod set count {count}",
                            f"use a first-layer size between 1 and {count}"))
    return errs


_MULTI_POD_SET = spelled_list([k for k in KINDS if not k.single_pod_set])


def _group_of_one(a: _Annotations) -> list[FieldError]:
    """Group-of-pod-sets rule: a batch Job is one pod set, so a group can never have two members."""
    if not a.has(ANN_GROUP_NAME) or not (a.has(ANN_REQUIRED) or a.has(ANN_PREFERRED)):
        return []
    if a.has(ANN_SLICE_SIZE) or a.has(ANN_SLICE_REQUIRED):
        return []
    return [invalid(a.at(ANN_GROUP_NAME), a.values[ANN_GROUP_NAME],
                    "can only define groups of exactly 2 pod sets, got: 1 pod set(s)",
                    f"a batch Job has one pod set; remove the group name (use it with {_MULTI_POD_SET})")]


def compact_wait_errors(annotations: Mapping[str, Any], path: str) -> list[FieldError]:
    """toposched's ``toposched.io/compact-*`` annotations (the bounded wait for a compact
    placement): read through the codec, each error naming the annotation and the fix."""
    try:
        wanted = compact_wait_from_annotations(annotations)
    except CompactWaitError as exc:
        value = annotations.get(exc.field)
        return [invalid(annotation_path(path, exc.field), value if isinstance(value, str) else _OMIT,
                        exc.problem, exc.fix)]
    if wanted is None:
        return []
    return level_key_errors(wanted.level, annotation_path(path, ANN_COMPACT_LEVEL))


def _spreading(a: _Annotations) -> list[FieldError]:
    """Kueue validates the spreading annotation only while its gate is on (inert otherwise)."""
    return spreading_errors(a.values, a.path) if a.spreading else []


# In Kueue's order, so the messages come out as they always did.
CHECKS: tuple[Check, ...] = (
    _one_level_annotation, _level_keys, _group_name, _unconstrained, _slice_size, _slice_pairing,
    _constraints, _spreading, _group_of_one,
)


def validate_topology_annotations(annotations: Mapping[str, Any], count: int | None,
                                  path: str = TEMPLATE_ANNOTATIONS, *, single_pod_set: bool = True,
                                  gates: FeatureGates = NO_OVERRIDES) -> list[FieldError]:
    """Kueue's syntactic checks of one pod template's TAS annotations, plus unknown keys.
    ``single_pod_set`` False (JobSet, PyTorchJob): a group name may pair this pod set with
    another; :func:`validate_pod_set_groups` checks the groups across the pod sets. ``gates``:
    the Kueue Configuration's feature gates (TASTopologySpreading switches the spreading checks)."""
    values, unreadable = _bounded_values(annotations, path)
    errs = _unknown_keys([k for k in annotations if isinstance(k, str)], path) + unreadable
    errs += compact_wait_errors(annotations, path)
    if unreadable:
        return errs  # a value that is not text, or too long: nothing more is read from it
    checked = _Annotations(values, count, path, gates.enabled("TASTopologySpreading"),
                           gates.enabled("TASMultiLayerTopology"))
    for check in CHECKS if single_pod_set else tuple(c for c in CHECKS if c is not _group_of_one):
        errs.extend(check(checked))
    return errs


@dataclass(frozen=True)
class PodSetAnnotations:
    """One pod set of a multi-pod-set job: where its template annotations are, what they say,
    and its pod count."""

    path: str
    annotations: Mapping[str, Any]
    count: int


def validate_pod_set_groups(pod_sets: Sequence[PodSetAnnotations],
                            gates: FeatureGates = NO_OVERRIDES) -> list[FieldError]:
    """Kueue's ``ValidatePodSetGroupingTopology``: pod sets sharing a group name (with a
    required or preferred level) form groups of exactly two, one of them a single pod, that
    ask for the same required or preferred level (and, with TASTopologySpreading on, carry the
    same spreading annotation). Kueue's messages, in its order."""
    groups: dict[str, list[PodSetAnnotations]] = {}
    for ps in pod_sets:
        name = ps.annotations.get(ANN_GROUP_NAME)
        if isinstance(name, str) and (ps.annotations.get(ANN_REQUIRED) or ps.annotations.get(ANN_PREFERRED)):
            groups.setdefault(name, []).append(ps)
    errs: list[FieldError] = []
    for name, members in groups.items():
        if len(members) != 2:
            errs += [invalid(annotation_path(m.path, ANN_GROUP_NAME), name,
                             f"can only define groups of exactly 2 pod sets, got: {len(members)} pod set(s)",
                             "give the group name to exactly two pod sets (leader and workers)")
                     for m in members]
            continue
        first, second = members
        if first.count != 1 and second.count != 1:
            detail = ("can only define groups where at least one pod set has only 1 replica, got: "
                      f"{first.count} replica(s) and {second.count} replica(s) in the group")
            errs += [invalid(annotation_path(m.path, ANN_GROUP_NAME), name, detail,
                             "make one of the two pod sets a single pod (the leader)") for m in members]
        if gates.enabled("TASTopologySpreading"):
            errs += group_spreading_errors(name, (first.path, first.annotations), (second.path, second.annotations))
        if not _same_level(first.annotations, second.annotations):
            template = (f"must specify '{ANN_REQUIRED}' or '{ANN_PREFERRED}' topology consistent with '{{}}' "
                        f"in group '{name}'")
            errs += [invalid(a.path, OMIT, template.format(b.path), "ask both pod sets for the same level")
                     for a, b in ((first, second), (second, first))]
    return errs


def _same_level(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Kueue's ``topologyRequestsValid``: both ask for a level, and the same one, the same way."""
    return a.get(ANN_REQUIRED) == b.get(ANN_REQUIRED) and a.get(ANN_PREFERRED) == b.get(ANN_PREFERRED)
