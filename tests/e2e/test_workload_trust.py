"""The Workload door on the real control plane (issue 30, finding 3): a tenant identity (a
ServiceAccount token with Kueue's batch-admin rights on Workloads in its namespace) cannot write
the annotations only toposched's controller writes, nor give itself a priority, nor create a
Workload that breaks Kueue's rules; its honest Workload is admitted, and the controller's own
writes (Workloads for Jobs, status, its annotations) go through untouched: the webhook's
``matchConditions`` skip the controller's username (on the local dev cluster: its own user,
``toposched-controller``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client

from scheduler.adapter.workload_checks import workload_problems
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET, DomainTarget
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN
from scheduler.devcluster.apply import apply_objects
from scheduler.k8s.informer import WORKLOADS, Api
from scheduler.kube import status as st
from tests.e2e.conftest import Stack
from tests.e2e.test_quota_flows import FLAVOR, KUEUE, cluster_queue, local_queue, namespace

CLUSTER = {"name": "e2e-trust", "instanceType": FLAVOR, "layers": [1, 1, 2], "nodesPerDomain": 2}
NS = "trust"
TENANT = "tenant"
LAYER3 = "topology.k8s.aws/network-node-layer-3"
TARGET = DomainTarget("main", FLAVOR, LAYER3, {LAYER3: "anywhere"}).encode()


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    stack = stack_factory(CLUSTER)
    apply_objects(stack.kube, [namespace(NS), cluster_queue("trust-cq", 16), local_queue(NS, "lq", "trust-cq")])
    apply_objects(stack.kube, [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TENANT, "namespace": NS}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": TENANT, "namespace": NS},
         "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"],  # Kueue's workload-editor-role
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": TENANT, "namespace": NS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TENANT},
         "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": NS}]}])
    return stack


def tenant_api(stack: Stack) -> Api:
    """The API as ``system:serviceaccount:trust:tenant`` (a token from the TokenRequest API)."""
    review = stack.api.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{TENANT}/token",
                               body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                     "spec": {"expirationSeconds": 3600}})
    config = client.Configuration()
    config.host = stack.cluster.server
    config.ssl_ca_cert = str(stack.cluster.pki / "ca.crt")
    config.api_key = {"authorization": f"Bearer {review['status']['token']}"}
    return Api(client.ApiClient(config))


def workload(name: str, pods: int = 1, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": name, "namespace": NS, "annotations": dict(annotations)},
            "spec": {"queueName": "lq", "podSets": [{
                "name": "main", "count": pods, "topologyRequest": {"required": LAYER3},
                "template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "c", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}]}}


def refused(call: Any) -> str:
    """The API server's message refusing ``call``."""
    with pytest.raises(client.ApiException) as caught:
        call()
    body = caught.value.body
    return str(json.loads(body.decode() if isinstance(body, bytes) else body)["message"])


def test_a_tenant_cannot_write_the_controllers_annotations(stack: Stack) -> None:
    tenant = tenant_api(stack)
    for key in (ANN_PREEMPTION_TARGET, ANN_RESERVED_DOMAIN):
        body = refused(lambda key=key: tenant.create(WORKLOADS, workload(f"forged-{key[13:17]}", **{key: TARGET}),
                                                     NS))
        assert 'admission webhook "vworkload.kueue.toposched.io" denied the request' in body
        assert (f"metadata.annotations[{key}]: Forbidden: only toposched's controller may set this annotation "
                f'(user "system:serviceaccount:{NS}:{TENANT}" is not it)') in body
    assert not stack.api.list(WORKLOADS, NS)["items"]

    tenant.create(WORKLOADS, workload("honest"), NS)  # the tenant's honest Workload: admitted as usual
    stack.wait(lambda: st.condition_true(stack.api.get(WORKLOADS, "honest", NS), st.ADMITTED), 60,
               "the tenant's Workload admitted")
    patch = {"metadata": {"annotations": {ANN_RESERVED_DOMAIN: TARGET}}}
    assert "may set this annotation" in refused(lambda: tenant.merge_patch(WORKLOADS, "honest", patch, NS))

    # The controller's identity writes its key (the webhook is not even asked) ...
    stack.as_controller().merge_patch(WORKLOADS, "honest",
                                      {"metadata": {"annotations": {ANN_PREEMPTION_TARGET: TARGET}}}, NS)
    # ... the tenant may still edit the rest, keeping it, but not remove it.
    tenant.merge_patch(WORKLOADS, "honest", {"metadata": {"labels": {"team": "a"}}}, NS)
    removal = {"metadata": {"annotations": {ANN_PREEMPTION_TARGET: None}}}
    assert "may remove this annotation" in refused(lambda: tenant.merge_patch(WORKLOADS, "honest", removal, NS))
    assert stack.api.get(WORKLOADS, "honest", NS)["metadata"]["annotations"][ANN_PREEMPTION_TARGET] == TARGET


def test_a_tenant_cannot_choose_its_priority(stack: Stack) -> None:
    tenant = tenant_api(stack)
    body = workload("urgent")
    body["spec"]["priority"] = 1_000_000
    assert "spec.priority: Forbidden: a Workload without a priority class has priority 0, not 1000000" in refused(
        lambda: tenant.create(WORKLOADS, body, NS))


def test_the_api_servers_words_are_the_ones_the_checks_use(stack: Stack) -> None:
    """Kueue's CRD refuses these before any webhook; toposched's checks (used where no CRD
    schema stands guard) must say the very same."""
    tenant = tenant_api(stack)
    negative = workload("negative", pods=-1)
    twice = workload("twice")
    twice["spec"]["podSets"].append(copy.deepcopy(twice["spec"]["podSets"][0]))
    too_many = workload("many")
    too_many["spec"]["podSets"] = [dict(twice["spec"]["podSets"][0], name=f"p{i}") for i in range(9)]
    min_count = workload("min-count")
    min_count["spec"]["podSets"][0]["minCount"] = 2
    no_priority = workload("no-priority")
    no_priority["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                               "name": "high"}
    bad_name = workload("bad-name")
    bad_name["spec"]["podSets"][0]["name"] = "Main"
    for bad in (negative, twice, too_many, min_count, no_priority, bad_name):
        body = refused(lambda bad=bad: tenant.create(WORKLOADS, bad, NS))
        [problem] = workload_problems(bad)
        assert str(problem) in body, (str(problem), body)
