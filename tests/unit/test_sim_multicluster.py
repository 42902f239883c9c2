"""MultiKueue in the simulator (issue 43 item 3): one stream, three workers, Kueue's two
dispatchers and toposched's; first admission wins and the other copies are withdrawn."""

from __future__ import annotations

import pytest

from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, WorkloadSpec
from scheduler.sim.model import GPU, SimJob
from scheduler.sim.multicluster import MultiClusterSim, WorkerSpec, outcome, worker_queue_objects
from scheduler.sim.scenario import world_from_objects

L3 = "topology.k8s.aws/network-node-layer-3"



def _worker(name: str, racks: int, per_rack: int, local: list[SimJob] | None = None) -> WorkerSpec:
    desc = {"name": name, "instanceType": "ml.p5.48xlarge", "layers": [1, 1, racks], "nodesPerDomain": per_rack}
    queues = worker_queue_objects(racks * per_rack * 8, ("team",))
    return WorkerSpec(name, world_from_objects(desc, queues), local or [])


def _job(i: int, pods: int, at: float, duration: float = 600.0) -> SimJob:
    topo = TopologyRequest(preferred=L3) if pods > 1 else None
    spec = WorkloadSpec("team", f"job-{i}", (PodSetSpec("main", pods, {GPU: 8}, topo),), uid=f"u{i}",
                        queue_name="q", created_at=at)
    return SimJob(spec, duration, at)


def _workers() -> list[WorkerSpec]:
    # the first worker has the most GPUs but racks of two; the third one rack of four
    return [_worker("a-many-small", 4, 2), _worker("b-mid", 2, 3), _worker("c-one-rack", 1, 4)]


STREAM = [_job(0, 4, 0.0), _job(1, 1, 10.0), _job(2, 3, 20.0)]


@pytest.mark.parametrize(("dispatcher", "copies"), [("all-at-once", 3.0), ("incremental", 3.0), ("toposched", 1.0)])
def test_each_job_is_admitted_once_and_the_losing_copies_are_gone(dispatcher: str, copies: float) -> None:
    sim = MultiClusterSim(_workers(), STREAM, dispatcher)
    routed = sim.run()
    assert all(r.cluster is not None for r in routed)
    got = outcome(routed, L3)
    assert got["copies_per_job"] == copies
    for name, worker in sim.sims.items():
        # a withdrawn copy holds nothing: only the jobs this worker won are there
        won = {r.job.key for r in routed if r.cluster == name}
        assert set(worker.cluster.admitted) <= won and not worker.cluster.pending


def test_toposched_places_the_four_node_job_in_one_rack_where_kueue_does_not() -> None:
    kueue = {r.job.key: r for r in MultiClusterSim(_workers(), STREAM, "all-at-once").run()}
    topo = {r.job.key: r for r in MultiClusterSim(_workers(), STREAM, "toposched").run()}
    # all at once: every worker could admit at t=0, the first in order wins (two racks of two)
    assert (kueue["team/job-0"].cluster, kueue["team/job-0"].domains[L3]) == ("a-many-small", 2)
    assert (topo["team/job-0"].cluster, topo["team/job-0"].domains[L3]) == ("c-one-rack", 1)
    assert topo["team/job-2"].domains[L3] == 1


def test_incremental_widens_after_the_round_when_the_first_workers_cannot_admit() -> None:
    workers = [_worker(f"w{i}", 1, 1) for i in range(5)]
    # four 8-GPU workers are busy for an hour with local load; the stream job fits on any idle one
    workers = [WorkerSpec(w.name, w.world, [_job(100 + i, 1, 0.0, 3600.0)] if i < 4 else [])
               for i, w in enumerate(workers)]
    routed = MultiClusterSim(workers, [_job(0, 1, 1.0)], "incremental", round_timeout_s=300.0).run()
    r = routed[0]
    assert r.copies == ["w0", "w1", "w2", "w3", "w4"] and r.cluster == "w4"
    assert r.admitted_at == pytest.approx(1.0 + 300.0, abs=2.5)


def test_a_workers_answer_carries_its_own_backlog_not_the_managers_copies() -> None:
    # issue 43: the worker's own second job waits behind its first; the stream's copy waits too
    local = [_job(100, 2, 0.0, duration=3600.0), _job(101, 2, 0.0)]
    sim = MultiClusterSim([_worker("a-one-rack", 1, 2, local)], [_job(0, 2, 0.0)], "toposched")
    sim.run(stop=lambda: True)
    pending = set(sim.sims["a-one-rack"].cluster.pending)
    assert pending == {"team/job-101", "team/job-0"}
    assert sim._answer("a-one-rack", _job(1, 1, 0.0)).backlog == 16  # job-101's GPUs, not the copy's
