"""The controller re-checks the annotations it owns (issue 30, finding 3): a tenant who can
update Workloads writes ``toposched.io/preemption-target`` or ``toposched.io/reserved-domain``
itself, and the controller must not honour it (the webhook may be down or bypassed). In-memory
API, fake clock, the controller's real phases."""

from __future__ import annotations

import json
from typing import Any

from scheduler.adapter.owned import Signer
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET, DomainTarget
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN, Reservation
from scheduler.core.config import FeatureGates, KueueConfig
from scheduler.core.kueue.queueing import ANN_PRIORITY_BOOST, resolve_priority
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.workload import PodSetSpec
from scheduler.k8s.informer import CLUSTER_QUEUES, WORKLOADS
from scheduler.kube import status as st
from tests.unit.kube.test_ownerless_workloads import ownerless, reconcile, workload
from tests.unit.kube.test_phases import BLOCK, NS, Harness, assigned_hosts

B1 = DomainTarget("main", "gpu", BLOCK, {BLOCK: "b1"})
HELD_B1 = Reservation("x", 0, 0.0, B1, 1e12, PodSetSpec("main", 2, {})).encode()


def prioritized(name: str, pods: int, priority: int, **annotations: str) -> dict[str, Any]:
    body = ownerless(name, pods)
    body["spec"]["priority"] = priority
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


def block_of(harness: Harness, name: str) -> str:
    """The block (b0 or b1) a workload's pods were placed in."""
    hosts = set(assigned_hosts(workload(harness, name)))
    return {"n0": "b0", "n1": "b0", "n2": "b1", "n3": "b1"}[sorted(hosts)[0]]


def evicted(harness: Harness, name: str) -> bool:
    return st.condition_true(workload(harness, name), st.EVICTED)


def two_blocks_busy(harness: Harness) -> dict[str, str]:
    """A priority-0 and a priority-50 workload, one block each; preemption within the queue on."""
    harness.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}})
    for name, priority in (("low", 0), ("mid", 50)):
        harness.api.create(WORKLOADS, prioritized(name, 2, priority), NS)
        harness.sync()
        reconcile(harness)
    blocks = {name: block_of(harness, name) for name in ("low", "mid")}
    assert sorted(blocks.values()) == ["b0", "b1"]
    return blocks


def test_a_forged_preemption_target_does_not_choose_the_victim(harness: Harness) -> None:
    """The tenant points its preemptor at the priority-50 workload's block; Kueue's choice, the
    priority-0 one, is preempted all the same."""
    blocks = two_blocks_busy(harness)
    mid_block = DomainTarget("main", "gpu", BLOCK, {BLOCK: blocks["mid"]}).encode()
    harness.api.create(WORKLOADS, prioritized("high", 2, 100, **{ANN_PREEMPTION_TARGET: mid_block}), NS)
    harness.sync()
    reconcile(harness)
    assert evicted(harness, "low") and not evicted(harness, "mid")
    # The controller wrote its own target (signed) over the forged one.
    stored = workload(harness, "high")["metadata"]["annotations"][ANN_PREEMPTION_TARGET]
    assert json.loads(stored)["domain"] == {BLOCK: blocks["low"]}
    assert harness.controller.writer.signer.verify(workload(harness, "high")["metadata"]["uid"],
                                                   ANN_PREEMPTION_TARGET, stored)


def test_a_target_signed_for_another_workload_or_by_another_key_is_not_honoured(harness: Harness) -> None:
    blocks = two_blocks_busy(harness)
    mid_block = DomainTarget("main", "gpu", BLOCK, {BLOCK: blocks["mid"]}).encode()
    signer = harness.controller.writer.signer
    copied = signer.sign(workload(harness, "mid")["metadata"]["uid"], ANN_PREEMPTION_TARGET, mid_block)
    harness.api.create(WORKLOADS, prioritized("high", 2, 100, **{ANN_PREEMPTION_TARGET: copied}), NS)
    harness.sync()
    [pending] = harness.controller._snapshot().pending
    assert ANN_PREEMPTION_TARGET not in pending.spec.annotations  # copied from another Workload's uid
    high = workload(harness, "high")
    other_key = Signer.per_process().sign(high["metadata"]["uid"], ANN_PREEMPTION_TARGET, mid_block)
    harness.api.merge_patch(WORKLOADS, "high", {"metadata": {"annotations": {ANN_PREEMPTION_TARGET: other_key}}}, NS)
    harness.sync()
    [pending] = harness.controller._snapshot().pending
    assert ANN_PREEMPTION_TARGET not in pending.spec.annotations  # not the controller's key
    mine = signer.sign(high["metadata"]["uid"], ANN_PREEMPTION_TARGET, mid_block)
    harness.api.merge_patch(WORKLOADS, "high", {"metadata": {"annotations": {ANN_PREEMPTION_TARGET: mine}}}, NS)
    harness.sync()
    [pending] = harness.controller._snapshot().pending
    assert pending.spec.annotations[ANN_PREEMPTION_TARGET] == mine  # its own value: honoured


