"""Topology requests: the one codec between pod-template annotations, :class:`TopologyRequest`
and Kueue's ``spec.podSets[].topologyRequest`` (v1beta2 field names).

Every reader of a topology request (the controller's Job -> Workload, the webhook, the
extender's rank rule, ``place``, the simulator, the gRPC API, the snapshot) goes through here,
so the rules below are decided once:

- precedence as Kueue's jobframework: required > preferred > unconstrained (the others are
  dropped); the group name only with required or preferred;
- slices: the multi-layer constraints list wins over the single slice annotations (Kueue
  treats them as mutually exclusive; the webhook rejects both together);
- a slice size that is not a Go int32 or a constraints value that is not a JSON array of
  ``{"topology": <string>, "size": <integer>}`` raises :class:`TopologyRequestError` (Kueue's
  ``Build()`` returns an error too, and no Workload is created);
- every value read is bounded (length, and JSON nesting depth checked before ``json.loads``),
  so a hostile annotation costs a bounded amount of work and fails with an error naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

ANN_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
ANN_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
ANN_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
ANN_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
ANN_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
ANN_SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
ANN_GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
# In Kueue's order; the webhook lists them in its "unknown annotation" hint.
TOPOLOGY_ANNOTATIONS = (
    ANN_REQUIRED, ANN_PREFERRED, ANN_UNCONSTRAINED, ANN_SLICE_REQUIRED, ANN_SLICE_SIZE,
    ANN_SLICE_CONSTRAINTS, ANN_GROUP_NAME,
)

# Kueue's topologyRequest field names (v1beta2; the multi-layer list is spelled "podset").
F_REQUIRED = "required"
F_PREFERRED = "preferred"
F_UNCONSTRAINED = "unconstrained"
F_SLICE_TOPOLOGY = "podSetSliceRequiredTopology"
F_SLICE_SIZE = "podSetSliceSize"
F_SLICE_CONSTRAINTS = "podsetSliceRequiredTopologyConstraints"
F_GROUP_NAME = "podSetGroupName"
F_POD_INDEX_LABEL = "podIndexLabel"
F_SUB_GROUP_INDEX_LABEL = "subGroupIndexLabel"
F_SUB_GROUP_COUNT = "subGroupCount"

# Bounds on what is parsed. A valid value is far below them: a level is a label key (at most
# 253 + 1 + 63 characters) and the constraints list has at most 3 flat objects (depth 2).
MAX_VALUE_LENGTH = 4096
MAX_JSON_DEPTH = 8

# Go's strconv.ParseBool, which Kueue uses for the unconstrained annotation.
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_GO_INT_RE = re.compile(r"^[+-]?[0-9]+$")


class Reason(StrEnum):
    """Why a topology request could not be read (or is invalid); the message is rendered from it."""

    NOT_A_STRING = "NotAString"
    TOO_LONG = "TooLong"
    TOO_DEEP = "TooDeep"
    NOT_NUMERIC = "NotNumeric"
    NOT_BOOLEAN = "NotBoolean"
    NOT_JSON_ARRAY = "NotJSONArray"
    LAYER_COUNT = "LayerCount"
    BAD_FIELD = "BadField"
    SLICE_SIZE_REQUIRED = "SliceSizeRequired"


# Kueue's wording where Kueue has one (tas_validation.go); ``{detail}`` is filled per error.
MESSAGES: Mapping[Reason, str] = {
    Reason.NOT_A_STRING: "must be a string, got {detail}",
    Reason.TOO_LONG: f"must be at most {MAX_VALUE_LENGTH} characters long, got {{detail}}",
    Reason.TOO_DEEP: f"must not nest JSON more than {MAX_JSON_DEPTH} levels deep",
    Reason.NOT_NUMERIC: "must be a numeric value",
    Reason.NOT_BOOLEAN: "must be a boolean value",
    Reason.NOT_JSON_ARRAY: "must be a valid JSON array: {detail}",
    Reason.LAYER_COUNT: "topology constraints must contain between 1 and 3 entries",
    Reason.BAD_FIELD: "{detail}",
    Reason.SLICE_SIZE_REQUIRED: f"must be set when '{ANN_SLICE_REQUIRED}' is specified",
}


def render(reason: Reason, detail: str = "") -> str:
    return MESSAGES[reason].format(detail=detail)


class TopologyRequestError(ValueError):
    """A topology request that cannot be read. ``field``: the annotation (or topologyRequest
    field) at fault; ``reason``: a :class:`Reason`; ``message``: Kueue's words for it. ``str()``
    is ``annotation <field>: <message>`` for annotations, ``<field>: <message>`` otherwise."""

    def __init__(self, field: str, reason: Reason, detail: str = "", *, annotation: bool = True) -> None:
        self.field = field
        self.reason = reason
        self.message = render(reason, detail)
        super().__init__(f"annotation {field}: {self.message}" if annotation else f"{field}: {self.message}")


@dataclass(frozen=True)
class SliceConstraint:
    level: str
    size: int


@dataclass(frozen=True)
class TopologyRequest:
    """Kueue ``PodSetTopologyRequest`` (spec.podSets[].topologyRequest)."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    slice_constraints: tuple[SliceConstraint, ...] = ()
    group_name: str | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    # The slices came as (and are written back as) the multi-layer constraints list rather
    # than the single podSetSliceRequiredTopology / podSetSliceSize pair.
    layered_slices: bool = False

    @property
    def slice_level(self) -> str | None:
        return self.slice_constraints[0].level if self.slice_constraints else None

    @property
    def slice_size(self) -> int | None:
        return self.slice_constraints[0].size if self.slice_constraints else None

    @property
    def explicit(self) -> bool:
        """The pod set asked for TAS itself (as opposed to implicit TAS of a TAS-only CQ)."""
        return bool(self.required or self.preferred or self.unconstrained is not None or self.slice_constraints)


