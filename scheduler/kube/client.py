"""Building an API client from a kubeconfig, or in-cluster credentials."""

from __future__ import annotations

from kubernetes import client, config

from scheduler.errors import UserError


def api_client(kubeconfig: str | None, qps_hint: int = 100) -> client.ApiClient:
    """``--kubeconfig`` if given, else $KUBECONFIG/~/.kube/config, else in-cluster."""
    try:
        if kubeconfig:
            api = config.new_client_from_config(config_file=kubeconfig)
        else:
            try:
                api = config.new_client_from_config()
            except config.ConfigException:
                config.load_incluster_config()
                api = client.ApiClient()
    except (config.ConfigException, FileNotFoundError) as exc:
        raise UserError(f"cannot load Kubernetes credentials ({exc}): pass --kubeconfig or set KUBECONFIG") from exc
    api.configuration.connection_pool_maxsize = max(qps_hint // 4, 16)
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = api.configuration.connection_pool_maxsize
    return api
