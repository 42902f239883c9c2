"""The controller's opt-in defragmentation (``toposched controller --defrag``): every
``interval_s`` it plans (``core.defrag.plan_defrag``, the code behind ``toposched defrag``) and
executes each plan whose moves fit the eviction budget of every ClusterQueue involved
(``budget_per_hour`` defragmentation evictions per ClusterQueue in any rolling hour).

A move is an eviction through the writer: Evicted=True with reason :data:`REASON` and a message
naming the domain, the workload it opens for and the GPU time lost since the last checkpoint
(Events ``EvictedDueToDefragmentation`` on the moved Workload, ``Defragmentation`` on the job it
opens the domain for). The domain is then recorded as that job's preemption target
(``toposched.io/preemption-target``), so the cycle places it there once the moved pods are gone,
and the moved workloads do not prefer their old domain (no previous-domains memory is written).
The budget's window is rebuilt after a restart from the Evicted conditions still on Workloads.

Where PreemptionLimits exist (toposched's, ``toposched.io``; docs/quota-and-preemption.md) they are
the budget instead: a plan runs only if no limit whose ``configSelector`` is unset would be
exceeded by its moves (each move one eviction: preemptor ClusterQueue = the waiting job's, no
PreemptionConfig), and every move is counted in the controller's ledger like a domain-clearing
preemption.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from scheduler.core.beyond.defrag import DefragPlan, Move, plan_defrag
from scheduler.core.beyond.domain_target import DomainTarget
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.preemption.rules import ConfiguredPreemption, PreemptionEvent, blocking_limit
from scheduler.kube import status as st
from scheduler.kube.apply import record_target
from scheduler.kube.preemption_limits import PreemptionLedger
from scheduler.kube.writer import Obj, Writer

log = logging.getLogger(__name__)

REASON = "Defragmentation"
WINDOW_S = 3600.0


def _events(plan: DefragPlan, now: float) -> list[PreemptionEvent]:
    return [PreemptionEvent(now, plan.cluster_queue, m.cluster_queue, m.workload) for m in plan.moves]


def move_message(plan: DefragPlan, move: Move) -> str:
    return (f"Moved by toposched defragmentation to open {plan.level} domain {plan.domain} for workload "
            f"{plan.for_workload}; {move.gpus} GPUs, {move.lost_gpu_s / 3600:.2f} GPU-hours since the last "
            f"checkpoint; resumes via {move.resumes}")


@dataclass
class DefragExecutor:
    writer: Writer
    clock: Callable[[], dt.datetime]
    budget_per_hour: int = 4
    interval_s: float = 60.0
    # The controller's PreemptionLimit ledger (kube/preemption_limits.py): moves are recorded in it.
    ledger: PreemptionLedger | None = None
    _last_run: float | None = None
    _evictions: dict[str, list[float]] = field(default_factory=dict)  # ClusterQueue -> times

    def _seed(self) -> None:
        """The window after a (re)start: defragmentation evictions still recorded on Workloads."""
        for wl in self.writer.cache.workloads.items():
            cond = st.find_condition(wl, st.EVICTED) or {}
            cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
            if cond.get("reason") == REASON and cq and cond.get("lastTransitionTime"):
                at = dt.datetime.fromisoformat(str(cond["lastTransitionTime"]).replace("Z", "+00:00")).timestamp()
                self._evictions.setdefault(cq, []).append(at)

    def _used(self, cq: str, now: float) -> int:
        recent = [t for t in self._evictions.get(cq, []) if now - t < WINDOW_S]
        self._evictions[cq] = recent
        return len(recent)

    def _fits_budget(self, plan: DefragPlan, now: float) -> bool:
        per_cq: dict[str, int] = {}
        for m in plan.moves:
            per_cq[m.cluster_queue] = per_cq.get(m.cluster_queue, 0) + 1
        return all(self._used(cq, now) + n <= self.budget_per_hour for cq, n in per_cq.items())

    def run(self, snapshot: Callable[[], Snapshot]) -> list[DefragPlan]:
        """When due, plan on a fresh snapshot and execute within the budget; the plans executed."""
        now_dt = self.clock()
        now = now_dt.timestamp()
        if self._last_run is None:
            self._seed()
        elif now - self._last_run < self.interval_s:
            return []
        self._last_run = now
        done: list[DefragPlan] = []
        snap = snapshot()
        rules = snap.preemption_rules
        for plan in plan_defrag(snap):
            if rules.limits:
                limit = blocking_limit(rules, now, _events(plan, now))
                if limit is not None:
                    log.info("defragmentation for %s deferred: PreemptionLimit %s would be exceeded",
                             plan.for_workload, limit.name)
                    continue
            elif not self._fits_budget(plan, now):
                log.info("defragmentation for %s deferred: eviction budget of %d per ClusterQueue per hour used",
                         plan.for_workload, self.budget_per_hour)
                continue
            if self._execute(plan, now_dt):
                done.append(plan)
                rules = self._counted(rules, plan, now)
        return done

    def _counted(self, rules: ConfiguredPreemption, plan: DefragPlan, now: float) -> ConfiguredPreemption:
        """The plan's moves in the ledger, and in ``rules`` for the next plan of this run."""
        events = _events(plan, now)
        for e in events:
            if self.ledger is not None:
                self.ledger.record(e)
        return replace(rules, events=(*rules.events, *events))

    def _execute(self, plan: DefragPlan, now: dt.datetime) -> bool:
        workloads = self.writer.cache.workloads
        moved: list[tuple[Obj, Move]] = []
        for m in plan.moves:
            wl = workloads.get(m.workload)
            if wl is None or (wl.get("metadata") or {}).get("uid") != m.uid or st.is_evicting(wl):
                return False  # the cache moved on since the plan: plan again next time
            moved.append((wl, m))
        for wl, m in moved:
            message = move_message(plan, m)
            updated = self.writer.patch_workload_status(wl, st.evict_status(wl, REASON, message, now))
            if updated is None:
                return False
            self._evictions.setdefault(m.cluster_queue, []).append(now.timestamp())
            self.writer.event(updated, "Normal", f"EvictedDue{REASON}", message)
            log.info("workload %s moved: %s", m.workload, message,
                     extra={"workload": m.workload, "queue": m.cluster_queue, "decision": "defragmented",
                            "reason": REASON})
        target = workloads.get(plan.for_workload)
        if target is not None:
            pod_set = (((target.get("spec") or {}).get("podSets") or [{}])[0]).get("name", "main")
            encoded = DomainTarget(pod_set, plan.flavor, plan.level, plan.selector).encode()
            target = record_target(self.writer, target, encoded)
            self.writer.event(target, "Normal", REASON,
                              f"Moving {len(plan.moves)} workload(s) to open {plan.level} domain {plan.domain}")
        return True
