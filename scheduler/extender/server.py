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

import dataclasses
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import ApiException

from scheduler.adapter.kinds.registry import BY_GROUP_KIND
from scheduler.core.health import UnknownValues
from scheduler.core.nodes import node_from_k8s
from scheduler.errors import UserError
from scheduler.extender.book import SlotBook, reserve_chosen
from scheduler.extender.gate import CachedOwners, GateVerdict, OwnerLookup, OwnerRef, judge
from scheduler.extender.occupancy import SlotTaken
from scheduler.extender.tls import ExtenderTLS, unauthenticated_bind_error
from scheduler.extender.wire import BindingArgs, FilterArgs, WireError, check_pod, decode_body, field
from scheduler.extender.workload_view import PodRef, pod_ref, view_names, without_pod_templates, workload_view
from scheduler.http.bounded import BoundedHTTPServer, serve_in_thread
from scheduler.http.connection import Connection
from scheduler.http.lean import LeanRequestHandler
from scheduler.http.limits import EXTENDER_CAPS, ConnectionLimits
from scheduler.k8s.informer import (
    NODES,
    PODS,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    WORKLOADS,
    Api,
    Informer,
    Obj,
    Resource,
    wait_synced,
)

log = logging.getLogger("toposched.extender")


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
        # (verb, seconds) callbacks, e.g. the Prometheus histogram (scheduler.http.request_metrics)
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
    benchmark can time it in-process and the server is a thin shell around it. Every verb
    answers any payload: one it cannot decode gets an ``Error`` (filter, bind) or no opinion
    (prioritize), never a pass."""

    def __init__(
        self,
        book: SlotBook,
        binder: Callable[[str, str, str, str], None] | None = None,
        pod_lookup: Callable[[str, str], Obj | None] | None = None,
        owner_lookup: OwnerLookup | None = None,
    ) -> None:
        self.book = book
        self.binder = binder  # (namespace, name, uid, node) -> None, raises on failure
        self.pod_lookup = pod_lookup  # (namespace, name) -> pod dict or None
        self.owner_lookup = owner_lookup  # the admission gate's owner reads (gate.judge)
        self.ready = threading.Event()

    def filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        try:
            request = FilterArgs.decode(args)
        except WireError as exc:
            log.info("filter: undecodable request: %s", exc)
            return _filter_result(field(args, "NodeNames") is not None or field(args, "Nodes") is None,
                                  [], [], {}, {}, f"toposched extender filter: bad request: {exc}")
        pod = pod_ref(request.pod)
        names, items = request.names, request.items
        group = self.book.remember(pod)
        if group is None:
            refusal = self._gate(request.pod, pod)
            if refusal is None:  # pass-through: echo the input
                return _filter_result(request.cache_capable, names, items or [], {}, {}, "")
            log.info("filter %s/%s refused (%s): %s", pod.namespace, pod.name, refusal.reason, refusal.message)
            return _filter_result(request.cache_capable, [], [], {}, {}, refusal.message)
        if not self.ready.is_set():
            return _filter_result(request.cache_capable, [], [], {}, {},
                                  "toposched extender is starting (caches not synced yet); retrying")
        payload = None if items is None else {name: node_from_k8s(n) for name, n in zip(names, items, strict=True)}
        out = self.book.filter(pod, names, payload)  # decides, writes nothing
        out = reserve_chosen(self.book, pod, out)  # --binder kube-scheduler: the chosen node's slot taken
        if out.error:
            log.info("filter %s/%s: %s", pod.namespace, pod.name, out.error,
                     extra={"workload": f"{pod.namespace}/{pod.workload}" if pod.workload else "",
                            "decision": "filter-refused"})
        else:
            log.debug("filter %s/%s: %d node(s) offered, %d passed", pod.namespace, pod.name, len(names),
                      len(out.passed))
        passed_items: list[Any] = []
        if items is not None:
            keep = set(out.passed)
            passed_items = [n for name, n in zip(names, items, strict=True) if name in keep]
        return _filter_result(request.cache_capable, out.passed, passed_items, out.failed, out.unresolvable, out.error)

    def _recall(self, namespace: str, name: str, uid: str) -> str | None:
        """Teach the book a pod it has no filter record of (read from the API), judging it as
        filter would; why it may not be bound, or None. A pod that cannot be found with that
        uid is refused: the extender binds only pods it knows (issue 30)."""
        unknown = (f"toposched: no pod {namespace}/{name} with uid {uid} went through this extender's filter or "
                   "is held by the API server; not binding a pod the extender does not know")
        found = self.pod_lookup(namespace, name) if self.pod_lookup is not None else None
        if found is None:
            return unknown
        try:
            obj = check_pod(found, f"pod {namespace}/{name}")
        except WireError as exc:
            return f"toposched: cannot read {exc}; retrying"
        if (obj.get("metadata") or {}).get("uid") != uid:
            return unknown
        ref = pod_ref(obj)
        if self.book.remember(ref) is not None:
            return None
        refusal = self._gate(obj, ref)
        return refusal.message if refusal is not None else None

    def _gate(self, pod: Mapping[str, Any], ref: PodRef) -> GateVerdict | None:
        """The admission gate for a pod the slot book does not own (no workload annotation);
        pods of other profiles are not ours to judge."""
        if ref.scheduler_name != self.book.scheduler_name:
            return None
        return judge(pod, self.owner_lookup)

    def prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        try:
            request = FilterArgs.decode(args)
        except WireError as exc:
            log.info("prioritize: undecodable request: %s", exc)
            return []  # no opinion; filter refuses the same body
        pod = pod_ref(request.pod)
        return [{"Host": host, "Score": score} for host, score in self.book.prioritize(pod, request.names)]

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        try:
            request = BindingArgs.decode(args)
        except WireError as exc:
            log.info("bind: undecodable request: %s", exc)
            return {"Error": f"toposched extender bind: bad request: {exc}"}
        ns, name, uid, node = request.namespace, request.name, request.uid, request.node
        if not uid:
            return {"Error": "toposched extender bind: PodUID is required (kube-scheduler always sends it)"}
        known, _ = self.book.group_for(uid)
        if not known:
            # Restarted between filter and bind, or the pod never went through filter.
            refusal = self._recall(ns, name, uid)
            if refusal is not None:
                log.info("bind %s/%s refused: %s", ns, name, refusal)
                return {"Error": refusal}
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


def _filter_result(
    cache_capable: bool,
    names: list[str],
    items: list[Any],
    failed: dict[str, str],
    unresolvable: dict[str, str],
    error: str,
) -> dict[str, Any]:
    """extender/v1 ``ExtenderFilterResult``: names back when names were sent, else Node objects."""
    return {
        "Nodes": None if cache_capable else {"apiVersion": "v1", "kind": "NodeList", "items": items},
        "NodeNames": names if cache_capable else None,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": error,
    }


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
        self.workloads = Informer(api, WORKLOADS, transform=without_pod_templates)
        # The workload's Topology levels judge compactness in prioritize. Not waited for: until
        # they are listed (or where RBAC does not allow it) the HyperPod levels are used.
        self.flavors = Informer(api, RESOURCE_FLAVORS, optional=True)
        self.topologies = Informer(api, TOPOLOGIES, optional=True)
        self.nodes.add_handler(self._on_node)
        self.flavors.add_handler(self._on_flavor)
        self.topologies.add_handler(self._on_topology)
        self.pods.add_handler(self._on_pod)
        self.workloads.add_handler(self._on_workload)
        self.extender = Extender(self.book, binder=self._bind, pod_lookup=self._lookup,
                                 owner_lookup=CachedOwners(self._get_owner))

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
            view = workload_view(obj)
            for name in view_names(obj):  # an elastic job's slices (workload_view.view_names)
                self.book.upsert_workload(dataclasses.replace(view, name=name))

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
        except Exception:  # gone, or API unreachable: bind refuses it (kube-scheduler retries)
            return None

    def _get_owner(self, namespace: str, ref: OwnerRef) -> Obj | None:
        """A live GET of a pod's owner (a governed kind): only pods routed to toposched
        without a workload annotation ask, and answers are cached (gate.CachedOwners). A short
        timeout: filter must answer within kube-scheduler's httpTimeout (5 s)."""
        resource = Resource(ref.group, ref.version, BY_GROUP_KIND[(ref.group, ref.kind)].plural)
        try:
            return self.api.request("GET", resource.path(namespace, ref.name), timeout=2)  # type: ignore[no-any-return]
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def start(self, sync_timeout_s: float = 120) -> None:
        for inf in (self.nodes, self.pods, self.workloads, self.flavors, self.topologies):
            inf.start()
        wait_synced([self.nodes, self.pods, self.workloads], sync_timeout_s)
        self.extender.ready.set()

    def stop(self) -> None:
        for inf in (self.nodes, self.pods, self.workloads, self.flavors, self.topologies):
            inf.stop()


