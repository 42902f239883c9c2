"""The KubeSchedulerConfiguration pieces that put the ``toposched`` profile and this extender
into a kube-scheduler (kubescheduler.config.k8s.io/v1).

Facts that shape the defaults (kube-scheduler v1.37 ``pkg/scheduler``):

- ``extenders`` is a top-level list: every extender is called for the pods of *every* profile
  of that kube-scheduler process (there is no per-profile extender). Scope is narrowed only by
  ``managedResources``: a pod is sent to the extender (filter, prioritize and, for the binder,
  bind) iff one of its containers requests or limits a listed resource. Hence the extender
  passes non-toposched pods through at once, and the recommended deployment (deploy/) is a
  *second* kube-scheduler that runs only the ``toposched`` profile, so the default scheduler
  never depends on us.
- ``ignorable: false`` (our default): an error or an unreachable extender fails the scheduling
  cycle and the pod is retried; with ``true`` kube-scheduler would skip our filter *and* fall
  back to its own binder when our bind refuses a taken slot, breaking the slot guarantee. The
  price of ``false`` is that, in a shared kube-scheduler, an extender outage blocks every pod
  that requests ``nvidia.com/gpu`` in every profile; in the dedicated toposched scheduler it
  blocks toposched pods only.
- ``percentageOfNodesToScore: 100`` on the profile: with extenders configured kube-scheduler
  stops its filter pass after a percentage of feasible nodes (10 % at 5,000 nodes) and only
  those reach our filter, which could miss every assigned node; 100 lets the assigned nodes
  always reach us (the controller's nodeSelector already narrows the set).
- ``DefaultPreemption`` is disabled in the profile: the toposched controller owns preemption
  (Kueue semantics); kube-scheduler evicting pods to make room would fight the assignment.
- Scores: extender score (0..10) x weight x 10 is added to the framework's plugin scores
  (each 0..100 x plugin weight). weight 10 lets compactness outweigh the default score plugins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.core.resources import GPU
from scheduler.core.workload import SCHEDULER_NAME

DEFAULT_PORT = 8888
# The files of ``toposched extender --issue-certs DIR`` (scheduler/extender/tls.py) and of a
# kubernetes.io/tls Secret with ca.crt: the extender serves tls.crt/tls.key and requires client
# certificates signed by ca.crt; kube-scheduler presents client.crt/client.key.
CA_FILE, CERT_FILE, KEY_FILE, CLIENT_CERT_FILE, CLIENT_KEY_FILE = "ca.crt", "tls.crt", "tls.key", "client.crt", \
    "client.key"
POD_TLS_DIR = "/run/toposched/extender-tls"  # deploy/: an in-memory volume of the scheduler Pod
BINDERS = ("extender", "kube-scheduler")
# kube-scheduler binds by default (issue 18, item 6): filter passes one node and reserves its
# slot, so a pod costs one extender call instead of three and no Binding POST of ours; the
# extender binder (filter, prioritize, bind) stays available with ``--binder extender``.
DEFAULT_BINDER = "kube-scheduler"


def extender_entry(
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    *,
    url_prefix: str | None = None,
    weight: int = 10,
    http_timeout: str = "5s",
    ignorable: bool = False,
    managed_resources: Sequence[str] = (GPU,),
    node_cache_capable: bool = True,
    binder: str = DEFAULT_BINDER,
    tls_dir: str | None = None,
) -> dict[str, Any]:
    """One ``extenders[]`` entry. ``managed_resources=()`` sends every pod of every profile.

    ``tls_dir``: HTTPS; kube-scheduler checks the extender's certificate against
    ``tls_dir/ca.crt`` and presents ``client.crt``/``client.key`` (``extender --tls-dir``).

    ``binder="kube-scheduler"``: only ``filterVerb``; the extender (run with ``--binder
    kube-scheduler``) passes one node per pod and reserves its slot in filter, kube-scheduler
    skips scoring (one feasible node) and binds with its own binder. ``"extender"``: filter
    offers every free assigned node, prioritize ranks them, the extender binds."""
    if weight < 1:
        raise ValueError(f"extender weight must be a positive integer, got {weight}")
    if binder not in BINDERS:
        raise ValueError(f"binder must be one of {', '.join(BINDERS)}, got {binder!r}")
    verbs = {"filterVerb": "filter"}
    if binder == "extender":
        verbs.update(prioritizeVerb="prioritize", bindVerb="bind")
    scheme = "https" if tls_dir else "http"
    entry: dict[str, Any] = {
        "urlPrefix": url_prefix or f"{scheme}://{host}:{port}",
        **verbs,
        "weight": weight,
        "nodeCacheCapable": node_cache_capable,
        "ignorable": ignorable,
        "httpTimeout": http_timeout,
    }
    if tls_dir:
        entry["enableHTTPS"] = True
        entry["tlsConfig"] = {"certFile": f"{tls_dir}/{CLIENT_CERT_FILE}", "keyFile": f"{tls_dir}/{CLIENT_KEY_FILE}",
                              "caFile": f"{tls_dir}/{CA_FILE}"}
    if managed_resources:
        entry["managedResources"] = [{"name": r, "ignoredByScheduler": False} for r in managed_resources]
    return entry


def toposched_profile(
    scheduler_name: str = SCHEDULER_NAME,
    *,
    percentage_of_nodes_to_score: int = 100,
    disable_preemption: bool = True,
) -> dict[str, Any]:
    profile: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "percentageOfNodesToScore": percentage_of_nodes_to_score,
    }
    if disable_preemption:
        profile["plugins"] = {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}
    return profile


def toposched_scheduler_config(
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    *,
    scheduler_name: str = SCHEDULER_NAME,
    **extender_kw: Any,
) -> dict[str, Any]:
    """``{"profile": <KubeSchedulerProfile>, "extender": <Extender>}`` for ``toposched``; e.g.
    ``default_scheduler_config(kubeconfig, [c["profile"]], [c["extender"]])``."""
    return {
        "profile": toposched_profile(scheduler_name),
        "extender": extender_entry(port, host, **extender_kw),
    }


def dedicated_scheduler_config(
    kubeconfig: str | None = None,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    *,
    scheduler_name: str = SCHEDULER_NAME,
    leader_elect: bool = True,
    **extender_kw: Any,
) -> dict[str, Any]:
    """A whole KubeSchedulerConfiguration for a second kube-scheduler that runs only the toposched
    profile (the EKS pattern: the managed default scheduler cannot be reconfigured)."""
    parts = toposched_scheduler_config(port, host, scheduler_name=scheduler_name, **extender_kw)
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": leader_elect,
            **({"resourceName": scheduler_name, "resourceNamespace": "kube-system"} if leader_elect else {}),
        },
        "profiles": [parts["profile"]],
        "extenders": [parts["extender"]],
    }
    if kubeconfig:
        config["clientConnection"] = {"kubeconfig": kubeconfig}
    return config
