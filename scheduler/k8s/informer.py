"""List+watch caches of raw object dicts, one thread per resource.

Objects stay plain dicts (the JSON the API server sent), which is what the converters in
``scheduler.core`` and ``scheduler.models`` read. Watches resume from the last
resourceVersion, use bookmarks, and relist on 410 Gone, so a restarted API server or an
expired watch loses no event (a relist emits the differences as events).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from scheduler.adapter.kinds.batch import BATCH_JOB

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Handler = Callable[[str, Obj, Obj | None], None]  # (event type, object, old object)
# client-go's Indexers: an object's values under one index (an empty tuple: not indexed).
Indexer = Callable[[Obj], Sequence[str]]


@dataclass(frozen=True)
class Resource:
    """An API resource: ``group`` "" is the core group."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def base_path(self) -> str:
        return f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        parts = [self.base_path]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


NODES = Resource("", "v1", "nodes", namespaced=False)
PODS = Resource("", "v1", "pods")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False)
JOBS = Resource(BATCH_JOB.group, BATCH_JOB.version, BATCH_JOB.plural)  # the other kinds: kube.jobs.resource_of
LEASES = Resource("coordination.k8s.io", "v1", "leases")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", namespaced=False)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas")
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
WORKLOADS = Resource(KUEUE_GROUP, KUEUE_VERSION, "workloads")
CLUSTER_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", namespaced=False)
LOCAL_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "localqueues")
RESOURCE_FLAVORS = Resource(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", namespaced=False)
TOPOLOGIES = Resource(KUEUE_GROUP, KUEUE_VERSION, "topologies", namespaced=False)
COHORTS = Resource(KUEUE_GROUP, KUEUE_VERSION, "cohorts", namespaced=False)
WORKLOAD_PRIORITY_CLASSES = Resource(KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", namespaced=False)
# Kueue's alpha PreemptionConfig (KEP-13396, Kueue v0.20): served only where its CRD is installed.
PREEMPTION_CONFIGS = Resource(KUEUE_GROUP, "v1alpha1", "preemptionconfigs", namespaced=False)
# toposched's own PreemptionLimit (in no Kueue release), and where toposched kept it before issue
# 41 (read only, by the migration: kube/limit_migration.py).
PREEMPTION_LIMITS = Resource("toposched.io", "v1alpha1", "preemptionlimits", namespaced=False)
LEGACY_PREEMPTION_LIMITS = Resource(KUEUE_GROUP, "v1alpha1", "preemptionlimits", namespaced=False)


def version_number(obj: Mapping[str, Any]) -> int:
    """An object's resourceVersion as a number (0 when absent or not a number), to tell which
    of two copies of one object is newer."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def strip_managed_fields(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields``, which nothing here reads (who wrote a key is
    told by its value, adapter/owned.py) and which is often the largest part of an object: every
    cached copy drops it, as Kueue's cache does (controller-runtime's TransformStripManagedFields,
    Kueue v0.17.0 pkg/config/config.go). Issue 42: the three doors held four times Kueue's memory."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class KubeApi(Protocol):
    """The calls the controller, the informers and the writer make: :class:`Api` over HTTP,
    ``scheduler.k8s.fakeapi.FakeApi`` in memory. Failures raise the client's ``ApiException``
    with the API server's status (404 gone, 409 conflict on a stale resourceVersion)."""

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj: ...

    def list(self, resource: Resource, namespace: str | None = None, **query: Any) -> Obj: ...

    def create(self, resource: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj: ...

    def merge_patch(self, resource: Resource, name: str, patch: Mapping[str, Any], namespace: str | None = None,
                    subresource: str | None = None) -> Obj: ...

    def replace(self, resource: Resource, obj: Mapping[str, Any], subresource: str | None = None) -> Obj: ...

    def delete(self, resource: Resource, name: str, namespace: str | None = None, **query: Any) -> Any: ...

    def watch(self, resource: Resource, resource_version: str, timeout_s: int = 240,
              namespace: str | None = None, **query: Any) -> Iterator[Obj]: ...


class Api:
    """Thin JSON-over-HTTP helper on the official client's connection pool and auth."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.client = api_client

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str = "application/json", timeout: float | None = 30) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        resp = self.client.call_api(
            path, method, query_params=list((query or {}).items()), header_params=headers, body=body,
            auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout,
        )[0]
        data = resp.data
        return json.loads(data) if data else None

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        return self.request("GET", resource.path(namespace, name))  # type: ignore[no-any-return]

    def list(self, resource: Resource, namespace: str | None = None, **query: Any) -> Obj:
        return self.request("GET", resource.path(namespace), query=query, timeout=120)  # type: ignore[no-any-return]

    def create(self, resource: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        return self.request("POST", resource.path(namespace), body=dict(obj))  # type: ignore[no-any-return]

    def merge_patch(self, resource: Resource, name: str, patch: Mapping[str, Any], namespace: str | None = None,
                    subresource: str | None = None) -> Obj:
        return self.request(  # type: ignore[no-any-return]
            "PATCH", resource.path(namespace, name, subresource), body=dict(patch),
            content_type="application/merge-patch+json",
        )

    def json_patch(self, resource: Resource, name: str, ops: Sequence[Mapping[str, Any]],
                   namespace: str | None = None, subresource: str | None = None) -> Obj:
        return self.request(  # type: ignore[no-any-return]
            "PATCH", resource.path(namespace, name, subresource), body=[dict(o) for o in ops],
            content_type="application/json-patch+json",
        )

    def replace(self, resource: Resource, obj: Mapping[str, Any], subresource: str | None = None) -> Obj:
        meta = obj["metadata"]
        return self.request(  # type: ignore[no-any-return]
            "PUT", resource.path(meta.get("namespace"), meta["name"], subresource), body=dict(obj))

    def delete(self, resource: Resource, name: str, namespace: str | None = None, **query: Any) -> Any:
        return self.request("DELETE", resource.path(namespace, name), query=query)

    def watch(self, resource: Resource, resource_version: str, timeout_s: int = 240,
              namespace: str | None = None, **query: Any) -> Iterator[Obj]:
        params = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": timeout_s, **query}
        resp = self.client.call_api(
            resource.path(namespace), "GET", query_params=list(params.items()),
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
            _preload_content=False, _request_timeout=(10, timeout_s + 30),
        )[0]
        try:
            for line in iter_resp_lines(resp):
                if line:
                    yield json.loads(line)
        finally:
            resp.release_conn()


class Informer:
    """Keeps ``store`` equal to the API server's view of one resource and calls handlers on
    every change: ``("ADDED"|"MODIFIED"|"DELETED", obj, old)``."""

    # How often an optional informer asks again whether its resource is served.
    ABSENT_RETRY_S = 15.0

    def __init__(self, api: KubeApi, resource: Resource, *, label_selector: str | None = None,
                 field_selector: str | None = None, optional: bool = False,
                 namespace: str | None = None, transform: Callable[[Obj], Obj] | None = None) -> None:
        """``namespace``: only that namespace's objects (RBAC granted by a Role there suffices).
        ``transform``: what is kept of each object, applied before it is stored or handed to a
        handler (client-go's SetTransform), for a door that reads only part of a large object.
        ``optional``: the resource may not be served (a CRD that is not installed, e.g.
        JobSet): a 404 counts as synced and empty, and the informer asks again every
        ``ABSENT_RETRY_S`` so the CRD is picked up when it is installed later."""
        self.api = api
        self.resource = resource
        self.optional = optional
        self.absent = False  # an optional resource the API server does not serve (its last list)
        self.query = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        self.namespace = namespace
        self.transform = transform
        self.store: dict[str, Obj] = {}
        self.lock = threading.RLock()
        self.synced = threading.Event()
        self.handlers: list[Handler] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rv = ""
        # Secondary indexes kept with the store (client-go's Indexers), so a controller phase
        # can walk the few objects it acts on instead of every object (issue 18: 15,000
        # Workloads scanned for their conditions in six phases a pass). index name -> value ->
        # key -> object, and index name -> key -> the values it is filed under.
        self._indexers: dict[str, Indexer] = {}
        self._index: dict[str, dict[str, dict[str, Obj]]] = {}
        self._filed: dict[str, dict[str, Sequence[str]]] = {}

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.resource.plural}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def items(self) -> list[Obj]:
        with self.lock:
            return list(self.store.values())

    def get(self, key: str) -> Obj | None:
        with self.lock:
            return self.store.get(key)

    # ------------------------------------------------------------------ indexes
    def add_indexer(self, name: str, indexer: Indexer) -> None:
        """File every object (present and future) under ``indexer(obj)`` in index ``name``.
        The indexer must be cheap and pure; one that raises files the object nowhere (logged),
        so a malformed object cannot stop the watch."""
        with self.lock:
            self._indexers[name] = indexer
            self._index[name] = {}
            self._filed[name] = {}
            for key, obj in self.store.items():
                self._file(name, key, obj)

    def indexed(self, name: str, value: str) -> list[Obj]:
        """The objects filed under ``value`` in index ``name`` (in the order they were filed)."""
        with self.lock:
            return list((self._index[name].get(value) or {}).values())

    def index_sizes(self, name: str) -> dict[str, int]:
        """How many objects each value of index ``name`` holds."""
        with self.lock:
            return {value: len(bucket) for value, bucket in self._index[name].items()}

    def _file(self, name: str, key: str, obj: Obj) -> None:
        try:
            values = tuple(self._indexers[name](obj))
        except Exception:  # noqa: BLE001 - a bad object must not stop the watch; the phases report it
            log.warning("index %s of %s: cannot file %s", name, self.resource.plural, key, exc_info=True)
            values = ()
        if values:
            self._filed[name][key] = values
            for value in values:
                self._index[name].setdefault(value, {})[key] = obj

    def _unfile(self, name: str, key: str) -> None:
        for value in self._filed[name].pop(key, ()):
            bucket = self._index[name].get(value)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._index[name][value]

    def _kept(self, obj: Obj) -> Obj:
        """What is stored of ``obj``: no managedFields, then the informer's transform."""
        obj = strip_managed_fields(obj)
        return self.transform(obj) if self.transform is not None else obj

    # ------------------------------------------------------------------ store writes (under lock)
    def put(self, obj: Obj, *, only_if_newer: bool = False) -> bool:
        """Store what is kept of ``obj`` (and re-file it); ``only_if_newer``: unless a copy with
        a higher resourceVersion is already there (a write's answer racing its own watch event)."""
        return self._store(self._kept(obj), only_if_newer=only_if_newer)

    def _store(self, obj: Obj, *, only_if_newer: bool = False) -> bool:
        """``put`` of an object already kept (a watch event, transformed once on arrival)."""
        key = object_key(obj)
        with self.lock:
            if only_if_newer:
                current = self.store.get(key)
                if current is not None and version_number(obj) < version_number(current):
                    return False
            self.store[key] = obj
            for name in self._indexers:
                self._unfile(name, key)
                self._file(name, key, obj)
            return True

    def remove(self, key: str) -> Obj | None:
        with self.lock:
            for name in self._indexers:
                self._unfile(name, key)
            return self.store.pop(key, None)

    def replace(self, objs: Mapping[str, Obj]) -> dict[str, Obj]:
        """Make the store ``objs`` (a relist); returns the previous store."""
        with self.lock:
            old, self.store = self.store, dict(objs)
            for name in self._indexers:
                self._index[name], self._filed[name] = {}, {}
                for key, obj in self.store.items():
                    self._file(name, key, obj)
            return old

    def _emit(self, event: str, obj: Obj, old: Obj | None) -> None:
        for handler in self.handlers:
            try:
                handler(event, obj, old)
            except Exception:  # a handler bug must not kill the watch
                log.exception("handler for %s %s %s failed", self.resource.plural, event, object_key(obj))

    def relist(self) -> None:
        """List the resource and make ``store`` equal to it, emitting the differences (an
        optional resource that is not served lists as empty)."""
        try:
            listed = self.api.list(self.resource, self.namespace, **self.query)
        except client.ApiException as exc:
            if not (self.optional and exc.status == 404):
                raise
            if not self.absent:
                log.info("%s.%s is not served (CRD not installed): idle, checking again every %.0fs",
                         self.resource.plural, self.resource.group, self.ABSENT_RETRY_S)
            self.absent = True
            listed = {"items": [], "metadata": {"resourceVersion": ""}}
        else:
            self.absent = False
        fresh = {object_key(kept): kept for kept in map(self._kept, listed.get("items") or ())}
        with self.lock:
            old_store = self.replace(fresh)
            self._rv = listed["metadata"]["resourceVersion"]
        for key, obj in fresh.items():
            old = old_store.get(key)
            if old is None:
                self._emit("ADDED", obj, None)
            elif old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._emit("MODIFIED", obj, old)
        for key, old in old_store.items():
            if key not in fresh:
                self._emit("DELETED", old, old)

    def _run(self) -> None:
        backoff = 0.2
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.relist()
                    self.synced.set()
                    if self.absent:  # nothing to watch: ask again later whether it is served
                        self._stop.wait(self.ABSENT_RETRY_S)
                        continue
                    need_list = False
                query: dict[str, Any] = dict(self.query)
                if self.namespace:
                    query["namespace"] = self.namespace
                for event in self.api.watch(self.resource, self._rv, **query):
                    if self._stop.is_set():
                        return
                    kind, obj = event.get("type"), self._kept(event.get("object") or {})
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            need_list = True
                        break
                    self._rv = obj.get("metadata", {}).get("resourceVersion", self._rv)
                    if kind == "BOOKMARK":
                        continue
                    key = object_key(obj)
                    with self.lock:
                        old = self.store.get(key)
                        if kind == "DELETED":
                            self.remove(key)
                        else:
                            self._store(obj)
                    self._emit(str(kind), obj, old)
                backoff = 0.2
            except client.ApiException as exc:
                if self._stop.is_set():
                    return
                log.info("watch of %s interrupted (%s); retrying in %.1fs", self.resource.plural, exc.status, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                need_list = True
            except Exception as exc:  # API server restarted, connection reset, ...
                if self._stop.is_set():
                    return
                log.info("watch of %s interrupted (%s); retrying in %.1fs", self.resource.plural, exc, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                need_list = True


def wait_synced(informers: list[Informer], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    for inf in informers:
        if not inf.synced.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"informer for {inf.resource.plural} did not sync within {timeout_s}s")
