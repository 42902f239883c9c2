"""End-to-end fixtures: a dedicated local control plane per test module with the whole
toposched stack running as processes (controller, extender, webhook), fake HyperPod nodes and
the HyperPod-style team queues. Nothing is mocked: the real kube-apiserver calls the real
webhook, the real Job controller makes pods, the real kube-scheduler calls the extender."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.core.fakecluster import generate_nodes
from scheduler.devcluster.apply import apply_objects, create_nodes, load_documents, wait_nodes_settled
from scheduler.devcluster.binaries import repo_root
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, LocalCluster
from scheduler.devcluster.stack import StackPorts, start_toposched
from scheduler.k8s.informer import Api

QUEUES = repo_root() / "examples" / "kueue" / "hyperpod-queues.yaml"


@dataclass
class Stack:
    cluster: LocalCluster
    api: Api
    kube: client.ApiClient
    nodes: list[dict[str, Any]]

    def wait(self, predicate: Callable[[], Any], timeout_s: float = 60, what: str = "condition",
             interval_s: float = 0.25) -> Any:
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            try:
                value = predicate()
                if value:
                    return value
            except client.ApiException as exc:
                last = exc
            time.sleep(interval_s)
        logs = self.cluster.logs
        raise AssertionError(f"{what}: not met within {timeout_s}s (last error: {last}); logs in {logs}")

    def as_user(self, user: str) -> Api:
        """The API as another user (impersonated by the admin; in system:masters, so RBAC allows
        the write and only the webhooks can refuse it)."""
        impersonating = self.cluster.api_client()
        impersonating.set_default_header("Impersonate-User", user)
        impersonating.set_default_header("Impersonate-Group", "system:masters")
        return Api(impersonating)

    def as_controller(self) -> Api:
        """The API as toposched's controller (its own user on the dev cluster, not the admin's):
        for a test that writes what only the controller may, or goes past the webhooks as it does."""
        from kubernetes import config

        return Api(config.new_client_from_config(config_file=str(self.cluster.controller_kubeconfig)))


def start_stack(directory: Path, description: dict[str, Any], controller_args: tuple[str, ...] = (),
                before_toposched: Callable[[LocalCluster], Any] | None = None,
                kueue_config: dict[str, Any] | None = None, kueue_version: str | None = None) -> Stack:
    """``before_toposched``: runs on the cluster before toposched starts (e.g. installs JobSet).
    ``kueue_config``: a Kueue Configuration (the fields after kind) for the controller and the
    webhook; ``kueue_version``: the Kueue release both behave as (``--kueue-version``)."""
    cluster = LocalCluster(directory).start()
    try:
        kube = cluster.api_client()
        nodes = generate_nodes(description)
        create_nodes(kube, nodes, FAKE_NODE_LABEL)
        wait_nodes_settled(kube, [n["metadata"]["name"] for n in nodes])
        apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "toposched-system"}}])
        apply_objects(kube, load_documents(QUEUES))
        if before_toposched is not None:
            before_toposched(cluster)
        config_file = None
        if kueue_config is not None:
            config_file = directory / "kueue-config.yaml"
            config_file.write_text(yaml.safe_dump({"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                                   "kind": "Configuration", **kueue_config}))
        start_toposched(cluster, StackPorts.dynamic(), controller_args=controller_args, kueue_config=config_file,
                        kueue_version=kueue_version)
    except BaseException:
        cluster.stop()
        raise
    return Stack(cluster, Api(kube), kube, nodes)


@pytest.fixture(scope="module")
def stack_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Stack]]:
    started: list[Stack] = []

    def make(description: dict[str, Any], controller_args: tuple[str, ...] = (),
             before_toposched: Callable[[LocalCluster], Any] | None = None,
             kueue_config: dict[str, Any] | None = None, kueue_version: str | None = None) -> Stack:
        stack = start_stack(Path(tmp_path_factory.mktemp("stack")), description, controller_args, before_toposched,
                            kueue_config, kueue_version)
        started.append(stack)
        return stack

    yield make
    for stack in started:
        stack.cluster.stop()
