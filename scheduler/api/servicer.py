"""``toposched.v1.Placement``: the engine's gRPC door (same answers as the CLI commands).

Place calls ``scheduler.commands.place`` (``build_tree``, ``compute_placement``, ``to_json``)
and the request files go through ``scheduler.commands._files`` — the code ``toposched place``
runs — so the semantics and the messages are the same; only the location prefix of a bad
document differs (``workload.manifest: ...`` names the request field instead of a file).
GetTopology builds the view with ``scheduler.commands.topology.view_from_objects``.

Status codes: INVALID_ARGUMENT (message starts with the field path), NOT_FOUND (unknown job
or flavor), FAILED_PRECONDITION (no live snapshot on a server started without a cluster),
DEADLINE_EXCEEDED (the deadline leaves no time to work), UNIMPLEMENTED (Simulate, whose trace
driver is not built; Explain while the admission cycle does not exist; the message names what
is missing).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import grpc

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
from scheduler.api.engine import Engine, EngineSnapshot, holds_reservation
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.api.gen.toposched.v1 import placement_pb2_grpc
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import WorkloadSpec
from scheduler.errors import UserError

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


def cycle_missing() -> list[str]:
    """What of the admission cycle is not there yet (empty when Explain/Simulate can run)."""
    missing = []
    if importlib.util.find_spec("scheduler.core.cycle") is None:
        missing.append("scheduler.core.cycle.run_cycle")
    from scheduler.kube import snapshot as kube_snapshot

    if not hasattr(kube_snapshot, "build_snapshot"):
        missing.append("scheduler.kube.snapshot.build_snapshot")
    return missing


def _field_text(text_bytes: bytes, field: str) -> str:
    try:
        return text_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldError(field, f"not UTF-8 text (byte {exc.start})") from exc


def _docs(data: bytes, field: str) -> list[tuple[str, dict[str, Any]]]:
    from scheduler.commands._files import parse_documents

    return parse_documents(_field_text(data, field), "field", field)


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
        except _Status as err:
            context.abort(err.code, err.message)
        raise AssertionError("unreachable")  # context.abort raises

    # ------------------------------------------------------------------ Place
    def Place(self, request: pb.PlaceRequest, context: grpc.ServicerContext) -> pb.PlaceResponse:
        return self._run(context, self._place, request, context)  # type: ignore[no-any-return]

    def _workload(self, request: pb.PlaceRequest) -> WorkloadSpec:
        from scheduler.commands._files import workload_from_documents

        which = request.workload.WhichOneof("source") if request.HasField("workload") else None
        if which is None:
            raise FieldError("workload", "required: a Job/Workload manifest (JSON or YAML) or the structured form")
        if which == "structured":
            return structured_workload(request.workload.structured)
        try:
            return workload_from_documents(_docs(request.workload.manifest, "workload.manifest"), "field",
                                           "workload.manifest")
        except UserError as err:
            raise _user_error_to_field(err) from err

    def _place(self, request: pb.PlaceRequest, context: grpc.ServicerContext) -> pb.PlaceResponse:
        from scheduler.commands import _files
        from scheduler.commands.place import build_tree, compute_placement, to_json

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
            if request.nodes:
                if request.flavor:
                    raise FieldError("flavor", "must be empty when nodes are given (offline placement; use "
                                               "topology for the levels)")
                nodes = _files.nodes_from_documents(_docs(request.nodes, "nodes"), "field", "nodes")
                pods = (_files.pods_from_documents(_docs(request.pods, "pods"), "field", "pods")
                        if request.pods else [])
                tree = build_tree(nodes, pods, topology)
            else:
                if request.pods:
                    raise FieldError("pods", "only read together with nodes (the live snapshot has its own pods)")
                tree, flavor_used = self._live_tree(self._live(), request.flavor, topology)
        except UserError as err:
            raise _user_error_to_field(err) from err
        budget_ms = request.time_budget_ms or DEFAULT_TIME_BUDGET_MS
        remaining = self._remaining(context)
        if remaining is not None:
            budget_ms = int(min(budget_ms, max(0.0, remaining - DEADLINE_RESERVE_S) * 1000))
        placement = compute_placement(tree, workload, SOLVER_NAMES[request.solver], budget_ms)
        return place_json_to_response(to_json(tree, placement), topology=tree.name, flavor=flavor_used,
                                      time_budget_ms=budget_ms)

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
        return self._run(context, self._explain, request)  # type: ignore[no-any-return]

    def _explain(self, request: pb.ExplainRequest) -> pb.ExplainResponse:
        if not request.namespace:
            raise FieldError("namespace", "required")
        if not request.name:
            raise FieldError("name", "required")
        snap = self._live()
        job, workload = snap.find_job(request.namespace, request.name)
        if job is None and workload is None:
            raise _Status(grpc.StatusCode.NOT_FOUND,
                          f"no Job or Workload {request.name!r} in namespace {request.namespace!r}")
        resp = pb.ExplainResponse(namespace=request.namespace, name=request.name)
        if workload is None:
            resp.reasons.append(pb.PendingReason(
                reason="NoWorkload",
                message="no Workload for this Job yet: the controller creates one per Job labelled "
                        "kueue.x-k8s.io/queue-name (is the label set, is the controller running?)"))
            return resp
        resp.workload = workload["metadata"]["name"]
        admission = (workload.get("status") or {}).get("admission") or {}
        resp.cluster_queue = admission.get("clusterQueue", "")
        conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or ()}
        finished = conditions.get("Finished")
        if finished and finished.get("status") == "True":
            resp.reasons.append(pb.PendingReason(reason="Finished", message=finished.get("message", "")
                                                 or "the Workload is finished"))
            return resp
        if holds_reservation(workload):
            resp.admitted = True
            return resp
        missing = cycle_missing()
        if missing:
            raise _Status(grpc.StatusCode.UNIMPLEMENTED,
                          "Explain needs the admission cycle (quota, queueing, preemption), which is not built yet: "
                          f"missing {', '.join(missing)}; no partial answer is given")
        for reason in explain_with_cycle(snap, workload, self.engine.solver, self.engine.time_budget_s, resp):
            resp.reasons.append(reason)
        recorded = conditions.get("QuotaReserved")
        if recorded and recorded.get("status") == "False" and recorded.get("message") and not any(
                r.message == recorded.get("message") for r in resp.reasons):
            resp.reasons.append(pb.PendingReason(reason=recorded.get("reason", ""),
                                                 message=f"last recorded by the controller: {recorded['message']}"))
        return resp

    # ------------------------------------------------------------------ GetTopology
    def GetTopology(self, request: pb.GetTopologyRequest, context: grpc.ServicerContext) -> pb.GetTopologyResponse:
        return self._run(context, self._topology, request)  # type: ignore[no-any-return]

    def _topology(self, request: pb.GetTopologyRequest) -> pb.GetTopologyResponse:
        from scheduler.commands.topology import view_from_objects
        from scheduler.core.health import HealthPolicy
        from scheduler.core.nodes import HOSTNAME_LABEL
        from scheduler.topoview.model import unknown_levels

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
        self._run(context, self._simulate_check, request)
        return iter(())

    def _simulate_check(self, request: pb.SimulateRequest) -> None:
        for name in ("cluster", "queues", "trace"):
            if not getattr(request, name):
                raise FieldError(name, "required")
        if request.solver not in SOLVER_NAMES:
            raise FieldError("solver", f"unknown value {request.solver}")
        for name in ("time_budget_ms", "progress_every_s", "horizon_s"):
            if getattr(request, name) < 0:
                raise FieldError(name, f"must be >= 0, got {getattr(request, name)}")
        missing = cycle_missing()
        if missing:
            raise _Status(grpc.StatusCode.UNIMPLEMENTED,
                          "Simulate needs the admission cycle (quota, queueing, preemption), which is not built yet: "
                          f"missing {', '.join(missing)}")
        raise _Status(grpc.StatusCode.UNIMPLEMENTED,
                      "Simulate: the trace-replay driver (submissions and job completions on a simulated clock "
                      "around scheduler.core.cycle.run_cycle, with progress events) is not built yet; no made-up "
                      "summary is sent")

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


def explain_with_cycle(snap: EngineSnapshot, workload: Mapping[str, Any], solver: str, time_budget_s: float,
                       resp: pb.ExplainResponse) -> list[pb.PendingReason]:
    """Run one admission cycle on the live snapshot with this workload as the only pending one
    (as if it were at the head of its queue): the cycle's own Pending reason, or that it would
    fit now (then what is ahead of it in the queue), plus the preemptions it would need."""
    import dataclasses
    import datetime as dt

    from scheduler.core.cycle import Admit, Pending, Preempt, run_cycle
    from scheduler.core.queueing import order_key, resolve_priority
    from scheduler.kube.snapshot import build_snapshot

    full = build_snapshot(snap.as_cache(), dt.datetime.now(dt.UTC), solver=solver, time_budget_s=time_budget_s)
    meta = workload["metadata"]
    key = f"{meta['namespace']}/{meta['name']}"
    mine = [p for p in full.pending if p.key == key]
    if not mine:
        return [pb.PendingReason(reason="NotQueued",
                                 message="the Workload is not queued (spec.active is false or it is being deleted)")]
    decisions = run_cycle(dataclasses.replace(full, pending=tuple(mine), inadmissible=frozenset()))
    out: list[pb.PendingReason] = []
    victims = []
    for d in decisions:
        if isinstance(d, Pending) and d.workload == key:
            resp.cluster_queue = resp.cluster_queue or d.cluster_queue
            out.append(pb.PendingReason(reason=d.reason, message=d.message))
        elif isinstance(d, Preempt) and d.preemptor == key:
            victims.append(f"{d.workload} ({d.reason})")
        elif isinstance(d, Admit) and d.workload == key:
            resp.cluster_queue = d.cluster_queue
            pw = mine[0]
            lq = {k: v.cluster_queue for k, v in full.local_queues.items()}
            prio = resolve_priority(pw.spec, full.workload_priority_classes, full.priority_classes, pw.priority)
            me = order_key(prio, pw.timestamp, pw.key)
            ahead = 0
            for other in full.pending:
                if other.key == key or lq.get(f"{other.spec.namespace}/{other.spec.queue_name}") != d.cluster_queue:
                    continue
                op = resolve_priority(other.spec, full.workload_priority_classes, full.priority_classes, other.priority)
                if order_key(op, other.timestamp, other.key) < me:
                    ahead += 1
            out.append(pb.PendingReason(
                reason="Admissible",
                message=f"fits now in ClusterQueue {d.cluster_queue} (quota and topology); "
                        f"{ahead} workload(s) ahead of it in that queue, admitted at the next cycle that reaches it"))
    if victims:
        out.append(pb.PendingReason(reason="Preemption", message=f"needs the preemption of {', '.join(victims)}"))
    if not out:
        out.append(pb.PendingReason(reason="Pending", message="the admission cycle made no decision for it"))
    return out


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
