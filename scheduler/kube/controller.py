"""The toposched controller: Jobs in, Workloads admitted (or left pending with a reason) out.

Each reconcile runs fixed phases, every one idempotent and driven only by what the API
server holds, so a restarted (or newly elected) controller continues exactly where the last
one stopped — no admission is lost and none is made twice:

Workloads created directly, with no owner Job (Kueue's perf runner, external frameworks), go
through the same phases as Kueue treats them: admitted, never started (nothing to unsuspend),
finished by whoever set their ``Finished`` condition (their quota is released by the next
snapshot), and on eviction released at once (nothing to stop) with the same requeue backoff.

1. ``ensure_workloads``   one Workload per managed job (Kueue naming, owner reference), one
                          per LeaderWorkerSet / StatefulSet group, whose pods are labelled with
                          it (``scheduler.kube.podgroups``), one per queued pod or pod group
                          (``scheduler.kube.podintegration``); none for a kind listed in
                          ``integrations.externalFrameworks`` (its controller creates it);
   ``suspend_unadmitted`` a managed job running without an admitted Workload is suspended
                          again (Kueue's "Not admitted by cluster queue").
2. ``sync_finished``      a finished Job finishes its Workload (quota is released).
3. ``node_failures``      an assigned node that stays unhealthy is hot-swapped inside the
                          required domain, or the Workload is evicted (``NodeFailures``).
4. ``progress_evictions`` an evicted Workload's Job is suspended; once its pods are gone the
                          reservation is dropped and the Workload requeued (or, past its
                          HyperPod auto-resume retries, finished as Failed).
5. ``start_admitted``     an admitted Workload's job is unsuspended with its node selectors;
                          the pods of an admitted pod Workload lose Kueue's admission gate; the
                          topology ungater pins each topology-gated pod to its domain
                          (``scheduler.kube.topology_ungater``).
6. ``admit``              one pure admission cycle (``scheduler.core.cycle``) on a snapshot;
                          its decisions are written back (admit / preempt / pending reason).

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

from scheduler.adapter.kinds.base import JobKind, PodSetStart
from scheduler.adapter.kinds.ownership import (
    OwnerRef,
    OwnerUnreadable,
    Resolution,
    governed_kind,
    managed_ancestor,
)
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.registry import enabled_kinds
from scheduler.adapter.kinds.workloads import workload_for_job
from scheduler.core.assignment import decode_topology_assignment
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.cycle import Pending, Snapshot, after_decisions, draining, run_cycles
from scheduler.core.failures import EVICTION_REASON, RequeueBackoff, StormPolicy
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.queueing import QueueState
from scheduler.core.topology_request import ANN_UNCONSTRAINED, TopologyRequestError, request_from_kueue
from scheduler.core.workload import LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME, WorkloadFormatError
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.apply import apply_decisions
from scheduler.kube.cache import ClusterCache, Wakeup
from scheduler.kube.defaults import DEFAULT_CYCLES_PER_PASS
from scheduler.kube.defrag import DefragExecutor
from scheduler.kube.events import EventRecorder
from scheduler.kube.gcpolicy import GcPolicy
from scheduler.kube.informer import WORKLOADS, KubeApi, object_key
from scheduler.kube.isolation import Isolation, UnreadableWorkloads
from scheduler.kube.jobs import JobIndex
from scheduler.kube.metrics import CycleMetrics, NoMetrics
from scheduler.kube.nodefailures import DEFAULT_UNREACHABLE_GRACE_S, NodeFailureHandler, requeue_or_fail
from scheduler.kube.podgroups import PodGroupPhases, is_group_workload
from scheduler.kube.podintegration import PodIntegration
from scheduler.kube.podsready import PodsReadyHandler, requeues_at_once
from scheduler.kube.queues import QueueObjectsWriter
from scheduler.kube.snapshot import build_snapshot
from scheduler.kube.topology_ungater import TopologyUngater
from scheduler.kube.workload_index import owner_uid
from scheduler.kube.writer import Observer, Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Clock = Callable[[], dt.datetime]


# Kueue's jobframework stop messages (event reason "Stopped").
NOT_ADMITTED_MESSAGE = "Not admitted by cluster queue"
NO_MATCHING_WORKLOAD_MESSAGE = "No matching Workload"


class Controller:
    def __init__(self, api: KubeApi, cache: ClusterCache, *, clock: Clock = st.utcnow, solver: str = "auto",
                 time_budget_s: float = 0.1, resync_s: float = 5.0, node_failure_grace_s: float = 3.0,
                 is_leader: Callable[[], bool] | None = None, events: EventRecorder | None = None,
                 requeue_backoff: RequeueBackoff | None = None,
                 node_unreachable_grace_s: float = DEFAULT_UNREACHABLE_GRACE_S,
                 storm_policy: StormPolicy | None = None, config: KueueConfig = KUEUE_DEFAULTS,
                 placement_options: PlacementOptions | None = None, domain_preemption: bool = True) -> None:
        """``is_leader``: asked before every write (default: :attr:`leading`, which the lease
        elector sets). ``events``: where Events go (default: a recorder on ``api``).
        ``requeue_backoff``: before a NodeFailures-evicted workload is admitted again (Kueue's
        waitForPodsReady requeuing defaults). ``node_failure_grace_s`` / ``node_unreachable_grace_s``:
        how long a known-bad / an unreachable assigned node must stay so before its workload is
        hot-swapped or evicted; ``storm_policy``: the eviction-storm guard. ``config``: the admin's
        Kueue Configuration (``--kueue-config``); its ``integrations.frameworks`` limit the job
        kinds managed."""
        self.api = api
        self.cache = cache
        self.clock = clock
        self.solver = solver
        self.config = config
        # The job-kind registry's kinds, as the Configuration enables them; a kind listed in
        # integrations.externalFrameworks is its own controller's (its Workloads are admitted here).
        self.kinds = enabled_kinds(config.frameworks, config.external_frameworks)
        self.time_budget_s = time_budget_s
        self.placement_options = placement_options  # toposched's policies beyond Kueue (None: Kueue's)
        # Domain-clearing preemption and sticky targets (core/domain_preemption.py); off: Kueue's
        # classical preemption only (--no-domain-preemption).
        self.domain_preemption = domain_preemption
        self.resync_s = resync_s
        self.leading = threading.Event()
        self.writer = Writer(api, cache, is_leader or self.leading.is_set, events or EventRecorder(api, clock=clock))
        self.isolation = Isolation(self.writer, clock)
        self.requeue_backoff = requeue_backoff if requeue_backoff is not None else RequeueBackoff()
        self.unreadable = UnreadableWorkloads()
        self.node_failures = NodeFailureHandler(cache, self.writer, clock, grace_s=node_failure_grace_s,
                                                isolation=self.isolation,
                                                unreachable_grace_s=node_unreachable_grace_s,
                                                storm_policy=storm_policy)
        self.pods_ready = PodsReadyHandler(self.writer, clock, config.wait_for_pods_ready, self.isolation)
        self.pod_groups = PodGroupPhases(cache, self.writer, self.isolation, self.resolve_priority, self.kinds)
        # Kueue's pod integration (plain pods, pod groups, Deployments' and StatefulSets' pods) and
        # its topology ungater (a gated pod of an admitted pod set is pinned to its domain).
        self.pod_integration = PodIntegration(cache, self.writer, self.isolation, self.resolve_priority,
                                              self.start_selectors, clock) if POD in self.kinds else None
        self.topology_ungater = TopologyUngater(cache, self.writer, self.isolation)
        self.queue_state = QueueState()
        self.queue_objects = QueueObjectsWriter(self.writer, cache, clock)
        self._fingerprint = 0
        self.wakeup = Wakeup()
        self._stop = threading.Event()
        # Observers of decisions (the gRPC WatchDecisions stream, metrics): the writer's own
        # list, which it calls after each decision it wrote.
        self.observers: list[Observer] = self.writer.observers
        # Admission attempts and per-pass gauges (scheduler.kube.metrics); off unless set.
        self.metrics: CycleMetrics = NoMetrics()
        # Opt-in defragmentation (--defrag): moves checkpointable workloads within a budget.
        self.defrag: DefragExecutor | None = None
        # Kueue scheduling cycles run back to back in one pass (core.cycle.run_cycles); 1: one
        # head per ClusterQueue per pass (``--cycles-per-pass``).
        self.cycles_per_pass = DEFAULT_CYCLES_PER_PASS
        # Process-wide garbage-collection tuning (scheduler.kube.gcpolicy); off unless the
        # controller command sets it, since it changes the collector for the whole process.
        self.gc_policy: GcPolicy | None = None

    # ------------------------------------------------------------------ lookups
    def _job_index(self) -> dict[str, tuple[JobKind, Obj]]:
        """uid -> (kind, object) of the queued objects of every enabled suspendable kind."""
        out: dict[str, tuple[JobKind, Obj]] = {}
        for kind in self.kinds:
            informer = self.cache.jobs.get(kind.framework)
            if informer is None or not kind.suspendable:
                continue
            for job in informer.items():
                if not kind.skipped(job):  # a RayJob on an existing cluster is not managed
                    out[str(job["metadata"]["uid"])] = (kind, job)
        return out

    def related(self, kind: str, namespace: str, name: str) -> Obj | None:
        """An object a kind's pod sets are read from (a TrainJob's runtime), from its informer."""
        informer = self.cache.related.get(kind)
        return informer.get(f"{namespace}/{name}" if namespace else name) if informer is not None else None

    def _queued_owner(self, namespace: str, ref: OwnerRef) -> Obj | None:
        """An owner from the informer caches, which hold the queued objects of every governed
        kind: one found there exists and is queued; one that is not is no managed ancestor."""
        kind = governed_kind(ref, self.kinds)
        informer = self.cache.jobs.get(kind.framework) if kind is not None else None
        return informer.get(f"{namespace}/{ref.name}") if informer is not None else None

    def ownership(self, job: Mapping[str, Any]) -> Resolution:
        """The job's queued ancestor of a governed kind, resolved by uid (a forged owner reference
        is not honoured: the job is queued on its own). A cyclic or too long chain: on its own."""
        try:
            return managed_ancestor(job, self._queued_owner, self.kinds)
        except OwnerUnreadable as exc:
            return Resolution(None, str(exc))

    # ------------------------------------------------------------------ phase 1
    def resolve_priority(self, job: Mapping[str, Any]) -> tuple[int, dict[str, str] | None] | None:
        """Kueue: the WorkloadPriorityClass label wins; else the pod template's PriorityClass;
        else a WorkloadPriorityClass named ``default`` (if any); else 0. A label naming a
        missing class blocks Workload creation (``None``)."""
        labels = (job.get("metadata") or {}).get("labels") or {}
        name = labels.get(LABEL_PRIORITY_CLASS)
        if name:
            wpc = self.cache.workload_priority_classes.get(name)
            if wpc is None:
                return None
            return int(wpc.get("value") or 0), {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                 "name": name}
        pc_name = ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get("priorityClassName")
        if pc_name:
            pc = self.cache.priority_classes.get(pc_name)
            if pc is not None:
                return int(pc.get("value") or 0), {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                    "name": pc_name}
        default = self.cache.workload_priority_classes.get("default")
        if default is not None:
            return int(default.get("value") or 0), {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                     "name": "default"}
        return 0, None

    def ensure_workloads(self) -> None:
        workloads = self.cache.workloads
        self.isolation.for_each("ensure_workloads", [entry for uid, entry in self._job_index().items()
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
        ownership = self.ownership(job)
        if ownership.ancestor is not None:
            return  # governed through its queued parent (a JobSet's Job, an mpi-operator launcher)
        if integration.finish_state(job).finished:
            return
        priority = self.resolve_priority(job)
        if priority is None:
            name = job["metadata"]["labels"][LABEL_PRIORITY_CLASS]
            self.writer.event(job, "Warning", "WorkloadPriorityClassNotFound",
                              f"workloadPriorityClass \"{name}\" not found; create it or fix label "
                              f"{LABEL_PRIORITY_CLASS}")
            return
        try:
            body = workload_for_job(integration, job, priority[0], priority[1], self.related)
        except (TopologyRequestError, WorkloadFormatError) as exc:  # as Kueue's reconciler: no Workload, retried
            self.writer.event(job, "Warning", "CreatedWorkloadFailed", str(exc)[:500])
            return
        if ownership.unhonoured:
            self.writer.event(job, "Warning", "OwnerReferenceNotHonoured",
                              f"{ownership.unhonoured}: queued on its own like any other {integration.kind}")
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
        """Kueue's jobframework: a managed job that runs while its Workload is not admitted (a
        user patched ``suspend: false`` on a pending job) is suspended again, with Kueue's
        ``Stopped`` event and message; without any Workload, Kueue's "No matching Workload"."""
        # (integration, job, its Workload or None), the Workload looked up once per job.
        items = [(*entry, wi.owned_by(self.cache.workloads, uid)) for uid, entry in self._job_index().items()]
        self.isolation.for_each("suspend_unadmitted", items, lambda item: self._suspend_unadmitted(*item),
                                subject=lambda item: item[1], workload_of=lambda item: item[2], concurrent=True,
                                wanted=lambda item: self._runs_unadmitted(*item))

    def _runs_unadmitted(self, integration: JobKind, job: Obj, wl: Obj | None) -> bool:
        meta = job.get("metadata") or {}
        if integration.is_suspended(job) or meta.get("deletionTimestamp"):
            return False
        if not (meta.get("labels") or {}).get(LABEL_QUEUE_NAME) or integration.finish_state(job).finished:
            return False  # not managed (Kueue's manageJobsWithoutQueueName: false), or done
        ancestor = self.ownership(job).ancestor
        if ancestor is not None:
            # Kueue's shouldSuspendChildJob: a child runs only while its ancestor's Workload is admitted.
            wl = wi.owned_by(self.cache.workloads, ancestor.uid)
            return wl is None or st.is_finished(wl) or not st.condition_true(wl, st.ADMITTED)
        # Admitted (or evicted: the eviction phase stops it with the eviction's message).
        return wl is None or not (st.condition_true(wl, st.ADMITTED) or st.is_finished(wl))

    def _suspend_unadmitted(self, integration: JobKind, job: Obj, wl: Obj | None) -> None:
        message = NOT_ADMITTED_MESSAGE if wl is not None else NO_MATCHING_WORKLOAD_MESSAGE
        ancestor = self.ownership(job).ancestor
        if ancestor is not None:
            message = f"{NOT_ADMITTED_MESSAGE}: the Workload of its owner {ancestor.spelled}"
        if self.writer.patch_job(integration, job, integration.stop_patch(job)):
            log.info("%s %s runs without an admitted Workload: suspended (%s)", integration.kind, object_key(job),
                     message)
            self.writer.event(job, "Normal", "Stopped", message)

    # ------------------------------------------------------------------ phase 2
    def sync_finished(self) -> None:
        """A Workload whose job finished is marked Finished (its quota is free at once). Walked
        from the jobs' side: a Workload without a job has nothing to sync."""
        if self.pod_integration is not None:
            self.pod_integration.sync_finished()
            self.pod_integration.release_finalizers()
        jobs = self._job_index()
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
        jobs = self._job_index()
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

    # ------------------------------------------------------------------ phase 4
    def start_selectors(self, wl: Mapping[str, Any]) -> list[PodSetStart]:
        """Per pod set: the flavors' nodeLabels, plus the required domain's labels (every level
        from the top down to the required one), read from the nodes of the assignment."""
        spec_sets = {ps["name"]: ps for ps in (wl.get("spec") or {}).get("podSets") or ()}
        out = []
        for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
            selector: dict[str, str] = {}
            tolerations: list[Mapping[str, Any]] = []
            for flavor_name in sorted(set((psa.get("flavors") or {}).values())):
                flavor = self.cache.flavors.get(flavor_name) or {}
                selector.update(((flavor.get("spec") or {}).get("nodeLabels")) or {})
                tolerations.extend(((flavor.get("spec") or {}).get("tolerations")) or ())
            request = request_from_kueue((spec_sets.get(psa["name"]) or {}).get("topologyRequest"))
            required = request.required if request is not None else None
            annotations: dict[str, str] = {}
            if psa.get("topologyAssignment"):
                if required:
                    selector.update(self._required_domain_selector(psa, required, flavor_name))
                if request is None or not request.explicit:
                    annotations[ANN_UNCONSTRAINED] = "true"
            out.append(PodSetStart(psa["name"], selector, tuple(tolerations), annotations, psa.get("count"),
                                   topology_assigned=bool(psa.get("topologyAssignment"))))
        return out

    def _required_domain_selector(self, psa: Mapping[str, Any], required: str, flavor_name: str) -> dict[str, str]:
        levels, domains = decode_topology_assignment(psa["topologyAssignment"])
        topo_name = ((self.cache.flavors.get(flavor_name) or {}).get("spec") or {}).get("topologyName")
        topo = self.cache.topologies.get(topo_name or "") or {}
        topo_levels = [lv["nodeLabel"] for lv in (topo.get("spec") or {}).get("levels") or ()]
        wanted = topo_levels[: topo_levels.index(required) + 1] if required in topo_levels else [required]
        values: dict[str, set[str]] = {level: set() for level in wanted}
        for domain in domains:
            labels: dict[str, str] = dict(zip(levels, domain.values, strict=False))
            if "kubernetes.io/hostname" in labels and len(levels) == 1:
                node = self.cache.nodes.get(labels["kubernetes.io/hostname"]) or {}
                labels = {**((node.get("metadata") or {}).get("labels") or {}), **labels}
            for level in wanted:
                if level in labels:
                    values[level].add(labels[level])
        return {level: next(iter(vals)) for level, vals in values.items() if len(vals) == 1}

    def start_admitted(self) -> None:
        jobs = self._job_index()
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

    # ------------------------------------------------------------------ phase 5
    def _capacity_fingerprint(self) -> int:
        """Changes whenever capacity or queue configuration may have changed: then workloads
        parked as inadmissible (BestEffortFIFO) get another chance (Kueue requeues them when
        a workload finishes or is evicted, or queue objects change)."""
        # A Workload that finishes leaves the holding set: that changes the fingerprint too.
        holding = frozenset((object_key(w), st.condition_true(w, st.EVICTED)) for w in wi.holding(self.cache.workloads))
        # Queue objects by spec generation (and deletion), not resourceVersion: our own status
        # and finalizer writes (kube.queues) must not count as a configuration change.
        config = frozenset((inf.resource.plural, object_key(o), o["metadata"].get("generation"),
                            bool(o["metadata"].get("deletionTimestamp")))
                           for inf in (self.cache.cluster_queues, self.cache.local_queues, self.cache.flavors,
                                       self.cache.topologies, self.cache.cohorts)
                           for o in inf.items())
        nodes = frozenset((object_key(o), o["metadata"].get("resourceVersion")) for o in self.cache.nodes.items())
        return hash((holding, config, nodes))

    def admit(self) -> Snapshot:
        """One admission cycle; returns the snapshot it decided on (the queue status is
        computed from it too)."""
        fingerprint = self._capacity_fingerprint()
        if fingerprint != self._fingerprint:
            self.queue_state.release()
            self._fingerprint = fingerprint
        self.queue_state.release_due(self.clock().timestamp())  # compact waits that ran out
        snapshot = self._snapshot()
        decided, reasons = snapshot, []
        if (snapshot.pending or draining(snapshot)) and not self.unreadable.holds_admission():
            self.queue_objects.announce_work(snapshot, self.isolation)
            decisions = self.metrics.admission_attempt(lambda: run_cycles(snapshot, self.cycles_per_pass))
            reasons = [d for d in decisions if isinstance(d, Pending)]
            actions = [d for d in decisions if not isinstance(d, Pending)]
            apply_decisions(self.writer, self.queue_state, snapshot, actions, self.clock(), self.isolation)
            decided = after_decisions(snapshot, decisions)
        # Queue status with this pass's admissions, before the pending reasons: a ClusterQueue
        # reports an admission (and its pending count) in the pass that made it, as Kueue's
        # cache does, even when hundreds of new Workloads each get a first pending reason
        # (issue 18: Kueue's perf recorder reads usage and "work left" from ClusterQueue status).
        self.queue_objects.sync(decided, self.isolation)
        if reasons:
            apply_decisions(self.writer, self.queue_state, snapshot, reasons, self.clock(), self.isolation)
        return snapshot

    def _snapshot(self) -> Snapshot:
        """The cycle's snapshot without the Workloads the adapter cannot read (each reported,
        and skipped until it changes); the rest of the cluster is admitted as usual."""
        def build() -> Snapshot:
            return build_snapshot(self.cache, self.clock(), solver=self.solver, time_budget_s=self.time_budget_s,
                                  inadmissible=self.queue_state.inadmissible(),
                                  placement_options=self.placement_options,
                                  domain_preemption=self.domain_preemption,
                                  exclude=self.unreadable.current(wi.live(self.cache.workloads)),
                                  config=self.config)
        try:
            return build()
        except Exception:
            if not self.unreadable.probe(self.cache.workloads.items(), self.cache.flavors.items(),
                                         lambda wl, exc: self.isolation.report("admit", wl, exc, wl),
                                         self.cache.workloads.get):
                raise  # no Workload is to blame: something else is broken (reconcile logs it)
            return build()

    # ------------------------------------------------------------------ loop
    def reconcile(self) -> None:
        self.ensure_workloads()
        self.suspend_unadmitted()
        self.sync_finished()
        self.pods_ready.run(wi.live(self.cache.workloads), self._job_index(), owner_uid)
        self.node_failures.run()
        self.progress_evictions()
        self.start_admitted()
        if self.pod_integration is not None:
            self.pod_integration.run()
        self.topology_ungater.ungate()
        snapshot = self.admit()  # writes the queue status too
        self.metrics.reconciled(snapshot, wi.finished_counts(self.cache.workloads))
        if self.defrag is not None:
            self.defrag.run(self._snapshot)
        if self.gc_policy is not None:
            self.gc_policy.after_pass()

    def stop(self) -> None:
        self._stop.set()
        self.leading.clear()
        self.wakeup()
