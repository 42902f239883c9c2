"""Bounds on the work one gRPC call can make the engine do, and the refusal to serve unprotected.

The API shares its process (and its two or so cores) with the admission cycle: a call that
solves for a minute or simulates a million jobs delays every admission, and with 16 worker
threads a handful of such calls starve the controller. Each bound below is checked before any
work starts and refused with the limit named, so a client learns the rule from the first error.
"""

from __future__ import annotations

import grpc

from scheduler.http.limits import is_loopback
from scheduler.sim.trace import Trace

# Place/Explain: CP-SAT gives its best answer within the budget; past a few seconds it rarely
# improves a placement (docs/placement.md), while each second holds a worker thread and a core
# the admission cycle needs. 10 s is 100x the default budget.
MAX_TIME_BUDGET_MS = 10_000
# Simulate: the budget is spent per placement, once per admission attempt of every job, so it is
# bounded far tighter than a single Place.
MAX_SIMULATE_TIME_BUDGET_MS = 1_000
# Simulate sizes. The simulator's work grows with jobs x nodes per cycle; 5,000 jobs on 2,000
# nodes (a large HyperPod cluster's day) simulate in minutes here. Bigger studies belong to
# `toposched simulate` on a machine of their own, not to the controller's process.
MAX_SIMULATE_JOBS = 5_000
MAX_SIMULATE_FAILURES = 5_000
MAX_SIMULATE_NODES = 2_000
# Simulated time: 30 days covers any trace worth replaying through the API; a longer horizon or
# a job submitted/running later is almost always a unit mistake (milliseconds given as seconds).
MAX_SIMULATE_SECONDS = 30 * 24 * 3600.0


class LimitExceeded(Exception):
    """A request over one of the bounds; ``code`` is the gRPC status to answer with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def effective_budget_ms(requested_ms: float, default_ms: float, deadline_left_s: float | None,
                        reserve_s: float) -> int:
    """The budget a Place call runs with: the request's (or the default), shortened by the call
    deadline. Refused when the work would exceed MAX_TIME_BUDGET_MS: a budget above the cap is
    accepted only under a deadline that already keeps the work below it."""
    budget_ms = float(requested_ms or default_ms)
    if deadline_left_s is not None:
        budget_ms = min(budget_ms, max(0.0, deadline_left_s - reserve_s) * 1000)
    if budget_ms > MAX_TIME_BUDGET_MS:
        raise LimitExceeded(grpc.StatusCode.INVALID_ARGUMENT,
                            f"time_budget_ms: at most {MAX_TIME_BUDGET_MS} ({MAX_TIME_BUDGET_MS // 1000} s, the "
                            f"longest one call may hold a solver in the controller's process), got "
                            f"{int(requested_ms)}; ask for less or set a shorter call deadline")
    return int(budget_ms)


def explain_budget_s(engine_budget_s: float, deadline_left_s: float | None, reserve_s: float) -> float:
    """Explain has no budget field: the engine's (--time-budget-ms), capped like Place's."""
    budget_s = min(engine_budget_s, MAX_TIME_BUDGET_MS / 1000)
    if deadline_left_s is not None:
        budget_s = min(budget_s, max(0.0, deadline_left_s - reserve_s))
    return budget_s


def check_simulate_request(time_budget_ms: int, horizon_s: float) -> None:
    if time_budget_ms > MAX_SIMULATE_TIME_BUDGET_MS:
        raise LimitExceeded(grpc.StatusCode.INVALID_ARGUMENT,
                            f"time_budget_ms: at most {MAX_SIMULATE_TIME_BUDGET_MS} per placement in Simulate "
                            f"(it is spent once per admission attempt of every job), got {time_budget_ms}")
    if horizon_s > MAX_SIMULATE_SECONDS:
        raise LimitExceeded(grpc.StatusCode.INVALID_ARGUMENT,
                            f"horizon_s: at most {MAX_SIMULATE_SECONDS:.0f} simulated seconds (30 days), "
                            f"got {horizon_s:g}")


def check_simulate_sizes(node_count: int, trace: Trace) -> None:
    for field, count, limit in (("cluster", node_count, MAX_SIMULATE_NODES), ("trace.jobs", len(trace.jobs),
                                                                           MAX_SIMULATE_JOBS),
                                ("trace.failures", len(trace.failures), MAX_SIMULATE_FAILURES)):
        if count > limit:
            noun = "nodes" if field == "cluster" else "entries"
            raise LimitExceeded(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"{field}: at most {limit} {noun} per Simulate call, got {count}; run larger "
                                "studies with `toposched simulate` outside the controller")
    times = [(f"jobs[{i}].{name}", value) for i, job in enumerate(trace.jobs)
             for name, value in (("at", job.at), ("duration", job.duration))]
    times += [(f"failures[{i}].at", failure.at) for i, failure in enumerate(trace.failures)]
    for field, seconds in times:
        if seconds > MAX_SIMULATE_SECONDS:
            raise LimitExceeded(grpc.StatusCode.INVALID_ARGUMENT,
                                f"trace.{field}: at most {MAX_SIMULATE_SECONDS:.0f} simulated seconds (30 days), "
                                f"got {seconds:g}")


def unprotected_bind_error(bind: str, tls: bool, token: bool) -> str | None:
    """The one line refusing to serve the engine on a non-loopback address in the clear and
    without a token (anyone who reaches it could read every workload and load the solver), or None."""
    if is_loopback(bind) or tls or token:
        return None
    return (f"refusing to serve the gRPC API on {bind} without TLS or a token: add --grpc-tls-cert FILE "
            "--grpc-tls-key FILE (and --grpc-client-ca FILE for mTLS) and/or --grpc-token-file FILE, or bind "
            "loopback with --grpc-bind 127.0.0.1 (--grpc-port 0 turns the API off)")
