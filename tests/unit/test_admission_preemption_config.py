"""The webhook's route for Kueue's alpha PreemptionConfig (``vpreemptionconfig.kueue.toposched.io``,
``/validate-kueue-x-k8s-io-v1alpha1-preemptionconfig``): a field Kueue v0.20's type does not have is
refused at CREATE and at UPDATE, naming the field (before issue 41 there was no route: such an
object was stored and its field ignored by the controller); a valid one passes."""

from __future__ import annotations

import copy
import json
from typing import Any

from admission import configs, review, routes
from admission.suspension import DEFAULT_CONTROLLER_USERS
from admission.view import ClusterView

PATH = "/validate-kueue-x-k8s-io-v1alpha1-preemptionconfig"
CONFIG = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig", "metadata": {"name": "defrag"},
          "spec": {"rules": [{"name": "defrag-smaller", "activationPolicy": {"trigger": "Always"},
                              "preemptorPriorityClassSelector": {"matchNames": ["urgent"]},
                              "candidateSelectors": [{"scope": "AnyClusterQueue",
                                                      "priority": {"mode": "Base", "comparison": "LessThan"}}]}]}}


def decide(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"uid": "u-1", "kind": {"group": "kueue.x-k8s.io", "kind": "PreemptionConfig"},
                               "operation": "UPDATE" if old is not None else "CREATE", "object": obj,
                               "userInfo": {"username": "admin"}}
    if old is not None:
        request["oldObject"] = old
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    code, out = review.answer(PATH, json.dumps(body).encode(), ClusterView(),
                              controller_users=DEFAULT_CONTROLLER_USERS)
    assert code == 200 and out["response"]["uid"] == "u-1"
    return dict(out["response"])


def test_kueues_v020_config_passes() -> None:
    assert decide(copy.deepcopy(CONFIG))["allowed"] is True


def test_an_unknown_field_is_refused_naming_it_on_create_and_update() -> None:
    bad = copy.deepcopy(CONFIG)
    bad["spec"]["rules"][0]["candidateSelectors"][0]["relativeWorkloadPriority"] = "LessThan"
    for resp in (decide(bad), decide(bad, old=copy.deepcopy(CONFIG))):
        assert resp["allowed"] is False and resp["status"]["code"] == 422
        assert resp["status"]["message"] == (
            "spec.rules[0].candidateSelectors[0].relativeWorkloadPriority: unknown field 'relativeWorkloadPriority': "
            "Kueue v0.20's PreemptionConfig has no such field; remove it (toposched never keeps a field it does not "
            "act on)")


def test_the_route_is_served_and_registered_for_preemptionconfigs_only() -> None:
    assert routes.ROUTES[PATH].kind_name == "PreemptionConfig"
    hooks = configs.validating_configuration(configs.service_client_config("toposched-system"))["webhooks"]
    hook = next(h for h in hooks if h["name"] == "vpreemptionconfig.kueue.toposched.io")
    assert hook["clientConfig"]["service"]["path"] == PATH
    assert hook["rules"] == [{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1alpha1"],
                              "resources": ["preemptionconfigs"], "operations": ["CREATE", "UPDATE"],
                              "scope": "Cluster"}]
