"""Usage is what runs (issue 39 item 10): a pod is an admitted workload's only by ownership;
every other bound pod's requests are usage of its node, whatever annotations or labels it
carries. Plain data through adapter.pod_ownership and build_snapshot."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.objects import ClusterObjects
from scheduler.adapter.pod_ownership import usage_pods, workload_pod_uids
from scheduler.adapter.snapshot import build_snapshot
from scheduler.adapter.views import EngineSnapshot
from tests.unit.adapter.test_snapshot import ADMITTED, NOW, OBJECTS, TOPOLOGY, node

GPU = "nvidia.com/gpu"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"


def pod(name: str, node_name: str, namespace: str = "ns", gpus: int = 8, uid: str | None = None,
        owner: tuple[str, str] | None = None, annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                            "annotations": annotations or {}, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": owner[0], "name": owner[1],
                                    "uid": f"uid-{owner[1]}", "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": node_name, "containers": [
        {"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}, "status": {"phase": "Running"}}


def job(name: str, namespace: str = "ns", owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": owner[0], "name": owner[1],
                                    "uid": f"uid-{owner[1]}", "controller": True}]
    return {"kind": "Job", "metadata": meta}


# ADMITTED holds n0 and n1 (one 8-GPU pod each) and is owned by Job "trainer".
OWNED = {**ADMITTED, "metadata": {**ADMITTED["metadata"], "ownerReferences": [
    {"apiVersion": "batch/v1", "kind": "Job", "name": "trainer", "uid": "uid-trainer", "controller": True}]}}


def free_gpus(objects: ClusterObjects) -> dict[str, int]:
    tree = build_snapshot(objects, NOW, solver="greedy").trees["p5"]
    gpu = tree.resources.index(GPU)
    return {tree.leaf_nodes[leaf][0]: int(tree.free[leaf, gpu]) for leaf in range(tree.n_leaves)}


def with_pods(*pods: dict[str, Any], links: tuple[dict[str, Any], ...] = ()) -> ClusterObjects:
    return ClusterObjects(**{**OBJECTS.__dict__, "pods": list(pods), "workloads": [OWNED], "owner_links": links})


def test_an_unqueued_pod_with_kueues_tas_annotation_is_usage_of_its_node() -> None:
    """The issue's case: 8-GPU pods that carry podset-unconstrained-topology but belong to no
    admitted Workload. Before: skipped as "a TAS pod", n2 and n3 looked free."""
    sneaky = [pod(f"sneaky-{n}", n, namespace="other", annotations={UNCONSTRAINED: "true"}) for n in ("n2", "n3")]
    assert free_gpus(with_pods(*sneaky)) == {"n0": 0, "n1": 0, "n2": 0, "n3": 0}


RACK_LEVEL = TOPOLOGY["spec"]["levels"][0]["nodeLabel"]


def test_no_label_or_annotation_makes_a_pod_a_workloads() -> None:
    markers = pod("marked", "n2", annotations={"kueue.x-k8s.io/workload": "running",
                                               "kueue.x-k8s.io/podset-required-topology": RACK_LEVEL},
                  labels={"kueue.x-k8s.io/prebuilt-workload-name": "running", "kueue.x-k8s.io/podset": "main",
                          "kueue.x-k8s.io/tas": "true"})
    assert free_gpus(with_pods(markers))["n2"] == 0


def test_the_workloads_own_pods_count_once_by_its_assignment() -> None:
    """The Job's pods (owner uid = the Workload's owner) are accounted by the assignment only."""
    own = [pod(f"trainer-{i}", f"n{i}", owner=("Job", "trainer"), annotations={UNCONSTRAINED: "true"})
           for i in range(2)]
    assert free_gpus(with_pods(*own)) == {"n0": 0, "n1": 0, "n2": 8, "n3": 8}


def test_ownership_is_by_uid_and_namespace() -> None:
    forged_uid = pod("forged", "n2", owner=("Job", "trainer"), uid="uid-forged")
    forged_uid["metadata"]["ownerReferences"][0]["uid"] = "uid-someone-else"
    other_ns = pod("elsewhere", "n3", namespace="other", owner=("Job", "trainer"))
    assert workload_pod_uids([forged_uid, other_ns], [OWNED]) == frozenset()
    assert {k: v for k, v in free_gpus(with_pods(forged_uid, other_ns)).items() if k in ("n2", "n3")} == \
        {"n2": 0, "n3": 0}


def test_a_chain_through_a_held_object_resolves_and_an_unknown_link_does_not() -> None:
    """A JobSet's pod: pod -> Job -> JobSet (the Workload's owner). The Job must be one the
    caller holds (the controller's links informer): an owner nobody holds is no evidence."""
    jobset_wl = {**OWNED, "metadata": {**OWNED["metadata"], "ownerReferences": [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "uid-js",
         "controller": True}]}}
    child = job("js-workers-0", owner=("JobSet", "js"))
    p = pod("js-workers-0-0", "n0", owner=("Job", "js-workers-0"))
    assert workload_pod_uids([p], [jobset_wl], [child]) == {"uid-js-workers-0-0"}
    assert workload_pod_uids([p], [jobset_wl], []) == frozenset()
    elsewhere = job("js-workers-0", namespace="other", owner=("JobSet", "js"))
    assert workload_pod_uids([p], [jobset_wl], [elsewhere]) == frozenset()


def test_a_pod_group_member_is_its_workloads_by_the_workloads_owner_list() -> None:
    """Kueue's pod groups: the Workload lists every member pod as an owner."""
    group = {**OWNED, "metadata": {**OWNED["metadata"], "ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "member", "uid": "uid-member"}]}}
    assert workload_pod_uids([pod("member", "n0"), pod("stranger", "n1")], [group]) == {"uid-member"}


def test_a_workload_without_a_topology_assignment_does_not_hide_its_pods() -> None:
    """Its usage is not subtracted from the trees, so its pods must count as they run."""
    plain = {**OWNED, "status": {**OWNED["status"], "admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {GPU: "p5"}, "count": 1}]}}}
    own = pod("trainer-0", "n2", owner=("Job", "trainer"))
    assert workload_pod_uids([own], [plain]) == frozenset()
    assert [p.name for p in usage_pods([own], [plain])] == ["trainer-0"]


def test_the_engine_views_count_the_same_pods() -> None:
    """explain and the gRPC API read EngineSnapshot: the same rule."""
    sneaky = pod("sneaky", "n2", namespace="other", annotations={UNCONSTRAINED: "true"})
    engine = EngineSnapshot(nodes=[node(f"n{i}", f"r{i // 2}") for i in range(4)], pods=[sneaky],
                            flavors=OBJECTS.flavors, topologies=OBJECTS.topologies, workloads=[OWNED])
    tree = engine.flavor_tree("p5")
    assert tree is not None
    gpu = tree.resources.index(GPU)
    assert {tree.leaf_nodes[leaf][0]: int(tree.free[leaf, gpu]) for leaf in range(tree.n_leaves)}["n2"] == 0
