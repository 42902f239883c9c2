"""``toposched explain`` on the real control plane with toposched's controller running, one test
per kind the registry governs without a Workload of its own, plus a registry kind with one
(the HyperPodPyTorchJob the real ``hyp`` CLI writes) and a misspelled queue: the state explain
prints is the state of the cluster (admitted and running replicas, a pod group short of pods),
and no line is broken. LeaderWorkerSet, Ray and TrainJob are covered on dicts in
tests/unit/test_explain_targets.py (their stacks need operators built from source)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from scheduler import cli
from scheduler.adapter.kinds.deployment import DEPLOYMENT
from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB
from scheduler.adapter.kinds.statefulset import STATEFULSET
from scheduler.devcluster.apply import load_documents
from scheduler.k8s.informer import PODS, WORKLOADS
from scheduler.kube.jobs import resource_of
from tests.e2e.conftest import Stack
from tests.e2e.test_pods_and_hyperpod import CLUSTER, EXAMPLES, HYP, NS, install_hyperpod_crd, running


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory({**CLUSTER, "name": "e2e-explain-kinds"}, before_toposched=install_hyperpod_crd)


def explain(stack: Stack, capsys: pytest.CaptureFixture[str], name: str) -> tuple[dict[str, Any], str]:
    kubeconfig = str(stack.cluster.kubeconfig)
    assert cli.main(["explain", f"{NS}/{name}", "--kubeconfig", kubeconfig, "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert cli.main(["explain", f"{NS}/{name}", "--kubeconfig", kubeconfig]) == 0
    text = capsys.readouterr().out
    assert " in  (" not in text and "()" not in text and "?" not in text, text  # no broken lines
    return doc, text


def test_a_deployment_with_its_replicas_admitted_and_running(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    [deployment] = load_documents(EXAMPLES / "deployment-serving.yaml")
    stack.api.create(resource_of(DEPLOYMENT), deployment, NS)
    stack.wait(lambda: running(stack, "app=llm-endpoint", 2), 180, "the Deployment's 2 replicas Running")
    doc, text = explain(stack, capsys, "llm-endpoint")
    assert doc["admitted"] is True and doc["kind"] == "Deployment"
    assert doc["reasons"][0]["message"].startswith("2 of 2 replicas admitted, 2 running"), doc
    assert f"{NS}/llm-endpoint (Deployment) is admitted in ClusterQueue " in text and "NoWorkload" not in text
    stack.api.delete(resource_of(DEPLOYMENT), "llm-endpoint", NS, propagationPolicy="Background")


def test_a_statefulset_group_admitted(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    [statefulset] = load_documents(EXAMPLES / "statefulset-serving.yaml")
    stack.api.create(resource_of(STATEFULSET), statefulset, NS)
    stack.wait(lambda: running(stack, "app=kv-cache", 2), 180, "the StatefulSet's 2 pods Running")
    doc, text = explain(stack, capsys, "kv-cache")
    assert doc["admitted"] is True and doc["kind"] == "StatefulSet"
    assert doc["reasons"][0]["message"].startswith("1 of 1 group admitted, 2 of 2 pods running"), doc
    assert "(StatefulSet) is admitted" in text
    stack.api.delete(resource_of(STATEFULSET), "kv-cache", NS, propagationPolicy="Background")


def test_an_incomplete_pod_group(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    first, _second = load_documents(EXAMPLES / "pod-group.yaml")
    stack.api.create(PODS, first, NS)
    for name in ("allreduce-0", "allreduce"):  # a member, or the group by its name
        doc, text = explain(stack, capsys, name)
        assert doc["admitted"] is False and doc["kind"] == "pod group"
        assert doc["reasons"][0]["message"] == "pod group allreduce: 1 of 2 pods exist, 0 running"
        assert "PodGroupIncomplete" in text and "NoWorkload" not in text
    stack.api.delete(PODS, "allreduce-0", NS)


def test_a_pod_with_a_misspelled_queue(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    [pod] = load_documents(EXAMPLES / "pod-single.yaml")
    pod = copy.deepcopy(pod)
    pod["metadata"]["name"] = "typo"
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "hyperpod-ns-team-a-localqeue"
    created = stack.api.create(PODS, pod, NS)
    stack.wait(lambda: [w for w in stack.api.list(WORKLOADS, NS)["items"] if any(
        r.get("uid") == created["metadata"]["uid"] for r in w["metadata"].get("ownerReferences") or ())],
        60, "the pod's Workload")
    doc, text = explain(stack, capsys, "typo")
    assert doc["admitted"] is False
    assert "LocalQueue hyperpod-ns-team-a-localqeue doesn't exist" in doc["reasons"][0]["message"], doc
    assert "Queue: position" not in text and "queue" not in doc
    stack.api.delete(PODS, "typo", NS)


def test_the_hyp_clis_hyperpodpytorchjob(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = yaml.safe_load((HYP / "hyp-create-pytorch-job-v1.1.yaml").read_text())
    created = stack.api.create(resource_of(HYPERPODPYTORCHJOB), manifest, NS)

    def admitted() -> dict[str, Any] | None:
        found = [w for w in stack.api.list(WORKLOADS, NS)["items"] if any(
            r.get("uid") == created["metadata"]["uid"] for r in w["metadata"].get("ownerReferences") or ())]
        return found[0] if found and (found[0].get("status") or {}).get("admission") else None

    wl = stack.wait(admitted, 90, "the HyperPodPyTorchJob's Workload admitted")
    doc, text = explain(stack, capsys, "llama3-pretrain")
    assert doc["admitted"] is True and doc["workload"] == wl["metadata"]["name"]
    assert f"{NS}/llama3-pretrain (Workload {wl['metadata']['name']}) is admitted" in text
    stack.api.delete(resource_of(HYPERPODPYTORCHJOB), "llama3-pretrain", NS, propagationPolicy="Background")
