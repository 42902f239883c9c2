"""Kueue's LWSImmutableGroupSize (beta on in v0.19.1, so under ``--kueue-version v0.19``; not in
v0.17): a managed LeaderWorkerSet's ``spec.leaderWorkerTemplate.size`` is immutable, since its
Workloads' pod sets are never recomputed. Through the webhook's own entry (``answer``).

Restates Kueue v0.19.2 ``pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook_test.go``
(``TestValidateUpdate``): "change size when managed", "change size when managed and the feature
gate is disabled", "same size when managed", "change size when unmanaged".
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from admission.review import answer
from admission.view import ClusterView
from scheduler.adapter.kinds.leaderworkerset import LEADERWORKERSET
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates
from tests.unit.test_admission_update_guards import lws

V019 = FeatureGates(release=KUEUE_V019)


def resized(obj: dict[str, Any], size: int | None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    if size is None:
        del out["spec"]["leaderWorkerTemplate"]["size"]
    else:
        out["spec"]["leaderWorkerTemplate"]["size"] = size
    return out


def review(obj: dict[str, Any], old: dict[str, Any], gates: FeatureGates, user: str = "alice") -> dict[str, Any]:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "UPDATE", "namespace": "ns", "userInfo": {"username": user},
        "object": obj, "oldObject": old}}
    code, out = answer(LEADERWORKERSET.validate_path, json.dumps(body).encode(), ClusterView(), gates=gates)
    assert code == 200
    return dict(out["response"])


def test_change_size_when_managed_is_refused_in_kueues_words() -> None:
    response = review(resized(lws(), 10), resized(lws(), 2), V019)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert message.startswith("spec.leaderWorkerTemplate.size: Invalid value: 10: field is immutable; keep "
                              "spec.leaderWorkerTemplate.size: 2")


def test_the_default_size_is_one() -> None:
    response = review(resized(lws(), 3), resized(lws(), None), V019)
    assert "Invalid value: 3: field is immutable; keep spec.leaderWorkerTemplate.size: 1" in \
        response["status"]["message"]


@pytest.mark.parametrize(("gates", "new", "queue"), [
    (FeatureGates({"LWSImmutableGroupSize": False}, KUEUE_V019), 10, "q"),  # the gate disabled
    (FeatureGates(release=KUEUE_V017), 10, "q"),  # v0.17: no such gate, the size may change
    (V019, 2, "q"),  # same size when managed
    (V019, 10, None),  # change size when unmanaged
])
def test_allowed(gates: FeatureGates, new: int, queue: str | None) -> None:
    assert review(resized(lws(queue), new), resized(lws(queue), 2), gates)["allowed"] is True
