"""The toposched controller: Jobs in, Workloads admitted (or left pending with a reason) out.

Each reconcile runs fixed phases, every one idempotent and driven only by what the API
server holds, so a restarted (or newly elected) controller continues exactly where the last
one stopped — no admission is lost and none is made twice:

Workloads created directly, with no owner Job (Kueue's perf runner, external frameworks), go
through the same phases as Kueue treats them: admitted, never started (nothing to unsuspend),
finished by whoever set their ``Finished`` condition (their quota is released by the next
snapshot), and on eviction released at once (nothing to stop) with the same requeue backoff.

1. ``ensure_workloads``   one Workload per managed Job (Kueue naming, owner reference), one
                          per LeaderWorkerSet group, whose pods are labelled with it
                          (``scheduler.kube.podgroups``);
   ``suspend_unadmitted`` a managed job running without an admitted Workload is suspended
                          again (Kueue's "Not admitted by cluster queue").
2. ``sync_finished``      a finished Job finishes its Workload (quota is released).
3. ``node_failures``      an assigned node that stays unhealthy is hot-swapped inside the
                          required domain, or the Workload is evicted (``NodeFailures``).
4. ``progress_evictions`` an evicted Workload's Job is suspended; once its pods are gone the
                          reservation is dropped and the Workload requeued (or, past its
                          HyperPod auto-resume retries, finished as Failed).
5. ``admit``              Kueue's admission cycles back to back (``scheduler.core.cycle``) on a
                          snapshot; their decisions are written back (admit / preempt / pending
                          reason), then the queue objects' status.
6. ``start_admitted``     an admitted Workload's Job is unsuspended with its node selectors: the
                          ones this pass admitted too, so a job starts in the pass that admits it.

Only the leader runs phases; followers keep caches warm. Every write goes through the
:class:`~scheduler.kube.writer.Writer`, which checks leadership before each one.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.kinds.base import JobKind, PodSetStart
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.registry import enabled_kinds
from scheduler.adapter.kinds.workloads import workload_for_job
from scheduler.adapter.owned import Signer
from scheduler.adapter.priority_policy import ClassRefused
from scheduler.adapter.workload_checks import workload_problems
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.failures import EVICTION_REASON, RequeueBackoff, StormPolicy
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.queueing import QueueState
from scheduler.core.snapshot import Snapshot
from scheduler.core.topology_request import TopologyRequestError
from scheduler.core.workload import LABEL_QUEUE_NAME, WorkloadFormatError
from scheduler.k8s.informer import WORKLOADS, KubeApi, object_key
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.admit import AdmitPhase
from scheduler.kube.cache import ClusterCache, Wakeup
from scheduler.kube.defaults import DEFAULT_CYCLES_PER_PASS
from scheduler.kube.defrag import DefragExecutor
from scheduler.kube.events import EventRecorder
from scheduler.kube.gcpolicy import GcPolicy
from scheduler.kube.gone_nodes import DEFAULT_LEASE_ABSENT_S
from scheduler.kube.invalid import InvalidWorkloads, invalid_message
from scheduler.kube.isolation import Isolation, UnreadableWorkloads
from scheduler.kube.jobs import JobIndex
from scheduler.kube.lookups import JobLookups
from scheduler.kube.metrics import CycleMetrics, NoMetrics
from scheduler.kube.nodefailures import DEFAULT_UNREACHABLE_GRACE_S, NodeFailureHandler, requeue_or_fail
from scheduler.kube.podgroups import PodGroupPhases, is_group_workload
from scheduler.kube.podintegration import PodIntegration
from scheduler.kube.podsready import PodsReadyHandler, requeues_at_once
from scheduler.kube.preemption_limits import PreemptionLedger, PreemptionRules
from scheduler.kube.queues import QueueObjectsWriter
from scheduler.kube.resuspend import Resuspension
from scheduler.kube.start import start_selectors
from scheduler.kube.topology_ungater import TopologyUngater
from scheduler.kube.workload_index import owner_uid
from scheduler.kube.writer import Observer, Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Clock = Callable[[], dt.datetime]


class Controller:
    def __init__(self, api: KubeApi, cache: ClusterCache, *, clock: Clock = st.utcnow, solver: str = "auto",
                 time_budget_s: float = 0.1, resync_s: float = 5.0, node_failure_grace_s: float = 3.0,
                 is_leader: Callable[[], bool] | None = None, events: EventRecorder | None = None,
                 requeue_backoff: RequeueBackoff | None = None,
                 node_unreachable_grace_s: float = DEFAULT_UNREACHABLE_GRACE_S,
                 storm_policy: StormPolicy | None = None, config: KueueConfig = KUEUE_DEFAULTS,
                 placement_options: PlacementOptions | None = None, domain_preemption: bool = True,
                 signer: Signer | None = None,
                 deleted_node_lease_absent_s: float | None = DEFAULT_LEASE_ABSENT_S) -> None:
        """``is_leader``: asked before every write (default: :attr:`leading`, which the lease
        elector sets). ``events``: where Events go (default: a recorder on ``api``).
        ``requeue_backoff``: before a NodeFailures-evicted workload is admitted again (Kueue's
        waitForPodsReady requeuing defaults). ``node_failure_grace_s`` / ``node_unreachable_grace_s``:
        how long a known-bad / an unreachable assigned node must stay so before its workload is
        hot-swapped or evicted; ``storm_policy``: the eviction-storm guard. ``config``: the admin's
        Kueue Configuration (``--kueue-config``); its ``integrations.frameworks`` limit the job
        kinds managed. ``signer``: the key the controller signs its owned annotations with
        (``scheduler.kube.signing``; default: one of this process only).
        ``deleted_node_lease_absent_s``: the pods of admitted workloads on a deleted node are
        deleted once no kubelet can run them (``scheduler.kube.gone_nodes``; None: never)."""
        self.api = api
        self.cache = cache
        self.clock = clock
        self.solver = solver
        self.config = config
        # The job-kind registry's kinds, as the Configuration enables them; a kind listed in
        # integrations.externalFrameworks is its own controller's (its Workloads are admitted here).
        self.kinds = enabled_kinds(config.frameworks, config.external_frameworks)
        self.lookups = JobLookups(cache, self.kinds,
                                  config.feature_gates.enabled("WorkloadPriorityClassDefaulting"))
        self.time_budget_s = time_budget_s
        self.placement_options = placement_options  # toposched's policies beyond Kueue (None: Kueue's)
        # Domain-clearing preemption and sticky targets (core/preemption/clear_domain.py); off: Kueue's
        # classical preemption only (--no-domain-preemption).
        self.domain_preemption = domain_preemption
        self.resync_s = resync_s
        self.leading = threading.Event()
        self.writer = Writer(api, cache, is_leader or self.leading.is_set, events or EventRecorder(api, clock=clock),
                             signer=signer)
        self.isolation = Isolation(self.writer, clock)
        self.resuspension = Resuspension(cache, self.writer, self.isolation, self.lookups)  # phase 1b
        self.invalid = InvalidWorkloads(self.writer, clock)
        self.requeue_backoff = requeue_backoff if requeue_backoff is not None else RequeueBackoff()
        self.unreadable = UnreadableWorkloads()
        # The conversions one pass's snapshot reuses from the last (the node-failure record reads
        # the same nodes and trees): owned here, the builder of snapshot after snapshot.
        self.snapshot_caches = SnapshotCaches()
        self.node_failures = NodeFailureHandler(cache, self.writer, clock, grace_s=node_failure_grace_s,
                                                isolation=self.isolation,
                                                unreachable_grace_s=node_unreachable_grace_s,
                                                storm_policy=storm_policy, caches=self.snapshot_caches,
                                                prefix_runs=config.feature_gates.enabled(
                                                    "TASAssignmentsEncodingByHostnamePrefix"),
                                                deleted_node_lease_absent_s=deleted_node_lease_absent_s)
        self.pods_ready = PodsReadyHandler(self.writer, clock, config.wait_for_pods_ready, self.isolation)
        self.pod_groups = PodGroupPhases(cache, self.writer, self.isolation, self.lookups.resolve_priority, self.kinds)
        # Kueue's pod integration (plain pods, pod groups, Deployments' and StatefulSets' pods) and
        # its topology ungater (a gated pod of an admitted pod set is pinned to its domain).
        self.pod_integration = PodIntegration(cache, self.writer, self.isolation, self.lookups.resolve_priority,
                                              self.start_selectors, clock) if POD in self.kinds else None
        self.topology_ungater = TopologyUngater(cache, self.writer, self.isolation)
        self.queue_state = QueueState()
        self.queue_objects = QueueObjectsWriter(self.writer, cache, clock)
        self.wakeup = Wakeup()
        self._stop = threading.Event()
        # Observers of decisions (the gRPC WatchDecisions stream, metrics): the writer's own
        # list, which it calls after each decision it wrote.
        self.observers: list[Observer] = self.writer.observers
        # Admission attempts and per-pass gauges (scheduler.kube.metrics); off unless set.
        self.metrics: CycleMetrics = NoMetrics()
        # Opt-in defragmentation (--defrag): moves checkpointable workloads within a budget.
        self.defrag: DefragExecutor | None = None
        # Kueue's PreemptionConfig / PreemptionLimit for toposched's own preemptions (domain
        # clearing, defragmentation): the evictions they count, and the rules read each pass.
        self.preemption_ledger = PreemptionLedger(self.writer, clock)
        self.preemption_rules = PreemptionRules(cache, self.preemption_ledger, self.snapshot_caches)
        # Kueue scheduling cycles run back to back in one pass (core.cycle.run_cycles); 1: one
        # head per ClusterQueue per pass (``--cycles-per-pass``).
        self.cycles_per_pass = DEFAULT_CYCLES_PER_PASS
        # More cycles while the last pass's time per cycle says they fit in this many seconds
        # (kube/cycle_budget.py, ``--cycle-budget-ms``); 0: exactly ``cycles_per_pass``.
        self.cycle_budget_s = 0.0
        # Process-wide garbage-collection tuning (scheduler.kube.gcpolicy); off unless the
        # controller command sets it, since it changes the collector for the whole process.
        self.gc_policy: GcPolicy | None = None
        self.admission = AdmitPhase(self)  # phase 5; reads the settings above when it runs

    # ------------------------------------------------------------------ phase 1
    def ensure_workloads(self) -> None:
        workloads = self.cache.workloads
        self.isolation.for_each("ensure_workloads", [entry for uid, entry in self.lookups.job_index().items()
                                                     if wi.owned_by(workloads, uid) is None],
                                lambda entry: self._ensure_workload(*entry), subject=lambda entry: entry[1],
                                concurrent=True)
        self.pod_groups.ensure()
        self.pod_groups.label_pods()
        if self.pod_integration is not None:
            self.pod_integration.ensure()

    def _ensure_workload(self, integration: JobKind, job: Obj) -> None:
        if (job.get("metadata") or {}).get("deletionTimestamp"):
            return
        if not (job.get("metadata") or {}).get("labels", {}).get(LABEL_QUEUE_NAME):
            return
        ownership = self.lookups.ownership(job)
        if ownership.ancestor is not None:
            return  # governed through its queued parent (a JobSet's Job, an mpi-operator launcher)
        if integration.finish_state(job).finished:
            return
        priority = self.lookups.resolve_priority(job)
        if isinstance(priority, ClassRefused):  # held: a class its namespace may not use (lookups.py)
            self.writer.event(job, "Warning", priority.reason, priority.event)
            return
        try:
            body = workload_for_job(integration, job, priority[0], priority[1], self.lookups.related)
        except (TopologyRequestError, WorkloadFormatError) as exc:  # as Kueue's reconciler: no Workload, retried
            self.writer.event(job, "Warning", "CreatedWorkloadFailed", str(exc)[:500])
            return
        if ownership.unhonoured:
            self.writer.event(job, "Warning", "OwnerReferenceNotHonoured",
                              f"{ownership.unhonoured}: queued on its own like any other {integration.kind}")
        problems = workload_problems(body)
        if problems:  # what the API server would refuse under Kueue's CRD: never written
            self.writer.event(job, "Warning", "CreatedWorkloadFailed", invalid_message(problems))
            return
        self._create_workload(job, body)

    def _create_workload(self, job: Obj, body: Obj) -> None:
        def failed(exc: ApiException) -> None:
            log.warning("creating workload for %s failed: %s", object_key(job), exc.body)
            self.writer.event(job, "Warning", "CreatedWorkloadFailed", str(exc.body)[:500])

        created = self.writer.create(WORKLOADS, body, job["metadata"]["namespace"], self.cache.workloads, failed)
        if created is not None:
            self.writer.event(job, "Normal", "CreatedWorkload",
                              f"Created Workload: {created['metadata']['namespace']}/{created['metadata']['name']}")

    # ------------------------------------------------------------------ phase 1b
    def suspend_unadmitted(self) -> None:
        self.resuspension.run()

    # ------------------------------------------------------------------ phase 2
    def sync_finished(self) -> None:
        """A Workload whose job finished is marked Finished (its quota is free at once). Walked
        from the jobs' side: a Workload without a job has nothing to sync."""
        if self.pod_integration is not None:
            self.pod_integration.sync_finished()
            self.pod_integration.release_finalizers()
        jobs = self.lookups.job_index()
        workloads = self.cache.workloads
        self.isolation.for_each("sync_finished",
                                [wl for uid in jobs for wl in workloads.indexed(wi.OWNER, uid)
                                 if not st.is_finished(wl)],
                                lambda wl: self._sync_finished(wl, jobs), workload_of=lambda wl: wl, concurrent=True,
                                wanted=lambda wl: self._job_finished(wl, jobs))

    @staticmethod
    def _job_finished(wl: Obj, jobs: JobIndex) -> bool:
        integration, job = jobs[owner_uid(wl) or ""]
        return integration.finish_state(job).finished

    def _sync_finished(self, wl: Obj, jobs: JobIndex) -> None:
        integration, job = jobs[owner_uid(wl) or ""]
        state = integration.finish_state(job)
        if self.writer.patch_workload_status(wl, st.finish_status(wl, state.reason, state.message, self.clock())):
            self.writer.notify("finished", wl, {"reason": state.reason})

    # ------------------------------------------------------------------ phase 3
    def progress_evictions(self) -> None:
        jobs = self.lookups.job_index()
        self.isolation.for_each("progress_evictions",
                                [wl for wl in wi.holding(self.cache.workloads) if st.is_evicting(wl)],
                                lambda wl: self._progress_eviction(wl, jobs), workload_of=lambda wl: wl,
                                concurrent=True)

    def _progress_eviction(self, wl: Obj, jobs: JobIndex) -> None:
        entry = jobs.get(owner_uid(wl) or "")
        if entry is None and is_group_workload(wl):
            if self.pod_groups.stop_group(wl):  # a pod group (LeaderWorkerSet, StatefulSet): its pods go first
                self._release(wl, None)
            return
        if entry is None and self.pod_integration is not None and self.pod_integration.owns(wl):
            if self.pod_integration.stop(wl):  # a pod cannot be suspended: deleted, as Kueue's Stop
                self._release(wl, None)
            return
        if entry is None:
            # An ownerless Workload (created directly, as Kueue's perf runner, Kueue's own
            # integration tests and external frameworks do) is released by whoever owns it, as
            # under Kueue: only Kueue's job reconciler clears an evicted Workload's reservation
            # (v0.17 jobframework/reconciler.go), so until then it keeps its quota.
            return
        integration, job = entry
        if not integration.is_suspended(job):
            self._suspend(integration, job, wl)
            return
        if not integration.can_restore(job):
            return  # pods still going, or the Job controller has not cleared startTime yet
        restore = integration.restore_patch(job, list((wl.get("spec") or {}).get("podSets") or ()))
        if restore is not None and not self.writer.patch_job(integration, job, restore):
            return
        self._release(wl, job)

    def _release(self, wl: Obj, job: Obj | None) -> None:
        """The evicted job's pods are gone: drop the reservation. Preempted evictions requeue at
        once (Kueue); NodeFailures evictions after Kueue's requeuing backoff (``requeueState``),
        unless HyperPod auto-resume retries are used up."""
        now = self.clock()
        requeue, failure = requeue_or_fail(wl)
        evicted = st.find_condition(wl, st.EVICTED) or {}
        requeue = requeue and requeues_at_once(str(evicted.get("reason") or ""))
        backoff = (self.requeue_backoff.delay_s(st.requeue_count(wl) + 1)
                   if evicted.get("reason") == EVICTION_REASON else None)
        status = st.release_status(wl, now, requeue=requeue, requeue_after_s=backoff)
        if failure:
            status["conditions"] = st.finish_status(st.merged(wl, status), "Failed", failure, now)["conditions"]
        if self.writer.patch_workload_status(wl, status):
            if failure:
                self.writer.event(job if job is not None else wl, "Warning", "AutoResumeRetriesExhausted", failure)
                self.writer.notify("finished", wl, {"reason": "Failed", "message": failure})
            else:
                self.writer.notify("requeued", wl, {})

    def _suspend(self, integration: JobKind, job: Obj, wl: Mapping[str, Any]) -> None:
        if self.writer.patch_job(integration, job, integration.stop_patch(job)):
            evicted = st.find_condition(wl, st.EVICTED) or {}
            self.writer.event(job, "Normal", "Stopped", evicted.get("message", "Workload evicted"))

    # ------------------------------------------------------------------ phase 6
    def start_admitted(self) -> None:
        jobs = self.lookups.job_index()
        self.isolation.for_each("start_admitted",
                                [wl for wl in wi.holding(self.cache.workloads)
                                 if st.condition_true(wl, st.ADMITTED) and not st.condition_true(wl, st.EVICTED)],
                                lambda wl: self._start(wl, jobs), workload_of=lambda wl: wl, concurrent=True,
                                wanted=lambda wl: self._startable(wl, jobs))

    @staticmethod
    def _startable(wl: Obj, jobs: JobIndex) -> bool:
        """An owner job that is still suspended and whose previous run's pods are gone (never
        two copies of a pod)."""
        entry = jobs.get(owner_uid(wl) or "")
        return entry is not None and entry[0].is_suspended(entry[1]) and entry[0].can_restore(entry[1])

    def _start(self, wl: Obj, jobs: JobIndex) -> None:
        integration, job = jobs[owner_uid(wl) or ""]
        for patch in integration.start_writes(job, wl["metadata"]["name"], self.start_selectors(wl)):
            if not self.writer.patch_job(integration, job, patch):
                return  # the next pass starts again from what is stored
        self.writer.event(job, "Normal", "Started",
                          f"Admitted by clusterQueue {wl['status']['admission']['clusterQueue']}")

    def start_selectors(self, wl: Mapping[str, Any]) -> list[PodSetStart]:
        return start_selectors(wl, self.cache)

    # ------------------------------------------------------------------ phase 5
    def admit(self) -> Snapshot:
        """One admission pass (kube/admit.py); returns the snapshot it decided on."""
        return self.admission.run()

    def _snapshot(self) -> Snapshot:
        return self.admission.snapshot()

    # ------------------------------------------------------------------ loop
    def reconcile(self) -> None:
        self.ensure_workloads()
        self.suspend_unadmitted()
        self.sync_finished()
        self.pods_ready.run(wi.live(self.cache.workloads), self.lookups.job_index(), owner_uid)
        self.node_failures.run()
        self.progress_evictions()
        snapshot = self.admit()  # writes the queue status too
        # Right after admission, so a job admitted in this pass starts in this pass instead of
        # waiting for the next one (a burst's jobs started one pass late, issue 34); also starts
        # any admitted job an earlier pass could not.
        self.start_admitted()
        if self.pod_integration is not None:
            self.pod_integration.run()
        self.topology_ungater.ungate()
        self.metrics.reconciled(snapshot, wi.finished_counts(self.cache.workloads))
        if self.defrag is not None:
            self.defrag.run(self._snapshot)
        if self.gc_policy is not None:
            self.gc_policy.after_pass()

    def stop(self) -> None:
        self._stop.set()
        self.leading.clear()
        self.wakeup()
