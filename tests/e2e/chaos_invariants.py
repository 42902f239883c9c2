"""The chaos test's watcher: it holds the API server's history of Workloads, Pods and Nodes (a
watch delivers every change, so the checks run on every state the watcher observes, not on
samples) and asserts, at every observed instant:

- quota: no ClusterQueue holds more than nominal + borrowing limit, no cohort more than the
  sum of its members' nominal quota (Kueue: a Workload holds quota while QuotaReserved is True
  and it is not Finished);
- ranks: no two non-terminal pods of the same Job with the same completion index are bound to
  nodes at once. A pod whose deletion has started but not finished still counts as running; a
  pod bound to a node object that is gone does not (nothing can run it: this is the "or the
  node object is gone" half of the graceful hot swap);
- reasons: a Workload that neither holds quota nor is finished has ``QuotaReserved=False``
  with a message, or has not reached the head of its ClusterQueue yet (no condition, as in
  Kueue) while that queue visibly works; anything else is tolerated for ``reason_grace_s``
  only (a Workload the controller just created, or one written while the API server was down).

The checks read the informers' stores, not copies built from the events: on a relist (after
the API server restarted) an informer swaps in the whole fresh list before it emits the
differences one by one, so every check sees a state the API server really had, never half
of the old list and half of the new.

It also logs, for the figures, when each new admission was observed and when each rank went
Running on which node.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.k8s.informer import Informer

INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
TERMINAL_PHASES = ("Succeeded", "Failed")


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return {}


def holds_quota(wl: Mapping[str, Any]) -> bool:
    return condition(wl, "QuotaReserved").get("status") == "True" and \
        condition(wl, "Finished").get("status") != "True"


def finished(wl: Mapping[str, Any]) -> bool:
    return condition(wl, "Finished").get("status") == "True"


def quantity(text: Any) -> float:
    value = str(text)
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def rank_of(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(job name, completion index) of an Indexed Job's pod; None for other pods."""
    meta = pod.get("metadata") or {}
    index = (meta.get("annotations") or {}).get(INDEX_ANNOTATION)
    job = (meta.get("labels") or {}).get("job-name")
    return (job, index) if job and index is not None else None


@dataclass(frozen=True)
class QueueLimit:
    nominal: float
    borrowing_limit: float
    cohort: str | None


