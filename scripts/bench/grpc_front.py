#!/usr/bin/env python3
"""What the gRPC front (scheduler/api/front.py) adds: the same server called through the front's
public port (A) and directly on gRPC's private port behind it (B), in one process, alternating
A and B rounds so that the machine's load falls on both alike.

- ``Place``: a Job (manifest form, required layer-3, 8 pods x 8 GPUs, greedy) on a fake HyperPod
  cluster (scripts/bench/api.py's), one call at a time on a kept channel.
- ``Health.Check``: the smallest call, so the relay's share is the most visible.
- ``WatchDecisions``: one open stream; the time from ``DecisionHub.publish`` to the client
  holding the decision.
- ``GetTopology``: every node of the cluster (a megabyte at 10,000 nodes).
- Raw bytes: 256 MiB sent through a front to a plain TCP sink, against the same sink directly:
  the relay's cost per byte, without gRPC's.

    python scripts/bench/grpc_front.py                    # 1,000 nodes, 6 rounds of 100
    python scripts/bench/grpc_front.py --busy-thread      # with a CPU-bound Python thread running

``--busy-thread`` runs a pure-Python loop next to the server, as the controller's admission cycle
would: every hop then waits for the GIL (switch interval 5 ms), the front's two extra hops
included. Prints figures only; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import grpc  # noqa: E402
import yaml  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

from scheduler.api.engine import EngineSnapshot, StaticEngine  # noqa: E402
from scheduler.api.front import BoundedFront  # noqa: E402
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb  # noqa: E402
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc  # noqa: E402
from scheduler.api.server import serve  # noqa: E402
from scripts.bench.api import JOB, cluster  # noqa: E402
from scripts.bench.percentiles import percentile  # noqa: E402

DECISION = {"metadata": {"namespace": "team-a", "name": "w"}, "status": {"admission": {"clusterQueue": "cq"}}}


def timed(call: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        out.append((time.perf_counter() - t) * 1000)
    return out


def stream_latencies(engine: StaticEngine, stub: placement_pb2_grpc.PlacementStub, n: int) -> list[float]:
    """Publish ``n`` decisions one after another on a fresh stream, each once the last arrived."""
    stream = stub.WatchDecisions(pb.WatchDecisionsRequest(), timeout=600)
    deadline = time.monotonic() + 10
    while engine.hub.subscriber_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        engine.hub.publish("admitted", DECISION, {})
        next(stream)
        out.append((time.perf_counter() - t) * 1000)
    stream.cancel()
    deadline = time.monotonic() + 10
    while engine.hub.subscriber_count() and time.monotonic() < deadline:
        time.sleep(0.001)
    return out


def throughput_mb_s(size: int = 256 << 20) -> dict[str, float]:
    """MB/s of ``size`` bytes sent to a sink that reads until EOF, through a front and directly."""
    sink = socket.create_server(("127.0.0.1", 0))

    def drain() -> None:
        while True:
            conn, _ = sink.accept()
            with conn:
                while conn.recv(1 << 20):
                    pass
                conn.sendall(b"k")

    threading.Thread(target=drain, daemon=True).start()
    front = BoundedFront(("127.0.0.1", 0), max_connections=4, max_per_client=4, first_bytes_timeout_s=5,
                         idle_timeout_s=60)
    front.upstream = sink.getsockname()
    front.start()
    chunk = memoryview(bytearray(1 << 20))
    out = {}
    try:
        for name, port in (("direct", sink.getsockname()[1]), ("front", front.port)) * 2:
            sock = socket.create_connection(("127.0.0.1", port))
            t = time.perf_counter()
            for _ in range(size // len(chunk)):
                sock.sendall(chunk)
            sock.shutdown(socket.SHUT_WR)
            sock.recv(1)  # the sink read everything
            out[name] = size / 1e6 / (time.perf_counter() - t)
            sock.close()
    finally:
        front.close()
        sink.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=100)
    parser.add_argument("--busy-thread", action="store_true")
    args = parser.parse_args()

    engine = StaticEngine(EngineSnapshot(nodes=cluster(args.nodes), source="bench"))
    server = serve(engine, port=0, max_workers=4)
    assert server.front.upstream is not None
    targets = {"front": f"127.0.0.1:{server.port}", "direct": f"127.0.0.1:{server.front.upstream[1]}"}
    channels = {name: grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 256 << 20)])
                for name, target in targets.items()}
    stubs = {name: placement_pb2_grpc.PlacementStub(ch) for name, ch in channels.items()}
    health = {name: health_pb2_grpc.HealthStub(ch) for name, ch in channels.items()}
    place = pb.PlaceRequest(workload=pb.WorkloadInput(manifest=yaml.safe_dump(JOB).encode()), solver=pb.SOLVER_GREEDY)
    topology_bytes = stubs["direct"].GetTopology(pb.GetTopologyRequest(), timeout=60).ByteSize()

    stop = threading.Event()
    if args.busy_thread:
        def spin() -> None:
            x = 0
            while not stop.is_set():
                x += 1
        threading.Thread(target=spin, daemon=True).start()

    kinds: dict[str, Callable[[str], list[float]]] = {
        "Health.Check": lambda name: timed(
            lambda: health[name].Check(health_pb2.HealthCheckRequest(), timeout=30), args.per_round),
        "Place": lambda name: timed(lambda: stubs[name].Place(place, timeout=30), args.per_round),
        "WatchDecisions": lambda name: stream_latencies(engine, stubs[name], args.per_round),
        "GetTopology": lambda name: timed(lambda: stubs[name].GetTopology(pb.GetTopologyRequest(), timeout=60),
                                          max(5, args.per_round // 10)),
    }
    results: dict[str, dict[str, list[float]]] = {kind: {"front": [], "direct": []} for kind in kinds}
    try:
        for kind, run in kinds.items():
            for name in targets:  # warm both channels
                run(name)
            for r in range(args.rounds):
                for name in (("front", "direct") if r % 2 == 0 else ("direct", "front")):
                    results[kind][name].extend(run(name))
        raw = throughput_mb_s()
    finally:
        stop.set()
        for ch in channels.values():
            ch.close()
        server.stop(0.5)

    print(f"gRPC front A/B: {args.nodes:,} nodes, {args.rounds} alternating rounds, "
          f"{'a busy Python thread running' if args.busy_thread else 'no other load in the process'}; "
          f"GetTopology answer {topology_bytes / 1e6:.1f} MB")
    print(f"  {'call':16s} {'direct p50/p99 ms':>20s} {'front p50/p99 ms':>20s} {'added p50 ms':>13s} "
          f"{'p50 ratio':>10s}")
    for kind, by in results.items():
        d, f = by["direct"], by["front"]
        print(f"  {kind:16s} {percentile(d, .5):9.3f} /{percentile(d, .99):8.3f} "
              f"{percentile(f, .5):9.3f} /{percentile(f, .99):8.3f} "
              f"{percentile(f, .5) - percentile(d, .5):13.3f} {percentile(f, .5) / percentile(d, .5):9.2f}x"
              f"   (means {statistics.fmean(d):.3f} / {statistics.fmean(f):.3f}, n={len(d)})")
    print(f"  raw bytes, 256 MiB to a TCP sink: direct {raw['direct']:.0f} MB/s, through a front "
          f"{raw['front']:.0f} MB/s (the second of two runs each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
