"""The kube-scheduler extender HTTP server: informers feed a :class:`SlotBook`; ``POST /filter``,
``/prioritize`` and ``/bind`` answer kube-scheduler (k8s.io/kube-scheduler/extender/v1).

Wire format. The extender/v1 Go types carry no JSON tags, so kube-scheduler sends and expects
the Go field names: ``{"Pod", "Nodes", "NodeNames"}`` in, ``{"Nodes", "NodeNames",
"FailedNodes", "FailedAndUnresolvableNodes", "Error"}`` out of filter, ``[{"Host", "Score"}]``
out of prioritize, ``{"PodName", "PodNamespace", "PodUID", "Node"}`` -> ``{"Error"}`` for bind.
The embedded Pod / NodeList are ordinary core/v1 JSON. Go's decoder matches keys case-
insensitively, so requests are read the same way here (lower-case keys are accepted too).

Every answer is HTTP 200 with ``Error`` set on failure: a non-200 answer makes kube-scheduler
report an opaque "failed filter with extender" instead of our message.

Other endpoints: ``GET /healthz`` (process alive), ``GET /readyz`` (informers synced),
``GET /stats`` (request counts, latency percentiles, book sizes; JSON).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scheduler.core.health import UnknownValues
from scheduler.core.nodes import node_from_k8s
from scheduler.extender.logic import SlotBook, SlotTaken, pod_ref, workload_view
from scheduler.kube.informer import (
    NODES,
    PODS,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    WORKLOADS,
    Api,
    Informer,
    Obj,
    wait_synced,
)

log = logging.getLogger("toposched.extender")


def field(obj: Mapping[str, Any], name: str) -> Any:
    """Go-style case-insensitive field lookup (``Pod``, ``pod``, ``POD`` ...)."""
    if name in obj:
        return obj[name]
    lower = name.lower()
    for key, value in obj.items():
        if key.lower() == lower:
            return value
    return None


def _quantile_ms(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)


class Stats:
    """Per-verb request counts and a bounded window of latencies (seconds)."""

    def __init__(self, window: int = 20000) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.latencies: dict[str, deque[float]] = {}
        self.window = window
        # (verb, seconds) callbacks, e.g. the Prometheus histogram (scheduler.kube.request_metrics)
        self.observers: list[Callable[[str, float], None]] = []

    def record(self, verb: str, seconds: float) -> None:
        with self.lock:
            self.counts[verb] = self.counts.get(verb, 0) + 1
            self.latencies.setdefault(verb, deque(maxlen=self.window)).append(seconds)
        for observer in self.observers:
            observer(verb, seconds)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            out: dict[str, Any] = {}
            for verb, count in self.counts.items():
                lat = sorted(self.latencies.get(verb) or ())
                out[verb] = {
                    "count": count,
                    "p50_ms": _quantile_ms(lat, 0.5),
                    "p99_ms": _quantile_ms(lat, 0.99),
                }
            return out


class Extender:
    """Decisions over a :class:`SlotBook`, on extender/v1 payloads (dicts). No HTTP here, so the
    benchmark can time it in-process and the server is a thin shell around it."""

    def __init__(
        self,
        book: SlotBook,
        binder: Callable[[str, str, str, str], None] | None = None,
        pod_lookup: Callable[[str, str], Obj | None] | None = None,
    ) -> None:
        self.book = book
        self.binder = binder  # (namespace, name, uid, node) -> None, raises on failure
        self.pod_lookup = pod_lookup  # (namespace, name) -> pod dict or None
        self.ready = threading.Event()

    def filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        pod = pod_ref(field(args, "Pod") or {})
        names_in = field(args, "NodeNames")
        node_list = field(args, "Nodes")
        payload = None
        if names_in is None:
            items = (node_list or {}).get("items") or []
            names = [((n.get("metadata") or {}).get("name") or "") for n in items]
        else:
            items = []
            names = list(names_in)
        group = self.book.remember(pod)
        if group is None:  # pass-through: echo the input
            return self._filter_result(names_in is not None, names, items, {}, {}, "")
        if not self.ready.is_set():
            return self._filter_result(
                names_in is not None,
                [],
                [],
                {},
                {},
                "toposched extender is starting (caches not synced yet); retrying",
            )
        if names_in is None:
            payload = {name: node_from_k8s(n) for name, n in zip(names, items, strict=True)}
        out = self.book.filter(pod, names, payload)
        if out.error:
            log.info("filter %s/%s: %s", pod.namespace, pod.name, out.error,
                     extra={"workload": f"{pod.namespace}/{pod.workload}" if pod.workload else "",
                            "decision": "filter-refused"})
        else:
            log.debug("filter %s/%s: %d node(s) offered, %d passed", pod.namespace, pod.name, len(names),
                      len(out.passed))
        passed_items: list[Any] = []
        if names_in is None:
            keep = set(out.passed)
            passed_items = [n for name, n in zip(names, items, strict=True) if name in keep]
        return self._filter_result(
            names_in is not None, out.passed, passed_items, out.failed, out.unresolvable, out.error
        )

    @staticmethod
    def _filter_result(
        cache_capable: bool,
        names: list[str],
        items: list[Any],
        failed: dict[str, str],
        unresolvable: dict[str, str],
        error: str,
    ) -> dict[str, Any]:
        return {
            "Nodes": None if cache_capable else {"apiVersion": "v1", "kind": "NodeList", "items": items},
            "NodeNames": names if cache_capable else None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": error,
        }

    def prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        pod = pod_ref(field(args, "Pod") or {})
        names_in = field(args, "NodeNames")
        if names_in is None:
            names = [
                ((n.get("metadata") or {}).get("name") or "")
                for n in ((field(args, "Nodes") or {}).get("items") or [])
            ]
        else:
            names = list(names_in)
        return [{"Host": host, "Score": score} for host, score in self.book.prioritize(pod, names)]

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        ns = field(args, "PodNamespace") or "default"
        name = field(args, "PodName") or ""
        uid = field(args, "PodUID") or ""
        node = field(args, "Node") or ""
        known, _ = self.book.group_for(uid)
        if not known and self.pod_lookup is not None:
            # Restarted between filter and bind, or the pod never went through filter.
            obj = self.pod_lookup(ns, name)
            if obj is not None and (obj.get("metadata") or {}).get("uid") == uid:
                self.book.remember(pod_ref(obj))
        try:
            res = self.book.reserve(uid, node)
        except SlotTaken as exc:
            log.info("bind %s/%s -> %s refused: %s", ns, name, node, exc,
                     extra={"node": node, "decision": "bind-refused"})
            return {"Error": f"toposched: {exc}"}
        if self.binder is None:
            if res is not None:
                self.book.confirm(res)
            return {"Error": ""}
        try:
            self.binder(ns, name, uid, node)
        except Exception as exc:  # API refused (pod gone, already bound, ...) or unreachable
            if res is not None:
                self.book.release(res)
            log.info("bind %s/%s -> %s failed: %s", ns, name, node, exc,
                     extra={"node": node, "decision": "bind-failed"})
            return {"Error": f"toposched: binding {ns}/{name} to {node} failed: {_api_message(exc)}"}
        if res is not None:
            self.book.confirm(res)
        return {"Error": ""}


def _node_signature(obj: Obj) -> tuple[Any, ...]:
    """What filter/prioritize read from a node (labels, taints, cordon, condition statuses,
    allocatable): a kubelet/KWOK heartbeat that only bumps timestamps leaves it unchanged."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    conds = tuple((c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or ())
    return (
        meta.get("labels"),
        spec.get("taints"),
        spec.get("unschedulable"),
        conds,
        status.get("allocatable"),
    )