def levels_used(request: TopologyRequest) -> list[str]:
    """The topology levels a request names (required or preferred, then each slice level)."""
    named = [request.required or request.preferred or ""] + [c.level for c in request.slice_constraints]
    return [level for level in named if level]


def unknown_level_detail(level: str, topology: str, levels: Sequence[str]) -> str:
    """The words for a requested level a Topology does not have, listing the levels it has (the
    webhook's denial and ``toposched place`` say the same; the fix is "use one of those levels")."""
    return f"level \"{level}\" is not in Topology \"{topology}\" (levels: {', '.join(levels)})"


UNKNOWN_LEVEL_FIX = "use one of those levels"


# ---- bounded reading -------------------------------------------------------------------------


def bounded_text(annotations: Mapping[str, Any], key: str) -> str | None:
    """The annotation's value as text (None when absent), bounded in length. Integers are
    accepted as their decimal text (a YAML file may leave ``podset-slice-size: 4`` unquoted);
    anything else that is not a string is an error naming the annotation."""
    if key not in annotations:
        return None
    value = annotations[key]
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise TopologyRequestError(key, Reason.NOT_A_STRING, type(value).__name__)
    if len(value) > MAX_VALUE_LENGTH:
        raise TopologyRequestError(key, Reason.TOO_LONG, str(len(value)))
    return value


def json_depth(text: str) -> int:
    """Deepest nesting of JSON arrays/objects in ``text``, counted without parsing it (brackets
    inside strings do not count), so a hostile value is rejected before ``json.loads``."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def load_bounded_json(key: str, text: str) -> Any:
    """``json.loads`` of an annotation value after the length and depth checks."""
    if len(text) > MAX_VALUE_LENGTH:
        raise TopologyRequestError(key, Reason.TOO_LONG, str(len(text)))
    if json_depth(text) > MAX_JSON_DEPTH:
        raise TopologyRequestError(key, Reason.TOO_DEEP)
    try:
        return json.loads(text)
    except RecursionError as exc:  # unreachable after the depth check; kept as a last guard
        raise TopologyRequestError(key, Reason.TOO_DEEP) from exc
    except ValueError as exc:
        raise TopologyRequestError(key, Reason.NOT_JSON_ARRAY, str(exc)) from exc


def go_int32(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 32)``: the value, or None when it fails."""
    if not _GO_INT_RE.match(text):
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None


# ---- annotations -> TopologyRequest -------------------------------------------------------------


def slice_size_from_text(text: str) -> int:
    size = go_int32(text)
    if size is None:
        raise TopologyRequestError(ANN_SLICE_SIZE, Reason.NOT_NUMERIC)
    return size


