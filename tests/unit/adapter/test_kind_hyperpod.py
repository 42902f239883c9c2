"""HyperPodPyTorchJob, read from the manifest the real HyperPod CLI 3.12.0 wrote
(tests/data/hyp/hyp-create-pytorch-job-v1.1.yaml): pod sets with spares charged (replicas +
spares), the topology request from the template, suspend through spec.runPolicy.suspend, and the
externalFrameworks spellings."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.adapter.kinds import hyperpod
from scheduler.adapter.kinds.base import FinishState, PodSetStart, merge_patched
from scheduler.adapter.kinds.governance import Governance
from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB as HP
from scheduler.adapter.kinds.registry import enabled_kinds
from scheduler.adapter.kinds.workloads import workload_pod_sets
from scheduler.adapter.kueue_config import external_framework
from scheduler.core.config import KueueConfig

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "hyp" / "hyp-create-pytorch-job-v1.1.yaml"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "jobs" / "hyperpod-pytorch-job.yaml"


@pytest.fixture
def job() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    return loaded


def test_the_cli_manifest_is_the_example_and_has_no_suspend(job: dict[str, Any]) -> None:
    assert yaml.safe_load(EXAMPLE.read_text()) == job
    assert (job["apiVersion"], job["kind"]) == ("sagemaker.amazonaws.com/v1", hyperpod.KIND)
    assert not HP.is_suspended(job)


def test_cli_manifest_pod_sets(job: dict[str, Any]) -> None:
    [ps] = workload_pod_sets(HP, job)
    assert (ps["name"], ps["count"]) == ("pod", 4)
    assert ps["topologyRequest"] == {"preferred": "topology.k8s.aws/network-node-layer-3"}
    # the CLI writes quantities as JSON integers
    assert ps["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == 8


def test_spares_are_charged(job: dict[str, Any]) -> None:
    job["spec"]["replicaSpecs"][0]["spares"] = 2
    assert [ps["count"] for ps in workload_pod_sets(HP, job)] == [6]  # "4 replicas and 2 spares ... 6 pods"
    job["spec"]["replicaSpecs"][0]["spares"] = -1
    assert HP.validation(job) == [("spec.replicaSpecs[0].spares", "Invalid",
                                   "must be a non-negative integer (replicas + spares pods are charged to quota)", -1)]
    assert [ps["count"] for ps in workload_pod_sets(HP, job)] == [4]  # refused by the webhook; never negative


def test_start_and_stop_through_run_policy(job: dict[str, Any]) -> None:
    suspended = merge_patched(job, HP.stop_patch(job))
    assert HP.is_suspended(suspended)
    [patch] = HP.start_writes(suspended, "wl", [PodSetStart("pod", {"l3": "x"}, topology_assigned=True)])
    started = merge_patched(suspended, patch)
    assert not HP.is_suspended(started)
    template = started["spec"]["replicaSpecs"][0]["template"]
    assert template["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge", "l3": "x"}
    assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "pod"
    assert template["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]  # the ungater places its pods
    original = job["spec"]["replicaSpecs"][0]["template"]["metadata"]["annotations"]
    assert template["metadata"]["annotations"] == {**original, "kueue.x-k8s.io/workload": "wl"}
    stopped = merge_patched(started, HP.stop_patch(started))
    restored = merge_patched(stopped, HP.restore_patch(stopped, workload_pod_sets(HP, job)) or {})
    assert restored["spec"]["replicaSpecs"] == suspended["spec"]["replicaSpecs"]
    assert HP.restore_patch(restored, workload_pod_sets(HP, job)) is None


def test_finished_by_complete_or_failed(job: dict[str, Any]) -> None:
    done = copy.deepcopy(job)
    done["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
    assert HP.finish_state(done) == FinishState(True, "Succeeded", "done")
    done["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    assert HP.finish_state(done) == FinishState(True, "Failed", "HyperPodPyTorchJob failed")
    assert not HP.finish_state(job).finished


@pytest.mark.parametrize(("name", "external"), [
    ("HyperPodPytorchJob.v1.sagemaker.amazonaws.com", True),  # AWS's documented spelling
    ("HyperPodPyTorchJob.v1.sagemaker.amazonaws.com", True),  # the kind the CLI writes
    ("HyperPodPyTorchJob.v2.sagemaker.amazonaws.com", False),
    ("PyTorchJob.v1.kubeflow.org", False),
])
def test_external_framework_spellings_decide_the_mode(name: str, external: bool) -> None:
    """Listed in externalFrameworks (either spelling): the operator creates its Workloads, so
    toposched does not govern it natively; otherwise it does (it is no Kueue framework, so
    integrations.frameworks cannot enable or disable it)."""
    gvk = external_framework(name)
    assert gvk is not None
    config = KueueConfig(frameworks=("batch/job",), external_frameworks=(gvk,))
    assert (HP not in enabled_kinds(config.frameworks, config.external_frameworks)) is external
    governance = Governance.from_config(config)
    assert (HP in governance.external_kinds()) is external
    # the object's kind as the API server has it is governed either way (natively or externally)
    assert governance.governs((hyperpod.GROUP, hyperpod.VERSION, hyperpod.KIND))
