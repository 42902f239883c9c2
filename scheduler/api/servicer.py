"""``toposched.v1.Placement``: the engine's gRPC door (same answers as the CLI commands).

Place calls ``scheduler.adapter.placement`` (``build_tree``, ``compute_placement``, ``to_json``)
and the request files go through ``scheduler.adapter.files`` — the code ``toposched place``
runs — so the semantics and the messages are the same; only the location prefix of a bad
document differs (``workload.manifest: ...`` names the request field instead of a file).
GetTopology builds the view with ``scheduler.adapter.topology_view.view_from_objects``.

Status codes: INVALID_ARGUMENT (message starts with the field path), NOT_FOUND (unknown job
or flavor), FAILED_PRECONDITION (no live snapshot on a server started without a cluster),
DEADLINE_EXCEEDED (the deadline leaves no time to work), UNIMPLEMENTED (Explain/Simulate while
the admission cycle does not exist; the message names what is missing).
Explain is ``scheduler.explain.explain`` (the code of ``toposched explain``); Simulate runs
``scheduler.sim`` and streams its progress.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import grpc

from scheduler.adapter import files as _files
from scheduler.adapter.manifest.checks import manifest_errors
from scheduler.adapter.manifest.shape import object_errors
from scheduler.adapter.placement import build_tree, check_levels, compute_placement, to_json
from scheduler.adapter.topology_view import view_from_objects
from scheduler.api.convert import (
    DECISION_ENUM,
    DECISION_NAMES,
    SOLVER_NAMES,
    FieldError,
    capacity_levels,
    place_json_to_response,
    structured_workload,
    view_to_response,
)
from scheduler.api.engine import Engine, EngineSnapshot
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc
from scheduler.api.limits import (
    LimitExceeded,
    check_simulate_request,
    check_simulate_sizes,
    effective_budget_ms,
    explain_budget_s,
)
from scheduler.core.health import HealthPolicy
from scheduler.core.nodes import HOSTNAME_LABEL
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import WorkloadSpec
from scheduler.errors import UserError
from scheduler.explain import NotFound, explain
from scheduler.sim.engine import Simulator
from scheduler.sim.model import Progress
from scheduler.sim.scenario import ClusterError, jobs_from_trace, summarize, world_from_objects
from scheduler.sim.trace import TraceError, trace_from_data
from scheduler.topoview.model import unknown_levels

log = logging.getLogger(__name__)

DEFAULT_TIME_BUDGET_MS = 100  # as `toposched place --time-budget-ms`
# Part of the remaining deadline kept for building the answer and sending it back.
DEADLINE_RESERVE_S = 0.02
MIN_WORK_S = 0.002
STREAM_POLL_S = 0.2


class _Status(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _field_text(text_bytes: bytes, field: str) -> str:
    try:
        return _files.decode_text(text_bytes, "field", field)  # the CLI's reader: UTF-8/16/32, no binary
    except UserError as err:
        raise _user_error_to_field(err) from err


def _docs(data: bytes, field: str) -> list[tuple[str, dict[str, Any]]]:
    return _files.parse_documents(_field_text(data, field), "field", field)


def _user_error_to_field(err: UserError) -> FieldError:
    text = str(err).removeprefix("field ")
    field = text.split(":", 1)[0]
    return FieldError(field, text.split(": ", 1)[1] if ": " in text else text)


class PlacementServicer(placement_pb2_grpc.PlacementServicer):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # ------------------------------------------------------------------ helpers
    def _live(self) -> EngineSnapshot:
        snap = self.engine.snapshot()
        if snap is None:
            raise _Status(grpc.StatusCode.FAILED_PRECONDITION,
                          "no live snapshot: this server was started without a cluster; send nodes (and pods) "
                          "in the request")
        return snap

    @staticmethod
    def _remaining(context: grpc.ServicerContext) -> float | None:
        remaining = context.time_remaining()
        if remaining is None or remaining > 1e8:  # no deadline set
            return None
        if remaining < MIN_WORK_S:
            raise _Status(grpc.StatusCode.DEADLINE_EXCEEDED, "the call deadline leaves no time to work")
        return float(remaining)

    def _run(self, context: grpc.ServicerContext, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except FieldError as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))
        except (_Status, LimitExceeded) as err:
            context.abort(err.code, err.message)
        raise AssertionError("unreachable")  # context.abort raises

    # ------------------------------------------------------------------ Place
    def Place(self, request: pb.PlaceRequest, context: grpc.ServicerContext) -> pb.PlaceResponse:
        return self._run(context, self._place, request, context)  # type: ignore[no-any-return]

    def _workload(self, request: pb.PlaceRequest) -> WorkloadSpec:
        which = request.workload.WhichOneof("source") if request.HasField("workload") else None
        if which is None:
            raise FieldError("workload", "required: a Job/Workload manifest (JSON or YAML) or the structured form")
        if which == "structured":
            return structured_workload(request.workload.structured)
        try:
            return _files.workload_from_documents(_docs(request.workload.manifest, "workload.manifest"), "field",
                                                  "workload.manifest",
                                                  partial(manifest_errors, gates=self.engine.config.feature_gates),
                                                  self.engine.config.release)
        except UserError as err:
            raise _user_error_to_field(err) from err

    def _place(self, request: pb.PlaceRequest, context: grpc.ServicerContext) -> pb.PlaceResponse:
        if request.solver not in SOLVER_NAMES:
            raise FieldError("solver", f"unknown value {request.solver}")
        if request.time_budget_ms < 0:
            raise FieldError("time_budget_ms", f"must be >= 0, got {request.time_budget_ms}")
        workload = self._workload(request)
        topology = None
        try:
            if request.topology:
                topology = _files.topology_from_documents(_docs(request.topology, "topology"), "field", "topology")
            flavor_used = ""
            live: EngineSnapshot | None = None
            if request.nodes:
                if request.flavor:
                    raise FieldError("flavor", "must be empty when nodes are given (offline placement; use "
                                               "topology for the levels)")
                nodes = _files.nodes_from_documents(_docs(request.nodes, "nodes"), "field", "nodes", object_errors)
                pods = (_files.pods_from_documents(_docs(request.pods, "pods"), "field", "pods", object_errors)
                        if request.pods else [])
                tree = build_tree(nodes, pods, topology)
            else:
                if request.pods:
                    raise FieldError("pods", "only read together with nodes (the live snapshot has its own pods)")
                live = self._live()
                tree, flavor_used = self._live_tree(live, request.flavor, topology)
            check_levels(tree, workload, "field workload")
        except UserError as err:
            raise _user_error_to_field(err) from err
        if request.whole_capacity:  # the healthy nodes with nothing admitted ("could it ever fit here")
            tree = tree.clone()
            tree.free = tree.allocatable.copy()
        budget_ms = effective_budget_ms(request.time_budget_ms, DEFAULT_TIME_BUDGET_MS, self._remaining(context),
                                        DEADLINE_RESERVE_S)
        placement = compute_placement(tree, workload, SOLVER_NAMES[request.solver], budget_ms, self.engine.config)
        resp = place_json_to_response(to_json(tree, placement), topology=tree.name, flavor=flavor_used,
                                      time_budget_ms=budget_ms)
        if live is not None:  # the worker's own queue, for the MultiKueue dispatcher
            queued = live.backlog(flavor_used)
            resp.backlog_gpus, resp.backlog_pods = queued.gpus, queued.pods
        return resp

    @staticmethod
    def _live_tree(snap: EngineSnapshot, flavor: str,
                   topology: tuple[str, tuple[str, ...]] | None) -> tuple[TopologyTree, str]:
        if flavor:
            tree = snap.flavor_tree(flavor)
            if tree is None:
                known = ", ".join(snap.tas_flavors()) or "none"
                raise _Status(grpc.StatusCode.NOT_FOUND,
                              f"flavor: no TAS ResourceFlavor named {flavor!r} (TAS flavors: {known})")
            return tree, flavor
        if topology is None:
            tas = snap.tas_flavors()
            if len(tas) == 1:
                tree = snap.flavor_tree(tas[0])
                if tree is not None:
                    return tree, tas[0]
            return snap.tree(), ""
        return snap.tree(topology[0], topology[1]), ""

    # ------------------------------------------------------------------ Explain
    def Explain(self, request: pb.ExplainRequest, context: grpc.ServicerContext) -> pb.ExplainResponse:
        return self._run(context, self._explain, request, context)  # type: ignore[no-any-return]

    def _explain(self, request: pb.ExplainRequest, context: grpc.ServicerContext) -> pb.ExplainResponse:
        if not request.namespace:
            raise FieldError("namespace", "required")
        if not request.name:
            raise FieldError("name", "required")
        snap = self._live()
        budget_s = explain_budget_s(self.engine.time_budget_s, self._remaining(context), DEADLINE_RESERVE_S)
        try:
            result = explain(snap, request.namespace, request.name, solver=self.engine.solver,
                             time_budget_s=budget_s, config=self.engine.config)
        except NotFound as err:
            raise _Status(grpc.StatusCode.NOT_FOUND, str(err)) from err
        return explain_dict_to_response(result)

    # ------------------------------------------------------------------ GetTopology
    def GetTopology(self, request: pb.GetTopologyRequest, context: grpc.ServicerContext) -> pb.GetTopologyResponse:
        return self._run(context, self._topology, request)  # type: ignore[no-any-return]

    def _topology(self, request: pb.GetTopologyRequest) -> pb.GetTopologyResponse:
        levels = [lv for lv in request.levels]
        for i, level in enumerate(levels):
            if not level:
                raise FieldError(f"levels[{i}]", "empty label key")
        if len(set(levels)) != len(levels):
            raise FieldError("levels", "items must be unique")
        levels = [lv for lv in levels if lv != HOSTNAME_LABEL]
        snap = self._live()
        tree: TopologyTree | None = None
        if request.flavor:
            tree = snap.flavor_tree(request.flavor)
            if tree is None:
                known = ", ".join(snap.tas_flavors()) or "none"
                raise _Status(grpc.StatusCode.NOT_FOUND,
                              f"flavor: no TAS ResourceFlavor named {request.flavor!r} (TAS flavors: {known})")
            if not levels:
                levels = [lv for lv in tree.levels if lv != HOSTNAME_LABEL]
        missing = unknown_levels(snap.nodes, levels) if levels else []
        if missing:
            raise FieldError("levels", f"{missing[0]!r} is not a label of any node")
        policy = HealthPolicy(unlabelled_nodes_healthy=not request.unlabelled_unhealthy,
                              require_deep_health_passed=request.require_deep_health)
        try:
            view = view_from_objects(snap.nodes_raw, snap.pods_raw, levels or None, policy, snap.source)
        except UserError as err:
            raise _Status(grpc.StatusCode.FAILED_PRECONDITION, str(err)) from err
        if tree is None:
            tree = snap.tree(levels=capacity_levels(view.levels))
        return view_to_response(view, tree, omit_nodes=request.omit_nodes, source=snap.source,
                                flavor=request.flavor)

    # ------------------------------------------------------------------ Simulate
    def Simulate(self, request: pb.SimulateRequest, context: grpc.ServicerContext) -> Iterator[pb.SimulateEvent]:
        """Progress events on the simulated clock (every ``progress_every_s``, else every cycle batch),
        then one summary per variant (this API runs the single configured policy: one summary)."""
        world, trace = self._run(context, self._simulate_inputs, request)
        events: list[pb.SimulateEvent] = []
        jobs, failures = self._run(context, self._simulate_jobs, trace, world, jobs_from_trace)

        def progress(p: Progress) -> None:
            events.append(pb.SimulateEvent(progress=pb.SimulateProgress(
                time_s=p.time_s, submitted=p.submitted, admitted=p.admitted, finished=p.finished,
                pending=p.pending, preemptions=p.preemptions, gpu_utilization=p.gpu_utilization)))

        solver = SOLVER_NAMES[request.solver]
        # Cancelled, past its deadline or done: the simulation stops at its next instant or cycle
        # instead of competing with admission for the controller's cores (issue 30).
        stop = threading.Event()
        if not context.add_callback(stop.set):
            return
        sim = Simulator(world, jobs, failures, solver="greedy" if solver == "auto" else solver,
                        time_budget_s=(request.time_budget_ms or DEFAULT_TIME_BUDGET_MS) / 1000,
                        horizon_s=request.horizon_s or None, progress=progress,
                        progress_every_s=request.progress_every_s, should_stop=stop.is_set)
        # Stream while simulating: the engine calls back synchronously, so run it in steps.
        result_box: list[Any] = []
        done = threading.Event()

        def work() -> None:
            try:
                result_box.append(sim.run())
            except Exception as exc:  # reported to the client below
                result_box.append(exc)
            finally:
                done.set()

        threading.Thread(target=work, name="simulate", daemon=True).start()
        sent = 0
        try:
            while not done.wait(STREAM_POLL_S) or sent < len(events):
                if not context.is_active():
                    return
                while sent < len(events):
                    yield events[sent]
                    sent += 1
                if done.is_set() and sent >= len(events):
                    break
        finally:
            stop.set()  # also when the stream is closed without a callback (the generator is dropped)
        result = result_box[0]
        if isinstance(result, Exception):
            context.abort(grpc.StatusCode.INTERNAL, f"simulation failed: {result}")
        s = summarize(result)
        yield pb.SimulateEvent(summary=pb.SimulateSummary(
            makespan_s=s["makespan_s"], submitted=s["submitted"], admitted=s["admitted"], finished=s["finished"],
            pending=s["pending"], preemptions=s["preemptions"], wait_p50_s=s["wait_s"]["p50"],
            wait_p99_s=s["wait_s"]["p99"], gpu_utilization=s["gpu_utilization"],
            mean_layer3_domains=s["mean_domains_multi_pod"], wall_s=s["wall_s"]))

    @staticmethod
    def _simulate_jobs(trace: Any, world: Any, jobs_from_trace: Any) -> Any:
        try:
            return jobs_from_trace(trace, world)
        except TraceError as err:
            raise FieldError("trace", str(err)) from err

    def _simulate_inputs(self, request: pb.SimulateRequest) -> tuple[Any, Any]:
        for name in ("cluster", "queues", "trace"):
            if not getattr(request, name):
                raise FieldError(name, "required")
        if request.solver not in SOLVER_NAMES:
            raise FieldError("solver", f"unknown value {request.solver}")
        for name in ("time_budget_ms", "progress_every_s", "horizon_s"):
            if getattr(request, name) < 0:
                raise FieldError(name, f"must be >= 0, got {getattr(request, name)}")
        check_simulate_request(request.time_budget_ms, request.horizon_s)
        try:
            cluster = [o for _, o in _files.node_objects(_docs(request.cluster, "cluster"), "field", "cluster",
                                                          object_errors)]
        except UserError as err:
            raise _user_error_to_field(err) from err
        except ValueError as err:
            raise FieldError("cluster", str(err)) from err
        try:
            queues = [o for _, o in _docs(request.queues, "queues")]
        except UserError as err:
            raise _user_error_to_field(err) from err
        try:
            world = world_from_objects(cluster, queues)
        except ClusterError as err:
            raise FieldError("cluster", str(err)) from err
        except ValueError as err:
            raise FieldError("queues", str(err)) from err
        try:
            data = _files.parse_data(_field_text(request.trace, "trace"), "field", "trace", "a trace (jobs, failures)")
        except UserError as err:
            raise _user_error_to_field(err) from err
        try:
            trace = trace_from_data(data)
        except TraceError as err:
            raise FieldError("trace", str(err)) from err
        check_simulate_sizes(len(world.nodes), trace)
        return world, trace

    # ------------------------------------------------------------------ WatchDecisions
    def WatchDecisions(self, request: pb.WatchDecisionsRequest,
                       context: grpc.ServicerContext) -> Iterator[pb.Decision]:
        kinds = self._run(context, self._watch_kinds, request)
        hub = self.engine.hub
        sub = hub.subscribe(request.namespace)
        context.add_callback(lambda: hub.unsubscribe(sub))
        try:
            while context.is_active() and not sub.closed:
                item = sub.get(STREAM_POLL_S)
                if item is None:
                    continue
                kind_name, workload, detail, at, dropped = item
                kind = DECISION_ENUM.get(kind_name, pb.DECISION_KIND_OTHER)
                if kinds and kind not in kinds:
                    continue
                yield decision_message(kind, kind_name, workload, detail, at, dropped)
        finally:
            hub.unsubscribe(sub)

    @staticmethod
    def _watch_kinds(request: pb.WatchDecisionsRequest) -> set[int]:
        out = set()
        for i, kind in enumerate(request.kinds):
            if kind == pb.DECISION_KIND_UNSPECIFIED or (kind not in DECISION_NAMES and kind != pb.DECISION_KIND_OTHER):
                raise FieldError(f"kinds[{i}]", f"not a decision kind: {kind}")
            out.add(int(kind))
        return out


def explain_dict_to_response(result: Mapping[str, Any]) -> pb.ExplainResponse:
    """``scheduler.explain.explain``'s answer as the typed message (+ the whole of it in details_json)."""
    return pb.ExplainResponse(
        namespace=result["namespace"], name=result["name"], workload=result.get("workload", ""),
        cluster_queue=result.get("clusterQueue", ""), admitted=bool(result.get("admitted")),
        reasons=[pb.PendingReason(reason=r["reason"], message=r["message"], pod_set=r.get("podSet", ""))
                 for r in result.get("reasons", [])],
        details_json=json.dumps(result, sort_keys=True))


def decision_message(kind: int, kind_name: str, workload: Mapping[str, Any], detail: Mapping[str, Any], at: float,
                     dropped: int = 0) -> pb.Decision:
    meta = workload.get("metadata") or {}
    job = next((ref.get("name", "") for ref in meta.get("ownerReferences") or () if ref.get("controller")), "")
    cq = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
    return pb.Decision(
        kind=pb.DecisionKind.ValueType(kind), kind_name=kind_name, namespace=meta.get("namespace", ""),
        workload=meta.get("name", ""),
        job=job, cluster_queue=cq or "",
        detail={str(k): v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
                for k, v in detail.items()},
        time_unix=at or time.time(), dropped_before=dropped,
    )
