"""HTTPS_PROXY / HTTP_PROXY / NO_PROXY read as kubectl (Go's httpproxy) reads them; the client
built by ``api_client`` honours NO_PROXY (the Kubernetes client 35.0.0 resets it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import urllib3

from scheduler.errors import UserError
from scheduler.k8s.client import api_client
from scheduler.k8s.proxy import proxy_for

PROXY = "http://127.0.0.1:9"


@pytest.mark.parametrize(("server", "no_proxy", "expected"), [
    ("https://api.example.com:6443", "", PROXY),
    ("https://api.example.com:6443", "example.com", None),  # a name covers its subdomains
    ("https://api.example.com:6443", ".example.com", None),
    ("https://example.com:6443", ".example.com", PROXY),  # .name: subdomains only
    ("https://api.example.com:6443", "*", None),
    ("https://api.example.com:6443", "other.com, api.example.com", None),
    ("https://api.example.com:6443", "api.example.com:6443", None),
    ("https://api.example.com:6443", "api.example.com:443", PROXY),  # another port
    ("https://notexample.com:6443", "example.com", PROXY),
    ("https://10.1.2.3:6443", "10.0.0.0/8", None),
    ("https://10.1.2.3:6443", "10.1.2.3", None),
    ("https://10.1.2.3:6443", "192.168.0.0/16", PROXY),
    ("https://[fd00::1]:6443", "fd00::/8", None),
    ("https://127.0.0.1:6443", "", None),  # loopback never goes through a proxy (Go)
    ("https://localhost:6443", "", None),
])
def test_no_proxy_as_kubectl_reads_it(server: str, no_proxy: str, expected: str | None) -> None:
    assert proxy_for(server, {"HTTPS_PROXY": PROXY, "NO_PROXY": no_proxy}) == expected


def test_scheme_picks_the_variable_without_fallback() -> None:
    env = {"HTTP_PROXY": "http://plain:3128"}
    assert proxy_for("https://api.example.com", env) is None  # Go: https uses HTTPS_PROXY only
    assert proxy_for("http://api.example.com", env) == "http://plain:3128"
    both = {"HTTPS_PROXY": "http://secure:3128", "HTTP_PROXY": "http://plain:3128"}
    assert proxy_for("https://api.example.com", both) == "http://secure:3128"  # the client picks HTTP_PROXY
    assert proxy_for("https://api.example.com", {"https_proxy": "proxy:3128"}) == "http://proxy:3128"
    assert proxy_for("https://api.example.com", {"HTTPS_PROXY": PROXY, "no_proxy": "example.com"}) is None


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return path


def test_api_client_honours_no_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", PROXY)
    monkeypatch.setenv("NO_PROXY", ".example.test")
    for name in ("https_proxy", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    direct = api_client(_kubeconfig(tmp_path, "https://api.example.test:6443"), connections=7)
    assert not isinstance(direct.rest_client.pool_manager, urllib3.ProxyManager)
    assert direct.rest_client.pool_manager.connection_pool_kw["maxsize"] == 7
    proxied = api_client(_kubeconfig(tmp_path, "https://api.example.com:6443"))
    assert isinstance(proxied.rest_client.pool_manager, urllib3.ProxyManager)
    assert proxied.configuration.proxy == PROXY


def test_the_kubeconfig_clusters_proxy_url_wins_as_in_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "*")
    for name in ("https_proxy", "no_proxy", "HTTPS_PROXY", "HTTP_PROXY", "http_proxy"):
        if name != "NO_PROXY":
            monkeypatch.delenv(name, raising=False)
    path = _kubeconfig(tmp_path, "https://api.example.com:6443")
    path.write_text(path.read_text().replace("insecure-skip-tls-verify: true",
                                             'insecure-skip-tls-verify: true, proxy-url: "http://bastion:3128"'))
    api = api_client(path)
    assert isinstance(api.rest_client.pool_manager, urllib3.ProxyManager)
    assert api.configuration.proxy == "http://bastion:3128"
    socks = tmp_path / "socks"
    socks.write_text(path.read_text().replace("http://bastion:3128", "socks5://127.0.0.1:1080"))
    with pytest.raises(UserError, match="only http:// and https:// proxies"):
        api_client(socks)
