"""JobSet as Kueue's JobSet integration sees it, on plain dicts: pod sets, start/stop/restore
patches, finished state; the webhook's JobSet mutation and validation; child Jobs left alone."""

from __future__ import annotations

import copy
from typing import Any

from admission.mutation import apply_patch, mutate_job
from admission.review import handle
from admission.validation import validate_job
from admission.view import ClusterView
from scheduler.adapter.kinds.base import PodSetStart, merge_patched
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.workloads import workload_for_job, workload_pod_sets

L3 = "topology.k8s.aws/network-node-layer-3"
Q = "kueue.x-k8s.io/queue-name"


def jobset(suspend: bool | None = None) -> dict[str, Any]:
    def rj(name: str, replicas: int, parallelism: int, ann: dict[str, str] | None = None) -> dict[str, Any]:
        return {"name": name, "replicas": replicas, "template": {"spec": {
            "parallelism": parallelism, "completions": parallelism, "completionMode": "Indexed",
            "template": {"metadata": {"annotations": ann or {}},
                         "spec": {"restartPolicy": "Never", "containers": [
                             {"name": "c", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}}}

    spec: dict[str, Any] = {"replicatedJobs": [rj("leader", 1, 1), rj("workers", 2, 3, {
        "kueue.x-k8s.io/podset-required-topology": L3})]}
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ns", "uid": "u-1", "labels": {Q: "lq"}}, "spec": spec}


def without_empty_maps(obj: Any) -> Any:
    """``labels: {}`` left by removing our only label is the same template."""
    if isinstance(obj, dict):
        return {k: without_empty_maps(v) for k, v in obj.items() if v != {} or k == "annotations"}
    if isinstance(obj, list):
        return [without_empty_maps(v) for v in obj]
    return obj


def test_one_pod_set_per_replicated_job_with_sub_group_ranks() -> None:
    sets = workload_pod_sets(JOBSET, jobset())
    assert [(ps["name"], ps["count"]) for ps in sets] == [("leader", 1), ("workers", 6)]
    assert "topologyRequest" in sets[0]  # index labels only: ranks work for every pod set
    assert sets[1]["topologyRequest"] == {
        "required": L3, "podIndexLabel": "batch.kubernetes.io/job-completion-index",
        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index", "subGroupCount": 2}
    wl = workload_for_job(JOBSET, jobset(), 0, None)
    assert wl["metadata"]["name"].startswith("jobset-train-")
    assert wl["metadata"]["ownerReferences"] == [{
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train", "uid": "u-1",
        "controller": True, "blockOwnerDeletion": True}]


def test_start_then_restore_round_trips_every_template() -> None:
    js = jobset(suspend=True)
    integ = JOBSET
    patch = integ.start_patch(js, "wl-1", [PodSetStart("leader", {"pool": "a"}),
                                          PodSetStart("workers", {"pool": "b", L3: "d1"})])
    assert patch["spec"]["suspend"] is False
    started = merge_patched(js, patch)
    leader, workers = (rj["template"]["spec"]["template"] for rj in started["spec"]["replicatedJobs"])
    assert leader["spec"]["nodeSelector"] == {"pool": "a"}
    assert workers["spec"]["nodeSelector"] == {"pool": "b", L3: "d1"}
    assert workers["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "workers"}
    assert workers["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == "wl-1"
    assert workers["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == L3
    # stopped: suspend only; once no child job is active the templates go back as they were
    assert integ.stop_patch(started) == {"spec": {"suspend": True}}
    stopped = merge_patched(started, integ.stop_patch(started))
    stopped["status"] = {"replicatedJobsStatus": [{"name": "workers", "active": 1}]}
    assert not integ.can_restore(stopped)
    stopped["status"]["replicatedJobsStatus"][0]["active"] = 0
    assert integ.can_restore(stopped)
    restore = integ.restore_patch(stopped, workload_pod_sets(JOBSET, js))
    assert restore is not None
    restored = merge_patched(stopped, restore)
    assert without_empty_maps(restored["spec"]["replicatedJobs"]) == js["spec"]["replicatedJobs"]
    assert integ.restore_patch(restored, workload_pod_sets(JOBSET, js)) is None


def test_finished_from_jobset_conditions() -> None:
    js = jobset()
    assert not JOBSET.finish_state(js).finished
    js["status"] = {"conditions": [{"type": "Completed", "status": "True", "message": "jobset completed successfully"}]}
    state = JOBSET.finish_state(js)
    assert (state.finished, state.reason) == (True, "Succeeded")
    js["status"] = {"conditions": [{"type": "Failed", "status": "True", "message": "jobset failed: job x failed"}]}
    assert JOBSET.finish_state(js).message == "jobset failed: job x failed"


def test_webhook_suspends_a_queued_jobset_and_routes_every_template_to_toposched() -> None:
    js = jobset()
    m = mutate_job(js, "CREATE", None)
    out = apply_patch(js, m.patch)
    assert out["spec"]["suspend"] is True
    assert all(rj["template"]["spec"]["template"]["spec"]["schedulerName"] == "toposched"
               for rj in out["spec"]["replicatedJobs"])
    assert mutate_job(out, "CREATE", None).patch == []  # idempotent on re-invocation


def test_child_jobs_of_a_jobset_are_left_to_their_parent() -> None:
    child = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "train-workers-0", "namespace": "ns", "labels": {Q: "lq"},
        "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train",
                             "uid": "u-1", "controller": True}]},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}
    owners = ClusterView(owners=lambda namespace, ref: jobset() if ref.kind == "JobSet" else None)
    assert mutate_job(child, "CREATE", owners).patch == []
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "r1", "operation": "CREATE", "kind": {"group": "batch", "kind": "Job"}, "object": child}}
    assert "patch" not in handle(BATCH_JOB.mutate_path, review, owners)["response"]
    # the same reference without a JobSet of that uid behind it: queued like any other Job
    assert "patch" in handle(BATCH_JOB.mutate_path, review, ClusterView(owners=lambda namespace, ref: None))[
        "response"]


def test_jobset_review_path_and_annotation_errors_name_the_replicated_job() -> None:
    js = jobset()
    bad = copy.deepcopy(js)
    bad["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["metadata"]["annotations"][
        "kueue.x-k8s.io/podset-prefered-topology"] = L3
    verdict = validate_job(bad)
    assert not verdict.allowed
    assert "spec.replicatedJobs[1].template.spec.template.metadata.annotations" in verdict.message()
    assert "did you mean kueue.x-k8s.io/podset-preferred-topology" in verdict.message()
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "r2", "operation": "CREATE", "kind": {"group": "jobset.x-k8s.io", "kind": "JobSet"},
        "object": {k: v for k, v in js.items() if k != "kind"}}}
    assert handle(JOBSET.mutate_path, review, None)["response"]["patchType"] == "JSONPatch"
