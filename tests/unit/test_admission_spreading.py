# ruff: noqa: E501  (Kueue's messages are long single lines)
"""The webhook's checks of ``kueue.x-k8s.io/podset-topology-spreading``, restated from Kueue's
``validateTopologySpreadingAnnotation`` / ``ValidatePodSetGroupingTopology`` (jobframework) and
``TestValidateSpreadingAnnotation``: inert and unchecked while ``TASTopologySpreading`` is off,
Kueue's field errors (plus a fix) while it is on, switched by the Kueue Configuration the
webhook is given."""

from __future__ import annotations

import json
from typing import Any

import pytest

from admission import review
from admission.validation import validate_job
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.manifest.annotations import validate_topology_annotations
from scheduler.adapter.manifest.checks import manifest_errors
from scheduler.core.config import FeatureGates

SPREAD, REQUIRED, PREFERRED, GROUP = ("kueue.x-k8s.io/podset-topology-spreading", "kueue.x-k8s.io/podset-required-topology",
                                      "kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-group-name")
RACK, BLOCK = "cloud.com/rack", "cloud.com/block"
ON, OFF = FeatureGates({"TASTopologySpreading": True}), FeatureGates()
A = "spec.template.metadata.annotations"
P = f"{A}[{SPREAD}]"


def spec(*rules: dict[str, Any], selectors: Any = None) -> str:
    doc: dict[str, Any] = {"rules": list(rules)}
    if selectors is not None:
        doc["workloadLabelSelectors"] = selectors
    return json.dumps(doc)


def rule(key: str = RACK, share: Any = "0.5", mode: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": key, "maxShareAllowingPlacement": share}
    if mode is not None:
        out["enforcementMode"] = mode
    return out


def kueue_words(ann: dict[str, str], gates: FeatureGates = ON) -> list[str]:
    """Kueue's part of each message (toposched appends '; <what to do>')."""
    errs = validate_topology_annotations(ann, 4, gates=gates)
    assert all(e.fix for e in errs), errs  # every denial says what to do
    return [str(e).split("; ")[0] for e in errs]


def test_valid_annotations_pass() -> None:
    assert kueue_words({REQUIRED: RACK, SPREAD: spec(rule())}) == []
    assert kueue_words({REQUIRED: BLOCK, SPREAD: spec(rule(BLOCK, "0.45"), rule(RACK, "500m", "Preferred"),
                                                      selectors=[{"key": "app", "operator": "In", "values": ["main"]}])}) == []


def test_gate_off_the_annotation_is_inert_and_unchecked() -> None:
    """Kueue lets admins annotate jobs before turning the gate on: nothing is checked, and the
    key is a known Kueue annotation (no 'unknown annotation' denial)."""
    assert kueue_words({SPREAD: "not json"}, OFF) == []
    assert kueue_words({PREFERRED: RACK, SPREAD: spec()}, OFF) == []


def test_needs_a_required_topology() -> None:
    assert kueue_words({PREFERRED: RACK, SPREAD: spec(rule())}) == [
        f"{P}: Forbidden: may only be set together with '{REQUIRED}'"]
    assert kueue_words({SPREAD: spec(rule())}) == [f"{P}: Forbidden: may only be set together with '{REQUIRED}'"]


def test_field_messages() -> None:
    value = spec(rule(RACK, "1", "Soft"), rule(RACK, "0.5"), rule("Bad Key", "0"),
                 selectors=[{"key": "app", "operator": "NotIn", "values": ["x"]}, {"key": "b", "operator": "In", "values": []}])
    assert kueue_words({REQUIRED: RACK, SPREAD: value}) == [
        f'{P}: Invalid value: {json.dumps(value)}: topology spreading rules must contain between 1 and 2 entries: got 3']
    value = spec(rule(RACK, "1", "Soft"), rule(RACK, "0"),
                 selectors=[{"key": "app", "operator": "NotIn", "values": ["x"]}, {"key": "b", "operator": "In", "values": []}])
    assert kueue_words({REQUIRED: RACK, SPREAD: value}) == [
        f"{P}.workloadLabelSelectors: Too many: 2: must have at most 1 items",
        f'{P}.workloadLabelSelectors[0].operator: Unsupported value: "NotIn": supported values: "In"',
        f'{P}.workloadLabelSelectors[1].values: Required value: must contain at least one value for the "In" operator',
        f'{P}.rules[0].maxShareAllowingPlacement: Invalid value: "1": must be greater than 0 and less than 1',
        f'{P}.rules[0].enforcementMode: Unsupported value: "Soft": supported values: "Required", "Preferred"',
        f'{P}.rules[1].maxShareAllowingPlacement: Invalid value: "0": must be greater than 0 and less than 1',
        f'{P}.rules[1].topologyKey: Duplicate value: "{RACK} (also at index 0)"',
    ]


def test_share_is_printed_as_a_quantity() -> None:
    (msg,) = kueue_words({REQUIRED: RACK, SPREAD: spec(rule(RACK, "1.5"))})
    assert msg == f'{P}.rules[0].maxShareAllowingPlacement: Invalid value: "1500m": must be greater than 0 and less than 1'


def test_topology_key_is_a_label_name() -> None:
    (msg,) = kueue_words({REQUIRED: RACK, SPREAD: spec(rule("not a key"))})
    assert msg.startswith(f'{P}.rules[0].topologyKey: Invalid value: "not a key": name part must consist of alphanumeric')
    words = kueue_words({REQUIRED: RACK, SPREAD: spec(rule(""))})
    assert words[0] == f'{P}.rules[0].topologyKey: Invalid value: "": name part must be non-empty'


@pytest.mark.parametrize(("value", "first_words"), [
    ("{", f'{P}: Invalid value: "{{": must be a valid JSON object: failed to parse topology spreading annotation'),
    ("[1]", f'{P}: Invalid value: "[1]": must be a valid JSON object: failed to parse topology spreading annotation'),
    (spec(rule(), selectors=5), f"{P}.workloadLabelSelectors: Invalid value: "),
    ("[" * 3000 + "]" * 3000, f"{P}: Invalid value: "),  # long, but under the 4,096-character bound
])
def test_unusable_values_are_one_clear_error(value: str, first_words: str) -> None:
    (msg,) = kueue_words({REQUIRED: RACK, SPREAD: value})
    assert msg.startswith(first_words), msg


def test_an_overlong_value_is_refused_before_parsing() -> None:
    (msg,) = kueue_words({REQUIRED: RACK, SPREAD: spec(rule(), selectors=[{"key": "app", "operator": "In",
                                                                           "values": ["v" * 60] * 80}])})
    assert msg.startswith(f"{P}: Invalid value: ")


# ------------------------------------------------------------------ PodSet groups (LWS, JobSet)

def _lws(leader: dict[str, str], workers: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "g"},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 4,
                "leaderTemplate": {"metadata": {"annotations": leader}, "spec": {"containers": []}},
                "workerTemplate": {"metadata": {"annotations": workers}, "spec": {"containers": []}}}}}


