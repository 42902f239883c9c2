"""Kubeflow PyTorchJob as Kueue's Kubeflow integration sees it, on plain dicts: pod sets per
replica type, start/stop/restore through merge patches on the replica-spec map, finished state,
and the webhook's PyTorchJob mutation and validation."""

from __future__ import annotations

import copy
from typing import Any

from admission.mutation import apply_patch, mutate_job
from admission.review import handle
from scheduler.adapter.kinds.base import PodSetStart, merge_patched
from scheduler.adapter.kinds.pytorchjob import PYTORCHJOB
from scheduler.adapter.kinds.workloads import workload_for_job, workload_pod_sets

L3 = "topology.k8s.aws/network-node-layer-3"
Q = "kueue.x-k8s.io/queue-name"


def pytorchjob(suspend: bool | None = None, workers: int = 3) -> dict[str, Any]:
    def replica(n: int | None, ann: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {"restartPolicy": "OnFailure", "template": {
            "metadata": {"annotations": ann},
            "spec": {"containers": [{"name": "pytorch", "image": "busybox",
                                     "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}
        if n is not None:
            out["replicas"] = n
        return out

    spec: dict[str, Any] = {"pytorchReplicaSpecs": {
        "Worker": replica(workers, {"kueue.x-k8s.io/podset-required-topology": L3}),
        "Master": replica(None, {})}}
    if suspend is not None:
        spec["runPolicy"] = {"suspend": suspend}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "llama", "namespace": "ns", "uid": "u-9", "labels": {Q: "lq"}}, "spec": spec}


def test_pod_sets_master_then_worker_with_replica_index_ranks() -> None:
    sets = workload_pod_sets(PYTORCHJOB, pytorchjob())
    assert [(ps["name"], ps["count"]) for ps in sets] == [("master", 1), ("worker", 3)]
    assert sets[1]["topologyRequest"] == {"required": L3, "podIndexLabel": "training.kubeflow.org/replica-index"}
    wl = workload_for_job(PYTORCHJOB, pytorchjob(), 0, None)
    assert wl["metadata"]["name"].startswith("pytorchjob-llama-")
    assert wl["metadata"]["ownerReferences"][0]["apiVersion"] == "kubeflow.org/v1"


def test_start_stop_restore_touch_only_the_templates_and_run_policy() -> None:
    job = pytorchjob(suspend=True)
    integ = PYTORCHJOB
    patch = integ.start_patch(job, "wl-9", [PodSetStart("master", {"pool": "a"}),
                                           PodSetStart("worker", {"pool": "b", L3: "d1"})])
    assert patch["spec"]["runPolicy"] == {"suspend": False}
    started = merge_patched(job, patch)
    worker = started["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3 and worker["restartPolicy"] == "OnFailure"  # untouched by the map merge
    assert worker["template"]["spec"]["nodeSelector"] == {"pool": "b", L3: "d1"}
    assert worker["template"]["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == "wl-9"
    assert not integ.is_suspended(started)
    stopped = merge_patched(started, integ.stop_patch(started))
    assert integ.is_suspended(stopped)
    stopped["status"] = {"replicaStatuses": {"Worker": {"active": 2}, "Master": {"active": 0}}}
    assert not integ.can_restore(stopped)
    stopped["status"]["replicaStatuses"]["Worker"]["active"] = 0
    assert integ.can_restore(stopped)
    restored = merge_patched(stopped, integ.restore_patch(stopped, workload_pod_sets(PYTORCHJOB, job)) or {})
    for t in ("Master", "Worker"):
        tpl = restored["spec"]["pytorchReplicaSpecs"][t]["template"]
        assert not tpl["spec"].get("nodeSelector")
        assert "kueue.x-k8s.io/workload" not in tpl["metadata"].get("annotations", {})
        assert "kueue.x-k8s.io/podset" not in tpl["metadata"].get("labels", {})


def test_finished_from_kubeflow_conditions() -> None:
    job = pytorchjob()
    job["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    assert not PYTORCHJOB.finish_state(job).finished
    done = "PyTorchJob llama is successfully completed."
    job["status"]["conditions"].append({"type": "Succeeded", "status": "True", "message": done})
    state = PYTORCHJOB.finish_state(job)
    assert (state.finished, state.reason, state.message) == (True, "Succeeded", done)


def test_webhook_suspends_through_run_policy_and_routes_every_replica_type() -> None:
    job = pytorchjob()
    out = apply_patch(job, mutate_job(job, "CREATE", None).patch)
    assert out["spec"]["runPolicy"] == {"suspend": True}
    assert {rs["template"]["spec"]["schedulerName"] for rs in out["spec"]["pytorchReplicaSpecs"].values()} == {
        "toposched"}
    assert mutate_job(out, "CREATE", None).patch == []
    # an explicit runPolicy keeps its other fields
    with_policy = copy.deepcopy(job)
    with_policy["spec"]["runPolicy"] = {"backoffLimit": 3}
    patched = apply_patch(with_policy, mutate_job(with_policy, "CREATE", None).patch)
    assert patched["spec"]["runPolicy"] == {"backoffLimit": 3, "suspend": True}


def test_webhook_paths_and_annotation_errors_name_the_replica_type() -> None:
    bad = pytorchjob()
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"][
        "kueue.x-k8s.io/podset-slice-size"] = "two"
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "r", "operation": "CREATE", "kind": {"group": "kubeflow.org", "kind": "PyTorchJob"},
        "object": {k: v for k, v in bad.items() if k != "kind"}}}
    response = handle(PYTORCHJOB.validate_path, review, None)["response"]
    assert response["allowed"] is False
    assert "spec.pytorchReplicaSpecs[Worker].template.metadata.annotations" in response["status"]["message"]
    assert handle(PYTORCHJOB.mutate_path, review, None)["response"]["patchType"] == "JSONPatch"


def test_the_webhook_judges_the_pod_sets_the_controller_creates() -> None:
    """A replica type Kueue's PyTorchJob integration has no pod set for (``Chief``: the
    training operator's TFJob vocabulary) is not part of the Workload: the webhook's fit checks
    read the registry's pod sets, the very ones the controller's Workload gets, so it does not
    refuse the job over pods that are never queued (it used to count them: 1 + 3 + 8 pods of 8
    GPUs > the 64-GPU quota)."""
    from admission.validation import validate_job  # the validation module pulls the fit checks
    from tests.unit.test_admission_validation import cluster

    job = pytorchjob(workers=3)
    job["metadata"]["namespace"] = "team-a"
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"][
        "kueue.x-k8s.io/podset-required-topology"]
    job["spec"]["pytorchReplicaSpecs"]["Chief"] = copy.deepcopy(job["spec"]["pytorchReplicaSpecs"]["Worker"])
    job["spec"]["pytorchReplicaSpecs"]["Chief"]["replicas"] = 8
    assert [ps["name"] for ps in workload_pod_sets(PYTORCHJOB, job)] == ["master", "worker"]
    verdict = validate_job(job, cluster(gpu_quota=64))
    assert verdict.allowed, verdict.message()
