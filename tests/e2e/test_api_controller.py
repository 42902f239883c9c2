"""The gRPC door of a running controller, against the real control plane: the same engine
(the controller's caches) answers GetTopology, Place, Explain and streams its decisions."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import grpc
import pytest
import yaml

from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc as pb_grpc
from scheduler.devcluster.binaries import repo_root
from scheduler.k8s.informer import JOBS
from tests.e2e.conftest import Stack

NS = "hyperpod-ns-team-a"
CLUSTER = {"name": "e2e-api", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


def grpc_target(stack: Stack) -> str:
    argv = list(stack.cluster.state.processes["toposched-controller"].argv)
    return f"127.0.0.1:{argv[argv.index('--grpc-port') + 1]}"


def test_get_topology_and_place_read_the_live_cluster(stack: Stack) -> None:
    target = grpc_target(stack)
    with grpc.insecure_channel(target) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = pb_grpc.PlacementStub(channel)
        topo = stub.GetTopology(pb.GetTopologyRequest(), timeout=30)
        assert topo.totals.nodes == 16 and topo.totals.healthy == 16
        manifest = (repo_root() / "examples" / "jobs" / "hyperpod-required-layer3.yaml").read_bytes()
        placed = stub.Place(pb.PlaceRequest(workload=pb.WorkloadInput(manifest=manifest)), timeout=30)
        assert placed.fits
    # The CLI's --server mode gives the same answer as the RPC.
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "place", "--server", target, "--workload",
                           str(repo_root() / "examples" / "jobs" / "hyperpod-required-layer3.yaml"),
                           "--output", "json"], capture_output=True, text=True, check=False, cwd=repo_root())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["fits"] is True and sum(a["count"] for a in out["podSets"][0]["assignments"]) == 10
    assert len(out["podSets"][0]["domains"]["topology.k8s.aws/network-node-layer-3"]) == 1


def test_watch_decisions_streams_an_admission_and_explain_knows_the_job(stack: Stack) -> None:
    target = grpc_target(stack)
    seen: list[Any] = []
    got = threading.Event()
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.PlacementStub(channel)
        stream = stub.WatchDecisions(pb.WatchDecisionsRequest(namespace=NS), timeout=90)

        def read() -> None:
            try:
                for decision in stream:
                    seen.append(decision)
                    if "admit" in pb.DecisionKind.Name(decision.kind).lower():
                        got.set()
                        return
            except grpc.RpcError:
                return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        job = yaml.safe_load((repo_root() / "examples" / "jobs" / "hyperpod-required-layer3.yaml").read_text())
        stack.api.create(JOBS, job, NS)
        assert got.wait(60), f"no admission streamed; saw {[pb.DecisionKind.Name(d.kind) for d in seen]}"
        stream.cancel()
        explained = stub.Explain(pb.ExplainRequest(namespace=NS, name="test-tas-job"), timeout=30)
        assert explained.admitted
    stack.api.delete(JOBS, "test-tas-job", NS, propagationPolicy="Background")