def test_group_members_carry_the_same_spreading_or_none() -> None:
    same = {GROUP: "g", REQUIRED: RACK, SPREAD: spec(rule())}
    assert validate_job(_lws(same, same), gates=ON).allowed
    other = dict(same, **{SPREAD: spec(rule(RACK, "0.25"))})
    leader, workers = "spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations", \
        "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations"
    words = [str(e).split("; ")[0] for e in validate_job(_lws(same, other), gates=ON).errors]
    template = f"must specify the same '{SPREAD}' annotation as '{{}}' in group 'g', or neither pod set may specify it"
    assert words == [f"{leader}: Invalid value: {template.format(workers)}",
                     f"{workers}: Invalid value: {template.format(leader)}"]
    without = {GROUP: "g", REQUIRED: RACK}
    assert len(validate_job(_lws(same, without), gates=ON).errors) == 2
    assert validate_job(_lws(same, other), gates=OFF).allowed


# ------------------------------------------------------------------ the doors: AdmissionReview, place

def _job(ann: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"parallelism": 2, "template": {"metadata": {"annotations": ann}, "spec": {"containers": []}}}}


def test_admission_review_follows_the_configured_gate() -> None:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u1", "kind": {"group": "batch", "version": "v1", "kind": "Job"}, "operation": "CREATE",
        "namespace": "team-a", "object": _job({PREFERRED: RACK, SPREAD: spec(rule())})}}
    off = review.handle(BATCH_JOB.validate_path, body, None)["response"]  # None: no cluster checks
    assert off["allowed"] is True
    on = review.handle(BATCH_JOB.validate_path, body, None, gates=ON)["response"]
    assert on["allowed"] is False
    assert on["status"]["message"].startswith(f"{P}: Forbidden: may only be set together with '{REQUIRED}'; ")


def test_place_refuses_what_the_webhook_refuses_with_the_same_gates() -> None:
    job = _job({REQUIRED: RACK, SPREAD: spec(rule(RACK, "2"))})
    assert manifest_errors(job) == []
    (msg,) = manifest_errors(job, gates=ON)
    assert "maxShareAllowingPlacement: Invalid value: \"2\"" in msg