def slice_constraints_from_json(text: str) -> tuple[SliceConstraint, ...]:
    """The multi-layer constraints annotation: a JSON array of ``{"topology", "size"}`` objects
    (sizes and levels are checked by the webhook, not here)."""
    raw = load_bounded_json(ANN_SLICE_CONSTRAINTS, text)
    if not isinstance(raw, list):
        raise TopologyRequestError(ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY,
                                   f"cannot unmarshal {type(raw).__name__} into an array")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise TopologyRequestError(ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY,
                                       "each entry must be an object with \"topology\" and \"size\"")
        for key in ("topology", "size"):
            if key not in item:
                raise TopologyRequestError(ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY, repr(key))
        size, level = item["size"], item["topology"]
        if isinstance(size, bool) or not isinstance(size, int):
            raise TopologyRequestError(ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY,
                                       f"size must be a JSON number, got {json.dumps(size)}")
        if not isinstance(level, str):
            raise TopologyRequestError(ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY,
                                       f"topology must be a JSON string, got {json.dumps(level)}")
        out.append(SliceConstraint(level, size))
    return tuple(out)


def _slices_from_annotations(annotations: Mapping[str, Any]) -> tuple[tuple[SliceConstraint, ...], bool]:
    """(slice constraints, whether they came as the multi-layer list)."""
    constraints_text = bounded_text(annotations, ANN_SLICE_CONSTRAINTS)
    if constraints_text is not None:
        return slice_constraints_from_json(constraints_text), True
    level = bounded_text(annotations, ANN_SLICE_REQUIRED)
    if level is None:
        return (), False
    size_text = bounded_text(annotations, ANN_SLICE_SIZE)
    if size_text is None:  # Kueue's webhook: field.Required on the slice size annotation
        raise TopologyRequestError(ANN_SLICE_SIZE, Reason.SLICE_SIZE_REQUIRED)
    return (SliceConstraint(level, slice_size_from_text(size_text)),), False


def request_from_annotations(
    annotations: Mapping[str, Any],
    pod_index_label: str | None = None,
    sub_group: tuple[str, int] | None = None,
) -> TopologyRequest | None:
    """A pod template's annotations -> :class:`TopologyRequest` (None when nothing is asked and
    no index label is given). ``pod_index_label`` / ``sub_group`` (index label, count of child
    jobs) come from the job integration, as Kueue's ``PodIndexLabel`` / ``SubGroup``."""
    required = bounded_text(annotations, ANN_REQUIRED) or None
    preferred = None if required else (bounded_text(annotations, ANN_PREFERRED) or None)
    unconstrained_text = bounded_text(annotations, ANN_UNCONSTRAINED)
    unconstrained = None if (required or preferred or unconstrained_text is None) else unconstrained_text in GO_TRUE
    constraints, layered = _slices_from_annotations(annotations)
    group = bounded_text(annotations, ANN_GROUP_NAME) if (required or preferred) else None
    sub_label, sub_count = sub_group if sub_group else (None, None)
    anything = required or preferred or unconstrained is not None or constraints
    if not anything and pod_index_label is None and sub_group is None:
        return None
    return TopologyRequest(
        required=required,
        preferred=preferred,
        unconstrained=unconstrained,
        slice_constraints=constraints,
        group_name=group or None,
        pod_index_label=pod_index_label,
        sub_group_index_label=sub_label,
        sub_group_count=sub_count,
        layered_slices=layered and bool(constraints),
    )


def request_to_annotations(request: TopologyRequest) -> dict[str, str]:
    """The pod-template annotations that ask for ``request`` (the index labels are not
    annotations: the job integration supplies them)."""
    out: dict[str, str] = {}
    if request.required:
        out[ANN_REQUIRED] = request.required
    elif request.preferred:
        out[ANN_PREFERRED] = request.preferred
    elif request.unconstrained is not None:
        out[ANN_UNCONSTRAINED] = "true" if request.unconstrained else "false"
    if request.layered_slices:
        out[ANN_SLICE_CONSTRAINTS] = json.dumps(
            [{"topology": c.level, "size": c.size} for c in request.slice_constraints])
    elif request.slice_constraints:
        first = request.slice_constraints[0]
        out[ANN_SLICE_REQUIRED] = first.level
        out[ANN_SLICE_SIZE] = str(first.size)
    if request.group_name and (request.required or request.preferred):
        out[ANN_GROUP_NAME] = request.group_name
    return out


# ---- TopologyRequest <-> Kueue topologyRequest ----------------------------------------------------