@dataclass
class ChaosWatch:
    """Fed by three informers' handlers (each on its own thread; one lock orders them)."""

    limits: Mapping[str, QueueLimit]
    resource: str
    reason_grace_s: float = 30.0
    cluster_queue_of: Mapping[str, str] = field(default_factory=dict)  # LocalQueue name -> ClusterQueue
    longest_unexplained_s: float = 0.0
    queued_without_condition_max: int = 0
    violations: list[str] = field(default_factory=list)
    states_checked: int = 0
    admissions: list[float] = field(default_factory=list)         # monotonic time of each new reservation
    running_log: list[tuple[float, tuple[str, str], str]] = field(default_factory=list)  # (t, rank, node)
    running_since: dict[str, float] = field(default_factory=dict)  # pod key -> first seen Running
    succeeded_on: set[tuple[tuple[str, str], str]] = field(default_factory=set)  # (rank, node)
    peak_usage: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    finished_names: set[str] = field(default_factory=set)
    workload_informer: Informer | None = None
    pod_informer: Informer | None = None
    nodes: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _reservations: dict[str, str] = field(default_factory=dict)
    _without_reason_since: dict[str, float] = field(default_factory=dict)

    def attach(self, workloads: Informer, pods: Informer, nodes: Informer) -> None:
        self.workload_informer, self.pod_informer = workloads, pods
        workloads.add_handler(self.on_workload)
        pods.add_handler(self.on_pod)
        nodes.add_handler(self.on_node)

    @property
    def workloads(self) -> dict[str, dict[str, Any]]:
        """The Workload informer's store (read on its own thread, or under ``lock``)."""
        assert self.workload_informer is not None
        return self.workload_informer.store

    @property
    def pods(self) -> dict[str, dict[str, Any]]:
        assert self.pod_informer is not None
        return self.pod_informer.store

    # ------------------------------------------------------------------ handlers
    def on_workload(self, kind: str, wl: dict[str, Any], _old: Any) -> None:
        key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        with self.lock:
            self.states_checked += 1
            if kind == "DELETED":
                return
            self._note_admission(key, wl)
            if finished(wl):
                self.finished_names.add(key)
            self._check_quota(f"after {key} rv {wl['metadata'].get('resourceVersion')}")

    def on_pod(self, kind: str, pod: dict[str, Any], _old: Any) -> None:
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        with self.lock:
            self.states_checked += 1
            if kind == "DELETED":
                return
            running = (pod.get("status") or {}).get("phase") == "Running"
            if running and key not in self.running_since:
                self.running_since[key] = time.monotonic()
                rank = rank_of(pod)
                if rank is not None:
                    self.running_log.append((time.monotonic(), rank, pod["spec"].get("nodeName", "")))
            rank = rank_of(pod)
            if rank is not None and (pod.get("status") or {}).get("phase") == "Succeeded":
                self.succeeded_on.add((rank, pod["spec"].get("nodeName", "")))
            if rank is not None:
                self._check_rank(rank, f"after pod {key} rv {pod['metadata'].get('resourceVersion')}")

    def on_node(self, kind: str, node: dict[str, Any], _old: Any) -> None:
        with self.lock:
            if kind == "DELETED":
                self.nodes.discard(node["metadata"]["name"])
            else:
                self.nodes.add(node["metadata"]["name"])

    # ------------------------------------------------------------------ checks
    def _note_admission(self, key: str, wl: Mapping[str, Any]) -> None:
        if not holds_quota(wl):
            self._reservations.pop(key, None)
            return
        admission = (wl.get("status") or {}).get("admission") or {}
        reservation = json.dumps([condition(wl, "QuotaReserved").get("lastTransitionTime"), admission],
                                 sort_keys=True)
        if self._reservations.get(key) != reservation:
            self.admissions.append(time.monotonic())
        self._reservations[key] = reservation

    def _check_quota(self, when: str) -> None:
        usage: dict[str, float] = defaultdict(float)
        for wl in self.workloads.values():
            if not holds_quota(wl):
                continue
            admission = (wl.get("status") or {}).get("admission") or {}
            for psa in admission.get("podSetAssignments") or ():
                used = (psa.get("resourceUsage") or {}).get(self.resource, 0)
                usage[admission.get("clusterQueue", "?")] += quantity(used)
        cohorts: dict[str, float] = defaultdict(float)
        for cq, used in usage.items():
            limit = self.limits.get(cq)
            if limit is None:
                self.violations.append(f"a Workload holds quota in unknown ClusterQueue {cq} ({when})")
                continue
            self.peak_usage[cq] = max(self.peak_usage[cq], used)
            if used > limit.nominal + limit.borrowing_limit:
                self.violations.append(f"{cq} holds {used:g} {self.resource} > nominal {limit.nominal:g} + "
                                       f"borrowing limit {limit.borrowing_limit:g} ({when})")
            if limit.cohort:
                cohorts[limit.cohort] += used
        for cohort, used in cohorts.items():
            total = sum(q.nominal for q in self.limits.values() if q.cohort == cohort)
            if used > total:
                self.violations.append(f"cohort {cohort} holds {used:g} {self.resource} > its {total:g} ({when})")

    def _runs(self, pod: Mapping[str, Any]) -> bool:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        return bool(node) and node in self.nodes and phase not in TERMINAL_PHASES

    def _check_rank(self, rank: tuple[str, str], when: str) -> None:
        copies = sorted(f"{p['metadata']['name']}@{p['spec']['nodeName']}"
                        f"{' (deleting)' if p['metadata'].get('deletionTimestamp') else ''}"
                        for p in self.pods.values() if rank_of(p) == rank and self._runs(p))
        if len(copies) > 1:
            self.violations.append(f"rank {rank[1]} of job {rank[0]} runs twice: {', '.join(copies)} ({when})")

    def check_reasons(self, now: float) -> None:
        """Called about once a second: pending Workloads must say why. A Workload that has not
        been at the head of its ClusterQueue yet carries no QuotaReserved condition (as in
        Kueue: only the heads a cycle tried get one); it is waiting behind the others, so it
        counts as explained while its ClusterQueue visibly works (some Workload there holds
        quota or is pending with a message). ``longest_unexplained_s`` is the figure."""
        assert self.workload_informer is not None
        current = self.workload_informer.items()  # a copy: the store is the informer thread's
        busy = {self._cluster_queue(wl) for wl in current if holds_quota(wl) or (
            condition(wl, "QuotaReserved").get("status") == "False" and condition(wl, "QuotaReserved").get("message"))}
        with self.lock:
            for wl in current:
                key = f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
                reserved = condition(wl, "QuotaReserved")
                explained = holds_quota(wl) or finished(wl) or \
                    (reserved.get("status") == "False" and bool(reserved.get("message")))
                if not explained and not reserved and self._cluster_queue(wl) in busy:
                    self.queued_without_condition_max = max(self.queued_without_condition_max, sum(
                        1 for w in current if not condition(w, "QuotaReserved") and not finished(w)))
                    explained = True
                if explained:
                    self._without_reason_since.pop(key, None)
                    continue
                since = self._without_reason_since.setdefault(key, now)
                self.longest_unexplained_s = max(self.longest_unexplained_s, now - since)
                if now - since > self.reason_grace_s:
                    self.violations.append(f"{key} pending for {now - since:.0f}s without a reason "
                                           f"(QuotaReserved: {reserved or 'absent'}; its ClusterQueue is idle)")
                    self._without_reason_since[key] = float("inf")  # reported once

    def _cluster_queue(self, wl: Mapping[str, Any]) -> str:
        admission = (wl.get("status") or {}).get("admission") or {}
        local = str((wl.get("spec") or {}).get("queueName") or "")
        return str(admission.get("clusterQueue") or self.cluster_queue_of.get(local, local))

    # ------------------------------------------------------------------ figures
    def first_admission_after(self, t: float) -> float | None:
        with self.lock:
            return next((a for a in self.admissions if a > t), None)

    def ranks_on(self, node: str) -> list[tuple[str, str]]:
        """Ranks with a non-terminal pod bound to ``node`` now."""
        assert self.pod_informer is not None
        current = self.pod_informer.items()
        with self.lock:
            return sorted({r for p in current
                           if (r := rank_of(p)) is not None and p["spec"].get("nodeName") == node
                           and (p.get("status") or {}).get("phase") == "Running"})

    def rank_back_after(self, rank: tuple[str, str], failed_node: str, t: float) -> float | None:
        """When ``rank`` was next seen Running on another node after ``t``."""
        with self.lock:
            return next((when for when, r, node in self.running_log
                         if r == rank and when > t and node != failed_node), None)
