"""Elastic jobs (Kueue v0.19.2's ElasticJobsViaWorkloadSlices) in the controller's pass,
against the in-memory API server: a batch Job annotated ``kueue.x-k8s.io/elastic-job: "true"``
scales up through a new workload slice admitted for the whole new size and replacing the old
one, scales down in place, and is never suspended by a scale. Restates Kueue's job controller
cases (pkg/controller/jobs/job/job_controller_test.go at v0.19.2, the "workload slices" cases:
scale-up creates a new slice annotated replacement-for the old one, the old slice is finished
``WorkloadSliceReplaced`` once the new one is admitted, a scale-down updates the slice) and the
scheduler's ``replaceWorkloadSlice`` (pkg/scheduler/scheduler.go). Each fails on main, where the
annotation meant nothing and a parallelism change stopped the job."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.adapter.workloads import admitted_workload
from scheduler.core.config import KUEUE_V019, FeatureGates, KueueConfig
from scheduler.core.workload import LABEL_QUEUE_NAME, kueue_workload_name
from scheduler.k8s.informer import JOBS, WORKLOADS
from scheduler.kube import status as st
from tests.unit.kube.test_phases import GPU, NS, Harness

V019 = KueueConfig(feature_gates=FeatureGates(release=KUEUE_V019))


def elastic_job(name: str, parallelism: int, completions: int = 8) -> dict[str, Any]:
    """No topology annotation (Kueue refuses a required or preferred one on an elastic job);
    the TAS-only ClusterQueue places it unconstrained."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {LABEL_QUEUE_NAME: "lq"},
                         "annotations": {ws.ELASTIC_ANNOTATION: "true"}},
            "spec": {"parallelism": parallelism, "completions": completions, "suspend": True,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [{
                         "name": "c", "image": "busybox",
                         "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}]}}}}


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.rebuild(config=V019)
    return harness


def reconcile(h: Harness, times: int = 1) -> None:
    for _ in range(times):
        h.controller.reconcile()
        h.sync()


def slices(h: Harness) -> list[dict[str, Any]]:
    return sorted(h.api.objects(WORKLOADS, NS), key=lambda w: (w["metadata"]["creationTimestamp"],
                                                                 int(w["metadata"]["resourceVersion"])))


def live(h: Harness) -> list[dict[str, Any]]:
    return [w for w in slices(h) if not st.is_finished(w)]


def scale(h: Harness, name: str, parallelism: int) -> None:
    h.clock.advance(1)
    h.api.merge_patch(JOBS, name, {"spec": {"parallelism": parallelism}}, NS)
    h.sync()


def started(h: Harness, name: str, parallelism: int) -> dict[str, Any]:
    h.api.create(JOBS, elastic_job(name, parallelism), NS)
    h.sync()
    reconcile(h, 2)
    [wl] = slices(h)
    assert st.condition_true(wl, st.ADMITTED) and h.job(name)["spec"]["suspend"] is False
    return wl


def gpus_used(wl: dict[str, Any]) -> int:
    return sum(v for (_f, r), v in admitted_workload(wl).usage.items() if r == GPU)


def test_an_elastic_jobs_first_slice_is_named_by_generation_and_annotated(h: Harness) -> None:
    """Kueue's ``newWorkloadName`` (generation hashed in) and ``prepareWorkloadSlice`` (no slice
    before: the slice name is its own)."""
    wl = started(h, "el", 1)
    job = h.job("el")
    meta = job["metadata"]
    assert wl["metadata"]["name"] == kueue_workload_name("Job", "batch", "el", meta["uid"], extra="1")
    assert wl["metadata"]["annotations"][ws.ELASTIC_ANNOTATION] == "true"
    assert wl["metadata"]["annotations"][ws.SLICE_NAME] == wl["metadata"]["name"]
    assert ws.REPLACEMENT_FOR not in wl["metadata"]["annotations"]


def test_scale_up_creates_a_new_slice_admitted_for_the_whole_size_and_replaces_the_old(h: Harness) -> None:
    old = started(h, "el", 1)
    scale(h, "el", 3)
    reconcile(h)
    assert h.job("el")["spec"]["suspend"] is False  # never suspended by a scale
    reconcile(h)
    first, second = slices(h)
    assert first["metadata"]["name"] == old["metadata"]["name"]
    ann = second["metadata"]["annotations"]
    assert ann[ws.REPLACEMENT_FOR] == f"{NS}/{old['metadata']['name']}"
    assert ann[ws.SLICE_NAME] == old["metadata"]["name"]
    assert second["metadata"]["name"] == kueue_workload_name("Job", "batch", "el", h.job("el")["metadata"]["uid"],
                                                            extra=str(h.job("el")["metadata"]["generation"]))
    assert [ps["count"] for ps in second["spec"]["podSets"]] == [3]
    assert st.condition_true(second, st.ADMITTED) and gpus_used(second) == 24
    finished = st.find_condition(first, st.FINISHED)
    assert finished is not None and finished["reason"] == ws.REASON_REPLACED
    assert finished["message"] == (f"Replaced to accommodate a workload (UID: {second['metadata']['uid']}, "
                                   f"JobUID: {h.job('el')['metadata']['uid']}) due to workload slice aggregation")
    assert [e["message"] for e in h.events_of(ws.REASON_REPLACED)] == [finished["message"]]
    assert h.job("el")["spec"]["suspend"] is False
    assert h.events_of("Stopped") == []


def test_a_replaced_slice_is_counted_in_kueues_metric(h: Harness) -> None:
    """Kueue's ``kueue_replaced_workload_slices_total{cluster_queue}`` (``ReportReplacedWorkloadSlices``
    in ``replaceWorkloadSlice``), fed by the writer's decision observers as the controller's
    command wires them."""
    from prometheus_client import CollectorRegistry

    from scheduler.kube.metrics import ControllerMetrics

    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry, config=V019)
    h.controller.observers.append(metrics.observe)
    started(h, "el", 1)
    scale(h, "el", 2)
    reconcile(h, 2)
    assert registry.get_sample_value("kueue_replaced_workload_slices_total",
                                     {"cluster_queue": "cq", "replica_role": "leader"}) == 1.0


def test_a_scale_up_beyond_quota_waits_while_the_old_slice_keeps_running(h: Harness) -> None:
    """The new slice is fitted for the delta: 3 -> 5 pods of 8 GPUs needs 16 more GPUs where 8
    are free (40 > 32): it waits, and the job runs on its admitted slice (Kueue's reconciler:
    a workload-slicing job is not suspended while its new slice is not admitted)."""
    started(h, "el", 3)
    scale(h, "el", 5)
    reconcile(h, 3)
    admitted = [w for w in live(h) if st.condition_true(w, st.ADMITTED)]
    assert len(admitted) == 1 and admitted[0]["spec"]["podSets"][0]["count"] == 3
    [waiting] = [w for w in live(h) if not st.has_reservation(w)]
    assert waiting["spec"]["podSets"][0]["count"] == 5
    assert h.job("el")["spec"]["suspend"] is False and h.events_of("Stopped") == []


def test_scale_down_updates_the_admitted_slice_in_place_and_releases_quota(h: Harness) -> None:
    wl = started(h, "el", 3)
    assert gpus_used(wl) == 24
    scale(h, "el", 1)
    reconcile(h)
    [after] = slices(h)
    assert after["metadata"]["uid"] == wl["metadata"]["uid"]
    assert after["spec"]["podSets"][0]["count"] == 1 and st.condition_true(after, st.ADMITTED)
    assert gpus_used(after) == 8  # Kueue's totalRequestsFromAdmission: the pods it still has
    assert h.job("el")["spec"]["suspend"] is False and h.events_of("Stopped") == []
    # Kueue keeps the admission's topology assignment as it was (a TAS flavor's nodes stay
    # taken until the slice ends); only the quota follows the new count.


def test_a_template_change_of_an_elastic_job_is_still_a_mismatch(h: Harness) -> None:
    """Only a change of counts is a scale (Kueue: EnsureWorkloadSlices is compatible only then)."""
    started(h, "el", 1)
    job = h.job("el")
    containers = job["spec"]["template"]["spec"]["containers"]
    containers[0]["image"] = "busybox:2"
    h.api.merge_patch(JOBS, "el", {"spec": {"template": {"spec": {"containers": containers}}}}, NS)
    h.sync()
    reconcile(h)
    assert h.job("el")["spec"]["suspend"] is True
    assert h.events_of("Stopped")


def test_under_v017_the_elastic_annotation_means_nothing(h: Harness) -> None:
    """The gate is alpha and off in Kueue v0.17.0: a scale is a mismatch, as on main."""
    h.rebuild(config=dataclasses.replace(V019, feature_gates=FeatureGates()))
    started(h, "el", 1)
    scale(h, "el", 2)
    reconcile(h)
    assert h.job("el")["spec"]["suspend"] is True


def test_a_hand_written_replacement_of_another_jobs_slice_is_not_honoured(h: Harness) -> None:
    """docs/security.md: a Workload naming another job's admitted slice in
    ``workload-slice-replacement-for`` neither gets the old slice's quota nor finishes it."""
    victim = started(h, "victim", 3)
    forged: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
              "metadata": {"name": "forged", "namespace": NS,
                           "annotations": {ws.ELASTIC_ANNOTATION: "true",
                                           ws.REPLACEMENT_FOR: f"{NS}/{victim['metadata']['name']}"}},
              "spec": {"queueName": "lq", "podSets": victim["spec"]["podSets"][:1]}}
    forged["spec"]["podSets"] = [dict(forged["spec"]["podSets"][0], count=2)]
    h.api.create(WORKLOADS, forged, NS)
    h.sync()
    reconcile(h, 2)
    after = h.api.get(WORKLOADS, victim["metadata"]["name"], NS)
    assert not st.is_finished(after) and st.condition_true(after, st.ADMITTED)
    assert not st.has_reservation(h.api.get(WORKLOADS, "forged", NS))  # 24 + 16 > 32: no delta granted


def test_an_elastic_rayclusters_autoscaled_worker_group_scales_through_a_new_slice(h: Harness) -> None:
    """Kueue v0.19.2's RayCluster with ``enableInTreeAutoscaling`` as an elastic job
    (raycluster_controller_test.go's workload-slice cases): the autoscaler raising a worker
    group's replicas is a scale, served by a new slice; the cluster keeps running."""
    from scheduler.adapter.kinds.ray import RAYCLUSTER
    from scheduler.k8s.informer import CLUSTER_QUEUES
    from scheduler.kube.jobs import resource_of
    from tests.unit.kube.test_new_kinds_phases import Q, pod_template

    # Kueue v0.19 charges the autoscaler's sidecar (cpu, memory) to the head: the queue covers them.
    h.api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": [GPU, "cpu", "memory"], "flavors": [{"name": "gpu", "resources": [
            {"name": GPU, "nominalQuota": "32"}, {"name": "cpu", "nominalQuota": "100"},
            {"name": "memory", "nominalQuota": "100Gi"}]}]}]}}, None)
    resource = resource_of(RAYCLUSTER)
    one_gpu = pod_template()
    one_gpu["spec"]["containers"][0]["resources"] = {"requests": {GPU: "8"}, "limits": {GPU: "8"}}
    head = pod_template()
    head["spec"]["containers"][0]["resources"] = {}
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "rc", "namespace": NS, "labels": dict(Q),
                            "annotations": {ws.ELASTIC_ANNOTATION: "true"}},
               "spec": {"suspend": True, "enableInTreeAutoscaling": True, "headGroupSpec": {"template": head},
                        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 1,
                                              "maxReplicas": 3, "template": one_gpu}]}}
    h.api.create(resource, cluster, NS)
    h.sync()
    reconcile(h, 3)
    [old] = slices(h)
    running = h.api.get(resource, "rc", NS)
    assert st.condition_true(old, st.ADMITTED) and running["spec"]["suspend"] is False
    group = running["spec"]["workerGroupSpecs"][0]
    h.clock.advance(1)
    h.api.merge_patch(resource, "rc", {"spec": {"workerGroupSpecs": [dict(group, replicas=3)]}}, NS)
    h.sync()
    reconcile(h, 2)
    first, second = slices(h)
    assert second["metadata"]["annotations"][ws.REPLACEMENT_FOR] == f"{NS}/{old['metadata']['name']}"
    assert [(ps["name"], ps["count"]) for ps in second["spec"]["podSets"]] == [("head", 1), ("gpu", 3)]
    assert st.condition_true(second, st.ADMITTED)
    assert (st.find_condition(first, st.FINISHED) or {}).get("reason") == ws.REASON_REPLACED
    assert h.api.get(resource, "rc", NS)["spec"]["suspend"] is False and h.events_of("Stopped") == []


