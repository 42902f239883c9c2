"""An in-process gRPC server on loopback over a snapshot of plain data (tests/data/place)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from scheduler.api.engine import EngineSnapshot, StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc
from scheduler.api.server import ApiServer, serve

DATA = Path(__file__).resolve().parents[2] / "data" / "place"
L1, L2, L3 = (f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3))
HOST = "kubernetes.io/hostname"


def load_items(path: Path) -> list[dict[str, Any]]:
    doc = yaml.safe_load(path.read_text())
    return list(doc.get("items") or [doc]) if doc.get("kind") == "List" else [doc]


def job(name: str = "req-l3", namespace: str = "team-a") -> dict[str, Any]:
    obj = yaml.safe_load((DATA / "job-required-l3.yaml").read_text())
    obj["metadata"].update(name=name, namespace=namespace, uid=f"uid-{name}")
    return obj


FLAVOR = {"metadata": {"name": "gpu"}, "spec": {"topologyName": "hyperpod", "nodeLabels": {}}}
PLAIN_FLAVOR = {"metadata": {"name": "cpu"}, "spec": {}}
TOPOLOGY = yaml.safe_load((DATA / "topology.yaml").read_text())


def snapshot(**extra: Any) -> EngineSnapshot:
    kwargs: dict[str, Any] = {"nodes": load_items(DATA / "nodes.yaml"), "jobs": [job()]}
    kwargs.update(extra)
    return EngineSnapshot(**kwargs)


@pytest.fixture
def engine() -> StaticEngine:
    return StaticEngine(snapshot())


@pytest.fixture
def server(engine: StaticEngine) -> Iterator[ApiServer]:
    srv = serve(engine, bind="127.0.0.1", port=0, max_workers=8)
    try:
        yield srv
    finally:
        srv.stop(0.5)


@pytest.fixture
def channel(server: ApiServer) -> Iterator[grpc.Channel]:
    ch = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield ch
    finally:
        ch.close()


@pytest.fixture
def stub(channel: grpc.Channel) -> placement_pb2_grpc.PlacementStub:
    return placement_pb2_grpc.PlacementStub(channel)
