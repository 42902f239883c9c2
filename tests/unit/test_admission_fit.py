"""The webhook's can-this-ever-fit question asks the core: Cohort quotas and parents count,
node selectors and tolerations filter leaves as in the controller."""

from __future__ import annotations

import copy
from typing import Any

from admission.validation import validate_job
from tests.unit.test_admission_validation import HOST, L3, R, cluster, job

P = "kueue.x-k8s.io/podset-preferred-topology"
L2 = "topology.k8s.aws/network-node-layer-2"


def test_cohort_quota_and_parent_cohort_lend() -> None:
    """cq-a (32 GPUs) sits in cohort "team" whose parent "org" holds 64 more: 64 GPUs fit only by
    borrowing from the parent — the old one-level model said "can never be admitted"."""
    view = cluster(gpu_quota=32, cohort="team", other_gpu=0)
    view.cohorts = {
        "team": {"metadata": {"name": "team"}, "spec": {"parentName": "org"}},
        "org": {"metadata": {"name": "org"}, "spec": {"resourceGroups": [
            {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "p5", "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": 64}]}]}]}},
    }
    verdict = validate_job(job(8, ann={P: L2}), view)
    assert verdict.allowed, verdict.message()
    assert any("fits only by borrowing" in w for w in verdict.warnings)
    view.cohorts = {}
    assert "can never be admitted" in validate_job(job(8, ann={P: L2}), view).message()


def test_node_selector_filters_leaves() -> None:
    """A pod template selecting one rack can only use that rack's nodes."""
    obj = job(4, ann={R: L3})
    obj["spec"]["template"]["spec"]["nodeSelector"] = {HOST: "n0"}
    message = validate_job(obj, cluster()).message()
    assert "4 pod(s) can never fit in one" in message and "the largest holds 1" in message


def test_taints_need_tolerations() -> None:
    view = cluster()
    nodes: dict[str, Any] = {k: copy.deepcopy(v) for k, v in view.nodes.items()}
    for node in nodes.values():
        node["spec"] = {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}
    view.nodes = nodes
    assert not validate_job(job(4, ann={R: L3}), view).allowed
    tolerated = job(4, ann={R: L3})
    tolerated["spec"]["template"]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    assert validate_job(tolerated, view).allowed


def test_nodes_that_are_registering_or_unhealthy_count_as_capacity_that_will_come() -> None:
    """Kubernetes taints every node not-ready as it registers (TaintNodesByCondition) until its
    kubelet reports Ready; a Job created in that window was refused as "can never fit" (a CI
    flake of test_webhook_ha). Condition taints report state, not who may run there: the job is
    admitted with the warning that it waits for the nodes to recover."""
    view = cluster()
    nodes: dict[str, Any] = {k: copy.deepcopy(v) for k, v in view.nodes.items()}
    for node in nodes.values():
        node["spec"] = {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                                   {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}
        node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    view.nodes = nodes
    verdict = validate_job(job(4, ann={R: L3}), view)
    assert verdict.allowed, verdict.message()
    assert any("only if unhealthy nodes recover" in w for w in verdict.warnings), verdict.warnings
    # A taint that restricts who may run there still counts: it does not go away by itself.
    for node in nodes.values():
        node["spec"]["taints"].append({"key": "gpu", "value": "true", "effect": "NoSchedule"})
    view.nodes_version += 1
    assert "can never fit" in validate_job(job(4, ann={R: L3}), view).message()