# Limits. kube-scheduler sends filter/prioritize one pod at a time (its scheduling cycle is
# serial) and binds in parallel goroutines with tiny bodies. With nodeCacheCapable (the default)
# a 5,000-node filter body is about 150 KiB; with full Node objects about 25 MiB.
MAX_BODY = 32 * 1024 * 1024
# Binds (with --binder extender) wait on the API server's answer to our Binding POST, and
# kube-scheduler sends them in parallel; filter and prioritize are CPU under the GIL.
WORKERS = 16
VERBS = ("filter", "prioritize", "bind")


def error_answer(verb: str, message: str) -> Any:
    """The verb's own answer shape carrying ``message``: a refusal kube-scheduler can decode
    (prioritize has no error field: no opinion)."""
    if verb == "filter":
        return _filter_result(True, [], [], {}, {}, message)
    if verb == "prioritize":
        return []
    return {"Error": message}


def _encode(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def answer(extender: Extender, verb: str, raw: bytes) -> bytes:
    """One request body of ``verb`` in, the verb's answer out, encoded; never raises."""
    try:
        args = decode_body(raw)
    except WireError as exc:
        return _encode(error_answer(verb, f"toposched extender {verb}: bad request: {exc}"))
    handler = {"filter": extender.filter, "prioritize": extender.prioritize, "bind": extender.bind}[verb]
    try:
        return _encode(handler(args))
    except Exception as exc:  # a bug of ours (in deciding or encoding): refuse, and say so
        log.exception("%s failed", verb)
        return _encode(error_answer(verb, f"toposched extender {verb}: internal error ({type(exc).__name__}: {exc})"))


class _Handler(LeanRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: kube-scheduler's Go client reuses connections
    server: ExtenderHTTPServer  # type: ignore[assignment]  # the bounded server, not a socketserver

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, code: int, payload: Any) -> None:
        data = payload if isinstance(payload, bytes) else _encode(payload)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        # Headers and body in one buffer (end_headers would flush the headers on their own): the
        # server sends an answer with one write (with TCP_NODELAY; two writes would meet Nagle
        # and the client's delayed ACK, ~40 ms).
        buffered: list[bytes] = getattr(self, "_headers_buffer")  # noqa: B009 - set by send_response
        head = b"".join(buffered) + b"\r\n"
        buffered.clear()
        self.wfile.write(head + data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        ext = self.server.extender
        if self.path == "/healthz":
            self._send(200, {"status": "ok"})
        elif self.path == "/readyz":
            ready = ext.ready.is_set()
            self._send(200 if ready else 503, {"ready": ready})
        elif self.path == "/stats":
            self._send(200, {"requests": self.server.stats.snapshot(), "book": ext.book.stats(),
                             "connections": self.server.open_connections})
        else:
            self._send(404, {"Error": f"no such path {self.path}"})

    def _body(self, verb: str) -> bytes | None:
        """The request body, or None after answering a request whose body cannot be taken
        (no usable Content-Length, over :data:`MAX_BODY`, chunked); such a connection is closed,
        since the unread body would be taken for the next request."""
        if self.headers.get("Transfer-Encoding"):
            problem = "send the body with a Content-Length, not chunked"
        else:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if 0 <= length <= MAX_BODY:
                return self.rfile.read(length) if length else b""
            problem = f"request body of {length} bytes: the limit is {MAX_BODY} bytes (send a Content-Length)"
        self.close_connection = True
        self._send(200, error_answer(verb, f"toposched extender {verb}: {problem}"))
        return None

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        verb = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        raw = self._body(verb)
        if raw is None:
            return
        if verb not in VERBS:
            self._send(404, {"Error": f"toposched extender serves /filter, /prioritize and /bind, not {self.path}"})
            return
        start = time.perf_counter()
        result = self.server.decide(verb, raw)
        self.server.stats.record(verb, time.perf_counter() - start)
        self._send(200, result)


def extender_limits(max_connections: int = EXTENDER_CAPS.total,
                    max_per_client: int = EXTENDER_CAPS.per_client) -> ConnectionLimits:
    return ConnectionLimits(max_connections=max_connections, max_per_client=max_per_client, workers=WORKERS,
                            max_body_bytes=MAX_BODY)


class ExtenderHTTPServer(BoundedHTTPServer):
    """The extender's HTTP(S) door (``scheduler.http.bounded``): plain HTTP only on loopback; with
    ``tls``, HTTPS that serves only clients presenting a certificate the client CA signed (and,
    with ``tls.client_names``, naming one of them): kube-scheduler's ``tlsConfig``."""

    def __init__(self, extender: Extender, bind: str, port: int, *, limits: ConnectionLimits | None = None,
                 tls: ExtenderTLS | None = None) -> None:
        refusal = unauthenticated_bind_error(bind, tls is not None)
        if refusal is not None:
            raise UserError(refusal)
        self.extender = extender
        self.stats = Stats()
        self.tls = tls
        super().__init__((bind, port), _Handler, limits=limits or extender_limits(),
                         ssl_context=tls.server_context() if tls is not None else None, name="extender")

    def accept_peer(self, conn: Connection) -> bool:
        if self.tls is None or self.tls.allows(conn.sock):
            return True
        log.warning("closed a connection from %s: its client certificate names none of %s", conn.client,
                    ", ".join(sorted(self.tls.client_names)))
        return False

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def decide(self, verb: str, raw: bytes) -> bytes:
        return answer(self.extender, verb, raw)

    def start(self) -> threading.Thread:
        return serve_in_thread(self, 0.1, "extender-http")

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