def reserve_compact(harness: Harness) -> None:
    harness.rebuild(placement_options=PlacementOptions(reserve_compact=True))


def b0_busy_and_a_holder(harness: Harness, holder: dict[str, Any]) -> None:
    """b0 full; ``holder`` (created first, so it goes before the next workload) claims b1."""
    reserve_compact(harness)
    harness.api.create(WORKLOADS, prioritized("busy", 2, 0), NS)
    harness.sync()
    reconcile(harness)
    assert block_of(harness, "busy") == "b0"
    harness.api.create(WORKLOADS, holder, NS)
    harness.sync()


def test_a_held_domain_on_a_workload_that_is_not_queued_holds_nothing(harness: Harness) -> None:
    """Signed by the controller even, so only the holder check is at stake: its LocalQueue does
    not exist, so it is not waiting in any queue and holds no block against the others."""
    holder = prioritized("holder", 2, 0)
    holder["spec"]["queueName"] = "no-such-queue"
    b0_busy_and_a_holder(harness, holder)
    uid = workload(harness, "holder")["metadata"]["uid"]
    signed = harness.controller.writer.signer.sign(uid, ANN_RESERVED_DOMAIN, HELD_B1)
    harness.api.merge_patch(WORKLOADS, "holder", {"metadata": {"annotations": {ANN_RESERVED_DOMAIN: signed}}}, NS)
    harness.clock.advance(1)
    harness.api.create(WORKLOADS, prioritized("next", 2, 0), NS)
    harness.sync()
    reconcile(harness)
    assert st.condition_true(workload(harness, "next"), st.ADMITTED)
    assert block_of(harness, "next") == "b1"


def test_a_forged_held_domain_on_a_queued_workload_holds_nothing(harness: Harness) -> None:
    """The holder waits in its queue (3 pods never share a block of 2 nodes; parked as
    inadmissible after its first decision, so no decision of its own clears the annotation);
    the tenant then writes the held domain itself."""
    b0_busy_and_a_holder(harness, prioritized("holder", 3, 0))
    reconcile(harness)
    harness.api.merge_patch(WORKLOADS, "holder", {"metadata": {"annotations": {ANN_RESERVED_DOMAIN: HELD_B1}}}, NS)
    harness.clock.advance(1)
    harness.api.create(WORKLOADS, prioritized("next", 2, 0), NS)
    harness.sync()
    reconcile(harness)
    assert st.condition_true(workload(harness, "next"), st.ADMITTED)
    assert block_of(harness, "next") == "b1"


def test_a_priority_boost_counts_only_while_kueues_gate_is_on(harness: Harness) -> None:
    """``kueue.x-k8s.io/priority-boost`` is Kueue's alpha PriorityBoost (off by default, and then
    ignored by Kueue); anyone who may update a Workload can write it, so off it must not count."""
    harness.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]}]}})
    harness.api.create(WORKLOADS, prioritized("first", 2, 0), NS)  # the whole quota, queued first
    harness.clock.advance(1)
    harness.api.create(WORKLOADS, prioritized("boosted", 2, 0, **{ANN_PRIORITY_BOOST: "1000"}), NS)
    harness.sync()
    priorities = {pw.spec.name: resolve_priority(pw.spec, {}, {}, pw.priority)
                  for pw in harness.controller._snapshot().pending}
    assert priorities == {"first": 0, "boosted": 0}
    reconcile(harness)
    assert st.condition_true(workload(harness, "first"), st.ADMITTED)
    assert not st.has_reservation(workload(harness, "boosted"))
    harness.rebuild(config=KueueConfig(feature_gates=FeatureGates({"PriorityBoost": True})))
    priorities = {pw.spec.name: resolve_priority(pw.spec, {}, {}, pw.priority)
                  for pw in harness.controller._snapshot().pending}
    assert priorities == {"boosted": 1000}
