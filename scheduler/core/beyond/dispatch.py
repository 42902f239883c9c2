"""toposched's topology-aware MultiKueue dispatcher: which worker to nominate (issue 43 item 2).

Kueue's external-dispatcher contract (v0.17.0): when the manager's Configuration names a
dispatcher other than Kueue's two, MultiKueue copies a Workload to exactly the workers in its
``status.nominatedClusterNames`` and keeps the first that admits (``status.clusterName``).
This module decides that list, on plain data; the shell asks each toposched worker its gRPC
``Place`` (read-only) and writes the answer.

The choice, per pending Workload, in rounds of :data:`ROUND_TIMEOUT_S` as Kueue's Incremental:

1. Among the toposched workers whose answer says the job fits now and which are not yet
   nominated: the one where it spans the fewest domains at the requested level, ties by free
   capacity (after the in-flight nominations, below), then by the MultiKueueConfig's order.
   A worker whose answer says it cannot fit is never nominated.
2. In-flight nominations and the worker's own backlog: capacity already promised to other
   pending Workloads nominated to a worker (and not admitted yet), and the demand of the
   worker's own queued Workloads (its ``Place`` answer's backlog), are subtracted from its free
   capacity, and a worker where the job would not fit once they are counted comes after every
   worker where it still does; within one pass each choice is counted before the next, so a
   burst spreads.
3. When no toposched worker fits with room, the workers that cannot be asked (no toposched
   endpoint, e.g. a Kueue worker, or no answer this pass) are nominated as Kueue's Incremental
   nominates them (three at a time, sorted); only when there are none is a toposched worker that
   fits only before the in-flight ones are counted nominated.
4. When the job fits nowhere now and holds no nomination (and no worker without an endpoint is
   left), it is nominated to one toposched worker whose answer says it would fit on its whole
   healthy capacity (``ever_fits``), so that it holds a place in that worker's queue instead of
   none: the one with the least work ahead of it relative to its capacity (in-flight
   nominations plus the worker's own backlog, over its healthy capacity), ties by the fewest
   domains it would span then, then by the config's order. A worker whose answer says it can
   never fit is still never nominated.
5. A round in progress keeps the nominations; nominations are only appended (MultiKueue
   removes the remote copy of a worker dropped from the list).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.kueue.mk_dispatch import ROUND_TIMEOUT_S, Round, next_incremental_workers


@dataclass(frozen=True)
class WorkerAnswer:
    """One toposched worker's answer to Place for one job, now."""

    cluster: str
    fits: bool
    domains: int  # domains of the requested level the placement spans (1: one domain)
    free: int  # free capacity in the job's unit (GPUs when it asks for GPUs, else pods)
    # Would it fit on the worker's whole healthy capacity (nothing admitted), and spanning how
    # many domains; the worker's healthy capacity in the same unit. Defaults: not known, so a
    # job that fits nowhere now is not nominated there (the behaviour before these fields).
    ever_fits: bool = False
    ever_domains: int = 0
    capacity: int = 0
    # The worker's own queued demand in the same unit (Place's backlog_*; 0: none or not known).
    backlog: int = 0


@dataclass(frozen=True)
class DispatchInput:
    """One Workload's dispatch question."""

    key: str
    workers: tuple[str, ...]  # the MultiKueueConfig's clusters, in its order
    answers: Mapping[str, WorkerAnswer]  # toposched workers that answered this pass
    nominated: tuple[str, ...] = ()
    round_start: float | None = None
    demand: int = 0  # in the answers' unit
    timeout_s: float = ROUND_TIMEOUT_S


def _rank(inp: DispatchInput, in_flight: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """Fitting, not yet nominated toposched workers: with room after in-flight, and without."""
    order = {name: i for i, name in enumerate(inp.workers)}
    roomy: list[tuple[int, int, int, str]] = []
    tight: list[tuple[int, int, int, str]] = []
    for name, ans in inp.answers.items():
        if name not in order or name in inp.nominated or not ans.fits:
            continue
        # the worker's own queue takes its free capacity before a new copy does
        left = ans.free - in_flight.get(name, 0) - ans.backlog
        entry = (ans.domains, -left, order[name], name)
        (roomy if left >= inp.demand else tight).append(entry)
    return [e[3] for e in sorted(roomy)], [e[3] for e in sorted(tight)]


def choose(inp: DispatchInput, now: float, in_flight: Mapping[str, int] | None = None) -> Round:
    """The nominations of one Workload after this pass (see the module's rules)."""
    if inp.round_start is not None and now - inp.round_start <= inp.timeout_s:
        return Round(inp.nominated, inp.round_start, False)
    roomy, tight = _rank(inp, in_flight or {})
    if roomy:
        return Round((*inp.nominated, roomy[0]), now, True)
    unasked = [w for w in inp.workers if w not in inp.answers]
    added = next_incremental_workers(inp.nominated, unasked)
    if added:
        return Round((*inp.nominated, *added), now, True)
    if tight:
        return Round((*inp.nominated, tight[0]), now, True)
    queued = _queue_behind(inp, in_flight or {})
    if queued is not None:
        return Round((queued,), now, True)
    return Round(inp.nominated, inp.round_start, False)


def _queue_behind(inp: DispatchInput, in_flight: Mapping[str, int]) -> str | None:
    """Rule 4: the worker whose queue a job that fits nowhere now should wait in, or None."""
    if inp.nominated:
        return None  # it already waits in a queue: one copy, not one per pass
    order = {name: i for i, name in enumerate(inp.workers)}
    ranked = sorted(((in_flight.get(name, 0) + ans.backlog) / ans.capacity, ans.ever_domains, order[name], name)
                    for name, ans in inp.answers.items()
                    if name in order and ans.ever_fits and ans.capacity > 0)
    return ranked[0][3] if ranked else None


@dataclass(frozen=True)
class Pass:
    """Every pending Workload's new nominations, and the in-flight demand they leave."""

    rounds: dict[str, Round]
    in_flight: dict[str, int] = field(default_factory=dict)


def in_flight_demand(pending: Sequence[DispatchInput]) -> dict[str, int]:
    """Demand already nominated to each worker by Workloads no worker has admitted yet."""
    out: dict[str, int] = {}
    for inp in pending:
        for name in inp.nominated:
            out[name] = out.get(name, 0) + inp.demand
    return out


def dispatch_pass(pending: Sequence[DispatchInput], now: float) -> Pass:
    """One pass over the pending Workloads in the given (queue) order; each new nomination is
    counted as in flight before the next Workload is chosen."""
    in_flight = in_flight_demand(pending)
    rounds: dict[str, Round] = {}
    for inp in pending:
        rnd = choose(inp, now, in_flight)
        rounds[inp.key] = rnd
        for name in rnd.nominated[len(inp.nominated):]:
            in_flight[name] = in_flight.get(name, 0) + inp.demand
    return Pass(rounds, in_flight)
