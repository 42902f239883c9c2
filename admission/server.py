"""The webhook process: informers, the decisions they feed, webhook registration, cert rotation.

HTTPS is served by a Go front (``webfront/``, started by ``admission/front.py``): it terminates
TLS (HTTP/1.1 keep-alive and HTTP/2), holds the connection caps and deadlines (limits below,
docs/security.md "Servers and network") and forwards each complete review over a Unix socket to
the decider (``admission/decider.py``), which answers it here on the watch caches.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from kubernetes.client import ApiException

from admission import review
from admission.decider import Decider, DeciderApp
from admission.fresh import FreshViews
from admission.front import Front
from admission.review import GOVERN_ALL
from admission.sources import CertSource
from admission.suspension import DEFAULT_CONTROLLER_USERS
from admission.view import ClusterView
from scheduler.adapter.kinds.governance import Governance
from scheduler.adapter.kinds.ownership import OwnerRef, OwnerUnreadable, interim_kind
from scheduler.adapter.kinds.registry import BY_GROUP_KIND
from scheduler.adapter.manifest.annotations import NO_OVERRIDES
from scheduler.core.config import FeatureGates
from scheduler.http.limits import WEBHOOK_CAPS, ConnectionLimits
from scheduler.k8s.informer import (
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    RESOURCE_QUOTAS,
    TOPOLOGIES,
    WORKLOAD_PRIORITY_CLASSES,
    Api,
    Informer,
    Resource,
    object_key,
    wait_synced,
)
from scheduler.k8s.owners import CachedOwners

log = logging.getLogger(__name__)

MAX_BODY = 8 * 1024 * 1024  # the API server's own request limit is 3 MiB; leave headroom
# The front holds the connections (goroutines); WORKERS only fills ConnectionLimits, which the
# front does not use: the decider answers in one thread. Connection caps: WEBHOOK_CAPS.
WORKERS = 1
IDLE_TIMEOUT_S = 90  # client-go closes its idle connections after 90 s: never close one it may reuse


def webhook_limits(max_connections: int = WEBHOOK_CAPS.total,
                   max_per_client: int = WEBHOOK_CAPS.per_client) -> ConnectionLimits:
    """The webhook's bounds; the API server's TLS handshake and request take milliseconds, so
    the 5 s handshake and 10 s head deadlines only ever cut off clients that are not it."""
    return ConnectionLimits(max_connections=max_connections, max_per_client=max_per_client, workers=WORKERS,
                            max_body_bytes=MAX_BODY, idle_timeout_s=IDLE_TIMEOUT_S)


def _fingerprint(node: Mapping[str, Any]) -> tuple[Any, ...]:
    """What the capacity index depends on; heartbeats change resourceVersion, not this."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    return (tuple(sorted((meta.get("labels") or {}).items())),
            tuple(sorted((status.get("allocatable") or status.get("capacity") or {}).items())),
            bool(spec.get("unschedulable")), ready,
            tuple(sorted((t.get("key"), t.get("effect")) for t in spec.get("taints") or ())))


# The informers' resources and the ClusterView field each one fills.
_VIEW_FIELDS: dict[Resource, str] = {
    LOCAL_QUEUES: "local_queues", CLUSTER_QUEUES: "cluster_queues", RESOURCE_FLAVORS: "flavors",
    TOPOLOGIES: "topologies", WORKLOAD_PRIORITY_CLASSES: "priority_classes", COHORTS: "cohorts", NODES: "nodes",
    # Which priority classes a namespace may use (scheduler/adapter/priority_policy.py).
    PRIORITY_CLASSES: "k8s_priority_classes", NAMESPACES: "namespaces", RESOURCE_QUOTAS: "resource_quotas",
}


def _denied(status: int, body: dict[str, Any]) -> bool:
    """A decided denial (not a malformed request, not our own internal error)."""
    response = body.get("response") or {}
    return status == 200 and response.get("allowed") is False and (response.get("status") or {}).get("code") != 500


