"""Kueue's ``integrations.frameworks`` decide which job kinds the controller manages (the
job-kind registry, by Kueue's framework names)."""

from __future__ import annotations

from scheduler.adapter.kinds.registry import KINDS, enabled_kinds, unmanaged_frameworks


def names(kinds: tuple[object, ...]) -> list[str]:
    return [k.framework for k in kinds]  # type: ignore[attr-defined]


def test_no_configuration_manages_every_integration() -> None:
    assert enabled_kinds(()) == KINDS


HYPERPOD = "sagemaker.amazonaws.com/hyperpodpytorchjob"  # no Kueue framework: governed unless external


def test_mpijob_and_leaderworkerset_by_kueues_framework_names() -> None:
    assert names(enabled_kinds(("kubeflow.org/mpijob", "leaderworkerset.x-k8s.io/leaderworkerset"))) == [
        "kubeflow.org/mpijob", "leaderworkerset.x-k8s.io/leaderworkerset", HYPERPOD]


def test_only_the_listed_frameworks_are_managed() -> None:
    assert names(enabled_kinds(("batch/job",))) == ["batch/job", HYPERPOD]
    assert names(enabled_kinds(("batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob"))) == [
        "batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob", HYPERPOD]
    # Kueue: deployment and statefulset need the pod integration, which they enable
    assert names(enabled_kinds(("deployment",))) == [HYPERPOD, "pod", "deployment"]
    assert names(enabled_kinds(("batch/job",), [("sagemaker.amazonaws.com", "v1", "HyperPodPytorchJob")])) == [
        "batch/job"]


def test_frameworks_without_an_integration_are_named() -> None:
    assert unmanaged_frameworks(("batch/job", "ray.io/rayjob", "pod", "workload.codeflare.dev/appwrapper")) == [
        "workload.codeflare.dev/appwrapper"]
