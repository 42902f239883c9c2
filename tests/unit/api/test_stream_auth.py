"""WatchDecisions streaming and cleanup, bearer token, TLS/mTLS, health, reflection, CLI --server."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from scheduler.api.engine import StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc
from scheduler.api.server import ApiServer, TlsConfig, serve
from scheduler.cli import main

from .conftest import DATA, snapshot


def wait_for(pred: Any, timeout: float = 3.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return bool(pred())


def wl(ns: str, name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name,
                         "ownerReferences": [{"controller": True, "kind": "Job", "name": f"job-{name}", "uid": "u"}]},
            "status": {"admission": {"clusterQueue": "cq-a"}}}


# ---------------------------------------------------------------------------- WatchDecisions


def test_watch_decisions_filters_and_cleans_up(engine: StaticEngine, stub: Any) -> None:
    hub = engine.hub
    stream = stub.WatchDecisions(pb.WatchDecisionsRequest(namespace="team-a", kinds=[
        pb.DECISION_KIND_ADMITTED, pb.DECISION_KIND_EVICTED, pb.DECISION_KIND_OTHER]))
    assert wait_for(lambda: hub.subscriber_count() == 1)
    hub.publish("admitted", wl("team-b", "elsewhere"), {})
    hub.publish("finished", wl("team-a", "not-asked"), {"reason": "Succeeded"})
    hub.publish("admitted", wl("team-a", "w1"), {"flavors": {"main": "gpu"}})
    hub.publish("evicted", wl("team-a", "w2"), {"reason": "NodeFailures", "message": "node n-1 failed"})
    hub.publish("hot-swapped-later", wl("team-a", "w3"), {})
    got = [next(stream) for _ in range(3)]
    assert [(d.kind, d.workload) for d in got] == [(pb.DECISION_KIND_ADMITTED, "w1"), (pb.DECISION_KIND_EVICTED, "w2"),
                                                   (pb.DECISION_KIND_OTHER, "w3")]
    first = got[0]
    assert first.namespace == "team-a" and first.job == "job-w1" and first.cluster_queue == "cq-a"
    assert json.loads(first.detail["flavors"]) == {"main": "gpu"} and first.time_unix > 0
    assert got[1].detail == {"reason": "NodeFailures", "message": "node n-1 failed"}
    assert got[2].kind_name == "hot-swapped-later"
    stream.cancel()  # the client goes away mid-stream
    assert wait_for(lambda: hub.subscriber_count() == 0), "subscription leaked after cancel"


def test_watch_decisions_channel_closed_mid_stream(server: ApiServer) -> None:
    hub = server.engine.hub
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stream = placement_pb2_grpc.PlacementStub(channel).WatchDecisions(pb.WatchDecisionsRequest())
    assert wait_for(lambda: hub.subscriber_count() == 1)
    hub.publish("admitted", wl("x", "y"), {})
    assert next(stream).workload == "y"
    channel.close()
    assert wait_for(lambda: hub.subscriber_count() == 0), "subscription leaked after the channel closed"


def test_watch_decisions_deadline_and_invalid_kind(engine: StaticEngine, stub: Any) -> None:
    with pytest.raises(grpc.RpcError) as info:
        list(stub.WatchDecisions(pb.WatchDecisionsRequest(), timeout=0.3))
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
    assert wait_for(lambda: engine.hub.subscriber_count() == 0)
    with pytest.raises(grpc.RpcError) as info:
        list(stub.WatchDecisions(pb.WatchDecisionsRequest(kinds=[pb.DECISION_KIND_UNSPECIFIED])))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert info.value.details().startswith("kinds[0]")  # type: ignore[attr-defined]
    assert engine.hub.subscriber_count() == 0


def test_slow_reader_counts_dropped(engine: StaticEngine) -> None:
    sub = engine.hub.subscribe(maxsize=2)
    for i in range(5):
        engine.hub.publish("admitted", wl("a", f"w{i}"), {})
    assert sub.get(0.1) is not None and sub.get(0.1) is not None
    engine.hub.publish("admitted", wl("a", "late"), {})
    item = sub.get(0.1)
    assert item is not None and item[1]["metadata"]["name"] == "late" and item[4] == 3
    engine.hub.unsubscribe(sub)
    assert engine.hub.subscriber_count() == 0


def test_server_stop_ends_streams(engine: StaticEngine) -> None:
    srv = serve(engine, port=0)
    stub = placement_pb2_grpc.PlacementStub(grpc.insecure_channel(f"127.0.0.1:{srv.port}"))
    stream = stub.WatchDecisions(pb.WatchDecisionsRequest())
    assert wait_for(lambda: engine.hub.subscriber_count() == 1)
    done = threading.Event()
    threading.Thread(target=lambda: (list(stream) if True else None, done.set()), daemon=True).start()
    srv.stop(0.5)
    assert done.wait(3) and engine.hub.subscriber_count() == 0


# ---------------------------------------------------------------------------- auth


def test_bearer_token(engine: StaticEngine) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    srv = serve(engine, port=0, token="s3cret")
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{srv.port}")
        stub = placement_pb2_grpc.PlacementStub(channel)
        req = pb.GetTopologyRequest(omit_nodes=True)
        for metadata, why in (((), "missing"), ((("authorization", "Bearer nope"),), "wrong"),
                              ((("authorization", "s3cret"),), "wrong")):
            with pytest.raises(grpc.RpcError) as info:
                stub.GetTopology(req, metadata=metadata)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
            assert why in info.value.details()  # type: ignore[attr-defined]
        with pytest.raises(grpc.RpcError) as info:
            next(stub.WatchDecisions(pb.WatchDecisionsRequest()))
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        assert engine.hub.subscriber_count() == 0
        assert stub.GetTopology(req, metadata=(("authorization", "Bearer s3cret"),)).totals.nodes == 16
        health = health_pb2_grpc.HealthStub(channel)  # health stays open for probes
        assert health.Check(health_pb2.HealthCheckRequest(service="toposched.v1.Placement")).status == \
            health_pb2.HealthCheckResponse.SERVING
        channel.close()
    finally:
        srv.stop(0.2)


def _cert(subject: str, issuer_key: Any = None, issuer: x509.Name | None = None, ca: bool = False,
          san: str | None = None) -> tuple[bytes, bytes, Any, x509.Name]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
               .not_valid_after(now + dt.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if san:
        import ipaddress

        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                                     x509.IPAddress(ipaddress.ip_address(san))]),
                                        critical=False)
    cert = builder.sign(issuer_key or key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem, key, name


def test_tls_and_mtls(engine: StaticEngine, tmp_path: Path) -> None:
    ca_pem, _, ca_key, ca_name = _cert("test-ca", ca=True)
    srv_pem, srv_key, _, _ = _cert("server", ca_key, ca_name, san="127.0.0.1")
    cli_pem, cli_key, _, _ = _cert("client", ca_key, ca_name)
    files = {}
    for name, data in (("ca", ca_pem), ("srv.crt", srv_pem), ("srv.key", srv_key)):
        files[name] = tmp_path / name
        files[name].write_bytes(data)
    req = pb.GetTopologyRequest(omit_nodes=True)
    srv = serve(engine, port=0, tls=TlsConfig(files["srv.crt"], files["srv.key"]))
    try:
        tls = grpc.secure_channel(f"127.0.0.1:{srv.port}", grpc.ssl_channel_credentials(root_certificates=ca_pem))
        assert placement_pb2_grpc.PlacementStub(tls).GetTopology(req, timeout=5).totals.nodes == 16
        tls.close()
        plain = grpc.insecure_channel(f"127.0.0.1:{srv.port}")
        with pytest.raises(grpc.RpcError) as info:
            placement_pb2_grpc.PlacementStub(plain).GetTopology(req, timeout=2)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        plain.close()
    finally:
        srv.stop(0.2)
    srv = serve(engine, port=0, tls=TlsConfig(files["srv.crt"], files["srv.key"], client_ca_file=files["ca"]))
    try:
        no_cert = grpc.secure_channel(f"127.0.0.1:{srv.port}", grpc.ssl_channel_credentials(root_certificates=ca_pem))
        with pytest.raises(grpc.RpcError):
            placement_pb2_grpc.PlacementStub(no_cert).GetTopology(req, timeout=2)
        no_cert.close()
        creds = grpc.ssl_channel_credentials(root_certificates=ca_pem, private_key=cli_key, certificate_chain=cli_pem)
        mtls = grpc.secure_channel(f"127.0.0.1:{srv.port}", creds)
        assert placement_pb2_grpc.PlacementStub(mtls).GetTopology(req, timeout=5).totals.nodes == 16
        mtls.close()
    finally:
        srv.stop(0.2)


def test_health_and_reflection(engine: StaticEngine) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    srv = serve(engine, port=0, reflection=True)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{srv.port}")
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING
        srv.set_serving(False)
        assert health.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.NOT_SERVING
        from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        answers = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = {s.name for s in next(answers).list_services_response.service}
        assert "toposched.v1.Placement" in names and "grpc.health.v1.Health" in names
        channel.close()
    finally:
        srv.stop(0.2)


# ---------------------------------------------------------------------------- CLI --server


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("workload, output", [("job-required-l3.yaml", "json"), ("job-required-l3.yaml", "text"),
                                              ("job-required-l3-nofit.yaml", "json")])
def test_cli_place_server_same_output(server: ApiServer, capsys: pytest.CaptureFixture[str], workload: str,
                                      output: str) -> None:
    base = ["place", "--workload", str(DATA / workload), "--solver", "greedy", "--output", output]
    offline = _cli(capsys, *base, "--nodes", str(DATA / "nodes.yaml"))
    remote = _cli(capsys, *base, "--server", f"127.0.0.1:{server.port}")
    # the same placement; only the offline answer says it saw no running pods
    if output == "json":
        doc, live = json.loads(offline[1]), json.loads(remote[1])
        assert (doc.pop("emptyCluster"), live.pop("emptyCluster"), live.pop("note")) == (True, False, "")
        assert doc.pop("note").startswith("placed on an empty cluster")
        assert live == doc
    else:
        assert offline[1].rstrip().splitlines()[-1].startswith("note: placed on an empty cluster")
        assert remote[1].rstrip().splitlines() == offline[1].rstrip().splitlines()[:-1]
    assert remote[0] == offline[0] and remote[0] in (0, 1)


def test_cli_place_server_with_nodes_and_no_pods_says_empty_cluster(server: ApiServer,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    base = ["place", "--workload", str(DATA / "job-required-l3.yaml"), "--solver", "greedy", "--output", "json",
            "--server", f"127.0.0.1:{server.port}", "--nodes", str(DATA / "nodes.yaml")]
    _, out, _ = _cli(capsys, *base)
    assert json.loads(out)["emptyCluster"] is True
    _, out, _ = _cli(capsys, *base, "--pods", str(DATA / "pods.yaml"))
    assert json.loads(out)["emptyCluster"] is False


def test_cli_place_server_errors(server: ApiServer, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Job\nmetadata: {name: j}\nspec: {}\n")
    code, out, err = _cli(capsys, "place", "--workload", str(bad), "--server", f"127.0.0.1:{server.port}")
    assert code == 2 and out == "" and f"workload file {bad}" in err and "spec.template" in err
    code, _, err = _cli(capsys, "place", "--workload", str(DATA / "job-required-l3.yaml"), "--flavor", "nope",
                        "--server", f"127.0.0.1:{server.port}")
    assert code == 2 and "no TAS ResourceFlavor named 'nope'" in err
    code, _, err = _cli(capsys, "place", "--workload", str(DATA / "job-required-l3.yaml"))
    assert code == 2 and "--nodes FILE (or --cluster FILE) is required" in err
    code, _, err = _cli(capsys, "place", "--workload", str(DATA / "job-required-l3.yaml"), "--server", "127.0.0.1:1",
                        "--server-timeout", "2")
    assert code == 1 and "cannot reach the engine" in err


@pytest.mark.parametrize("fmt", ["json", "mermaid", "svg"])
def test_cli_topology_server_same_output(server: ApiServer, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    offline = _cli(capsys, "topology", "--nodes", str(DATA / "nodes.yaml"), "--format", fmt)
    remote = _cli(capsys, "topology", "--server", f"127.0.0.1:{server.port}", "--format", fmt)
    assert remote == offline and remote[0] == 0


def test_cli_token_file(engine: StaticEngine, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    srv = serve(engine, port=0, token="tok")
    try:
        target = f"127.0.0.1:{srv.port}"
        code, _, err = _cli(capsys, "topology", "--server", target, "--format", "json")
        assert code == 1 and "refused the call" in err
        token = tmp_path / "token"
        token.write_text("tok\n")
        code, out, _ = _cli(capsys, "topology", "--server", target, "--format", "json", "--server-token-file",
                            str(token))
        assert code == 0 and json.loads(out)["totals"]["nodes"] == 16
    finally:
        srv.stop(0.2)


def test_snapshot_none_topology_precondition(capsys: pytest.CaptureFixture[str]) -> None:
    engine = StaticEngine(None)
    srv = serve(engine, port=0)
    try:
        code, _, err = _cli(capsys, "topology", "--server", f"127.0.0.1:{srv.port}")
        assert code == 2 and "no live snapshot" in err
    finally:
        srv.stop(0.2)
    assert snapshot().tas_flavors() == []
