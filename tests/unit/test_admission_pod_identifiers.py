"""Kueue's WorkloadIdentifierAnnotations at the pod webhook and in the update guards (on under
``--kueue-version v0.19``): a pod group may be named by the annotation, judged where it was
read; the group name stays immutable whichever form carries it; a held pod keeps the annotation
forms of its identifiers too (a tenant cannot unhook it by rewriting them). Through the
webhook's own entry (``answer``).

Restates Kueue v0.19.2 ``pkg/controller/jobs/pod/pod_webhook_test.go``: ``TestValidateCreate``
("invalid group name", "invalid group name label, WorkloadIdentifierAnnotations enabled",
"invalid group name annotation, ...", "different group name label and annotation, label
ignored, ...") and ``TestValidateUpdate`` ("pod group name is changed, labels / annotations /
label to annotation / annotation to label, ...", "pod group name label replaced with annotation,
..."); the guard of the annotation forms is toposched's (docs/security.md, boundary 9).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from admission.review import answer
from admission.view import ClusterView
from scheduler.adapter.kinds.identifiers import Identifiers
from scheduler.adapter.kinds.pod import POD
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates
from scheduler.extender.workload_view import pod_ref
from tests.unit.test_admission_pods import make_pod

GROUP, TOTAL = "kueue.x-k8s.io/pod-group-name", "kueue.x-k8s.io/pod-group-total-count"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
MANAGED, QUEUE = "kueue.x-k8s.io/managed", "kueue.x-k8s.io/queue-name"
V019, V017 = FeatureGates(release=KUEUE_V019), FeatureGates(release=KUEUE_V017)
LABEL_PATH, ANN_PATH = f"metadata.labels[{GROUP}]", f"metadata.annotations[{GROUP}]"


def pod(label: str | None = None, annotation: str | None = None, **annotations: str) -> dict[str, Any]:
    anns = {TOTAL: "3", **annotations}
    if annotation is not None:
        anns[GROUP] = annotation
    return make_pod({GROUP: label} if label is not None else {}, anns)


def review(obj: dict[str, Any], gates: FeatureGates, old: dict[str, Any] | None = None,
           user: str = "alice") -> dict[str, Any]:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "UPDATE" if old is not None else "CREATE", "namespace": "ns",
        "userInfo": {"username": user}, "object": obj, "oldObject": old}}
    code, out = answer(POD.validate_path, json.dumps(body).encode(), ClusterView(), gates=gates)
    assert code == 200
    return dict(out["response"])


def refused_at(response: dict[str, Any]) -> str:
    assert response["allowed"] is False, response
    return str(response["status"]["message"]).split(":", 1)[0]


@pytest.mark.parametrize(("obj", "gates", "path"), [
    (pod(label="group name"), V017, LABEL_PATH),  # invalid group name
    (pod(label="group name"), V019, LABEL_PATH),  # invalid group name label, gate enabled
    (pod(annotation="group name"), V019, ANN_PATH),  # invalid group name annotation, gate enabled
])
def test_an_invalid_group_name_is_refused_where_it_was_read(obj: dict[str, Any], gates: FeatureGates,
                                                            path: str) -> None:
    assert refused_at(review(obj, gates)) == path


def test_the_annotation_wins_over_the_label_under_v019() -> None:
    """"different group name label and annotation, label ignored"."""
    assert review(pod(label="group-name-a", annotation="group-name-b"), V019)["allowed"] is True


def test_under_v017_the_annotation_names_no_group() -> None:
    message = review(pod(annotation="grp"), V017)["status"]["message"]
    assert message.startswith(f"{LABEL_PATH}: Required value: both the '{TOTAL}' annotation and the '{GROUP}' label")
    message = review(make_pod({}, {GROUP: "grp"}), V019)["status"]["message"]
    assert message.startswith(f"metadata.annotations[{TOTAL}]: Required value: both the '{TOTAL}' annotation and "
                              f"the '{GROUP}' annotation should be set")


@pytest.mark.parametrize(("old", "new", "path"), [
    (pod(label="test-group"), pod(label="test-group-new"), LABEL_PATH),
    (pod(annotation="test-group"), pod(annotation="test-group-new"), ANN_PATH),
    (pod(label="test-group"), pod(annotation="test-group-new"), ANN_PATH),
    (pod(annotation="test-group"), pod(label="test-group-new"), LABEL_PATH),
    (pod(label="test-group"), pod(annotation="test-group"), None),  # replaced with the annotation: allowed
])
def test_the_group_name_is_immutable_whichever_form_carries_it(old: dict[str, Any], new: dict[str, Any],
                                                               path: str | None) -> None:
    response = review(new, V019, old)
    if path is None:
        assert response["allowed"] is True
    else:
        assert refused_at(response) == path
        assert "field is immutable" in response["status"]["message"]


def held(**annotations: str) -> dict[str, Any]:
    return make_pod({MANAGED: "true", QUEUE: "q"}, {**annotations})


@pytest.mark.parametrize("key", [GROUP, PREBUILT])
def test_a_held_pod_keeps_the_annotation_forms_under_v019(key: str) -> None:
    old = held(**{key: "grp", TOTAL: "1"}) if key == GROUP else held(**{key: "grp"})
    new = json.loads(json.dumps(old))
    new["metadata"]["annotations"][key] = "other"
    response = review(new, V019, old)
    assert response["allowed"] is False and f"metadata.annotations[{key}]: Invalid value" in \
        response["status"]["message"]
    if key == PREBUILT:  # under v0.17 the annotation ties nothing; the controller may write it
        assert review(new, V017, old)["allowed"] is True
        controller = "system:serviceaccount:toposched-system:toposched-controller"
        assert review(new, V019, old, user=controller)["allowed"] is True
    # the group name is Kueue's rule for everyone (immutable once set), the controller included


def test_identifiers_read_and_write_as_kueue() -> None:
    """jobframework ``PrebuiltWorkloadNameFor`` / ``SetPrebuiltWorkloadName``, pod ``GetPodGroupName``."""
    on, off = Identifiers(True), Identifiers(False)
    both = make_pod({GROUP: "a", PREBUILT: "a"}, {GROUP: "b", PREBUILT: "b"})
    assert (on.group_name(both), on.prebuilt_workload(both)) == ("b", "b")
    assert (off.group_name(both), off.prebuilt_workload(both)) == ("a", "a")
    label_only = make_pod({PREBUILT: "a"}, {})
    assert on.prebuilt_workload(label_only) == "a"  # the label is the fallback
    long_name = "x" * 64
    assert off.prebuilt_workload(make_pod({}, {PREBUILT: long_name})) == long_name  # too long for a label
    assert off.prebuilt_workload(make_pod({}, {PREBUILT: "short"})) == ""
    assert on.stamp("w") == ({}, {GROUP: "w", PREBUILT: "w"})
    assert off.stamp("w") == ({GROUP: "w", PREBUILT: "w"}, {})


def test_the_extender_finds_a_pods_workload_by_either_form() -> None:
    by_annotation = make_pod({}, {PREBUILT: "wl", "kueue.x-k8s.io/role-hash": "worker"})
    ref = pod_ref(by_annotation)
    assert ref.workload == "wl" and ref.pod_set == "worker"