def _api_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if body:
        try:
            return str(json.loads(body).get("message") or body)
        except (ValueError, AttributeError):
            return str(body)
    return str(exc)


class ExtenderService:
    """Informers + :class:`Extender` + the Kubernetes binder."""

    def __init__(self, api: Api, book: SlotBook | None = None) -> None:
        self.api = api
        self.book = book or SlotBook()
        self.unknown = UnknownValues()
        self.nodes = Informer(api, NODES)
        # Only pods of our scheduler can hold slots (core-contracts), and the API server filters
        # on spec.schedulerName, so a large cluster's other pods never reach this process.
        self.pods = Informer(api, PODS, field_selector=f"spec.schedulerName={self.book.scheduler_name}")
        self.workloads = Informer(api, WORKLOADS)
        # The workload's Topology levels judge compactness in prioritize. Not waited for: until
        # they are listed (or where RBAC does not allow it) the HyperPod levels are used.
        self.flavors = Informer(api, RESOURCE_FLAVORS, optional=True)
        self.topologies = Informer(api, TOPOLOGIES, optional=True)
        self.nodes.add_handler(self._on_node)
        self.flavors.add_handler(self._on_flavor)
        self.topologies.add_handler(self._on_topology)
        self.pods.add_handler(self._on_pod)
        self.workloads.add_handler(self._on_workload)
        self.extender = Extender(self.book, binder=self._bind, pod_lookup=self._lookup)

    def _on_node(self, event: str, obj: Obj, old: Obj | None) -> None:
        if event == "DELETED":
            self.book.delete_node(obj["metadata"]["name"])
            return
        if old is not None and _node_signature(old) == _node_signature(obj):
            return  # heartbeat-only status update: nothing the decisions read changed
        health = self.book.upsert_node(node_from_k8s(obj))
        if self.unknown.first(health):
            log.warning("node %s: %s", obj["metadata"]["name"], health.reason)

    def _on_pod(self, event: str, obj: Obj, old: Obj | None) -> None:
        ref = pod_ref(obj)
        if event == "DELETED":
            self.book.forget_pod(ref)
        else:
            self.book.observe_pod(ref)

    def _on_workload(self, event: str, obj: Obj, old: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        if event == "DELETED":
            self.book.delete_workload(meta.get("namespace") or "default", meta.get("name") or "")
        else:
            self.book.upsert_workload(workload_view(obj))

    def _on_flavor(self, event: str, obj: Obj, old: Obj | None) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        if event == "DELETED":
            self.book.delete_flavor(name)
        else:
            self.book.upsert_flavor(name, (obj.get("spec") or {}).get("topologyName"))

    def _on_topology(self, event: str, obj: Obj, old: Obj | None) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        if event == "DELETED":
            self.book.delete_topology(name)
        else:
            levels = [str(lv.get("nodeLabel") or "") for lv in (obj.get("spec") or {}).get("levels") or ()]
            self.book.upsert_topology(name, levels)

    def _bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.api.request("POST", PODS.path(namespace, name, "binding"), body=body, timeout=10)

    def _lookup(self, namespace: str, name: str) -> Obj | None:
        cached = self.pods.get(f"{namespace}/{name}")
        if cached is not None:
            return cached
        try:
            return self.api.get(PODS, name, namespace)
        except Exception:  # gone, or API unreachable: bind proceeds as pass-through-or-refuse
            return None

    def start(self, sync_timeout_s: float = 120) -> None:
        for inf in (self.nodes, self.pods, self.workloads, self.flavors, self.topologies):
            inf.start()
        wait_synced([self.nodes, self.pods, self.workloads], sync_timeout_s)
        self.extender.ready.set()

    def stop(self) -> None:
        for inf in (self.nodes, self.pods, self.workloads, self.flavors, self.topologies):
            inf.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: kube-scheduler's Go client reuses connections
    server: ExtenderHTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body are two writes; without NODELAY, Nagle + the client's delayed ACK add
        # ~40 ms to every keep-alive answer.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, code: int, payload: Any) -> None:
        data = json.dumps(payload, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        ext = self.server.extender
        if self.path == "/healthz":
            self._send(200, {"status": "ok"})
        elif self.path == "/readyz":
            ready = ext.ready.is_set()
            self._send(200 if ready else 503, {"ready": ready})
        elif self.path == "/stats":
            self._send(200, {"requests": self.server.stats.snapshot(), "book": ext.book.stats()})
        else:
            self._send(404, {"Error": f"no such path {self.path}"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        verb = self.path.rstrip("/").rsplit("/", 1)[-1]
        handler = {
            "filter": self.server.extender.filter,
            "prioritize": self.server.extender.prioritize,
            "bind": self.server.extender.bind,
        }.get(verb)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if handler is None:
            self._send(
                404, {"Error": f"toposched extender serves /filter, /prioritize and /bind, not {self.path}"}
            )
            return
        start = time.perf_counter()
        try:
            args = json.loads(raw or b"{}")
            if not isinstance(args, dict):
                raise ValueError("request body is not a JSON object")
            result: Any = handler(args)
        except Exception as exc:
            log.exception("%s failed", verb)
            result = [] if verb == "prioritize" else {"Error": f"toposched extender {verb}: {exc}"}
        self.server.stats.record(verb, time.perf_counter() - start)
        self._send(200, result)


class ExtenderHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, extender: Extender, bind: str, port: int) -> None:
        self.extender = extender
        self.stats = Stats()
        super().__init__((bind, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="extender-http", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
