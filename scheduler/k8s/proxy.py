"""Proxy settings from the environment, read as kubectl reads them.

The Kubernetes Python client 35.0.0 reads ``NO_PROXY`` in ``Configuration.__init__`` and then
sets ``self.no_proxy = None`` a few lines later (``kubernetes/client/configuration.py``), and it
lets ``HTTP_PROXY`` override ``HTTPS_PROXY`` for an ``https://`` API server. So with
``HTTPS_PROXY`` set, every request goes to the proxy whatever ``NO_PROXY`` says, where kubectl
(client-go: ``net/http.ProxyFromEnvironment``, ``golang.org/x/net/http/httpproxy``) goes direct.

:func:`proxy_for` is Go's rule, written out: ``HTTPS_PROXY``/``https_proxy`` for an https server,
``HTTP_PROXY``/``http_proxy`` for an http one (no fallback between them); ``localhost`` and
loopback addresses never go through a proxy; ``NO_PROXY``/``no_proxy`` is a comma list of
``*``, IP addresses, CIDR ranges, host names (matching the name and its subdomains), ``.name``
(subdomains only), each with an optional ``:port``. :func:`apply_proxy` puts the answer on a
client's configuration and rebuilds its connection pool (the pool is built with the proxy
decision baked in, in ``ApiClient.__init__``).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from kubernetes import client
from kubernetes.client import rest

from scheduler.errors import UserError


def _env(env: Mapping[str, str], *names: str) -> str:
    """Go's ``getEnvAny``: the first of ``names`` set to a non-empty value."""
    return next((env[n] for n in names if env.get(n)), "")


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _matches(entry: str, host: str, port: int) -> bool:
    """One ``NO_PROXY`` entry against the server's host and port (httpproxy's ``useProxy``)."""
    if entry == "*":
        return True
    try:
        network = ipaddress.ip_network(entry, strict=False) if "/" in entry else None
    except ValueError:
        network = None
    ip = _ip(host)
    if network is not None:
        return ip is not None and ip in network
    entry_host, entry_port = entry, 0
    if entry.count(":") == 1 or entry.startswith("[") and "]:" in entry:
        entry_host, _, raw_port = entry.rpartition(":")
        entry_port = int(raw_port) if raw_port.isdigit() else -1
    if entry_port and entry_port != port:
        return False
    entry_ip = _ip(entry_host)
    if entry_ip is not None:
        return ip is not None and ip == entry_ip
    entry_host = entry_host.lower()
    if entry_host.startswith("*."):
        entry_host = entry_host[1:]
    if entry_host.startswith("."):
        return host.endswith(entry_host)
    return host == entry_host or host.endswith("." + entry_host)


def proxy_for(server: str, env: Mapping[str, str] | None = None) -> str | None:
    """The proxy URL kubectl would use to reach ``server`` (an API server URL), or None."""
    env = os.environ if env is None else env
    parts = urlsplit(server)
    scheme = parts.scheme or "https"
    proxy = _env(env, "HTTPS_PROXY", "https_proxy") if scheme == "https" else _env(env, "HTTP_PROXY", "http_proxy")
    host = (parts.hostname or "").lower()
    if not proxy or not host:
        return None
    ip = _ip(host)
    if host == "localhost" or (ip is not None and ip.is_loopback):
        return None
    port = parts.port or _default_port(scheme)
    no_proxy = _env(env, "NO_PROXY", "no_proxy")
    if any(_matches(e.strip(), host, port) for e in no_proxy.split(",") if e.strip()):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"  # Go reads a bare host:port as http://


def kubeconfig_proxy_url(kubeconfig: str | None, context: str | None = None) -> str | None:
    """The ``proxy-url`` of the kubeconfig's cluster (current context, or ``context``), or None.
    The Kubernetes Python client 35.0.0 does not read it; kubectl sends every request there,
    whatever the environment says."""
    from kubernetes.config.kube_config import KUBE_CONFIG_DEFAULT_LOCATION, KubeConfigMerger

    try:
        merged = KubeConfigMerger(kubeconfig or KUBE_CONFIG_DEFAULT_LOCATION).config
        name = context or merged.safe_get("current-context")
        cluster_name = merged["contexts"].get_with_name(name)["context"]["cluster"]
        url = merged["clusters"].get_with_name(cluster_name)["cluster"].safe_get("proxy-url")
    except Exception:  # the loader has already said what is wrong with the file; no proxy-url here
        return None
    return str(url) if url else None


def apply_proxy(api: client.ApiClient, env: Mapping[str, str] | None = None,
                proxy_url: str | None = None) -> client.ApiClient:
    """Set ``api``'s proxy as kubectl would: the kubeconfig cluster's ``proxy-url`` when given,
    else the environment's, and rebuild its connection pool so that the decision takes effect;
    the pool keeps ``connection_pool_maxsize``."""
    cfg = api.configuration
    proxy = proxy_url or proxy_for(str(cfg.host), env)
    if proxy is not None and not proxy.startswith(("http://", "https://")):
        raise UserError(f"proxy {proxy!r}: only http:// and https:// proxies are supported (kubectl also takes "
                        "socks5://); set NO_PROXY to reach the API server directly")
    cfg.proxy = proxy
    cfg.no_proxy = None  # decided above; the client's own check must not decide again
    api.rest_client = rest.RESTClientObject(cfg)
    return api
