"""Shared fixtures.

``local_cluster`` (session scope) starts a real control plane once per test session — etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and KWOK, on dynamic loopback ports —
and stops it, by pid, at the end. Tests that use it are marked ``cluster``. Unit tests never
touch it, so ``pytest tests/unit`` needs no Go toolchain.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

log = logging.getLogger("tests")

# Property tests assert behaviour, never time: on a loaded 2-core machine (CI runs control
# planes beside them) example generation can be slow, which is no failure.
settings.register_profile("toposched", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("toposched")


def pytest_configure(config: pytest.Config) -> None:
    from scheduler.devcluster.processes import tie_to_caller

    tie_to_caller()  # the control planes a test run starts end with it, however it ends (CI's timeout included)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "local_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from scheduler.devcluster.controlplane import LocalCluster

    directory = Path(tmp_path_factory.mktemp("cluster"))
    cluster = LocalCluster(directory)
    cluster.start()
    log.info("local control plane up at %s (kubeconfig %s)", cluster.server, cluster.kubeconfig)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kube_api(local_cluster: object) -> object:
    return local_cluster.api_client()  # type: ignore[attr-defined]


@pytest.fixture
def namespace(kube_api: object) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (without waiting)."""
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except client.ApiException:
            pass
