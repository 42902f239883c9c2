"""Kueue's ``integrations.frameworks`` decide which job kinds the controller manages."""

from __future__ import annotations

from scheduler.kube.jobs import INTEGRATIONS, LWS_KEY, managed_integrations, unmanaged_frameworks


def test_no_configuration_manages_every_integration() -> None:
    assert managed_integrations(()) == frozenset(INTEGRATIONS) | {LWS_KEY}


def test_mpijob_and_leaderworkerset_by_kueues_framework_names() -> None:
    assert managed_integrations(("kubeflow.org/mpijob", "leaderworkerset.x-k8s.io/leaderworkerset")) == {
        "kubeflow.org/MPIJob", LWS_KEY}


def test_only_the_listed_frameworks_are_managed() -> None:
    assert managed_integrations(("batch/job",)) == {"batch/Job"}
    assert managed_integrations(("batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob")) == {
        "batch/Job", "jobset.x-k8s.io/JobSet"}


def test_frameworks_without_an_integration_are_named() -> None:
    assert unmanaged_frameworks(("batch/job", "ray.io/rayjob", "pod")) == ["ray.io/rayjob", "pod"]
