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