def test_a_workload_of_another_namespace_labelled_with_the_jobs_uid_is_no_slice_of_it(h: Harness) -> None:
    """docs/security.md boundary 10: Kueue lists a job's slices in its namespace by owner
    reference; a tenant's Workload elsewhere carrying the job's uid (label and owner reference)
    is neither rescaled nor allowed to stand in for the job's next slice."""
    from scheduler.k8s.informer import NAMESPACES

    wl = started(h, "el", 1)
    uid = h.job("el")["metadata"]["uid"]
    h.api.create(NAMESPACES, {"metadata": {"name": "other"}}, None)
    forged: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "forged", "namespace": "other", "labels": {"kueue.x-k8s.io/job-uid": uid},
                     "annotations": {ws.ELASTIC_ANNOTATION: "true",
                                     ws.REPLACEMENT_FOR: f"{NS}/{wl['metadata']['name']}"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "el", "uid": uid,
                                          "controller": True}]},
        "spec": {"queueName": "lq", "podSets": [dict(wl["spec"]["podSets"][0], count=1)]}}
    h.api.create(WORKLOADS, forged, "other")
    h.sync()
    scale(h, "el", 2)
    reconcile(h, 2)
    assert h.api.get(WORKLOADS, "forged", "other")["spec"]["podSets"][0]["count"] == 1
    [_, new] = slices(h)
    assert new["metadata"]["annotations"][ws.REPLACEMENT_FOR] == f"{NS}/{wl['metadata']['name']}"
    assert st.condition_true(new, st.ADMITTED)


