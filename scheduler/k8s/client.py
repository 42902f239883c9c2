"""Building an API client: ``--kubeconfig`` if given, in-cluster credentials inside a Pod, else
$KUBECONFIG / ~/.kube/config. Every command that talks to a cluster uses this one function; the
proxy comes from HTTPS_PROXY/HTTP_PROXY/NO_PROXY as kubectl reads them (``scheduler/k8s/proxy.py``)."""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import client, config

from scheduler.errors import UserError
from scheduler.k8s.proxy import apply_proxy, kubeconfig_proxy_url


def api_client(kubeconfig: str | Path | None, qps_hint: int = 100, connections: int | None = None) -> client.ApiClient:
    """``connections``: pooled connections kept open (default: a quarter of ``qps_hint``, at
    least 16); a process with N writes in flight beside its informers' watches (each holds a
    connection while it lasts) needs N + its watches, or every write past the pool's size opens
    and closes a TLS connection of its own."""
    proxy_url = None
    try:
        if kubeconfig:
            api = config.new_client_from_config(config_file=str(kubeconfig))
            proxy_url = kubeconfig_proxy_url(str(kubeconfig))
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
            api = client.ApiClient()
        else:
            api = config.new_client_from_config()
            proxy_url = kubeconfig_proxy_url(None)
    except (config.ConfigException, OSError) as exc:
        raise UserError(f"cannot load Kubernetes credentials ({exc}): pass --kubeconfig or set KUBECONFIG") from exc
    # Enough pooled connections for the informers plus the writers running side by side.
    api.configuration.connection_pool_maxsize = connections or max(qps_hint // 4, 16)
    return apply_proxy(api, proxy_url=proxy_url)  # rebuilds the pool: the proxy decision and the pool size take effect
