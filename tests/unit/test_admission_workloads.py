"""The webhook's Workload door (issue 30, finding 3): the annotations only the controller writes
are refused from anyone else on CREATE and UPDATE, naming the key and why; a Workload that breaks
Kueue's schema or webhook rules is refused with Kueue's (and the API server's) words, whoever
sends it; and a Workload's priority is its class's. Through ``review.answer``, as the server
calls it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from admission import review, routes
from admission.suspension import DEFAULT_CONTROLLER_USERS
from admission.view import ClusterView
from scheduler.adapter.owned import ANN_RETRIES, ANN_RETRY_KEY, CONTROLLER_OWNED
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET, DomainTarget
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN
from scheduler.core.beyond.preferred_domains import ANN_PREVIOUS_DOMAINS

CONTROLLER = next(iter(DEFAULT_CONTROLLER_USERS))
TENANT = "alice"
TARGET = DomainTarget("main", "gpu", "block", {"block": "b1"}).encode()
VIEW = ClusterView(priority_classes={"high": {"metadata": {"name": "high"}, "value": 100}})


def workload(pods: int = 2, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "team-a", "annotations": dict(annotations)},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": pods, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}]}}


def decide(obj: dict[str, Any], old: dict[str, Any] | None = None, user: str = TENANT,
           path: str = routes.VALIDATE_WORKLOAD) -> dict[str, Any]:
    request: dict[str, Any] = {"uid": "u-1", "kind": {"kind": "Workload"}, "namespace": "team-a",
                               "operation": "UPDATE" if old is not None else "CREATE", "object": obj,
                               "userInfo": {"username": user}}
    if old is not None:
        request["oldObject"] = old
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    code, out = review.answer(path, json.dumps(body).encode(), VIEW, controller_users=DEFAULT_CONTROLLER_USERS)
    assert code == 200 and out["response"]["uid"] == "u-1"
    return dict(out["response"])


def refusal(resp: dict[str, Any]) -> str:
    assert resp["allowed"] is False and resp["status"]["code"] == 403, resp
    return str(resp["status"]["message"])


# ---------------------------------------------------------------------- owned annotations


@pytest.mark.parametrize("key", sorted(CONTROLLER_OWNED))
def test_a_tenant_cannot_create_a_workload_carrying_an_owned_key(key: str) -> None:
    message = refusal(decide(workload(**{key: TARGET})))
    assert message.startswith(f"metadata.annotations[{key}]: Forbidden: only toposched's controller may set this "
                              f"annotation (user \"{TENANT}\" is not it): it records {CONTROLLER_OWNED[key]}")
    assert "remove it from the object" in message


def test_the_owned_keys_are_the_ones_the_controller_writes() -> None:
    assert set(CONTROLLER_OWNED) == {ANN_PREEMPTION_TARGET, ANN_RESERVED_DOMAIN, ANN_PREVIOUS_DOMAINS, ANN_RETRIES,
                                     ANN_RETRY_KEY}


def test_adding_changing_or_removing_an_owned_key_is_refused_keeping_it_is_not() -> None:
    before = workload(**{ANN_PREEMPTION_TARGET: TARGET})
    added = decide(workload(**{ANN_RESERVED_DOMAIN: TARGET, ANN_PREEMPTION_TARGET: TARGET}), before)
    assert "[toposched.io/reserved-domain]: Forbidden: only toposched's controller may set" in refusal(added)
    changed = decide(workload(**{ANN_PREEMPTION_TARGET: TARGET.replace("b1", "b0")}), before)
    assert "may change this annotation" in refusal(changed)
    removed = decide(workload(), before)
    assert "may remove this annotation" in refusal(removed) and "keep the annotation as it is" in refusal(removed)
    kept = workload(**{ANN_PREEMPTION_TARGET: TARGET, "team": "x"})  # another annotation edited
    assert decide(kept, before)["allowed"] is True


def test_the_controller_may_write_its_keys() -> None:
    before = workload()
    assert decide(workload(**{ANN_PREEMPTION_TARGET: TARGET}), user=CONTROLLER)["allowed"] is True
    assert decide(workload(**{ANN_PREEMPTION_TARGET: TARGET}), before, user=CONTROLLER)["allowed"] is True


def test_a_review_without_a_user_is_nobody() -> None:
    message = refusal(decide(workload(**{ANN_RESERVED_DOMAIN: TARGET}), user=""))
    assert "(a request without a user is not it)" in message


# ---------------------------------------------------------------------- Kueue's rules


def _pod_set(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj["spec"]["podSets"][0])


def test_kueue_schema_rules_with_the_api_servers_words() -> None:
    assert refusal(decide(workload(pods=-1))) == (
        "spec.podSets[0].count: Invalid value: -1: spec.podSets[0].count in body should be greater than or equal to 0")
    twice = workload()
    twice["spec"]["podSets"].append(_pod_set(twice))
    assert refusal(decide(twice)) == 'spec.podSets[1]: Duplicate value: {"name":"main"}'
    many = workload()
    many["spec"]["podSets"] = [dict(_pod_set(many), name=f"p{i}") for i in range(9)]
    assert refusal(decide(many)) == "spec.podSets: Too many: 9: must have at most 8 items"
    none = workload()
    none["spec"]["podSets"] = []
    assert refusal(decide(none)) == "spec.podSets: Invalid value: 0: spec.podSets in body should have at least 1 items"
    bad = workload()
    bad["spec"]["podSets"][0].update(name="Main", minCount=3)
    assert refusal(decide(bad)).splitlines()[1:] == [
        "- spec.podSets[0].name: Invalid value: \"Main\": spec.podSets[0].name in body should match "
        "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
        "- spec.podSets[0]: Invalid value: minCount should be positive and less or equal to count"]


def test_kueue_webhook_rules_with_kueues_words() -> None:
    two = workload()
    two["spec"]["podSets"] = [dict(_pod_set(two), name=n, minCount=1) for n in ("a", "b")]
    assert refusal(decide(two)) == "spec.podSets: Invalid value: 2: at most one podSet can use minCount"
    pods = workload()
    pods["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["pods"] = "1"
    assert refusal(decide(pods)) == ('spec.podSets[0].template.spec.containers[0].resources.requests[pods]: '
                                     'Invalid value: "pods": the key is reserved for internal kueue use')


def test_what_toposched_adds_says_what_to_write() -> None:
    negative = workload()
    negative["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"
    assert refusal(decide(negative)).endswith('requests[cpu]: Invalid value: "-1": must be greater than or equal to 0; '
                                              "requests and limits count what one pod uses: write 0 or more")
    both = workload()
    both["spec"]["podSets"][0]["topologyRequest"] = {"required": "block", "preferred": "rack"}
    assert "must not contain more than one topology request" in refusal(decide(both))
    size = workload()
    size["spec"]["podSets"][0]["topologyRequest"] = {"required": "block", "podSetSliceRequiredTopology": "rack",
                                                     "podSetSliceSize": 3}
    assert refusal(decide(size)) == ("spec.podSets[0].topologyRequest.podSetSliceSize: Invalid value: 3: must not be "
                                     "greater than pod set count 2")


def test_pod_sets_are_immutable_while_the_workload_holds_quota() -> None:
    old = workload()
    old["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True"}]}
    new = copy.deepcopy(old)
    new["spec"]["podSets"][0]["count"] = 1
    assert refusal(decide(new, old)).startswith("spec.podSets[0]: Invalid value: field is immutable")
    del old["status"]
    assert decide(new, old)["allowed"] is True  # pending: Kueue lets the pod sets change


def test_a_metadata_only_update_of_an_old_invalid_workload_passes() -> None:
    """Only a changed spec is checked again (a finalizer or label update never is refused)."""
    old = workload(pods=-1)
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"x": "y"}
    assert decide(new, old)["allowed"] is True


def test_the_controller_is_held_to_kueues_rules_too() -> None:
    assert "greater than or equal to 0" in refusal(decide(workload(pods=-1), user=CONTROLLER))


# ---------------------------------------------------------------------- priority


def with_priority(priority: int | None, ref: dict[str, str] | None = None) -> dict[str, Any]:
    obj = workload()
    if priority is not None:
        obj["spec"]["priority"] = priority
    if ref is not None:
        obj["spec"]["priorityClassRef"] = ref
    return obj


WPC_HIGH = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}


def test_a_tenant_cannot_choose_its_priority() -> None:
    assert refusal(decide(with_priority(1000))) == (
        'spec.priority: Forbidden: a Workload without a priority class has priority 0, not 1000 (user "alice" is not '
        "toposched's controller); name a WorkloadPriorityClass in spec.priorityClassRef and set spec.priority to "
        "its value")
    assert refusal(decide(with_priority(1000, WPC_HIGH))) == (
        'spec.priority: Forbidden: WorkloadPriorityClass "high" gives priority 100, not 1000 (user "alice" is not '
        "toposched's controller); set spec.priority to 100")
    missing = dict(WPC_HIGH, name="urgent")
    assert refusal(decide(with_priority(5, missing))).startswith('spec.priorityClassRef.name: Not found: "urgent"')


def test_the_class_value_and_other_writers_pass() -> None:
    assert decide(with_priority(100, WPC_HIGH))["allowed"] is True
    assert decide(with_priority(0))["allowed"] is True and decide(with_priority(None))["allowed"] is True
    pod_class = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "system-node-critical"}
    assert decide(with_priority(7, pod_class))["allowed"] is False  # judged now: test_admission_priority_bounds.py
    assert decide(with_priority(1000), user=CONTROLLER)["allowed"] is True
    old = with_priority(50, WPC_HIGH)  # the class's value moved since; the priority is not touched
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"x": "y"}
    assert decide(new, old)["allowed"] is True


def test_the_schema_rule_on_priority_class_ref_is_kueues() -> None:
    assert refusal(decide(with_priority(None, WPC_HIGH))) == (
        "spec: Invalid value: priority should not be nil when priorityClassRef is set")


# ---------------------------------------------------------------------- registration


def test_the_workload_webhook_is_registered_fail_closed_for_everyone_but_the_controller() -> None:
    from admission import configs

    hooks = configs.validating_configuration(configs.url_client_config("https://x"), controller_users=["ctl", "b"])
    [hook] = [h for h in hooks["webhooks"] if h["name"] == "vworkload.kueue.toposched.io"]
    assert hook["failurePolicy"] == "Fail" and hook["clientConfig"]["url"].endswith(routes.VALIDATE_WORKLOAD)
    assert hook["rules"] == [{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1beta2", "v1beta1"],
                              "resources": ["workloads", "workloads/status"], "operations": ["CREATE", "UPDATE"],
                              "scope": "Namespaced"}]
    assert hook["matchConditions"] == [{"name": "not-toposched-controller",
                                        "expression": '!(request.userInfo.username in ["b", "ctl"])'}]
    default = configs.validating_configuration(configs.url_client_config("https://x"), "ns")
    [hook] = [h for h in default["webhooks"] if h["name"] == "vworkload.kueue.toposched.io"]
    assert "system:serviceaccount:ns:toposched-controller" in hook["matchConditions"][0]["expression"]


def test_the_v1beta1_path_is_served() -> None:
    v1beta1 = workload(**{ANN_PREEMPTION_TARGET: TARGET})
    v1beta1["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    assert "Forbidden" in refusal(decide(v1beta1, path="/validate-kueue-x-k8s-io-v1beta1-workload"))
