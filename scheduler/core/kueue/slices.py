"""Elastic jobs in the cycle: Kueue v0.19.2's workload slices (``ElasticJobsViaWorkloadSlices``;
``pkg/workloadslicing/workloadslicing.go`` ``ReplacedWorkloadSlice`` / ``FindReplacedSliceTarget``,
``pkg/scheduler/scheduler.go``, ``flavorassigner.go``).

A new slice of a scaled-up job replaces the admitted slice it names: it is nominated as if the
old slice's quota were already its own (Kueue charges only the delta, new minus old) and on the
old slice's flavors (Kueue keeps the original flavor), the old
slice is never one of its preemption targets, and once it is admitted the old slice is finished
(``Admit.replaces``; the writer finishes it with Kueue's ``WorkloadSliceReplaced`` reason and
message) and its quota and topology usage are released. Its topology is placed whole beside
the old slice's pods, which keep their nodes: Kueue v0.19.2's default, where placing only the
delta next to the previous assignment is the alpha gate ``ElasticJobsViaWorkloadSlicesWithTAS``
(off, not built). Which pending Workload
replaces which admitted one is the adapter's reading (``Snapshot.slice_replacements``, only
between slices of one job); the cycle honours it only inside one ClusterQueue and namespace,
as Kueue looks the old slice up in the new one's ClusterQueue."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.cycle_state import CycleState
from scheduler.core.kueue.quota import ClusterQueueSpec, QuotaState


def replaced_slice(state: CycleState, key: str, namespace: str, cluster_queue: str) -> AdmittedWorkload | None:
    """``ReplacedWorkloadSlice``: the admitted slice the pending Workload ``key`` replaces, when
    it is in the same ClusterQueue and namespace (and not being evicted: its quota is on the
    way out, Kueue's ``FindLatestActiveWorkload``)."""
    old_key = state.snap.slice_replacements.get(key)
    if old_key is None:
        return None
    for w in state.admitted:
        if w.key == old_key and w.cluster_queue == cluster_queue and w.spec.namespace == namespace \
                and not w.evicted:
            return w
    return None


def same_flavors(cq: ClusterQueueSpec, old: AdmittedWorkload) -> ClusterQueueSpec:
    """The ClusterQueue as the new slice may use it: in each resource group only the flavors
    the old slice holds (Kueue's flavor assigner: "could not assign <f> flavor since the
    original workload is assigned: <g>"; a group the old slice uses nothing of keeps them all)."""
    used = {flavor for flavor, _resource in old.usage}
    groups = tuple(replace(g, flavors=tuple(f for f in g.flavors if f.name in used) or g.flavors)
                   for g in cq.resource_groups)
    return replace(cq, resource_groups=groups)


def without_slice(quota: QuotaState, old: AdmittedWorkload) -> QuotaState:
    """A copy of ``quota`` with the old slice's usage released: what the new slice is fitted
    against (the delta, as Kueue's flavor assigner subtracts the old slice's requests)."""
    work = quota.clone()
    work.remove_usage(old.cluster_queue, old.usage)
    return work


@contextmanager
def as_own(state: CycleState, old: AdmittedWorkload) -> Iterator[None]:
    """While nominating a new slice: the old slice's quota counts as free and it is no
    preemption candidate; restored afterwards (the cycle's state is charged only when the new
    slice settles)."""
    quota, admitted = state.quota, state.admitted
    state.quota = without_slice(quota, old)
    state.admitted = [w for w in admitted if w.key != old.key]
    try:
        yield
    finally:
        state.quota, state.admitted = quota, admitted
