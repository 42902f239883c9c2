"""Two or more control planes for MultiKueue end to end: a manager with the real Kueue v0.17.0
(MultiKueue configured: Configuration, ``kueue.x-k8s.io/multikueue`` AdmissionCheck,
MultiKueueConfig, one MultiKueueCluster per worker with a kubeconfig Secret) and N workers,
each running toposched (the stack of tests/e2e/conftest.py) or Kueue v0.17.0.

The fixture ``multicluster_factory`` (module scope) gives ``make(workers, description=..., jobset=...)``:
``workers`` maps a worker's name to ``"toposched"`` or ``"kueue"`` (the order is the
MultiKueueConfig's). All planes start in parallel; every process is tied to pytest
(tests/conftest.py) and stopped, by pid, at the end of the module. Returns a :class:`MultiCluster`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scheduler.core.fakecluster import generate_nodes
from scheduler.devcluster.apply import apply_objects, create_nodes, load_documents, wait_nodes_settled
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, LocalCluster
from scheduler.devcluster.jobset import start_jobset
from scheduler.devcluster.kueue import KueueCluster, start_kueue
from scheduler.devcluster.multikueue import (
    MANAGER_FEATURE_GATES,
    MANAGER_OVERLAY,
    manager_identity,
    register_workers,
    with_admission_check,
)
from scheduler.k8s.informer import Api
from tests.e2e.conftest import QUEUES, Stack, start_stack

WORKER_KINDS = ("toposched", "kueue")
DEFAULT_WORKER = {"name": "mk-worker", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"


@dataclass
class MultiCluster:
    manager: Stack  # Kueue v0.17.0 with MultiKueue; no nodes
    workers: dict[str, Stack]  # by MultiKueueCluster name
    engines: dict[str, str]  # worker name -> "toposched" | "kueue"

    def worker(self, name: str) -> Stack:
        return self.workers[name]


def _integrations(jobset: bool) -> tuple[str, ...]:
    return ("batch/job", JOBSET_FRAMEWORK) if jobset else ("batch/job",)


def start_manager(directory: Path, jobset: bool) -> Stack:
    cluster = KueueCluster(directory, feature_gates=MANAGER_FEATURE_GATES).start()
    try:
        if jobset:
            start_jobset(cluster)  # its controller leaves JobSets managed by MultiKueue alone
        start_kueue(cluster, integrations=_integrations(jobset), config_overlay=MANAGER_OVERLAY)
        kube = cluster.api_client()
    except BaseException:
        cluster.stop()
        raise
    return Stack(cluster, Api(kube), kube, [])


def start_kueue_worker(directory: Path, description: Mapping[str, Any], jobset: bool) -> Stack:
    cluster = KueueCluster(directory).start()
    try:
        kube = cluster.api_client()
        nodes = generate_nodes(dict(description))
        create_nodes(kube, nodes, FAKE_NODE_LABEL)
        wait_nodes_settled(kube, [n["metadata"]["name"] for n in nodes])
        if jobset:
            start_jobset(cluster)
        start_kueue(cluster, integrations=_integrations(jobset))
        apply_objects(kube, load_documents(QUEUES))
    except BaseException:
        cluster.stop()
        raise
    return Stack(cluster, Api(kube), kube, nodes)


def start_toposched_worker(directory: Path, description: Mapping[str, Any], jobset: bool,
                           controller_args: tuple[str, ...] = ()) -> Stack:
    return start_stack(directory, dict(description), controller_args,
                       before_toposched=start_jobset if jobset else None)


def start_multicluster(base: Path, workers: Mapping[str, str], description: Mapping[str, Any] | None = None,
                       jobset: bool = False, descriptions: Mapping[str, Mapping[str, Any]] | None = None,
                       controller_args: tuple[str, ...] = (), started: list[LocalCluster] | None = None
                       ) -> MultiCluster:
    """Start the manager and ``workers`` in parallel and wire them. ``descriptions``: a node
    description per worker (default ``description`` or :data:`DEFAULT_WORKER`);
    ``controller_args``: for toposched workers' controllers. ``started`` collects every plane
    (for the caller to stop, also when this raises)."""
    for name, engine in workers.items():
        if engine not in WORKER_KINDS:
            raise ValueError(f"worker {name}: engine {engine!r} is not one of {WORKER_KINDS}")
    started = started if started is not None else []

    def worker(name: str, engine: str) -> Stack:
        desc = dict((descriptions or {}).get(name) or description or {**DEFAULT_WORKER, "name": name})
        if engine == "kueue":
            stack = start_kueue_worker(base / name, desc, jobset)
        else:
            stack = start_toposched_worker(base / name, desc, jobset, controller_args)
        started.append(stack.cluster)
        return stack

    def manager() -> Stack:
        stack = start_manager(base / "manager", jobset)
        started.append(stack.cluster)
        return stack

    with ThreadPoolExecutor(max_workers=len(workers) + 1) as pool:
        manager_future = pool.submit(manager)
        futures = {name: pool.submit(worker, name, engine) for name, engine in workers.items()}
        stacks = {name: f.result() for name, f in futures.items()}
        manager_stack = manager_future.result()
    register_workers(manager_stack.cluster, {name: manager_identity(s.cluster) for name, s in stacks.items()})
    apply_objects(manager_stack.kube, with_admission_check(load_documents(QUEUES)))
    return MultiCluster(manager_stack, stacks, dict(workers))


@pytest.fixture(scope="module")
def multicluster_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., MultiCluster]]:
    started: list[LocalCluster] = []

    def make(workers: Mapping[str, str], description: Mapping[str, Any] | None = None, jobset: bool = False,
             descriptions: Mapping[str, Mapping[str, Any]] | None = None,
             controller_args: tuple[str, ...] = ()) -> MultiCluster:
        return start_multicluster(Path(tmp_path_factory.mktemp("multicluster")), workers, description, jobset,
                                  descriptions, controller_args, started)

    yield make
    for cluster in started:
        cluster.stop()
