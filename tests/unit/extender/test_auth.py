"""Who may call the extender (issue 30 item 3): kube-scheduler, by its client certificate, or
any process of the Pod on loopback; nothing else. And bind takes only pods the extender knows."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from scheduler.cli import main
from scheduler.errors import UserError
from scheduler.extender.book import SlotBook
from scheduler.extender.server import Extender, ExtenderHTTPServer
from scheduler.extender.tls import ExtenderTLS, issue_pod_certificates
from tests.unit.extender.serving import serving
from tests.unit.extender.test_logic import ALL, pod


def _client(directory: Path, cert: bool = True) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(directory / "ca.crt"))
    if cert:
        ctx.load_cert_chain(str(directory / "client.crt"), str(directory / "client.key"))
    return ctx


def _filter(port: int, ctx: ssl.SSLContext) -> dict[str, Any]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
    try:
        conn.request("POST", "/filter", json.dumps({"Pod": pod("p"), "NodeNames": ALL}).encode())
        return dict(json.loads(conn.getresponse().read()))
    finally:
        conn.close()


@pytest.fixture(scope="module")
def pod_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("extender-tls")
    issue_pod_certificates(directory)
    return directory


def test_kube_schedulers_client_certificate_is_served(pod_certs: Path) -> None:
    with serving({"a1": 2}, tls=ExtenderTLS.from_dir(pod_certs)) as (httpd, _):
        assert _filter(httpd.port, _client(pod_certs))["NodeNames"] == ["a1"]


def test_a_caller_without_a_client_certificate_is_refused_at_the_handshake(pod_certs: Path) -> None:
    with serving({"a1": 2}, tls=ExtenderTLS.from_dir(pod_certs)) as (httpd, ext):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _filter(httpd.port, _client(pod_certs, cert=False))
        assert httpd.stats.snapshot() == {} and ext.book.stats()["reservations"] == 0


def test_a_certificate_of_another_ca_is_refused(pod_certs: Path, tmp_path: Path) -> None:
    issue_pod_certificates(tmp_path)  # a second Pod's set: its client certificate is not ours
    ctx = _client(pod_certs, cert=False)
    ctx.load_cert_chain(str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
    with serving({"a1": 2}, tls=ExtenderTLS.from_dir(pod_certs)) as (httpd, _):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _filter(httpd.port, ctx)


def test_client_names_narrow_the_accepted_certificates(pod_certs: Path) -> None:
    with serving({"a1": 2}, tls=ExtenderTLS.from_dir(pod_certs, client_names=["someone-else"])) as (httpd, _):
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            _filter(httpd.port, _client(pod_certs))
    with serving({"a1": 2}, tls=ExtenderTLS.from_dir(pod_certs, client_names=["toposched-scheduler"])) as (httpd, _):
        assert _filter(httpd.port, _client(pod_certs))["NodeNames"] == ["a1"]


@pytest.mark.parametrize("bind", ["0.0.0.0", "10.1.2.3", "::", "scheduler.example"])
def test_plain_http_off_loopback_is_refused_before_anything_is_bound(bind: str) -> None:
    with pytest.raises(UserError, match="without client authentication"):
        ExtenderHTTPServer(Extender(SlotBook()), bind, 0)


def test_the_command_refuses_a_non_loopback_bind_without_tls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["extender", "--bind", "0.0.0.0", "--kubeconfig", "/nonexistent"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--tls-dir" in err and "refusing to serve the extender on 0.0.0.0" in err
    assert main(["extender", "--client-name", "x", "--kubeconfig", "/nonexistent"]) == 2


def test_the_help_never_suggests_an_open_bind(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["extender", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    bind_help = help_text.rsplit("--bind BIND", 1)[1].split("--tls-dir DIR", 1)[0]  # the option, not the usage
    assert "0.0.0.0" not in bind_help and "refused without --tls-dir" in bind_help


def _bind(ext: Extender, uid: str = "uid-ghost") -> dict[str, Any]:
    return ext.bind({"PodName": "ghost", "PodNamespace": "ns", "PodUID": uid, "Node": "a1"})


def test_bind_refuses_a_pod_that_never_went_through_filter_and_does_not_exist() -> None:
    """Issue 30: /bind of a pod the extender did not know posted a Binding with the scheduler's
    cluster-wide pods/binding right."""
    bound: list[str] = []
    ext = Extender(SlotBook(), binder=lambda ns, name, uid, node: bound.append(name), pod_lookup=lambda ns, n: None)
    out = _bind(ext)
    assert "not binding a pod the extender does not know" in out["Error"] and bound == []
    no_lookup = Extender(SlotBook(), binder=lambda ns, name, uid, node: bound.append(name))
    assert "does not know" in _bind(no_lookup)["Error"] and bound == []


def test_bind_refuses_a_uid_that_is_not_the_pods() -> None:
    bound: list[str] = []
    ghost = pod("ghost", wl=None, sched="default-scheduler")
    ext = Extender(SlotBook(), binder=lambda ns, name, uid, node: bound.append(name), pod_lookup=lambda ns, n: ghost)
    assert "does not know" in _bind(ext, uid="uid-forged")["Error"] and bound == []
    assert _bind(ext, uid=ghost["metadata"]["uid"]) == {"Error": ""} and bound == ["ghost"]  # the real one


def test_bind_without_a_uid_is_refused() -> None:
    bound: list[str] = []
    ext = Extender(SlotBook(), binder=lambda ns, name, uid, node: bound.append(name))
    assert "PodUID is required" in _bind(ext, uid="")["Error"] and bound == []


def test_the_entry_points_kube_scheduler_at_https_with_its_client_certificate() -> None:
    from scheduler.extender.config import POD_TLS_DIR, extender_entry

    entry = extender_entry(8888, tls_dir=POD_TLS_DIR)
    assert entry["urlPrefix"] == "https://127.0.0.1:8888" and entry["enableHTTPS"] is True
    assert entry["tlsConfig"] == {"certFile": f"{POD_TLS_DIR}/client.crt", "keyFile": f"{POD_TLS_DIR}/client.key",
                                  "caFile": f"{POD_TLS_DIR}/ca.crt"}
    assert "tlsConfig" not in extender_entry(8888) and extender_entry(8888)["urlPrefix"].startswith("http://")
