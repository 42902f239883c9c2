"""A cycle's decisions -> API writes (through the :class:`~scheduler.kube.writer.Writer`).

What each decision does is ``adapter/apply.py``'s (the simulator applies the same); this is the
controller's view of the cluster it is applied to: Admit -> ``status.admission`` +
QuotaReserved/Admitted; Preempt/Evict -> Evicted (+Preempted), after which the controller's
eviction phase stops the job; Pending -> QuotaReserved=False with the reason as the Kueue
release writes it (``reasons.written_reason``), only when it changed (routing failures repeat
every cycle), and the PreemptionBlockedByLimit condition (``kube/preemption_limits.py``).
Nothing here decides.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from scheduler.adapter.apply import apply_decision
from scheduler.adapter.kinds import workload_slicing as slicing
from scheduler.core.assignment import encode_v1beta2
from scheduler.core.beyond.compactness import RELAXED_REASON
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET
from scheduler.core.kueue.decisions import Admit, Decision, Evict, Pending, PodSetAdmission, Preempt
from scheduler.core.kueue.queueing import QueueState
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.reasons import LEGACY_PENDING, written_reason
from scheduler.core.resources import format_quantity
from scheduler.k8s.informer import WORKLOADS
from scheduler.kube import status as st
from scheduler.kube.eviction import evict
from scheduler.kube.isolation import Isolation
from scheduler.kube.preemption_limits import sync_blocked_condition
from scheduler.kube.writer import Obj, Writer

log = logging.getLogger(__name__)


def _job_of(wl: Obj) -> str:
    """The Job (kind/name) that owns the Workload, for the logs' ``job`` field."""
    for ref in (wl.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return f"{ref.get('kind')}/{ref.get('name')}"
    return ""


def pod_set_assignment(psa: PodSetAdmission, prefix_runs: bool = False) -> dict[str, Any]:
    """A core ``PodSetAdmission`` as Kueue's ``status.admission.podSetAssignments[]`` entry;
    ``prefix_runs``: the TASAssignmentsEncodingByHostnamePrefix gate (core/assignment.py)."""
    out: dict[str, Any] = {
        "name": psa.name,
        "flavors": dict(psa.flavors),
        "resourceUsage": {res: format_quantity(amount, res) for res, amount in sorted(psa.resource_usage.items())},
        "count": psa.count,
    }
    if psa.topology is not None:
        out["topologyAssignment"] = encode_v1beta2(psa.topology, split_by_hostname_prefix=prefix_runs)
    return out


def placement_detail(decision: Admit) -> dict[str, Any]:
    """What the placement observed (for the metrics): per TAS pod set, the domains spanned
    per level versus the fewest possible, and the pod sets CP-SAT placed better than greedy."""
    spans = [{"podSet": p.name, "level": s.level, "spanned": s.spanned, "fewest": s.fewest}
             for p in decision.pod_sets if p.topology is not None for s in p.topology.spans]
    improved = [p.name for p in decision.pod_sets if p.topology is not None and p.topology.improved_by_cpsat]
    return {"domainSpans": spans, "improvedByCpsat": improved}


class WriterView:
    """The cluster as the controller's writer sees it (adapter/apply.py ``ClusterView``): the
    Workloads of the informer cache, written through the writer, with Events, logs and the
    decision observers."""

    def __init__(self, writer: Writer, snapshot: Snapshot, now: dt.datetime) -> None:
        self.writer = writer
        self.snapshot = snapshot
        self.now = now
        self.waited = {p.key: p.timestamp for p in snapshot.pending}
        gates = snapshot.config.feature_gates
        # How Kueue's release writes what the cycle decided (docs/kueue-versions.md): the
        # topology assignment's encoding, and QuotaReserved=False's legacy or granular reasons.
        self.prefix_runs = gates.enabled("TASAssignmentsEncodingByHostnamePrefix")
        self.observability = gates.enabled("UnadmittedWorkloadsObservability")

    def _workload(self, key: str) -> Obj | None:
        return self.writer.cache.workloads.get(key)

    def current(self, decision: Decision) -> bool:
        wl = self._workload(decision.workload)
        return wl is not None and (wl.get("metadata") or {}).get("uid") == decision.uid

    def admit(self, decision: Admit) -> bool:
        wl, writer = self._workload(decision.workload), self.writer
        assert wl is not None  # current
        wait_s = max(0.0, self.snapshot.now - self.waited.get(decision.workload, self.snapshot.now))
        psas = [pod_set_assignment(p, self.prefix_runs) for p in decision.pod_sets]
        updated = writer.patch_workload_status(wl, st.admit_status(wl, decision.cluster_queue, psas, self.now))
        if not updated:
            return False
        cq = decision.cluster_queue
        writer.event(updated, "Normal", "QuotaReserved",
                     f"Quota reserved in ClusterQueue {cq}, wait time since queued was {wait_s:.0f}s")
        writer.event(updated, "Normal", "Admitted",
                     f"Admitted by ClusterQueue {decision.cluster_queue}, wait time since reservation was 0s")
        if decision.relaxed:  # toposched's compact wait ran out (core/beyond/compactness.py)
            writer.event(updated, "Normal", RELAXED_REASON, decision.relaxed)
        log.info("workload %s admitted by ClusterQueue %s after %.0fs", decision.workload, decision.cluster_queue,
                 wait_s, extra={"workload": decision.workload, "job": _job_of(wl), "queue": decision.cluster_queue,
                                "decision": "admitted", "reason": decision.reason})
        writer.notify("admitted", updated, {"clusterQueue": decision.cluster_queue, "podSetAssignments": psas,
                                            "waitSeconds": wait_s, **placement_detail(decision)})
        return True

    def replace_slice(self, decision: Admit) -> None:
        """Kueue's ``Scheduler.replaceWorkloadSlice``: the old slice Finished with reason
        ``WorkloadSliceReplaced`` and the new slice's uid and job uid in the message, and an
        Event on it; its quota is released as a Finished Workload's is."""
        old, new = self._workload(decision.replaces), self._workload(decision.workload)
        if old is None or new is None or st.is_finished(old):
            return
        message = slicing.replaced_message(new)
        updated = self.writer.patch_workload_status(old, st.finish_status(old, slicing.REASON_REPLACED, message,
                                                                          self.now))
        if updated:
            self.writer.event(old, "Normal", slicing.REASON_REPLACED, message)
            self.writer.notify("slice_replaced", updated, {"replacement": decision.workload})
            log.info("workload slice %s replaced by %s", decision.replaces, decision.workload)

    def evict(self, decision: Preempt | Evict) -> None:
        wl, writer = self._workload(decision.workload), self.writer
        assert wl is not None  # current
        if isinstance(decision, Evict):
            updated = evict(writer, wl, decision.reason, decision.message, self.now)
            if updated:
                writer.event(updated, "Normal", f"EvictedDueTo{decision.reason}", decision.message)
                log.info("workload %s evicted: %s", decision.workload, decision.message,
                         extra={"workload": decision.workload, "job": _job_of(wl), "queue": decision.cluster_queue,
                                "decision": "evicted", "reason": decision.reason})
                writer.notify("evicted", updated, {"reason": decision.reason, "message": decision.message})
            return
        updated = evict(writer, wl, "Preempted", decision.message, self.now, preempted_reason=decision.reason)
        if not updated:
            return
        writer.event(updated, "Normal", "EvictedDueToPreempted", decision.message)
        writer.event(updated, "Normal", "Preempted", decision.message)
        preemptor = self._workload(decision.preemptor)
        if preemptor:
            writer.event(preemptor, "Normal", "PreemptedWorkload", f"Preempted {decision.workload} ({decision.reason})")
        log.info("workload %s preempted by %s: %s", decision.workload, decision.preemptor, decision.message,
                 extra={"workload": decision.workload, "job": _job_of(wl), "queue": decision.cluster_queue,
                        "decision": "preempted", "reason": decision.reason})
        writer.notify("preempted", updated, {"reason": decision.reason, "message": decision.message,
                                             "preemptor": decision.preemptor,
                                             "preemptorClusterQueue": decision.preemptor_cluster_queue,
                                             # toposched's own preemption: PreemptionLimits count it
                                             "counted": decision.counted, "preemptionConfig": decision.config})

    def annotate(self, workload: str, annotation: str, value: str | None) -> None:
        wl = self._workload(workload)
        if wl is not None:
            record_target(self.writer, wl, value, annotation)

    def still_pending(self, decision: Pending, parked: bool) -> None:
        wl, writer = self._workload(decision.workload), self.writer
        assert wl is not None  # current
        wl = sync_blocked_condition(writer, wl, decision.blocked_by_limit, self.now)
        # Kueue's legacy reasons unless UnadmittedWorkloadsObservability is on (docs/kueue-versions.md)
        reason = written_reason(decision.reason, by_workload_controller=decision.by_workload_controller,
                                observability=self.observability)
        current = st.find_condition(wl, st.QUOTA_RESERVED) or {}
        if (current.get("status"), current.get("reason"), current.get("message")) == (
                "False", reason, decision.message):
            return
        updated = writer.patch_workload_status(wl, st.pending_status(wl, reason, decision.message, self.now))
        if updated:
            writer.event(updated, "Warning" if reason != LEGACY_PENDING else "Normal", reason, decision.message)
            log.info("workload %s pending: %s", decision.workload, decision.message,
                     extra={"workload": decision.workload, "job": _job_of(wl), "queue": decision.cluster_queue,
                            "decision": "pending", "reason": decision.reason})
            writer.notify("pending", updated, {"reason": decision.reason, "message": decision.message})


def apply_decisions(writer: Writer, queue_state: QueueState, snapshot: Snapshot, decisions: Iterable[Decision],
                    now: dt.datetime, isolation: Isolation | None = None) -> None:
    """Write each decision about a workload the cache still holds with the same uid
    (adapter/apply.py ``apply_decision``); with ``isolation``, the Workloads are written side by
    side, and one whose write fails is reported while the others are still written."""
    view = WriterView(writer, snapshot, now)

    # One step per Workload, its decisions in cycle order; the steps of different Workloads run
    # side by side (the writer's pool), as Kueue writes admissions in goroutines.
    by_workload: dict[str, list[Decision]] = {}
    for decision in decisions:
        by_workload.setdefault(decision.workload, []).append(decision)

    def write_all(group: list[Decision]) -> None:
        for decision in group:
            apply_decision(view, queue_state, snapshot.cluster_queues, decision)

    def workload_of(group: list[Decision]) -> Obj | None:
        return writer.cache.workloads.get(group[0].workload)

    groups = list(by_workload.values())
    if isolation is None:
        for group in groups:
            write_all(group)
        return
    isolation.for_each("admit", groups, write_all, subject=lambda g: workload_of(g) or {}, workload_of=workload_of,
                       concurrent=True)


def record_target(writer: Writer, wl: Obj, target: str | None, key: str = ANN_PREEMPTION_TARGET) -> Obj:
    """Keep the preemptor's sticky preemption target on its Workload (``None`` removes it), so
    the next cycle, and a restarted or new leader, preempts for the same domain. ``key``
    :data:`ANN_RESERVED_DOMAIN`: the same for the domain a compact wait holds (reserve-compact).
    Written signed with the controller's key for this Workload's uid: the next snapshot honours
    only values the controller wrote (``scheduler.adapter.owned``)."""
    annotations = (wl.get("metadata") or {}).get("annotations") or {}
    stored = None if target is None else writer.signer.sign(str(wl["metadata"].get("uid") or ""), key, target)
    if annotations.get(key) == stored:
        return wl
    updated = writer.patch(WORKLOADS, wl, {"metadata": {"annotations": {key: stored}}},
                           writer.cache.workloads)
    return updated or wl
