"""The controller finds a workload's pods by the Workload's own record (its owner references,
checked by uid, and the immutable group label), never by ``kueue.x-k8s.io/managed``, a label
the tenant may remove (issue 39): an evicted Workload keeps its quota while any of its pods
still holds a node. Fails on the old code: the unlabelled pod was not found, the quota was
released at once, and a preemptor could be placed on the node the pod still occupies."""

from __future__ import annotations

from scheduler.core.kueue_names import LABEL_MANAGED, LABEL_POD_GROUP_NAME
from scheduler.k8s.informer import PODS, WORKLOADS
from scheduler.kube import status as st
from tests.unit.kube.test_new_kinds_phases import Q, create, gated_pod, reconcile, workloads
from tests.unit.kube.test_phases import NS, Harness

KUBELET = "test.toposched.io/kubelet-still-running-it"


def run_on_node(harness: Harness, name: str) -> None:
    """kube-scheduler bound it, the kubelet runs it; then its tenant removes the managed label."""
    harness.api.merge_patch(PODS, name, {"spec": {"nodeName": "n0"}}, NS)
    harness.api.merge_patch(PODS, name, {"status": {"phase": "Running"}}, NS, subresource="status")
    # the kubelet's part, simulated: the pod stays until its containers have stopped
    finalizers = [*harness.api.get(PODS, name, NS)["metadata"].get("finalizers", []), KUBELET]
    harness.api.merge_patch(PODS, name, {"metadata": {"labels": {LABEL_MANAGED: None}, "finalizers": finalizers}},
                            NS)
    harness.sync()


def evict(harness: Harness, wl: dict[str, object]) -> None:
    conditions = st.set_condition(st.conditions_of(wl), st.EVICTED, "True", "Preempted", "Preempted by test",
                                  harness.clock())
    harness.api.merge_patch(WORKLOADS, str(wl["metadata"]["name"]), {"status": {"conditions": conditions}},  # type: ignore[index]
                            NS, subresource="status")
    harness.sync()


def test_an_unlabelled_running_pod_keeps_its_workloads_quota_until_it_is_gone(harness: Harness) -> None:
    create(harness, PODS, gated_pod("solo", Q))
    reconcile(harness, 3)
    [wl] = workloads(harness)
    assert st.condition_true(wl, st.ADMITTED)
    run_on_node(harness, "solo")
    evict(harness, wl)
    reconcile(harness, 2)
    pod = harness.api.get(PODS, "solo", NS)
    assert pod["metadata"].get("deletionTimestamp")  # found by the Workload's owner reference: deleted
    held = harness.api.get(WORKLOADS, wl["metadata"]["name"], NS)
    assert st.has_reservation(held) and not st.condition_true(held, st.REQUEUED)  # still holds its node
    assert harness.api.get(PODS, "solo", NS)["metadata"]["finalizers"] == [KUBELET]  # Kueue's released
    harness.api.merge_patch(PODS, "solo", {"metadata": {"finalizers": None}}, NS)  # the kubelet is done
    harness.sync()
    reconcile(harness, 2)
    released = harness.api.get(WORKLOADS, wl["metadata"]["name"], NS)
    # released and requeued (and, its quota free, admitted again in the same pass)
    assert st.condition_true(released, st.REQUEUED) and not st.condition_true(released, st.EVICTED)


def test_a_pod_groups_unlabelled_member_keeps_the_groups_quota(harness: Harness) -> None:
    group = {**Q, LABEL_POD_GROUP_NAME: "grp"}
    count = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    for name in ("g-0", "g-1"):
        create(harness, PODS, gated_pod(name, group, count))
    reconcile(harness, 3)
    [wl] = workloads(harness)
    assert st.condition_true(wl, st.ADMITTED)
    run_on_node(harness, "g-1")
    harness.api.merge_patch(PODS, "g-0", {"metadata": {"finalizers": None}}, NS)
    harness.api.delete(PODS, "g-0", NS)
    harness.sync()
    evict(harness, wl)
    reconcile(harness, 2)
    assert harness.api.get(PODS, "g-1", NS)["metadata"].get("deletionTimestamp")
    assert st.has_reservation(harness.api.get(WORKLOADS, "grp", NS))
