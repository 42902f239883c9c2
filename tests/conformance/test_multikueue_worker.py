"""Side by side behind the real Kueue v0.17.0 as a MultiKueue manager: the same batch Job is
dispatched by one manager to a toposched worker and by another to a Kueue v0.17.0 worker (both
workers named ``w``, same nodes and queues). What the manager sees must be the same: its
Workload's conditions (type, status, reason, and the messages that do not carry a time), its
MultiKueue check, ``status.clusterName``, the MultiKueue events, and the job's mirrored status;
and on the worker, one Workload for the job (the manager's copy, owned by the job)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from scheduler.devcluster.controlplane import LocalCluster
from scheduler.k8s.informer import JOBS, PODS, WORKLOADS, Resource
from tests.e2e.conftest import Stack
from tests.multicluster.conftest import MultiCluster, start_multicluster
from tests.multicluster.jobs import FAKE_PHASE, NS, batch_job, condition, workload_of

pytestmark = pytest.mark.cluster
ENGINES = ("toposched", "kueue")
WORKER = {"name": "mk-conformance", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 2}
EVENTS = Resource("", "v1", "events")
TIMES = re.compile(r"\d+(\.\d+)?(ms|s|m)\b")


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, MultiCluster]]:
    started: list[LocalCluster] = []

    def start(engine: str) -> MultiCluster:
        return start_multicluster(Path(tmp_path_factory.mktemp(f"mk-{engine}")), {"w": engine},
                                  descriptions={"w": WORKER}, started=started)

    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {engine: pool.submit(start, engine) for engine in ENGINES}
            yield {engine: f.result() for engine, f in futures.items()}
    finally:
        for cluster in started:
            cluster.stop()


def _pods(stack: Stack, job: str) -> list[dict[str, Any]]:
    return list(stack.api.list(PODS, NS, labelSelector=f"job-name={job}")["items"])


def run_and_observe(mc: MultiCluster, job: str) -> dict[str, Any]:
    manager, worker = mc.manager, mc.worker("w")
    manager.api.create(JOBS, batch_job(job, 2, 8), NS)
    local = manager.wait(lambda: (w := workload_of(manager.api, "Job", job)) and condition(w, "Admitted") and w,
                         timeout_s=120, what=f"{job} admitted on the manager")
    worker.wait(lambda: len([p for p in _pods(worker, job) if (p.get("status") or {}).get("phase") == "Running"])
                == 2, timeout_s=120, what=f"{job}'s pods running on the worker")
    worker_workloads = [w["metadata"]["name"] for w in worker.api.list(WORKLOADS, NS)["items"]
                        if w["metadata"]["name"].startswith(f"job-{job}-")]
    for pod in _pods(worker, job):
        worker.api.merge_patch(PODS, pod["metadata"]["name"], {"metadata": {"labels": {FAKE_PHASE: "Succeeded"}}}, NS)
    name = local["metadata"]["name"]
    done = manager.wait(lambda: (w := workload_of(manager.api, "Job", job)) and condition(w, "Finished") and w,
                        timeout_s=120, what=f"{job} finished on the manager")
    manager_job = manager.wait(lambda: (j := manager.api.get(JOBS, job, NS)) and
                               (j.get("status") or {}).get("succeeded") == 2 and j, what="job status mirrored")
    events = manager.api.list(EVENTS, NS, fieldSelector=f"involvedObject.name={name}")["items"]
    return {
        "conditions": sorted((c["type"], c["status"], c["reason"], TIMES.sub("<t>", c.get("message") or ""))
                             for c in done["status"]["conditions"]),
        "checks": [(c["name"], c["state"], c.get("message")) for c in done["status"].get("admissionChecks") or ()],
        "clusterName": done["status"].get("clusterName"),
        "multikueue_events": sorted({e["message"] for e in events if e.get("reason") == "MultiKueue"}),
        # Known timing difference (docs/multicluster.md): the job mirrored from a Kueue worker
        # carries the Job controller's Suspended=False (it synced the copy while suspended);
        # toposched starts the copy before the Job controller's first sync. Compared without it.
        "job_conditions": sorted((c["type"], c["status"]) for c in manager_job["status"].get("conditions") or ()
                                 if c["type"] != "Suspended"),
        "worker_workloads": worker_workloads == [name],
    }


def test_the_manager_sees_the_same_from_a_toposched_and_a_kueue_worker(pairs: dict[str, MultiCluster]) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {engine: pool.submit(run_and_observe, mc, "mk-same") for engine, mc in pairs.items()}
        seen = {engine: f.result() for engine, f in futures.items()}
    assert seen["toposched"]["worker_workloads"] and seen["kueue"]["worker_workloads"]
    assert seen["toposched"] == seen["kueue"]
