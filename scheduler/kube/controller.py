"""The toposched controller: Jobs in, Workloads admitted (or left pending with a reason) out.

Each reconcile runs the phases of :meth:`Controller.declared_phases`, in that order, every one
idempotent and driven only by what the API server holds, so a restarted (or newly elected)
controller continues exactly where the last one stopped: no admission is lost and none is made
twice. Each phase is a module with a narrow input (``kube/phase.py``'s shared parts and its
own); the settings are one frozen value (``kube/settings.py``) built by the command.

Workloads created directly, with no owner Job (Kueue's perf runner, external frameworks), go
through the same phases as Kueue treats them: admitted, never started (nothing to unsuspend),
finished by whoever set their ``Finished`` condition (their quota is released by the next
snapshot), and on eviction released at once (nothing to stop) with the same requeue backoff.

Only the leader runs phases; followers keep caches warm. Every write goes through the
:class:`~scheduler.kube.writer.Writer`, which checks leadership before each one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.adapter.caches import SnapshotCaches
from scheduler.adapter.kinds.base import PodSetStart
from scheduler.adapter.kinds.identifiers import identifiers
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.registry import enabled_kinds
from scheduler.adapter.kinds.workload_slicing import GATE as ELASTIC_GATE
from scheduler.adapter.owned import Signer
from scheduler.adapter.workload_checks import max_pod_sets
from scheduler.core.kueue.queueing import QueueState
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.k8s.gcpolicy import GcPolicy
from scheduler.k8s.informer import KubeApi
from scheduler.kube import workload_index as wi
from scheduler.kube.admission_gates import AdmissionGates
from scheduler.kube.admit import AdmissionParts, AdmitPhase
from scheduler.kube.cache import ClusterCache, Wakeup
from scheduler.kube.defrag import DefragExecutor
from scheduler.kube.elastic import ElasticSlices, ElasticUngater
from scheduler.kube.ensure import EnsureWorkloads
from scheduler.kube.equivalence import Equivalence
from scheduler.kube.events import EventRecorder
from scheduler.kube.evictions import ProgressEvictions
from scheduler.kube.explicit_status import ExplicitStatus
from scheduler.kube.finishing import SyncFinished
from scheduler.kube.invalid import InvalidWorkloads
from scheduler.kube.isolation import Isolation, UnreadableWorkloads
from scheduler.kube.limit_migration import LimitMigration
from scheduler.kube.lookups import JobLookups
from scheduler.kube.metrics import CycleMetrics, NoMetrics
from scheduler.kube.nodefailures import NodeFailureHandler
from scheduler.kube.orphans import FinishOrphaned
from scheduler.kube.phase import PassState, Phase, Shared
from scheduler.kube.podgroups import PodGroupPhases
from scheduler.kube.podintegration import PodIntegration
from scheduler.kube.podsready import PodsReadyHandler
from scheduler.kube.prebuilt import Prebuilt
from scheduler.kube.preemption_limits import PreemptionLedger, PreemptionRules
from scheduler.kube.queues import QueueObjectsWriter
from scheduler.kube.resuspend import Resuspension
from scheduler.kube.settings import ControllerSettings
from scheduler.kube.starting import StartAdmitted
from scheduler.kube.topology_ungater import TopologyUngater
from scheduler.kube.workload_index import owner_uid
from scheduler.kube.writer import Observer, Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]

DEFAULT_SETTINGS = ControllerSettings()


class Controller:
    def __init__(self, api: KubeApi, cache: ClusterCache, settings: ControllerSettings = DEFAULT_SETTINGS, *,
                 is_leader: Callable[[], bool] | None = None, events: EventRecorder | None = None,
                 signer: Signer | None = None, metrics: CycleMetrics | None = None,
                 gc_policy: GcPolicy | None = None) -> None:
        """``is_leader``: asked before every write (default: :attr:`leading`, which the lease
        elector sets). ``events``: where Events go (default: a recorder on ``api``). ``signer``:
        the key the controller signs its owned annotations with (``scheduler.kube.signing``;
        default: one of this process only). ``metrics``: admission attempts and per-pass gauges
        (default: none). ``gc_policy``: process-wide garbage-collection tuning (only for a
        process that holds the caches: the command's)."""
        self.api = api
        self.cache = cache
        self.settings = settings
        clock = settings.clock
        self.leading = threading.Event()
        self.writer = Writer(api, cache, is_leader or self.leading.is_set, events or EventRecorder(api, clock=clock),
                             concurrency=max(1, settings.concurrent_writes), signer=signer)
        # The job-kind registry's kinds, as the Configuration enables them; a kind listed in
        # integrations.externalFrameworks is its own controller's (its Workloads are admitted here).
        kinds = enabled_kinds(settings.config.frameworks, settings.config.external_frameworks)
        lookups = JobLookups(cache, kinds, settings.config.feature_gates.enabled("WorkloadPriorityClassDefaulting"))
        self.shared = Shared(cache, self.writer, Isolation(self.writer, clock), clock, lookups, kinds,
                             settings.config.feature_gates)
        self.isolation = self.shared.isolation
        self.metrics: CycleMetrics = metrics or NoMetrics()
        self.gc_policy = gc_policy
        # The conversions one pass's snapshot reuses from the last (the node-failure record reads
        # the same nodes and trees): owned here, the builder of snapshot after snapshot.
        caches = SnapshotCaches()
        self.node_failures = NodeFailureHandler(
            cache, self.writer, clock, grace_s=settings.node_failure_grace_s, isolation=self.isolation,
            unreachable_grace_s=settings.node_unreachable_grace_s, storm_policy=settings.storm_policy,
            caches=caches, prefix_runs=settings.config.feature_gates.enabled("TASAssignmentsEncodingByHostnamePrefix"),
            deleted_node_lease_absent_s=settings.deleted_node_lease_absent_s,
            skip_pod_owned=settings.config.feature_gates.enabled("SkipReassignmentForPodOwnedWorkloads"),
            overlapping_flavors=settings.config.feature_gates.enabled("TASHandleOverlappingFlavors"))
        self.pods_ready = PodsReadyHandler(self.writer, clock, settings.config.wait_for_pods_ready, self.isolation)
        self.pod_groups = PodGroupPhases(cache, self.writer, self.isolation, lookups.resolve_priority, kinds,
                                         settings.config.feature_gates)
        # What runs is what was admitted (Kueue's EquivalentToWorkload); no stale admission starts.
        self.equivalence = Equivalence(self.shared, settings.config.feature_gates.enabled("PartialAdmission"),
                                       settings.config.release, settings.config.feature_gates)
        self.starting = StartAdmitted(self.shared, self.equivalence.startable)
        # Kueue's pod integration (plain pods, pod groups, Deployments' and StatefulSets' pods) and
        # its topology ungater (a gated pod of an admitted pod set is pinned to its domain).
        self.pod_integration = PodIntegration(cache, self.writer, self.isolation, lookups.resolve_priority,
                                              self.starting.selectors, clock,
                                              identifiers(settings.config.feature_gates),
                                              max_pod_sets(settings.config.release)) if POD in kinds else None
        self.topology_ungater = TopologyUngater(cache, self.writer, self.isolation)
        self.queue_objects = QueueObjectsWriter(self.writer, cache, clock)
        # Kueue's PreemptionConfig / toposched's PreemptionLimit for toposched's own preemptions
        # (domain clearing, defragmentation): the evictions they count, and the rules read each
        # pass; PreemptionLimits an earlier toposched kept in kueue.x-k8s.io are copied over first.
        self.preemption_ledger = PreemptionLedger(self.writer, clock)
        self.limit_migration = LimitMigration(cache, self.writer)
        self.admission = AdmitPhase(self.shared, settings, AdmissionParts(
            QueueState(), self.queue_objects, UnreadableWorkloads(), InvalidWorkloads(self.writer, clock), caches,
            PreemptionRules(cache, self.preemption_ledger, caches), self.metrics))
        self.defrag = (DefragExecutor(self.writer, clock, settings.defrag.budget, settings.defrag.interval_s,
                                      ledger=self.preemption_ledger) if settings.defrag is not None else None)
        gates = settings.config.feature_gates
        # Elastic jobs (Kueue v0.19's ElasticJobsViaWorkloadSlices): workload slices.
        slices = ElasticSlices(self.shared, gates) if gates.enabled(ELASTIC_GATE) else None
        self.elastic_ungater = ElasticUngater(self.shared) if slices is not None else None
        self.ensuring = EnsureWorkloads(self.shared, self.pod_groups, self.pod_integration,
                                        gates.enabled("AdmissionGatedBy"), settings.config.release, slices,
                                        Prebuilt(self.shared, identifiers(gates)))
        self.admission_gates = AdmissionGates(self.shared, gates, self.pod_groups.owned_groups)
        self.orphans = FinishOrphaned(self.shared, gates.enabled("FinishOrphanedWorkloads"))
        self.explicit_status = ExplicitStatus(self.shared, gates.enabled("UnadmittedWorkloadsExplicitStatus"))
        self.finishing = SyncFinished(self.shared, self.pod_integration)
        self.evictions = ProgressEvictions(self.shared, self.pod_groups, self.pod_integration, settings.requeue_backoff)
        self.resuspension = Resuspension(cache, self.writer, self.isolation, lookups, gates)
        self.wakeup = Wakeup()
        self._stop = threading.Event()
        # Observers of decisions (the gRPC WatchDecisions stream, metrics): the writer's own
        # list, which it calls after each decision it wrote.
        self.observers: list[Observer] = self.writer.observers
        self.phases = self.declared_phases()

    def declared_phases(self) -> tuple[Phase, ...]:
        """The pass, in order. Workloads exist before anything reads them; a job running without
        admission is stopped before the cycle counts its pods; finished and evicted Workloads give
        their quota back before the cycle decides; a job admitted in this pass starts in this pass
        (a burst's jobs started one pass late, issue 34); the pods of admitted pod sets are
        released and pinned after their Workloads are admitted; metrics and defragmentation read
        the snapshot the cycle decided on."""
        phases = [
            Phase("ensure_workloads", self.ensuring.run),
            Phase("equivalence", lambda _state: self.equivalence.run()),
            Phase("admission_gates", self.admission_gates.run),
            Phase("explicit_status", self.explicit_status.run),
            Phase("suspend_unadmitted", lambda _state: self.resuspension.run()),
            Phase("sync_finished", self.finishing.run),
            Phase("finish_orphaned", self.orphans.run),
            Phase("pods_ready", lambda _state: self.pods_ready.run(
                wi.live(self.cache.workloads), self.shared.lookups.job_index(), owner_uid)),
            Phase("node_failures", lambda _state: self.node_failures.run()),
            Phase("progress_evictions", self.evictions.run),
            Phase("migrate_preemption_limits", lambda _state: self.limit_migration.run()),
            Phase("admit", self.admission.run),  # writes the queue objects' status too
            Phase("start_admitted", self.starting.run),
        ]
        pods, defrag, gc, elastic = self.pod_integration, self.defrag, self.gc_policy, self.elastic_ungater
        if elastic is not None:  # an elastic job's pods as its newest admitted slice grants
            phases.append(Phase("ungate_elastic", lambda _state: elastic.run()))
        if pods is not None:
            phases.append(Phase("release_pods", lambda _state: pods.run()))
        phases.append(Phase("ungate_topology", lambda _state: self.topology_ungater.ungate()))
        phases.append(Phase("metrics", self._record_metrics))
        if defrag is not None:
            phases.append(Phase("defrag", lambda _state: defrag.run(self.admission.snapshot)))
        if gc is not None:
            phases.append(Phase("gc", lambda _state: gc.after_pass()))
        return tuple(phases)

    def _record_metrics(self, state: PassState) -> None:
        if state.snapshot is not None:
            self.metrics.reconciled(state.snapshot, wi.finished_counts(self.cache.workloads))

    # Single phases by name, for tests that step one phase at a time.
    def ensure_workloads(self) -> None:
        self.ensuring.run()

    def suspend_unadmitted(self) -> None:
        self.resuspension.run()

    def sync_finished(self) -> None:
        self.finishing.run()

    def progress_evictions(self) -> None:
        self.evictions.run()

    def start_admitted(self) -> None:
        self.starting.run()

    def start_selectors(self, wl: Mapping[str, Any]) -> list[PodSetStart]:
        return self.starting.selectors(wl)

    def migrate_preemption_limits(self) -> None:
        self.limit_migration.run()

    def admit(self) -> Snapshot:
        """One admission pass (kube/admit.py); returns the snapshot it decided on."""
        return self.admission.run()

    def _snapshot(self) -> Snapshot:
        return self.admission.snapshot()

    # ------------------------------------------------------------------ loop
    def reconcile(self) -> None:
        state = PassState()
        for phase in self.phases:
            phase.run(state)

    def stop(self) -> None:
        self._stop.set()
        self.leading.clear()
        self.wakeup()