def test_the_newest_admitted_slice_ungates_the_pods_its_predecessor_minted(h: Harness) -> None:
    """elastic_job_ungater_test.go "reconciling latest admitted slice ungates pods minted by the
    previous slice", "skip surplus pods over quota during scale-up", "ungate surplus once
    replacement admitted", "preserve topology gate when ungating elastic gate"."""
    from scheduler.k8s.informer import PODS

    first = started(h, "el", 1)
    name = first["metadata"]["name"]

    def make_pod(pod_name: str) -> None:
        h.api.create(PODS, {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": pod_name, "namespace": NS,
                                         "labels": {"kueue.x-k8s.io/podset": "main"},
                                         "annotations": {"kueue.x-k8s.io/workload": name}},
                            "spec": {"schedulingGates": [{"name": ws.SCHEDULING_GATE}, {"name": "other"}],
                                     "containers": [{"name": "c", "image": "x"}]}}, NS)

    def gates(pod_name: str) -> list[str]:
        return [g["name"] for g in h.api.get(PODS, pod_name, NS)["spec"].get("schedulingGates") or ()]

    for i in range(3):
        make_pod(f"el-{i}")
    h.sync()
    reconcile(h)
    assert [gates(f"el-{i}") for i in range(3)] == [["other"], [ws.SCHEDULING_GATE, "other"],
                                                   [ws.SCHEDULING_GATE, "other"]]
    scale(h, "el", 3)
    reconcile(h, 2)
    assert [gates(f"el-{i}") for i in range(3)] == [["other"]] * 3


def test_pods_naming_the_active_slice_itself_are_ungated_too(h: Harness) -> None:
    """A job started again with a later slice (after an eviction) stamps that slice's own name
    on its pods: the ungater finds them under it as under the chain's first name."""
    from scheduler.k8s.informer import PODS

    started(h, "el", 1)
    scale(h, "el", 2)
    reconcile(h, 2)
    _, new = slices(h)
    h.api.create(PODS, {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "later", "namespace": NS, "labels": {"kueue.x-k8s.io/podset": "main"},
                                     "annotations": {"kueue.x-k8s.io/workload": new["metadata"]["name"]}},
                        "spec": {"schedulingGates": [{"name": ws.SCHEDULING_GATE}],
                                 "containers": [{"name": "c", "image": "x"}]}}, NS)
    h.sync()
    reconcile(h)
    assert not h.api.get(PODS, "later", NS)["spec"].get("schedulingGates")