def _message(body: dict[str, Any]) -> str:
    return str(((body.get("response") or {}).get("status") or {}).get("message") or "")


class WebhookApp:
    """Decisions plus the cluster view they read. Without an ``Api`` it serves an empty view."""

    def __init__(self, api: Api | None, scheduler_name: str = "toposched", default_queue: bool = True,
                 watch_nodes: bool = True, controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
                 gates: FeatureGates = NO_OVERRIDES, governance: Governance = GOVERN_ALL) -> None:
        self.api = api
        self.gates = gates
        self.governance = governance
        self.scheduler_name = scheduler_name
        self.default_queue = default_queue
        self.controller_users = frozenset(controller_users)
        self.ready = threading.Event()
        self.answer_observers: list[Callable[[bool, float], None]] = []
        self.informers: list[Informer] = []
        self.view = ClusterView(lookup=self._lookup if api else None,
                                owners=CachedOwners(self._get_owner) if api else None)
        self._node_prints: dict[str, tuple[Any, ...]] = {}
        # Denials are decided again on a view listed after the request arrived (admission/fresh.py).
        self.fresh: FreshViews | None = None
        if api is None:
            self.ready.set()
            return
        self.fresh = FreshViews(self._listed_view)
        for resource, attr in _VIEW_FIELDS.items():
            if resource is NODES and not watch_nodes:
                continue
            # Cohorts only widen what can be borrowed; a Kueue without the Cohort CRD has none.
            inf = Informer(api, resource, optional=resource is COHORTS)
            setattr(self.view, attr, inf.store)
            if resource is NODES:
                inf.add_handler(self._on_node)
            self.informers.append(inf)

    def _on_node(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        fp = None if event == "DELETED" else _fingerprint(obj)
        if self._node_prints.get(name) != fp:
            if fp is None:
                self._node_prints.pop(name, None)
            else:
                self._node_prints[name] = fp
            self.view.nodes_version += 1

    def _lookup(self, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        plural = {"LocalQueue": LOCAL_QUEUES, "ClusterQueue": CLUSTER_QUEUES, "ResourceFlavor": RESOURCE_FLAVORS,
                  "Topology": TOPOLOGIES, "WorkloadPriorityClass": WORKLOAD_PRIORITY_CLASSES,
                  "PriorityClass": PRIORITY_CLASSES, "Namespace": NAMESPACES}[kind]
        assert self.api is not None
        try:
            return self.api.get(plural, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _get_owner(self, namespace: str, ref: OwnerRef) -> dict[str, Any] | None:
        """A live GET of the object an owner reference names (a governed kind, or a kind that
        stands between a pod and its governed ancestor); None when there is none. A short
        timeout: the API server waits at most the webhook's timeoutSeconds for the answer."""
        kind = BY_GROUP_KIND.get((ref.group, ref.kind))
        interim = interim_kind(ref)
        plural = kind.plural if kind is not None else interim.plural if interim is not None else None
        if plural is None or not ref.name:
            return None
        assert self.api is not None
        try:
            found: dict[str, Any] = self.api.request(
                "GET", Resource(ref.group, ref.version, plural).path(namespace, ref.name), timeout=2)
            return found
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise OwnerUnreadable(f"reading {ref.spelled}: HTTP {exc.status} {exc.reason}") from exc
        except Exception as exc:  # unreachable API server, timeout
            raise OwnerUnreadable(f"reading {ref.spelled}: {exc}") from exc

    def start(self, timeout_s: float = 60) -> None:
        for inf in self.informers:
            inf.start()
        if self.informers:
            wait_synced(self.informers, timeout_s)
        # Replace the node sets' views (informer relists swap store dicts).
        self._rebind()
        self.ready.set()

    def _rebind(self) -> None:
        # Informer._relist replaces ``store``; keep the view pointing at the live dicts.
        for inf in self.informers:
            setattr(self.view, _VIEW_FIELDS[inf.resource], inf.store)

    def _listed_view(self) -> ClusterView:
        """The view of the informers' resources listed from the API server now (consistent reads)."""
        assert self.api is not None
        view = ClusterView(lookup=self._lookup, owners=self.view.owners, health_policy=self.view.health_policy)
        for inf in self.informers:
            try:
                items = self.api.list(inf.resource).get("items") or ()
            except ApiException as exc:
                if not (inf.optional and exc.status == 404):
                    raise
                items = ()
            setattr(view, _VIEW_FIELDS[inf.resource], {object_key(o): o for o in items})
        return view

    def stop(self) -> None:
        for inf in self.informers:
            inf.stop()

    def decide(self, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        """One request body in, (HTTP status, AdmissionReview) out; never raises."""
        arrived = time.monotonic()
        status, body = self.decide_cached(path, raw)
        if not self.needs_confirming(status, body):
            return status, body
        return self.confirm(path, raw, arrived, status, body)

    def decide_cached(self, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        """The answer on the watch caches (CPU only: the decider's loop thread gives it)."""
        if self.informers:
            self._rebind()
        return self._answer(path, raw, self.view)

    def needs_confirming(self, status: int, body: dict[str, Any]) -> bool:
        """A denial on the watch caches is decided again on a fresh read (:meth:`confirm`)."""
        return self.fresh is not None and _denied(status, body)

    def confirm(self, path: str, raw: bytes, arrived: float, status: int,
                body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A cached denial decided again on a view listed after ``arrived`` (blocks on the API server)."""
        assert self.fresh is not None
        if _denied(*self._answer(path, raw, None)):
            return status, body  # refused on its own (syntax, shape), whatever the cluster holds
        try:
            fresh = self.fresh.after(arrived)
        except Exception as exc:  # the API server is unreachable: the cached view's answer stands
            log.warning("could not re-read the cluster to confirm a denial (%s); answering from the watch cache", exc)
            return status, body
        second = self._answer(path, raw, fresh)
        if not _denied(*second):
            log.info("a denial decided on the watch cache was overturned by a fresh read of the cluster "
                     "(the cache was behind the API server): %s", _message(body))
        return second

    def _answer(self, path: str, raw: bytes, view: ClusterView | None) -> tuple[int, dict[str, Any]]:
        return review.answer(path, raw, view, self.scheduler_name, self.default_queue, self.controller_users,
                             self.gates, self.governance)


class WebhookServer:
    """The running webhook: the HTTPS front (``admission/front.py``, Go: TLS, connection caps,
    deadlines), the decider it forwards each review to (``admission/decider.py``), informers,
    and a certificate source (which loads, rotates and publishes the certificate the front
    serves: ``admission/sources.py``, ``admission/sharedcerts.py``)."""

    def __init__(self, app: WebhookApp, certs: CertSource, bind: str, port: int,
                 limits: ConnectionLimits | None = None) -> None:
        self.app = app
        self.certs = certs
        self.draining = threading.Event()
        self._dir = Path(tempfile.mkdtemp(prefix="toposched-webhook-"))
        self.decider = Decider(self._dir / "decider.sock", DeciderApp(
            app.decide_cached, app.needs_confirming, app.confirm, self.readiness, self.draining,
            lambda: certs.serving_pem, app.answer_observers))
        self.decider.start()
        self.front = Front(bind, port, self._dir / "decider.sock", limits or webhook_limits())
        self.port = self.front.port

    def readiness(self) -> tuple[bool, str]:
        """Ready = not shutting down, informers synced, a certificate loaded whose CA is trusted."""
        if self.draining.is_set():
            return False, "shutting down"
        if not self.app.ready.is_set():
            return False, "informers not synced"
        return self.certs.readiness()

    def start(self, informer_timeout_s: float = 60) -> None:
        self.app.start(informer_timeout_s)
        self.certs.start()

    def drain(self) -> None:
        """Stop being ready and close keep-alive connections after their next answer; keep
        serving, so requests routed here before the endpoint is removed are still answered."""
        self.draining.set()

    def stop(self) -> None:
        self.draining.set()
        self.certs.stop()
        self.front.stop()
        self.decider.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
        self.app.stop()