def request_to_kueue(request: TopologyRequest) -> dict[str, Any]:
    """Kueue's ``topologyRequest`` dict, with its field order as Kueue's job reconciler writes it."""
    out: dict[str, Any] = {}
    if request.required:
        out[F_REQUIRED] = request.required
    elif request.preferred:
        out[F_PREFERRED] = request.preferred
    elif request.unconstrained is not None:
        out[F_UNCONSTRAINED] = request.unconstrained
    if request.layered_slices:
        out[F_SLICE_CONSTRAINTS] = [{"topology": c.level, "size": c.size} for c in request.slice_constraints]
    elif request.slice_constraints:
        out[F_SLICE_TOPOLOGY] = request.slice_constraints[0].level
        out[F_SLICE_SIZE] = request.slice_constraints[0].size
    if request.group_name and (request.required or request.preferred):
        out[F_GROUP_NAME] = request.group_name
    if request.pod_index_label:
        out[F_POD_INDEX_LABEL] = request.pod_index_label
    if request.sub_group_index_label is not None:
        out[F_SUB_GROUP_INDEX_LABEL] = request.sub_group_index_label
        if request.sub_group_count is not None:
            out[F_SUB_GROUP_COUNT] = request.sub_group_count
    return out


def _field_int(name: str, value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise TopologyRequestError(f"topologyRequest.{name}", Reason.BAD_FIELD,
                                   f"must be an integer, got {value!r}", annotation=False) from exc


def _slices_from_kueue(raw: Mapping[str, Any]) -> tuple[tuple[SliceConstraint, ...], bool]:
    layered = []
    for item in raw.get(F_SLICE_CONSTRAINTS) or ():
        if not isinstance(item, Mapping) or "topology" not in item or "size" not in item:
            raise TopologyRequestError(f"topologyRequest.{F_SLICE_CONSTRAINTS}", Reason.BAD_FIELD,
                                       f"each entry needs topology and size, got {item!r}", annotation=False)
        layered.append(SliceConstraint(str(item["topology"]), _field_int(F_SLICE_CONSTRAINTS, item["size"])))
    if layered:
        return tuple(layered), True
    if raw.get(F_SLICE_TOPOLOGY):
        size = _field_int(F_SLICE_SIZE, raw.get(F_SLICE_SIZE) or 0)
        return (SliceConstraint(str(raw[F_SLICE_TOPOLOGY]), size),), False
    return (), False


def slice_size_errors(raw: Mapping[str, Any] | None, path: str) -> tuple[str, ...]:
    """Kueue v0.19's ``validateTASSliceSize`` (``TASValidateWorkloadSliceSize``) of one pod
    set's ``topologyRequest`` at ``path``, as field errors: the slice topology needs a size
    > 0, a size needs the slice topology, every multi-layer size is > 0. Pure; the cycle
    decides whether the gate is on."""
    if not raw:
        return ()
    errs: list[str] = []
    size = raw.get(F_SLICE_SIZE)
    if raw.get(F_SLICE_TOPOLOGY) is not None:
        if size is None:
            errs.append(f"{path}.{F_SLICE_SIZE}: Required value: must be set when {F_SLICE_TOPOLOGY} is specified")
        elif isinstance(size, int) and size <= 0:
            errs.append(f"{path}.{F_SLICE_SIZE}: Invalid value: {size}: must be greater than 0")
    elif size is not None:
        errs.append(f"{path}.{F_SLICE_SIZE}: Forbidden: may not be set when {F_SLICE_TOPOLOGY} is not specified")
    for i, item in enumerate(raw.get(F_SLICE_CONSTRAINTS) or ()):
        layer_size = item.get("size") if isinstance(item, Mapping) else None
        if isinstance(layer_size, int) and layer_size <= 0:
            errs.append(f"{path}.{F_SLICE_CONSTRAINTS}[{i}].size: Invalid value: {layer_size}: must be greater than 0")
    return tuple(errs)


def request_from_kueue(raw: Mapping[str, Any] | None) -> TopologyRequest | None:
    """A Workload pod set's ``topologyRequest`` (v1beta1 or v1beta2 field names) -> TopologyRequest
    (None when absent or empty). Kueue has validated the object; a field of the wrong type
    raises :class:`TopologyRequestError` naming it, except ``subGroupCount``, which is only
    used when it is an integer (the extender's ranks are optional)."""
    if not raw:
        return None
    constraints, layered = _slices_from_kueue(raw)
    count = raw.get(F_SUB_GROUP_COUNT)
    return TopologyRequest(
        required=raw.get(F_REQUIRED) or None,
        preferred=raw.get(F_PREFERRED) or None,
        unconstrained=raw.get(F_UNCONSTRAINED),
        slice_constraints=constraints,
        group_name=raw.get(F_GROUP_NAME) or None,
        pod_index_label=raw.get(F_POD_INDEX_LABEL) or None,
        sub_group_index_label=raw.get(F_SUB_GROUP_INDEX_LABEL) or None,
        sub_group_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        layered_slices=layered,
    )


# ---- toposched's bounded wait for a compact placement (not a Kueue field) -------------------------

ANN_COMPACT_LEVEL = "toposched.io/compact-level"
ANN_COMPACT_MAX_DOMAINS = "toposched.io/compact-max-domains"
ANN_COMPACT_WAIT = "toposched.io/compact-wait"
COMPACT_ANNOTATIONS = (ANN_COMPACT_LEVEL, ANN_COMPACT_MAX_DOMAINS, ANN_COMPACT_WAIT)
MAX_COMPACT_WAIT_S = 7 * 24 * 3600
_DURATION_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True)
class CompactWait:
    """"At most ``max_domains`` domains of ``level``; wait up to ``wait_s`` seconds from queueing
    for such a placement, then take the best placement available" (Slurm's ``--switches=N@T``).
    Read from the pod template (``toposched.io/compact-*``) or a ClusterQueue's default."""

    level: str
    max_domains: int = 1
    wait_s: float = 0.0


