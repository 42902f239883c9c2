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

from scheduler.adapter.newkinds import hyperpod
from scheduler.adapter.newkinds.mergepatch import merge_patched
from scheduler.core.workload import WorkloadFormatError

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "hyp" / "hyp-create-pytorch-job-v1.1.yaml"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "jobs" / "hyperpod-pytorch-job.yaml"


@pytest.fixture
def job() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    return loaded


def test_the_cli_manifest_is_the_example_and_has_no_suspend(job: dict[str, Any]) -> None:
    assert yaml.safe_load(EXAMPLE.read_text()) == job
    assert (job["apiVersion"], job["kind"]) == ("sagemaker.amazonaws.com/v1", hyperpod.KIND)
    assert not hyperpod.is_suspended(job)


def test_cli_manifest_pod_sets(job: dict[str, Any]) -> None:
    [ps] = hyperpod.pod_sets(job)
    assert (ps["name"], ps["count"]) == ("pod", 4)
    assert ps["topologyRequest"] == {"preferred": "topology.k8s.aws/network-node-layer-3"}
    # the CLI writes quantities as JSON integers
    assert ps["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == 8


def test_spares_are_charged(job: dict[str, Any]) -> None:
    job["spec"]["replicaSpecs"][0]["spares"] = 2
    assert [ps["count"] for ps in hyperpod.pod_sets(job)] == [6]  # "4 replicas and 2 spares ... 6 pods"
    job["spec"]["replicaSpecs"][0]["spares"] = -1
    with pytest.raises(WorkloadFormatError, match="must not be negative"):
        hyperpod.pod_sets(job)
    job["spec"]["replicaSpecs"][0]["spares"] = "two"
    with pytest.raises(WorkloadFormatError, match="must be integers"):
        hyperpod.pod_sets(job)


def test_start_and_stop_through_run_policy(job: dict[str, Any]) -> None:
    suspended = merge_patched(job, hyperpod.stop_patch(job))
    assert hyperpod.is_suspended(suspended)
    patch = {"metadata": {"labels": {"kueue.x-k8s.io/podset": "pod"}}, "spec": {"nodeSelector": {"l3": "x"}}}
    started = merge_patched(suspended, hyperpod.start_patch(suspended, {"pod": patch}))
    assert not hyperpod.is_suspended(started)
    template = started["spec"]["replicaSpecs"][0]["template"]
    assert template["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge", "l3": "x"}
    assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "pod"
    assert template["metadata"]["annotations"] == job["spec"]["replicaSpecs"][0]["template"]["metadata"]["annotations"]
    restore = {"metadata": {"labels": {"kueue.x-k8s.io/podset": None}},
               "spec": {"nodeSelector": {"l3": None}}}
    restored = merge_patched(started, hyperpod.restore_patch(started, {"pod": restore}) or {})
    assert restored["spec"]["replicaSpecs"] == suspended["spec"]["replicaSpecs"]
    assert hyperpod.restore_patch(started, {}) is None


def test_finished_by_complete_or_failed(job: dict[str, Any]) -> None:
    done = copy.deepcopy(job)
    done["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
    assert hyperpod.finish_state(done) == hyperpod.FinishState(True, "Succeeded", "done")
    done["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    assert hyperpod.finish_state(done) == hyperpod.FinishState(True, "Failed", "HyperPodPyTorchJob failed")
    assert not hyperpod.finish_state(job).finished


@pytest.mark.parametrize(("name", "matches"), [
    ("HyperPodPytorchJob.v1.sagemaker.amazonaws.com", True),  # AWS's documented spelling
    ("HyperPodPyTorchJob.v1.sagemaker.amazonaws.com", True),  # the kind the CLI writes
    ("HyperPodPyTorchJob.v2.sagemaker.amazonaws.com", False),
    ("PyTorchJob.v1.kubeflow.org", False),
    ("HyperPodPyTorchJob", False),
])
def test_external_framework_spellings(name: str, matches: bool) -> None:
    assert hyperpod.external_framework_matches(name) is matches


def test_external_framework_format_as_kueue_parses_it() -> None:
    assert hyperpod.parse_external_framework("Kind.v1.group") == ("Kind", "v1", "group")
    assert hyperpod.parse_external_framework("Kind.v1.example.com") == ("Kind", "v1", "example.com")
    assert hyperpod.parse_external_framework("Kind.v1") is None
