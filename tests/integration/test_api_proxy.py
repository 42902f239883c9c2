"""Every command that talks to the API server honours HTTPS_PROXY and NO_PROXY as kubectl does
(the Kubernetes Python client 35.0.0 reads NO_PROXY and then resets it): against the real local
control plane, with a proxy that fails when used and with a CONNECT proxy that counts tunnels."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler import cli

HOST = "kube.example.test"  # not resolvable: reachable only through the proxy


class _Tunnel(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream_port: int) -> None:
        super().__init__(("127.0.0.1", 0), _Connect)
        self.upstream_port = upstream_port
        self.connects: list[str] = []


class _Connect(socketserver.StreamRequestHandler):
    """CONNECT host:port -> a tunnel to 127.0.0.1:<the API server's port>, counted."""

    server: _Tunnel

    def handle(self) -> None:
        line = self.rfile.readline().decode()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        method, target, _ = line.split(" ", 2)
        self.server.connects.append(target)
        if method != "CONNECT":
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            return
        upstream = socket.create_connection(("127.0.0.1", self.server.upstream_port))
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        back = threading.Thread(target=pipe, args=(upstream, self.connection), daemon=True)
        back.start()
        pipe(self.connection, upstream)
        back.join(timeout=30)
        upstream.close()


@pytest.fixture
def tunnel(local_cluster: Any) -> Iterator[_Tunnel]:
    port = int(str(local_cluster.server).rsplit(":", 1)[1])
    server = _Tunnel(port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(monkeypatch: pytest.MonkeyPatch, https_proxy: str, no_proxy: str | None) -> None:
    for name in ("https_proxy", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", https_proxy)
    if no_proxy is not None:
        monkeypatch.setenv("NO_PROXY", no_proxy)


def _named_kubeconfig(local_cluster: Any, tmp_path: Path) -> Path:
    """The cluster's kubeconfig with the server under a name only the proxy resolves (the TLS
    name stays one the serving certificate carries)."""
    doc = yaml.safe_load(Path(local_cluster.kubeconfig).read_text())
    port = str(local_cluster.server).rsplit(":", 1)[1]
    for entry in doc["clusters"]:
        entry["cluster"]["server"] = f"https://{HOST}:{port}"
        entry["cluster"]["tls-server-name"] = "localhost"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_no_proxy_covering_the_api_server_goes_direct(
        local_cluster: Any, namespace: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _env(monkeypatch, f"http://127.0.0.1:{_closed_port()}", "127.0.0.1,.svc")
    assert cli.main(["explain", f"{namespace}/nope", "--kubeconfig", str(local_cluster.kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert f"no Job or Workload 'nope' in namespace '{namespace}'" in err, err  # the API server answered


def test_https_proxy_is_used_unless_no_proxy_names_the_server(
        local_cluster: Any, namespace: str, tunnel: _Tunnel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = str(_named_kubeconfig(local_cluster, tmp_path))
    port = str(local_cluster.server).rsplit(":", 1)[1]
    _env(monkeypatch, f"http://127.0.0.1:{tunnel.server_address[1]}", None)
    assert cli.main(["explain", f"{namespace}/nope", "--kubeconfig", kubeconfig]) == 1
    assert f"no Job or Workload 'nope' in namespace '{namespace}'" in capsys.readouterr().err
    assert tunnel.connects and set(tunnel.connects) == {f"{HOST}:{port}"}
    # `toposched topology --kubeconfig` builds its client apart: the same rule
    before = len(tunnel.connects)
    out = str(tmp_path / "t.json")
    cli.main(["topology", "--kubeconfig", kubeconfig, "--format", "json", "-o", out])
    assert len(tunnel.connects) > before
    assert "proxy" not in capsys.readouterr().err  # it read the cluster (whatever its nodes)
    # NO_PROXY names the server's domain: no tunnel (and the name does not resolve: exit 1)
    tunnel.connects.clear()
    _env(monkeypatch, f"http://127.0.0.1:{tunnel.server_address[1]}", "example.test")
    assert cli.main(["explain", f"{namespace}/nope", "--kubeconfig", kubeconfig]) == 1
    assert tunnel.connects == []