class CompactWaitError(TopologyRequestError):
    """A ``toposched.io/compact-*`` value that cannot be read: ``field`` is the annotation,
    ``problem`` says what is wrong, ``fix`` what to write instead (every reader that handles
    a bad topology annotation handles this one the same way)."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        super().__init__(field, Reason.BAD_FIELD, f"{problem}; {fix}")
        self.problem, self.fix = problem, fix


def duration_seconds(text: str) -> int | None:
    """``"90"`` (seconds) or a Go-style duration of whole h/m/s units (``"1h30m"``, ``"45s"``)."""
    text = text.strip()
    if text.isascii() and text.isdigit():
        return int(text)
    match = _DURATION_RE.match(text) if text.isascii() else None
    if not text or match is None or not any(match.groups()):
        return None
    h, m, s = (int(g) if g else 0 for g in match.groups())
    return h * 3600 + m * 60 + s


def _compact_text(annotations: Mapping[str, Any], key: str) -> str | None:
    try:
        return bounded_text(annotations, key)
    except TopologyRequestError as exc:
        raise CompactWaitError(key, exc.message, "write a short string value") from exc


def compact_wait_from_annotations(annotations: Mapping[str, Any]) -> CompactWait | None:
    """The pod template's (or ClusterQueue's) ``toposched.io/compact-*`` annotations, or None
    when none is set. Raises :class:`CompactWaitError` naming the annotation and the fix."""
    level = _compact_text(annotations, ANN_COMPACT_LEVEL)
    count_text = _compact_text(annotations, ANN_COMPACT_MAX_DOMAINS)
    wait_text = _compact_text(annotations, ANN_COMPACT_WAIT)
    if level is None and count_text is None and wait_text is None:
        return None
    if not level:
        raise CompactWaitError(ANN_COMPACT_LEVEL, "must be set when any toposched.io/compact-* annotation is",
                               'name a Topology level, e.g. "topology.k8s.aws/network-node-layer-3"')
    max_domains = 1
    if count_text is not None:
        parsed = go_int32(count_text)
        if parsed is None or parsed < 1:
            raise CompactWaitError(ANN_COMPACT_MAX_DOMAINS, f"must be a whole number of at least 1, got {count_text!r}",
                                   'write the most domains the job may span, e.g. "1"')
        max_domains = parsed
    wait_s = 0
    if wait_text is not None:
        seconds = duration_seconds(wait_text)
        if seconds is None or seconds > MAX_COMPACT_WAIT_S:
            raise CompactWaitError(ANN_COMPACT_WAIT, f"must be a duration of at most 168h, got {wait_text!r}",
                                   'write seconds or h/m/s units, e.g. "30m" or "1h30m"')
        wait_s = seconds
    return CompactWait(level, max_domains, float(wait_s))


def without_inner_layers(request: TopologyRequest | None) -> TopologyRequest | None:
    """The request with only its outermost slice layer: what Kueue places while
    ``TASMultiLayerTopology`` is off (``buildSliceSizeAtLevel`` adds no inner layer)."""
    if request is None or len(request.slice_constraints) <= 1:
        return request
    return replace(request, slice_constraints=request.slice_constraints[:1])


def slice_levels_of(request: TopologyRequest | None) -> tuple[str, ...]:
    """The levels a pod set's slices must each stay within (empty without slices)."""
    return tuple(c.level for c in request.slice_constraints) if request else ()
