"""Kubeflow PyTorchJob as Kueue's Kubeflow integration sees it, on plain dicts: pod sets per
replica type, start/stop/restore through merge patches on the replica-spec map, finished state,
and the webhook's PyTorchJob mutation and validation."""

from __future__ import annotations

import copy
from typing import Any

from admission.mutation import apply_patch, mutate_job
from admission.review import MUTATE_PYTORCHJOB, VALIDATE_PYTORCHJOB, handle
from scheduler.kube.jobs import INTEGRATIONS, PodSetStart, PyTorchJobJob, merge_patched, workload_for_job

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
    sets = PyTorchJobJob().pod_sets(pytorchjob())
    assert [(ps["name"], ps["count"]) for ps in sets] == [("master", 1), ("worker", 3)]
    assert sets[1]["topologyRequest"] == {"required": L3, "podIndexLabel": "training.kubeflow.org/replica-index"}
    wl = workload_for_job(INTEGRATIONS["kubeflow.org/PyTorchJob"], pytorchjob(), 0, None)
    assert wl["metadata"]["name"].startswith("pytorchjob-llama-")
    assert wl["metadata"]["ownerReferences"][0]["apiVersion"] == "kubeflow.org/v1"


def test_start_stop_restore_touch_only_the_templates_and_run_policy() -> None:
    job = pytorchjob(suspend=True)
    integ = PyTorchJobJob()
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
    restored = merge_patched(stopped, integ.restore_patch(stopped, integ.pod_sets(job)) or {})
    for t in ("Master", "Worker"):
        tpl = restored["spec"]["pytorchReplicaSpecs"][t]["template"]
        assert not tpl["spec"].get("nodeSelector")
        assert "kueue.x-k8s.io/workload" not in tpl["metadata"].get("annotations", {})
        assert "kueue.x-k8s.io/podset" not in tpl["metadata"].get("labels", {})


def test_finished_from_kubeflow_conditions() -> None:
    job = pytorchjob()
    job["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    assert not PyTorchJobJob().finish_state(job).finished
    done = "PyTorchJob llama is successfully completed."
    job["status"]["conditions"].append({"type": "Succeeded", "status": "True", "message": done})
    state = PyTorchJobJob().finish_state(job)
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
    response = handle(VALIDATE_PYTORCHJOB, review, None)["response"]
    assert response["allowed"] is False
    assert "spec.pytorchReplicaSpecs[Worker].template.metadata.annotations" in response["status"]["message"]
    assert handle(MUTATE_PYTORCHJOB, review, None)["response"]["patchType"] == "JSONPatch"
