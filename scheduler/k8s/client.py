"""Building an API client: ``--kubeconfig`` if given, in-cluster credentials inside a Pod, else
$KUBECONFIG / ~/.kube/config. Every command that talks to a cluster uses this one function."""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import client, config

from scheduler.errors import UserError


def api_client(kubeconfig: str | Path | None, qps_hint: int = 100) -> client.ApiClient:
    try:
        if kubeconfig:
            api = config.new_client_from_config(config_file=str(kubeconfig))
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
            api = client.ApiClient()
        else:
            api = config.new_client_from_config()
    except (config.ConfigException, OSError) as exc:
        raise UserError(f"cannot load Kubernetes credentials ({exc}): pass --kubeconfig or set KUBECONFIG") from exc
    # Enough pooled connections for the informers plus the writers running side by side.
    api.configuration.connection_pool_maxsize = max(qps_hint // 4, 16)
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = api.configuration.connection_pool_maxsize
    return api
