"""Node failures in the simulator, decided as the controller decides them.

A failure flips ``sagemaker.amazonaws.com/node-health-status`` to ``UnschedulablePendingReboot``
(so ``node_health`` excludes the node when the trees are rebuilt); the controller's own decision
(``core.failures.node_failure_decisions`` and ``apply_replacement``) then hot-swaps a workload
with a failed node in a hostname-level assignment when a slot in the required domain takes its
pods, or evicts it with reason ``NodeFailures``, requeued (keeping its creation-time queue
position, as Kueue does) after the controller's requeue backoff (``core.failures.RequeueBackoff``:
a workload's first NodeFailures requeue is at once, as Kueue's; the n-th after it waits
``base * 2^(n-2)`` seconds, capped; Kueue's ``requeueState``). The controller's eviction-storm
guard applies too (``core.failures.storms`` over ``storm_groups``, ``StormPolicy``): while more
than the threshold of a group's nodes failed within the window, workloads on failed nodes are
held (neither replaced nor evicted; event ``held``) and decided again when a node recovers. A
requeued job restarts from the beginning (no checkpoint model).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence

from scheduler.core.health import node_health
from scheduler.core.kueue.admitted import TASUsage
from scheduler.core.kueue.failures import (
    EVICTION_REASON,
    FailureTracker,
    HoldForNodeStorm,
    PlacedWorkload,
    ReplaceNodes,
    RequeueBackoff,
    Storm,
    StormPolicy,
    apply_replacement,
    held_nodes,
    node_failure_decisions,
    pods_per_node,
    storm_groups,
    storms,
)
from scheduler.sim.cluster import SimCluster
from scheduler.sim.model import FAILED_STATUS


class SimNodeFailures:
    def __init__(self, cluster: SimCluster, requeue_backoff: RequeueBackoff, storm_policy: StormPolicy | None) -> None:
        self.cluster = cluster
        self.requeue_backoff = requeue_backoff
        self.storm_policy = storm_policy  # None: the guard is off
        # The controller's record of unhealthy nodes (no grace: failures are instants here).
        self.tracker = FailureTracker(grace_s=0.0)
        self.storms: dict[str, Storm] = {}
        self.held: set[str] = set()  # workloads whose node failure is held by a storm
        self.requeue_counts: dict[str, int] = defaultdict(int)  # Kueue's requeueState.count
        self.changed = False  # health changed at this instant: decide once every change is recorded
        for name, info in cluster.nodes.items():
            self.tracker.observe(name, node_health(info, cluster.world.health_policy).healthy, 0.0)

    def fail(self, node: str) -> None:
        c = self.cluster
        c.set_health(node, FAILED_STATUS)
        self.tracker.observe(node, False, c.now)
        c.log.append({"t": c.now, "kind": "failure", "node": node})
        self.changed = True

    def recover(self, node: str) -> None:
        c = self.cluster
        c.set_health(node, "Schedulable")
        self.tracker.observe(node, True, c.now)
        c.log.append({"t": c.now, "kind": "recovery", "node": node})
        self.changed = True  # a storm may be over: held workloads are decided again
        c.state.release(None)

    def _watch_storms(self) -> dict[str, Storm]:
        """The controller's storm guard over the same groups; node -> the storm holding it."""
        if self.storm_policy is None:
            return {}
        c = self.cluster
        labels = {name: info.labels for name, info in c.nodes.items()}
        selectors = {name: flavor.node_labels for name, flavor in c.world.flavors.items()}
        current = storms(storm_groups(labels, selectors), self.tracker, c.now, self.storm_policy, self.storms)
        for group in sorted(set(current) - set(self.storms)):
            c.log.append({"t": c.now, "kind": "storm", "group": group, "detail": current[group].message})
        for group in sorted(set(self.storms) - set(current)):
            c.log.append({"t": c.now, "kind": "storm-over", "group": group})
        self.storms = current
        return held_nodes(current)

    def decide(self) -> None:
        """The controller's decision for every workload on a failed node, with no grace
        (virtual time) and evictions freeing their capacity at once (pods terminate in no time
        here); a held workload is decided again at the next failure or recovery. As one
        controller pass sees every node that failed together (a rack), the failures of one
        instant are decided together."""
        self.changed = False
        c = self.cluster
        held = self._watch_storms()
        on_failed = [c.admitted[key] for key in sorted(c.admitted)
                     if not c.admitted[key].evicted
                     and self.tracker.failed_among({h for u in c.admitted[key].tas
                                                    for h in pods_per_node(u.placement)}, c.now)]
        placed = [PlacedWorkload(w.spec.key, w.tas, {ps.name: ps.topology for ps in w.spec.pod_sets})
                  for w in on_failed]
        labels = {name: info.labels for name, info in c.nodes.items()}
        decisions = node_failure_decisions(placed, self.tracker, c.trees, c.now, labels,
                                           release_evicted=True, held=held)
        self.held &= {d.workload for d in decisions if isinstance(d, HoldForNodeStorm)}
        for decision in decisions:
            if isinstance(decision, HoldForNodeStorm):
                if decision.workload not in self.held:
                    self.held.add(decision.workload)
                    c.log.append({"t": c.now, "kind": "held", "workload": decision.workload,
                                  "detail": decision.message})
            elif isinstance(decision, ReplaceNodes):
                self._replace(decision)
            else:
                self._evict(decision.workload, decision.failed_nodes)

    def _replace(self, decision: ReplaceNodes) -> None:
        c, key = self.cluster, decision.workload
        w = c.admitted[key]
        c.tas(w, -1)
        w = dataclasses.replace(w, tas=tuple(TASUsage(u.flavor, apply_replacement(u.placement, decision),
                                                       u.per_pod) for u in w.tas))
        c.admitted[key] = w
        c.tas(w, +1)
        c.replacements += 1
        c.log.append({"t": c.now, "kind": "replacement", "workload": key, "node": ",".join(decision.failed_nodes)})

    def _evict(self, key: str, failed_nodes: Sequence[str]) -> None:
        """NodeFailures eviction, requeued after the controller's backoff (requeueState)."""
        c = self.cluster
        c.lose(key)
        c.evictions += 1
        c.jobs[key].evictions += 1
        self.requeue_counts[key] += 1
        c.requeue(key, "eviction", f"{EVICTION_REASON}: {','.join(failed_nodes)}",
                  backoff_s=self.requeue_backoff.delay_s(self.requeue_counts[key]))
