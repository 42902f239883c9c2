"""Issue 14 item 6: no unprotected non-loopback gRPC, bounded budgets and Simulate sizes."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from scheduler.api import limits
from scheduler.api.engine import StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.api.server import ApiServer
from scheduler.cli import main
from scheduler.commands.controller import check_grpc_args
from scheduler.errors import UserError
from tests.unit.http.hostile import wait_until

from .conftest import DATA

KQ = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
ONE_DOMAIN = {"name": "sim", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1], "nodesPerDomain": 2}
QUEUES = [
    {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "p5"}, "spec": {}},
    {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "p5", "resources": [{"name": GPU, "nominalQuota": "16"}]}]}]}},
    {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "team"},
     "spec": {"clusterQueue": "cq"}},
]


def status_of(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()  # type: ignore[attr-defined]


def simulate(stub: Any, jobs: list[dict[str, Any]], **fields: Any) -> list[Any]:
    return list(stub.Simulate(pb.SimulateRequest(
        cluster=yaml.safe_dump(ONE_DOMAIN).encode(), queues=yaml.safe_dump_all(QUEUES).encode(),
        trace=yaml.safe_dump({"jobs": jobs}).encode(), solver=pb.SOLVER_GREEDY, **fields), timeout=30))


def sim_job(i: int, at: float = 0, duration: float = 10) -> dict[str, Any]:
    return {"at": at, "namespace": "team", "queue": "q", "name": f"j{i}", "pods": 1, "gpusPerPod": 8,
            "duration": duration}


# ---------------------------------------------------------------------------- bind protection

@pytest.mark.parametrize("bind", ["127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"])
def test_loopback_needs_no_protection(bind: str) -> None:
    assert limits.unprotected_bind_error(bind, tls=False, token=False) is None


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "10.0.0.5", "toposched-controller.svc", ""])
def test_other_addresses_need_tls_or_a_token(bind: str) -> None:
    refusal = limits.unprotected_bind_error(bind, tls=False, token=False)
    assert refusal is not None and "\n" not in refusal
    assert "--grpc-tls-cert" in refusal and "--grpc-tls-key" in refusal and "--grpc-token-file" in refusal
    assert limits.unprotected_bind_error(bind, tls=True, token=False) is None
    assert limits.unprotected_bind_error(bind, tls=False, token=True) is None


def test_api_server_refuses_an_unprotected_public_bind() -> None:
    with pytest.raises(UserError) as info:
        ApiServer(StaticEngine(None), bind="0.0.0.0", port=0)
    assert info.value.exit_code == 2 and "without TLS or a token" in str(info.value)


def test_api_server_serves_a_public_bind_with_a_token() -> None:
    server = ApiServer(StaticEngine(None), bind="0.0.0.0", port=0, token="s3cret").start()
    try:
        assert server.port and server.token_required
    finally:
        server.stop(0.1)


def test_controller_exits_2_with_one_line_before_touching_a_cluster(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    # The kubeconfig does not exist: reaching the cluster would fail differently (exit 1 or a traceback).
    code = main(["controller", "--kubeconfig", str(tmp_path / "absent"), "--grpc-bind", "0.0.0.0"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("toposched controller: refusing to serve the gRPC API on 0.0.0.0")
    assert "--grpc-tls-cert" in err and "--grpc-token-file" in err


@pytest.mark.parametrize("flags, message", [
    (["--grpc-max-connections-per-client", "0"],
     "--grpc-max-connections-per-client must be between 1 and --grpc-max-connections (512), got 0"),
    (["--grpc-max-connections", "16", "--grpc-max-connections-per-client", "32"],
     "--grpc-max-connections-per-client must be between 1 and --grpc-max-connections (16), got 32"),
    (["--grpc-max-connections", "0"], "--grpc-max-connections must be at least 1, got 0"),
])
def test_controller_refuses_connection_caps_that_cannot_work(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                             flags: list[str], message: str) -> None:
    code = main(["controller", "--kubeconfig", str(tmp_path / "absent"), *flags])
    assert code == 2
    assert capsys.readouterr().err == f"toposched controller: {message}\n"


def test_controller_with_the_api_off_is_not_refused(tmp_path: Path) -> None:
    args = argparse.Namespace(grpc_port=0, grpc_bind="0.0.0.0", grpc_tls_cert=None, grpc_tls_key=None,
                              grpc_client_ca=None, grpc_token_file=None, grpc_max_connections=512,
                              grpc_max_connections_per_client=64)
    check_grpc_args(args)  # --grpc-port 0: nothing is served
    args.grpc_port, args.grpc_token_file = 50051, tmp_path / "token"
    check_grpc_args(args)


# ---------------------------------------------------------------------------- time budgets

def test_place_budget_over_the_cap_is_invalid_argument(stub: Any) -> None:
    request = pb.PlaceRequest(workload=pb.WorkloadInput(manifest=(DATA / "job-required-l3.yaml").read_bytes()),
                              time_budget_ms=limits.MAX_TIME_BUDGET_MS + 1)
    code, details = status_of(lambda: stub.Place(request, timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith(f"time_budget_ms: at most {limits.MAX_TIME_BUDGET_MS} (10 s")
    request.time_budget_ms = limits.MAX_TIME_BUDGET_MS
    assert stub.Place(request, timeout=30).fits


def test_effective_budget_rules() -> None:
    assert limits.effective_budget_ms(0, 100, None, 0.02) == 100
    assert limits.effective_budget_ms(20_000, 100, 0.6, 0.02) == 580  # the deadline keeps the work under the cap
    with pytest.raises(limits.LimitExceeded):
        limits.effective_budget_ms(20_000, 100, 60.0, 0.02)
    assert limits.explain_budget_s(60.0, None, 0.02) == limits.MAX_TIME_BUDGET_MS / 1000
    assert limits.explain_budget_s(0.1, 0.05, 0.02) == pytest.approx(0.03)


# ---------------------------------------------------------------------------- Simulate sizes

def test_simulate_within_the_limits_runs(stub: Any) -> None:
    events = simulate(stub, [sim_job(0), sim_job(1, at=5)])
    assert events[-1].summary.finished == 2


@pytest.mark.parametrize("fields, message", [
    ({"time_budget_ms": limits.MAX_SIMULATE_TIME_BUDGET_MS + 1}, "time_budget_ms: at most 1000"),
    ({"horizon_s": limits.MAX_SIMULATE_SECONDS * 2}, "horizon_s: at most 2592000"),
])
def test_simulate_request_over_a_limit_is_invalid_argument(stub: Any, fields: dict[str, Any], message: str) -> None:
    code, details = status_of(lambda: simulate(stub, [sim_job(0)], **fields))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(message), details


def test_simulate_virtual_time_is_bounded(stub: Any) -> None:
    code, details = status_of(lambda: simulate(stub, [sim_job(0), sim_job(1, at=limits.MAX_SIMULATE_SECONDS + 1)]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("trace.jobs[1].at: at most 2592000")
    code, details = status_of(lambda: simulate(stub, [sim_job(0, duration=1e9)]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("trace.jobs[0].duration")


def test_simulate_too_many_jobs_is_resource_exhausted(stub: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_SIMULATE_JOBS", 3)  # the real limit's trace would be slow to build
    code, details = status_of(lambda: simulate(stub, [sim_job(i) for i in range(4)]))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert details.startswith("trace.jobs: at most 3 entries per Simulate call, got 4")


def test_simulate_too_many_nodes_is_resource_exhausted(stub: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_SIMULATE_NODES", 1)
    code, details = status_of(lambda: simulate(stub, [sim_job(0)]))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and details.startswith("cluster: at most 1 nodes"), details


# ---------------------------------------------------------------------------- Simulate stops with its call

def _simulations_running() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "simulate" and t.is_alive())


def _long_simulation(stub: Any, **kwargs: Any) -> Any:
    """500 jobs queued for one 2-node domain: about a minute of simulating here when left alone."""
    jobs = [sim_job(i, duration=100) for i in range(500)]
    return stub.Simulate(pb.SimulateRequest(
        cluster=yaml.safe_dump(ONE_DOMAIN).encode(), queues=yaml.safe_dump_all(QUEUES).encode(),
        trace=yaml.safe_dump({"jobs": jobs}).encode(), solver=pb.SOLVER_GREEDY, progress_every_s=100), **kwargs)


def test_a_cancelled_simulate_stops_simulating(stub: Any) -> None:
    """Issue 30: the simulation went on after the client cancelled, competing with admission."""
    assert wait_until(lambda: _simulations_running() == 0, 30)
    stream = _long_simulation(stub, timeout=120)
    assert next(stream).HasField("progress")
    assert _simulations_running() == 1
    stream.cancel()
    assert wait_until(lambda: _simulations_running() == 0, 5), "the simulation kept running after the cancel"


def test_a_simulate_past_its_deadline_stops_simulating(stub: Any) -> None:
    assert wait_until(lambda: _simulations_running() == 0, 30)
    code, _ = status_of(lambda: list(_long_simulation(stub, timeout=2)))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert wait_until(lambda: _simulations_running() == 0, 5), "the simulation kept running past the deadline"
