"""The topology ungater phase on the in-memory API: pods of an admitted TAS pod set, gated with
kueue.x-k8s.io/topology, are released one per assigned slot with the domain in their
nodeSelector, by rank; a pod beyond the assignment and pods of other Workloads stay gated."""

from __future__ import annotations

from typing import Any

from scheduler.core.workload import ANN_WORKLOAD, LABEL_PODSET
from scheduler.k8s.informer import PODS
from scheduler.kube.topology_ungater import TopologyUngater, release_patch
from tests.unit.kube.test_phases import NS, Harness

HOST = "kubernetes.io/hostname"
INDEX = "batch.kubernetes.io/job-completion-index"


def gated_pod(name: str, workload: str, index: str | None, other_gates: tuple[str, ...] = ()) -> dict[str, Any]:
    labels = {LABEL_PODSET: "main", **({INDEX: index} if index is not None else {})}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels, "annotations": {ANN_WORKLOAD: workload}},
            "spec": {"schedulingGates": [{"name": g} for g in ("kueue.x-k8s.io/topology", *other_gates)],
                     "nodeSelector": {"node.kubernetes.io/instance-type": "p5"},
                     "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending"}}


def ungater(h: Harness) -> TopologyUngater:
    return TopologyUngater(h.cache, h.controller.writer, h.controller.isolation)


def test_gated_pods_of_an_admitted_pod_set_are_released_to_their_rank_domains(harness: Harness) -> None:
    wl = harness.admitted("j", 2)
    name = wl["metadata"]["name"]
    for pod in (gated_pod("r1", name, "1", ("other",)), gated_pod("r0", name, "0"),
                gated_pod("stranger", "not-this-one", "0")):
        harness.api.create(PODS, pod, NS)
    harness.sync()
    ungater(harness).ungate()
    r0, r1 = harness.api.get(PODS, "r0", NS), harness.api.get(PODS, "r1", NS)
    assert r0["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5", HOST: "n0"}
    assert r1["spec"]["nodeSelector"][HOST] == "n1"
    assert "schedulingGates" not in r0["spec"]
    assert r1["spec"]["schedulingGates"] == [{"name": "other"}]  # only the topology gate goes
    stranger = harness.api.get(PODS, "stranger", NS)
    assert stranger["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    # a second pass has nothing to do
    before = harness.api.get(PODS, "r0", NS)["metadata"]["resourceVersion"]
    harness.sync()
    ungater(harness).ungate()
    assert harness.api.get(PODS, "r0", NS)["metadata"]["resourceVersion"] == before


def test_a_pod_beyond_the_assignment_stays_gated_and_a_replacement_takes_the_free_slot(harness: Harness) -> None:
    wl = harness.admitted("j", 2)
    name = wl["metadata"]["name"]
    for pod in (gated_pod("a", name, None), gated_pod("b", name, None), gated_pod("c", name, None)):
        harness.api.create(PODS, pod, NS)
    harness.sync()
    ungater(harness).ungate()
    selectors = {p: harness.api.get(PODS, p, NS)["spec"]["nodeSelector"].get(HOST) for p in "abc"}
    assert selectors == {"a": "n0", "b": "n1", "c": None}  # greedy, in list order, never over a domain's count
    # b's node fails: b is gone, c replaces it in the freed domain
    harness.api.delete(PODS, "b", NS)
    harness.sync()
    ungater(harness).ungate()
    assert harness.api.get(PODS, "c", NS)["spec"]["nodeSelector"][HOST] == "n1"


def test_nothing_is_released_for_a_workload_not_admitted(harness: Harness) -> None:
    wl = harness.admitted("j", 2)
    harness.api.create(PODS, gated_pod("p", "some-other-workload", "0"), NS)
    harness.sync()
    ungater(harness).ungate()
    assert harness.api.get(PODS, "p", NS)["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert wl["metadata"]["name"] != "some-other-workload"


def test_release_patch_sends_remaining_gates_whole() -> None:
    pod = gated_pod("p", "w", "0", ("x",))
    assert release_patch(pod, {HOST: "n0"}) == {"spec": {
        "schedulingGates": [{"name": "x"}], "nodeSelector": {"node.kubernetes.io/instance-type": "p5", HOST: "n0"}}}
