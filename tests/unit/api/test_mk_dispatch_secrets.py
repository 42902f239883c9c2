"""A worker's credentials Secret is read each pass (issue 43): a rotated Secret takes effect
without a restart, and one that no longer parses leaves that worker unusable with one log line
naming the Secret and the fault, never the others. Real toposched gRPC workers on loopback, the
manager in the in-memory API."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator

import pytest

from scheduler.adapter.mk_dispatch import ENDPOINT_ANNOTATION, SECRET_ANNOTATION
from scheduler.api.dispatch_workers import SECRETS, Channel
from scheduler.api.dispatcher import MULTIKUEUE_CLUSTERS
from scheduler.api.engine import EngineSnapshot, StaticEngine
from scheduler.api.server import ApiServer, serve
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import WORKLOADS
from tests.unit.api.test_mk_dispatcher import _dispatcher, _manager, _nodes, _workload

NS = "toposched-system"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def guarded() -> Iterator[dict[str, ApiServer]]:
    """Two workers that check a bearer token: big-rack (one rack of 4) wants "new-token"."""
    servers = {"small-racks": serve(StaticEngine(EngineSnapshot(nodes=_nodes({"ra": 2, "rb": 2}))),
                                    bind="127.0.0.1", port=0, max_workers=4, token="small-token"),
               "big-rack": serve(StaticEngine(EngineSnapshot(nodes=_nodes({"rc": 4}))),
                                 bind="127.0.0.1", port=0, max_workers=4, token="new-token")}
    try:
        yield servers
    finally:
        for srv in servers.values():
            srv.stop(0.5)


def _with_secrets(workers: dict[str, ApiServer], tokens: dict[str, dict[str, str]]) -> FakeApi:
    api = _manager(workers, tuple(workers))
    for name, data in tokens.items():
        api.create(SECRETS, {"metadata": {"name": f"{name}-grpc", "namespace": NS}, "data": data}, NS)
        api.merge_patch(MULTIKUEUE_CLUSTERS, name, {"metadata": {"annotations": {
            ENDPOINT_ANNOTATION: f"127.0.0.1:{workers[name].port}", SECRET_ANNOTATION: f"{name}-grpc"}}})
    return api


def test_a_rotated_token_takes_effect_at_the_next_pass(guarded: dict[str, ApiServer]) -> None:
    api = _with_secrets(guarded, {"small-racks": {"token": _b64("small-token")},
                                  "big-rack": {"token": _b64("old-token")}})
    api.create(WORKLOADS, _workload("three", 3))
    now = [0.0]
    dispatcher = _dispatcher(api, now)
    # big-rack refuses the old token: only small-racks answers (it fits there, over two racks)
    assert dispatcher.run_once() == {"team-a/three": ("small-racks",)}
    api.merge_patch(SECRETS, "big-rack-grpc", {"data": {"token": _b64("new-token")}}, NS)
    api.create(WORKLOADS, _workload("four", 3))
    # the same dispatcher, no restart: big-rack answers with the rotated token
    assert dispatcher.run_once()["team-a/four"] == ("big-rack",)


def test_a_secret_that_no_longer_parses_leaves_only_its_worker_unusable(
        guarded: dict[str, ApiServer], caplog: pytest.LogCaptureFixture) -> None:
    api = _with_secrets(guarded, {"small-racks": {"token": _b64("small-token")},
                                  "big-rack": {"token": _b64("new-token")}})
    api.merge_patch(SECRETS, "big-rack-grpc", {"data": {"token": "not base64!"}}, NS)
    api.create(WORKLOADS, _workload("three", 3))
    now = [0.0]
    dispatcher = _dispatcher(api, now)
    with caplog.at_level(logging.WARNING, logger="scheduler.api.dispatch_workers"):
        assert dispatcher.run_once() == {"team-a/three": ("small-racks",)}
        api.create(WORKLOADS, _workload("again", 1))
        dispatcher.run_once()
    faults = [r.getMessage() for r in caplog.records if "big-rack" in r.getMessage()]
    assert faults == [f"worker big-rack: unusable: Secret {NS}/big-rack-grpc: data[token]: not base64; "
                      "write the value base64-encoded under data (or as text under stringData)"]


@pytest.mark.parametrize(("data", "fault"), [
    ({"ca.crt": _b64("not a certificate")}, "data[ca.crt]: not PEM certificates"),
    ({"tls.crt": _b64("x")}, "data[tls.key]: missing; mTLS needs both tls.crt and tls.key, or neither"),
    ({"token": _b64("two words")}, "data[token]: must be a bearer token of printable ASCII without spaces"),
])
def test_an_unusable_secret_names_the_key_and_the_fix(data: dict[str, str], fault: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    from scheduler.adapter.mk_dispatch import WorkerEndpoint
    from scheduler.api.dispatch_workers import make_worker

    api = FakeApi()
    api.create(SECRETS, {"metadata": {"name": "w-grpc", "namespace": NS}, "data": data}, NS)
    conns: dict[str, Channel] = {}
    with caplog.at_level(logging.WARNING, logger="scheduler.api.dispatch_workers"):
        assert make_worker(api, NS, conns, WorkerEndpoint("w", "127.0.0.1:1", "w-grpc")) is None
    assert f"Secret {NS}/w-grpc: {fault}" in caplog.text


