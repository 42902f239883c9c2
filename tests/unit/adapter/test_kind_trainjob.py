"""TrainJob as Kueue v0.17.0 reads it: the JobSet the Trainer v2.2.0 renders from the runtime
(counts from parallelism / mlPolicy.numNodes / spec.trainer.numNodes, resourcesPerNode, runtime
patches) and its pod sets; Kueue's runtime patch at start (the cases of Kueue's
pkg/controller/jobs/trainjob/trainjob_controller_test.go TestRunWithPodsetsInfo restated) and the
ranks of test/e2e/tas/trainjob_test.go (3 replicas x parallelism 2 = 6 pods). The rendering is
also checked against the real Trainer in tests/integration/test_job_peers_new.py."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.adapter.kinds import trainjob
from scheduler.adapter.kinds.base import FinishState, PodSetStart, merge_patched
from scheduler.adapter.kinds.trainjob import TRAINJOB
from scheduler.adapter.kinds.workloads import workload_pod_sets
from scheduler.core.workload import WorkloadFormatError


def pod_sets(job: dict[str, Any], runtime_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The Workload's pod sets, the runtime found by the registry's related lookup."""
    def related(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        wanted = ("ClusterTrainingRuntime", "", "torch-distributed")
        return {"spec": runtime_spec} if (kind, namespace, name) == wanted else None
    return workload_pod_sets(TRAINJOB, job, related)

ANCESTOR = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
REQ = "kueue.x-k8s.io/podset-required-topology"


def rjob(name: str, labels: dict[str, str] | None = None, parallelism: int | None = None, replicas: int | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {"spec": {"containers": [
        {"name": "node", "image": "pytorch", "resources": {"requests": {"cpu": "1"}}}]}}}
    if annotations:
        job_spec["template"]["metadata"] = {"annotations": annotations}
    if parallelism is not None:
        job_spec["parallelism"] = job_spec["completions"] = parallelism
    out: dict[str, Any] = {"name": name, "template": {"spec": job_spec}}
    if labels:
        out["template"]["metadata"] = {"labels": labels}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def torch_runtime(num_nodes: int | None = 1, *jobs: dict[str, Any]) -> dict[str, Any]:
    policy: dict[str, Any] = {"torch": {}}
    if num_nodes is not None:
        policy["numNodes"] = num_nodes
    return {"mlPolicy": policy, "template": {"spec": {"replicatedJobs": list(jobs) or [rjob("node", ANCESTOR)]}}}


def tj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "trainjob", "namespace": "ns"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec}}


def counts(pod_sets: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(ps["name"], ps["count"]) for ps in pod_sets]


def test_num_nodes_of_the_trainjob_sets_the_trainer_step_count_and_resources_per_node() -> None:
    job = tj(trainer={"numNodes": 3, "resourcesPerNode": {"requests": {"nvidia.com/gpu": "8"}}})
    [node] = pod_sets(job, torch_runtime(1))
    assert (node["name"], node["count"]) == ("node", 3)
    assert node["template"]["spec"]["containers"][0]["resources"] == {"requests": {"nvidia.com/gpu": "8"}}
    # ranked by completion index within the child Job index, as a JobSet
    assert node["topologyRequest"] == {"podIndexLabel": "batch.kubernetes.io/job-completion-index",
                                       "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index", "subGroupCount": 1}


def test_runtime_num_nodes_when_the_trainjob_gives_none_and_initializers_count_parallelism() -> None:
    runtime = torch_runtime(2, rjob("dataset-initializer", {"trainer.kubeflow.org/trainjob-ancestor-step":
                                                            "dataset-initializer"}), rjob("node", ANCESTOR))
    assert counts(pod_sets(tj(), runtime)) == [("dataset-initializer", 1), ("node", 2)]
    assert counts(pod_sets(tj(), torch_runtime(None))) == [("node", 1)]  # numNodes defaults to 1


def test_without_ml_policy_the_parallelism_counts_times_replicas() -> None:
    """Kueue's TAS e2e case: a runtime with node replicas 3, parallelism 2 and no mlPolicy: 6 pods."""
    runtime = {"template": {"spec": {"replicatedJobs": [rjob("node", None, parallelism=2, replicas=3,
                                                              annotations={REQ: "cloud.com/block"})]}}}
    [node] = pod_sets(tj(trainer={"numNodes": 5}), runtime)
    assert (node["count"], node["topologyRequest"]["required"], node["topologyRequest"]["subGroupCount"]) == (
        6, "cloud.com/block", 3)


def test_mpi_runtime_counts_the_node_job_with_and_without_launcher_as_node() -> None:
    launcher, node = rjob("launcher", {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}), rjob("node")
    runtime = {"mlPolicy": {"numNodes": 1, "mpi": {}}, "template": {"spec": {"replicatedJobs": [launcher, node]}}}
    assert counts(pod_sets(tj(trainer={"numNodes": 4}), runtime)) == [("launcher", 1), ("node", 4)]
    runtime["mlPolicy"]["mpi"] = {"runLauncherAsNode": True}
    assert counts(pod_sets(tj(trainer={"numNodes": 4}), runtime)) == [("launcher", 1), ("node", 3)]
    assert counts(pod_sets(tj(trainer={"numNodes": 1}), runtime)) == [("launcher", 1), ("node", 1)]


