"""The topology-request codec: annotations <-> TopologyRequest <-> Kueue topologyRequest."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.adapter.kinds.workloads import topology_request_from_template
from scheduler.core.topology_request import (
    ANN_GROUP_NAME,
    ANN_PREFERRED,
    ANN_REQUIRED,
    ANN_SLICE_CONSTRAINTS,
    ANN_SLICE_REQUIRED,
    ANN_SLICE_SIZE,
    ANN_UNCONSTRAINED,
    MAX_JSON_DEPTH,
    MAX_VALUE_LENGTH,
    Reason,
    SliceConstraint,
    TopologyRequest,
    TopologyRequestError,
    json_depth,
    request_from_annotations,
    request_from_kueue,
    request_to_annotations,
    request_to_kueue,
)

L1, L2, L3 = (f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3))
HOST = "kubernetes.io/hostname"
INDEX = "batch.kubernetes.io/job-completion-index"


# ---- annotations -> TopologyRequest -> Kueue dict, as the Job -> Workload path writes it ----------
KUEUE_CASES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    ("required", {ANN_REQUIRED: L3}, {"required": L3, "podIndexLabel": INDEX}),
    ("preferred", {ANN_PREFERRED: L3}, {"preferred": L3, "podIndexLabel": INDEX}),
    ("required wins", {ANN_REQUIRED: L3, ANN_PREFERRED: L2, ANN_UNCONSTRAINED: "true"},
     {"required": L3, "podIndexLabel": INDEX}),
    ("unconstrained", {ANN_UNCONSTRAINED: "true"}, {"unconstrained": True, "podIndexLabel": INDEX}),
    ("unconstrained Go bool", {ANN_UNCONSTRAINED: "T"}, {"unconstrained": True, "podIndexLabel": INDEX}),
    ("unconstrained false", {ANN_UNCONSTRAINED: "false"}, {"unconstrained": False, "podIndexLabel": INDEX}),
    ("slice", {ANN_REQUIRED: L2, ANN_SLICE_REQUIRED: L3, ANN_SLICE_SIZE: "4"},
     {"required": L2, "podSetSliceRequiredTopology": L3, "podSetSliceSize": 4, "podIndexLabel": INDEX}),
    ("constraints", {ANN_REQUIRED: L1, ANN_SLICE_CONSTRAINTS: json.dumps([{"topology": L2, "size": 8}])},
     {"required": L1, "podsetSliceRequiredTopologyConstraints": [{"topology": L2, "size": 8}],
      "podIndexLabel": INDEX}),
    ("group with level", {ANN_PREFERRED: L3, ANN_GROUP_NAME: "g"},
     {"preferred": L3, "podSetGroupName": "g", "podIndexLabel": INDEX}),
    ("group without level ignored", {ANN_UNCONSTRAINED: "true", ANN_GROUP_NAME: "g"},
     {"unconstrained": True, "podIndexLabel": INDEX}),
    ("nothing asked", {}, {"podIndexLabel": INDEX}),
]


@pytest.mark.parametrize("name,annotations,want", KUEUE_CASES, ids=[c[0] for c in KUEUE_CASES])
def test_annotations_to_kueue_dict(name: str, annotations: dict[str, str], want: dict[str, Any]) -> None:
    template = {"metadata": {"annotations": annotations}}
    got = topology_request_from_template(template, INDEX)
    assert got == want
    assert list(got or {}) == list(want)  # Kueue's field order, as written before the codec
    assert json.dumps(request_to_kueue(request_from_kueue(got) or TopologyRequest())) == json.dumps(got)


def test_sub_group_is_written_after_the_index_label() -> None:
    template = {"metadata": {"annotations": {ANN_REQUIRED: L3}}}
    got = topology_request_from_template(template, INDEX, ("jobset.sigs.k8s.io/job-index", 2))
    assert list((got or {}).items()) == [("required", L3), ("podIndexLabel", INDEX),
                                         ("subGroupIndexLabel", "jobset.sigs.k8s.io/job-index"),
                                         ("subGroupCount", 2)]


def test_no_annotations_and_no_label_is_no_request() -> None:
    assert request_from_annotations({}) is None
    assert request_from_annotations({"other": "x"}) is None
    assert request_from_kueue(None) is None
    assert request_from_kueue({}) is None


def test_constraints_win_over_single_slice_annotations() -> None:
    request = request_from_annotations({ANN_SLICE_REQUIRED: L3, ANN_SLICE_SIZE: "2",
                                        ANN_SLICE_CONSTRAINTS: json.dumps([{"topology": L2, "size": 4}])})
    assert request is not None
    assert request.slice_constraints == (SliceConstraint(L2, 4),)
    assert request.layered_slices


def test_v1beta1_and_v1beta2_slice_fields_are_read() -> None:
    single = request_from_kueue({"podSetSliceRequiredTopology": L3, "podSetSliceSize": 2})
    layered = request_from_kueue({"podsetSliceRequiredTopologyConstraints": [{"topology": L2, "size": 4}]})
    assert single is not None and single.slice_constraints == (SliceConstraint(L3, 2),)
    assert layered is not None and layered.layered_slices and layered.slice_level == L2


# ---- every error -----------------------------------------------------------------------------
ERROR_CASES: list[tuple[str, dict[str, Any], str, Reason, str]] = [
    ("slice size not numeric", {ANN_SLICE_REQUIRED: L3, ANN_SLICE_SIZE: "two"}, ANN_SLICE_SIZE, Reason.NOT_NUMERIC,
     f"annotation {ANN_SLICE_SIZE}: must be a numeric value"),
    ("slice size missing", {ANN_SLICE_REQUIRED: L3}, ANN_SLICE_SIZE, Reason.SLICE_SIZE_REQUIRED,
     f"annotation {ANN_SLICE_SIZE}: must be set when '{ANN_SLICE_REQUIRED}' is specified"),
    ("slice size above int32", {ANN_SLICE_REQUIRED: L3, ANN_SLICE_SIZE: str(2**31)}, ANN_SLICE_SIZE,
     Reason.NOT_NUMERIC, "must be a numeric value"),
    ("constraints not JSON", {ANN_SLICE_CONSTRAINTS: "[{"}, ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY,
     f"annotation {ANN_SLICE_CONSTRAINTS}: must be a valid JSON array: "),
    ("constraints not an array", {ANN_SLICE_CONSTRAINTS: "{}"}, ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY,
     "cannot unmarshal dict into an array"),
    ("constraints entry not an object", {ANN_SLICE_CONSTRAINTS: "[1]"}, ANN_SLICE_CONSTRAINTS,
     Reason.NOT_JSON_ARRAY, "each entry must be an object"),
    ("constraints entry without size", {ANN_SLICE_CONSTRAINTS: json.dumps([{"topology": L3}])},
     ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY, "'size'"),
    ("constraints size a string", {ANN_SLICE_CONSTRAINTS: json.dumps([{"topology": L3, "size": "4"}])},
     ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY, 'size must be a JSON number, got "4"'),
    ("constraints topology a number", {ANN_SLICE_CONSTRAINTS: json.dumps([{"topology": 3, "size": 4}])},
     ANN_SLICE_CONSTRAINTS, Reason.NOT_JSON_ARRAY, "topology must be a JSON string, got 3"),
    ("value not a string", {ANN_REQUIRED: ["x"]}, ANN_REQUIRED, Reason.NOT_A_STRING, "must be a string, got list"),
    ("value too long", {ANN_REQUIRED: "x" * (MAX_VALUE_LENGTH + 1)}, ANN_REQUIRED, Reason.TOO_LONG,
     f"must be at most {MAX_VALUE_LENGTH} characters long, got {MAX_VALUE_LENGTH + 1}"),
    ("JSON too deep", {ANN_SLICE_CONSTRAINTS: "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)},
     ANN_SLICE_CONSTRAINTS, Reason.TOO_DEEP, f"annotation {ANN_SLICE_CONSTRAINTS}: must not nest JSON"),
    ("hostile nesting under the length bound", {ANN_SLICE_CONSTRAINTS: "[" * 2000},
     ANN_SLICE_CONSTRAINTS, Reason.TOO_DEEP, "levels deep"),
]


@pytest.mark.parametrize("name,annotations,field,reason,text", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_name_the_annotation(name: str, annotations: dict[str, Any], field: str, reason: Reason,
                                    text: str) -> None:
    with pytest.raises(TopologyRequestError) as info:
        request_from_annotations(annotations)
    assert info.value.field == field
    assert info.value.reason is reason
    assert text in str(info.value)
    assert isinstance(info.value, ValueError)


def test_kueue_dict_errors_name_the_field() -> None:
    with pytest.raises(TopologyRequestError) as info:
        request_from_kueue({"podSetSliceRequiredTopology": L3, "podSetSliceSize": "many"})
    assert info.value.field == "topologyRequest.podSetSliceSize"
    assert info.value.reason is Reason.BAD_FIELD
    assert str(info.value).startswith("topologyRequest.podSetSliceSize: must be an integer")


def test_unreadable_unconstrained_is_false_not_an_error() -> None:
    """As core.workload did: the webhook reports it ("must be a boolean value")."""
    request = request_from_annotations({ANN_UNCONSTRAINED: "yes"})
    assert request is not None and request.unconstrained is False


def test_json_depth_ignores_brackets_inside_strings() -> None:
    assert json_depth('[{"topology": "[[[[[[[[[[", "size": 1}]') == 2
    assert json_depth('["\\"[[[[[[[[[["]') == 1
    assert json_depth("") == 0


def test_unquoted_yaml_integer_slice_size_is_read() -> None:
    request = request_from_annotations({ANN_SLICE_REQUIRED: L3, ANN_SLICE_SIZE: 4})
    assert request is not None and request.slice_size == 4


# ---- round trips (property) --------------------------------------------------------------------
levels = st.sampled_from([L1, L2, L3, HOST])
constraints = st.lists(st.builds(SliceConstraint, levels, st.integers(1, 64)), min_size=1, max_size=3)


@st.composite
def requests(draw: st.DrawFn) -> TopologyRequest:
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained", "none"]))
    level = draw(levels)
    slices = tuple(draw(st.one_of(st.just([]), constraints)))
    layered = bool(slices) and (len(slices) > 1 or draw(st.booleans()))
    leveled = mode in ("required", "preferred")
    return TopologyRequest(
        required=level if mode == "required" else None,
        preferred=level if mode == "preferred" else None,
        unconstrained=draw(st.booleans()) if mode == "unconstrained" else None,
        slice_constraints=slices,
        group_name=draw(st.sampled_from([None, "leader-workers"])) if leveled else None,
        pod_index_label=draw(st.sampled_from([None, INDEX])),
        layered_slices=layered,
    )


@settings(max_examples=100, deadline=None)
@given(requests())
def test_kueue_dict_round_trip(request: TopologyRequest) -> None:
    encoded = request_to_kueue(request)
    decoded = request_from_kueue(encoded)
    assert (decoded or TopologyRequest()) == request
    assert json.loads(json.dumps(encoded)) == encoded  # plain JSON, as the API server stores it


@settings(max_examples=100, deadline=None)
@given(requests())
def test_annotation_round_trip(request: TopologyRequest) -> None:
    decoded = request_from_annotations(request_to_annotations(request), request.pod_index_label)
    assert (decoded or TopologyRequest()) == request


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from([ANN_REQUIRED, ANN_PREFERRED, ANN_UNCONSTRAINED, ANN_SLICE_REQUIRED,
                                        ANN_SLICE_SIZE, ANN_SLICE_CONSTRAINTS, ANN_GROUP_NAME]),
                       st.one_of(st.text(max_size=40), st.text(alphabet="[]{}\",:0123456789 ", max_size=200))))
def test_any_annotations_parse_or_raise_the_one_error(annotations: dict[str, str]) -> None:
    try:
        request = request_from_annotations(annotations)
    except TopologyRequestError as exc:  # a missing slice size is named although absent
        assert exc.field in annotations or (exc.field == ANN_SLICE_SIZE and ANN_SLICE_REQUIRED in annotations)
        return
    if request is not None:
        assert request_from_kueue(request_to_kueue(request)) is not None or not request_to_kueue(request)
