"""A mixed set behind the real Kueue v0.17.0: one Kueue worker beside one toposched worker.
The manager's AllAtOnce dispatcher copies each Workload to both; the worker where it is
admitted keeps it and the manager deletes the other copy, whichever engine runs there."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.k8s.informer import JOBS, WORKLOADS
from tests.multicluster.conftest import MultiCluster
from tests.multicluster.jobs import JOBSETS, NS, batch_job, condition, jobset, remote_workload, workload_of

# toposched's worker: 2 layer-3 domains of 2 nodes (4 nodes); Kueue's: 1 domain of 3 nodes.
TOPO = {"name": "mk-topo", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2], "nodesPerDomain": 2}
KUEUE = {"name": "mk-kueue", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 3}


@pytest.fixture(scope="module")
def mc(multicluster_factory: Any) -> MultiCluster:
    return multicluster_factory({"kueue": "kueue", "topo": "toposched"}, jobset=True,
                                descriptions={"kueue": KUEUE, "topo": TOPO})


def admitted_on(mc: MultiCluster, kind: str, name: str) -> tuple[str, str]:
    """Wait until the manager's Workload of ``kind``/``name`` is admitted; (its name, its worker)."""
    wl = mc.manager.wait(lambda: (w := workload_of(mc.manager.api, kind, name)) and condition(w, "Admitted") and w,
                         timeout_s=120, what=f"manager Workload of {kind} {name} admitted")
    return wl["metadata"]["name"], wl["status"]["clusterName"]


def the_loser_is_gone(mc: MultiCluster, wl_name: str, winner: str) -> None:
    for name, stack in mc.workers.items():
        if name != winner:
            stack.wait(lambda s=stack: remote_workload(s.api, wl_name) is None, timeout_s=60,
                       what=f"losing copy {wl_name} removed from {name}")


@pytest.mark.parametrize(("job_name", "pods", "topology", "winner"), [
    ("fits-kueue-only", 3, "topology.k8s.aws/network-node-layer-3", "kueue"),  # 3 nodes in one domain
    ("fits-topo-only", 4, "topology.k8s.aws/network-node-layer-1", "topo"),  # 4 nodes in all
])
def test_batch_job_goes_where_it_fits_and_the_other_copy_is_removed(mc: MultiCluster, job_name: str, pods: int,
                                                                     topology: str, winner: str) -> None:
    mc.manager.api.create(JOBS, batch_job(job_name, pods, 8, topology), NS)
    wl_name, cluster = admitted_on(mc, "Job", job_name)
    assert cluster == winner
    the_loser_is_gone(mc, wl_name, winner)
    remote = remote_workload(mc.worker(winner).api, wl_name)
    assert condition(remote, "Admitted")
    mc.worker(winner).wait(lambda: mc.worker(winner).api.get(JOBS, job_name, NS), what="remote Job")
    mc.manager.api.delete(JOBS, job_name, NS, propagationPolicy="Background")
    mc.worker(winner).wait(lambda: remote_workload(mc.worker(winner).api, wl_name) is None, timeout_s=90,
                           what="remote Workload removed after the manager's Job is deleted")


def test_jobset_is_dispatched_to_the_toposched_worker(mc: MultiCluster) -> None:
    # 4 nodes in one layer-1 domain: only toposched's worker has them
    mc.manager.api.create(JOBSETS, jobset("mk-jobset", 2, 2, 8, "topology.k8s.aws/network-node-layer-1"), NS)
    wl_name, cluster = admitted_on(mc, "JobSet", "mk-jobset")
    assert cluster == "topo"
    topo = mc.worker("topo")
    remote = remote_workload(topo.api, wl_name)
    assert all(a.get("topologyAssignment") for a in remote["status"]["admission"]["podSetAssignments"])
    topo.wait(lambda: topo.api.get(JOBSETS, "mk-jobset", NS), what="remote JobSet")
    adopted = topo.wait(lambda: workload_of(topo.api, "JobSet", "mk-jobset"), what="the copy owned by the JobSet")
    assert adopted["metadata"]["name"] == wl_name  # adopted, not a second Workload
    assert [w["metadata"]["name"] for w in topo.api.list(WORKLOADS, NS)["items"]
            if w["metadata"]["name"].startswith("jobset-mk-jobset-")] == [wl_name]
    the_loser_is_gone(mc, wl_name, "topo")