def test_runtime_patches_merge_into_the_pod_template_by_replicated_job_name() -> None:
    patch = {"manager": "example.com/user", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {
            "metadata": {"annotations": {REQ: "topology.k8s.aws/network-node-layer-3"}},
            "spec": {"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}],
                     "schedulingGates": [{"name": "user-gate"}]}}}}},
        {"name": "absent", "template": {"spec": {}}}]}}}}
    [node] = pod_sets(tj(runtimePatches=[patch]), torch_runtime(1))
    assert node["topologyRequest"]["required"] == "topology.k8s.aws/network-node-layer-3"
    [container] = node["template"]["spec"]["containers"]
    assert container["image"] == "pytorch" and container["env"] == [{"name": "A", "value": "1"}]  # merged by name
    assert node["template"]["spec"]["schedulingGates"] == [{"name": "user-gate"}]


def test_start_fills_kueues_runtime_patch_and_keeps_the_users() -> None:
    toleration = {"key": "t2k", "operator": "Exists", "effect": "NoSchedule"}
    user = {"manager": "example.com/user-manager", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"disktype": "sdd"}}}}}}]}}}}
    job = tj(suspend=True, runtimePatches=[user, trainjob.kueue_runtime_patch(None)])
    start = PodSetStart("node", {"gpu": "nvidia"}, (toleration,), {"test-annotation": "test"}, 1,
                        topology_assigned=True)
    first, second = TRAINJOB.start_writes(job, "wl-1", [start])
    # two writes, the runtime patch first while suspended
    assert "suspend" not in first["spec"] and second == {"spec": {"suspend": False}}
    started = merge_patched(merge_patched(job, first), second)
    assert started["spec"]["suspend"] is False
    kept, kueue = started["spec"]["runtimePatches"]
    assert kept == user
    assert kueue["manager"] == "kueue.x-k8s.io/manager"
    assert kueue["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] == [
        {"name": "node", "template": {"spec": {"template": {
            "metadata": {"annotations": {"test-annotation": "test", "kueue.x-k8s.io/workload": "wl-1"},
                         "labels": {"kueue.x-k8s.io/podset": "node"}},
            "spec": {"nodeSelector": {"gpu": "nvidia"}, "tolerations": [toleration],
                     "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}]}}}}}]
    # the pods the Trainer renders then carry Kueue's selector and gate
    [node] = pod_sets(started, torch_runtime(1))
    assert node["template"]["spec"]["nodeSelector"] == {"disktype": "sdd", "gpu": "nvidia"}  # both patches
    assert node["template"]["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    # restore clears Kueue's replicated jobs only
    restored = merge_patched(started, TRAINJOB.restore_patch(started, []) or {})
    assert restored["spec"]["runtimePatches"] == [user, {"manager": "kueue.x-k8s.io/manager",
                                                         "trainingRuntimeSpec": {"template": {"spec": {}}}}]
    assert TRAINJOB.restore_patch(restored, []) is None


def test_start_without_kueues_runtime_patch_adds_it() -> None:
    """Created while the webhook was down: Kueue fails with "kueue runtime patch not found"
    forever; toposched appends its entry while the TrainJob is suspended."""
    first, _ = TRAINJOB.start_writes(tj(suspend=True), "wl", [PodSetStart("node", {})])
    [entry] = first["spec"]["runtimePatches"]
    assert entry["manager"] == "kueue.x-k8s.io/manager"


def test_webhook_appends_kueues_runtime_patch_with_the_queue() -> None:
    ops: list[dict[str, Any]] = []
    assert TRAINJOB.create_defaults is not None
    TRAINJOB.create_defaults(tj(), ops, {"kueue.x-k8s.io/queue-name": "lq"})
    assert ops == [{"op": "add", "path": "/spec/runtimePatches", "value": [trainjob.kueue_runtime_patch("lq")]}]
    ops = []
    TRAINJOB.create_defaults(tj(runtimePatches=[{"manager": "x"}]), ops, {"kueue.x-k8s.io/queue-name": "lq"})
    assert ops == [{"op": "add", "path": "/spec/runtimePatches/-", "value": trainjob.kueue_runtime_patch("lq")}]


def test_pod_sets_need_the_runtime() -> None:
    with pytest.raises(WorkloadFormatError, match="ClusterTrainingRuntime"):
        workload_pod_sets(TRAINJOB, tj())
    with pytest.raises(WorkloadFormatError, match="runtime 'torch-distributed' not found"):
        workload_pod_sets(TRAINJOB, tj(), lambda *_: None)


def test_kueue_runtime_patch_carries_the_queue_label() -> None:
    assert trainjob.kueue_runtime_patch("lq") == {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {"template": {"spec": {}, "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq"}}}}}


def test_finished_active_and_ready() -> None:
    done = {**tj(), "status": {"conditions": [{"type": "Complete", "status": "True", "message": "ok"}]}}
    assert TRAINJOB.finish_state(done) == FinishState(True, "Succeeded", "ok")
    failed = {**tj(), "status": {"conditions": [{"type": "Failed", "status": "True", "message": "boom"}]}}
    assert TRAINJOB.finish_state(failed).reason == "Failed"
    assert not TRAINJOB.finish_state(tj()).finished
    running = {**tj(), "status": {"jobsStatus": [{"name": "node", "active": 1, "ready": 1}]}}
    assert TRAINJOB.active_pods(running) and not TRAINJOB.active_pods(tj())
    assert TRAINJOB.pods_ready(running) and not TRAINJOB.pods_ready(tj())
    assert trainjob.pod_selector(running) == "jobset.sigs.k8s.io/jobset-name=trainjob"


def test_runtime_ref_defaults_to_the_cluster_runtime_and_needs_a_name() -> None:
    assert trainjob.runtime_ref(tj()) == ("ClusterTrainingRuntime", "torch-distributed")
    assert trainjob.runtime_ref(tj(runtimeRef={"name": "r", "kind": "TrainingRuntime"})) == ("TrainingRuntime", "r")
    with pytest.raises(WorkloadFormatError, match="spec.runtimeRef.name"):
        trainjob.runtime_ref(tj(runtimeRef={}))
