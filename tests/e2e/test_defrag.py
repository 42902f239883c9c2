"""``toposched controller --defrag`` end to end on the local control plane: 4 fake p5 nodes in 2
layer-3 domains, two checkpointable (HyperPod auto-resume) 1-node jobs left one in each domain,
a 2-node job that requires one domain pending. The controller moves one of them (Evicted, reason
Defragmentation, through the writer), the real Job controller and kube-scheduler run the rest:
the 2-node job ends up running in one domain and the moved job runs again in the other."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.k8s.informer import JOBS, NODES, PODS, WORKLOADS
from scheduler.kube.jobs import ANN_AUTO_RESUME, ANN_MAX_RETRY
from tests.e2e.conftest import Stack
from tests.e2e.test_quota_flows import admitted, conds, finish, running, workload_of

CLUSTER = {"name": "e2e-defrag", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2], "nodesPerDomain": 2}
NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
L3 = "topology.k8s.aws/network-node-layer-3"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER, controller_args=("--defrag", "--defrag-interval-seconds", "1",
                                                   "--defrag-budget", "2"))


def job(name: str, pods: int) -> dict[str, Any]:
    requests = {"nvidia.com/gpu": "8"}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE},
                     "annotations": {ANN_AUTO_RESUME: "true", ANN_MAX_RETRY: "2"}},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                 "template": {"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": L3}},
                              "spec": {"restartPolicy": "Never", "containers": [{
                                  "name": "main", "image": "busybox",
                                  "resources": {"requests": requests, "limits": requests}}]}}},
    }


def start(stack: Stack, name: str, pods: int) -> dict[str, Any]:
    created = stack.api.create(JOBS, job(name, pods), NS)
    stack.wait(lambda: len(running(stack, created)) == pods, timeout_s=90, what=f"{name} running")
    return created


def racks_of(stack: Stack, created: dict[str, Any]) -> set[str]:
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in stack.api.list(NODES)["items"]}
    return {labels[p["spec"]["nodeName"]][L3] for p in running(stack, created)}


def test_defrag_opens_a_domain_for_the_pending_job(stack: Stack) -> None:
    a, b = start(stack, "a", 1), start(stack, "b", 1)  # BestFit packs: a and b share a domain
    c, d = start(stack, "c", 1), start(stack, "d", 1)  # c and d the other one
    assert racks_of(stack, a) == racks_of(stack, b) != racks_of(stack, c)
    finish(stack, b)
    finish(stack, d)
    stack.wait(lambda: not running(stack, b) and not running(stack, d), what="b and d finished")
    big = stack.api.create(JOBS, job("big", 2), NS)
    stack.wait(lambda: len(running(stack, big)) == 2, timeout_s=120, what="big running after a move")
    assert len(racks_of(stack, big)) == 1
    moved = [j for j in (a, c) if (conds(workload_of(stack, NS, j["metadata"]["uid"])).get("Evicted") or {})
             .get("reason") == "Defragmentation" or any(
                 e.get("reason") == "Defragmentation" for e in ((workload_of(stack, NS, j["metadata"]["uid"]) or {})
                                                               .get("status", {}).get("schedulingStats", {})
                                                               .get("evictions") or ()))]
    assert len(moved) == 1, "exactly one workload moved"
    stayed = c if moved[0] is a else a
    assert admitted(stack, stayed) and len(running(stack, stayed)) == 1
    stack.wait(lambda: len(running(stack, moved[0])) == 1, timeout_s=120, what="the moved job running again")
    assert racks_of(stack, moved[0]) == racks_of(stack, stayed) != racks_of(stack, big)
    events = stack.api.list(PODS, NS)  # the cluster is still consistent: 4 pods on 4 nodes
    nodes = [p["spec"].get("nodeName") for p in events["items"] if p["status"].get("phase") == "Running"
             and not p["metadata"].get("deletionTimestamp")]
    assert len(nodes) == len(set(nodes)) == 4
    assert stack.api.list(WORKLOADS, NS)["items"]
