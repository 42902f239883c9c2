#!/usr/bin/env python3
"""gRPC API benchmark: ``Place`` latency over loopback gRPC vs the same call in process.

A fake HyperPod cluster of N nodes (8 GPUs each, 3 network layers: 16 nodes per layer-3,
8 layer-3 per layer-2) is put in a StaticEngine snapshot served by the real server
(scheduler.api.server) on 127.0.0.1. Each request places one Job (manifest form, required
layer-3, 8 pods x 8 GPUs, greedy unless --solver) on the live snapshot tree; the in-process
figure is ``scheduler.adapter.placement`` on the same tree — the code the servicer runs — so the
difference is gRPC + request parsing + response building. Requests are bounded (--requests).

    python scripts/bench/api.py                       # 10,000 nodes, 200 requests
    python scripts/bench/api.py --nodes 1000 --requests 100 --solver cpsat

Prints figures only; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import grpc  # noqa: E402
import yaml  # noqa: E402

from scheduler.adapter.placement import compute_placement, to_json  # noqa: E402
from scheduler.api.engine import EngineSnapshot, StaticEngine  # noqa: E402
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb  # noqa: E402
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc  # noqa: E402
from scheduler.api.server import serve  # noqa: E402
from scheduler.core.workload import workload_from_job  # noqa: E402
from scripts.bench.percentiles import percentile  # noqa: E402

L = "topology.k8s.aws/network-node-layer-{}"


def cluster(n: int) -> list[dict[str, object]]:
    nodes = []
    for i in range(n):
        l3, l2 = i // 16, i // (16 * 8)
        name = f"ip-10-{i // 65536}-{(i // 256) % 256}-{i % 256}"
        nodes.append({"kind": "Node", "metadata": {"name": name, "labels": {
            L.format(1): f"nn-{l2 // 16}", L.format(2): f"nn-{l2}", L.format(3): f"nn-{l3}",
            "kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})
    return nodes


JOB = {
    "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bench", "namespace": "default"},
    "spec": {"parallelism": 8, "completions": 8, "template": {
        "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": L.format(3)}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}}}]}}},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--solver", choices=("greedy", "cpsat", "auto"), default="greedy")
    parser.add_argument("--budget-ms", type=int, default=100)
    args = parser.parse_args()

    t0 = time.perf_counter()
    snap = EngineSnapshot(nodes=cluster(args.nodes), source="bench")
    tree = snap.tree()
    build_s = time.perf_counter() - t0
    workload = workload_from_job(JOB)
    manifest = yaml.safe_dump(JOB).encode()

    inproc = []
    for _ in range(args.requests):
        t = time.perf_counter()
        doc = to_json(tree, compute_placement(tree, workload, args.solver, args.budget_ms))
        inproc.append((time.perf_counter() - t) * 1000)
    assert doc["fits"]

    server = serve(StaticEngine(snap), port=0, max_workers=4)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = placement_pb2_grpc.PlacementStub(channel)
    solver = {"greedy": pb.SOLVER_GREEDY, "cpsat": pb.SOLVER_CPSAT, "auto": pb.SOLVER_AUTO}[args.solver]
    request = pb.PlaceRequest(workload=pb.WorkloadInput(manifest=manifest), solver=solver,
                              time_budget_ms=args.budget_ms)
    for _ in range(5):  # warm the channel
        stub.Place(request, timeout=30)
    remote = []
    try:
        for _ in range(args.requests):
            t = time.perf_counter()
            resp = stub.Place(request, timeout=30)
            remote.append((time.perf_counter() - t) * 1000)
        assert resp.fits
    finally:
        channel.close()
        server.stop(0.5)

    print(f"Place, {args.nodes:,} nodes, {args.requests} requests, solver {args.solver} "
          f"(snapshot tree built once in {build_s:.2f} s)")
    for label, values in (("in-process", inproc), ("gRPC loopback", remote)):
        print(f"  {label:14s} p50 {percentile(values, 0.5):7.2f} ms   p99 {percentile(values, 0.99):7.2f} ms   "
              f"mean {statistics.fmean(values):7.2f} ms")
    print(f"  ratio gRPC/in-process: p50 {percentile(remote, 0.5) / percentile(inproc, 0.5):.2f}x   "
          f"p99 {percentile(remote, 0.99) / percentile(inproc, 0.99):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
