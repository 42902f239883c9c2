"""The controller's phases against an in-memory API server (``scheduler.k8s.fakeapi``): no
control plane, no mocks of our own code. Each test drives phases by hand with a fixed clock
and reads the results back from the fake API server."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.core.topology_request import ANN_REQUIRED
from scheduler.core.workload import ANN_WORKLOAD, LABEL_QUEUE_NAME
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.gcpolicy import GcPolicy
from scheduler.k8s.informer import (
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    WORKLOADS,
)
from scheduler.kube import status as st
from scheduler.kube.cache import ClusterCache
from scheduler.kube.controller import Controller
from scheduler.kube.events import EVENTS, EventRecorder
from scheduler.kube.eviction import evict
from scheduler.kube.metrics import CycleMetrics
from scheduler.kube.nodefailures import placed_workload
from scheduler.kube.settings import ControllerSettings

BLOCK = "topology.k8s.aws/network-node-layer-3"
HOST = "kubernetes.io/hostname"
HEALTH = "sagemaker.amazonaws.com/node-health-status"
NS = "team-a"
GPU = "nvidia.com/gpu"


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def node(name: str, block: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOST: name, BLOCK: block, HEALTH: "Schedulable"}},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", GPU: "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def job(name: str, pods: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {LABEL_QUEUE_NAME: "lq"}},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "suspend": True,
                     "template": {"metadata": {"annotations": {ANN_REQUIRED: BLOCK}},
                                  "spec": {"restartPolicy": "Never", "containers": [{
                                      "name": "c", "image": "busybox",
                                      "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}]}}}}


class Harness:
    """A fake API server seeded with 2 blocks of 2 nodes, one TAS flavor and queue, and a
    controller whose caches are listed (not watched) from it."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.api = FakeApi(self.clock)
        self.leading = True
        for obj, resource in self._seed():
            self.api.create(resource, obj, (obj["metadata"]).get("namespace"))
        self.cache = ClusterCache.create(self.api)
        self.events = EventRecorder(self.api, clock=self.clock)
        self.decisions: list[tuple[str, str]] = []
        self.settings = ControllerSettings(clock=self.clock, node_failure_grace_s=3.0)
        self.controller = self.rebuild()
        self.sync()

    def rebuild(self, metrics: CycleMetrics | None = None, gc_policy: GcPolicy | None = None,
                **changes: Any) -> Controller:
        """A new controller on the same API and caches, with ``changes`` to the settings (the
        controller's settings are frozen: a test that wants others builds a new one)."""
        self.settings = dataclasses.replace(self.settings, **changes)
        self.controller = Controller(self.api, self.cache, self.settings, is_leader=lambda: self.leading,
                                     events=self.events, metrics=metrics, gc_policy=gc_policy)
        self.controller.observers.append(lambda kind, wl, _detail: self.decisions.append(
            (kind, wl["metadata"]["name"])))
        return self.controller

    def _seed(self) -> list[tuple[dict[str, Any], Any]]:
        return [
            ({"metadata": {"name": NS}}, NAMESPACES),
            *((node(f"n{i}", f"b{i // 2}"), NODES) for i in range(4)),
            ({"metadata": {"name": "topo"}, "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": HOST}]}},
             TOPOLOGIES),
            ({"metadata": {"name": "gpu"}, "spec": {"topologyName": "topo"}}, RESOURCE_FLAVORS),
            ({"metadata": {"name": "cq"}, "spec": {
                "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                    {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": "32"}]}]}]}}, CLUSTER_QUEUES),
            ({"metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "cq"}}, LOCAL_QUEUES),
        ]

    def sync(self) -> None:
        """The informers' view = the API server's (what the watch would deliver)."""
        for informer in self.cache.all():
            informer.relist()

    def workload(self) -> dict[str, Any]:
        (wl,) = self.api.objects(WORKLOADS, NS)
        return wl

    def job(self, name: str) -> dict[str, Any]:
        return self.api.get(JOBS, name, NS)

    def event_reasons(self) -> list[str]:
        self.events.flush()
        return [e["reason"] for e in self.api.objects(EVENTS)]

    def events_of(self, reason: str) -> list[dict[str, Any]]:
        self.events.flush()
        return [e for e in self.api.objects(EVENTS) if e["reason"] == reason]

    def admitted(self, name: str, pods: int) -> dict[str, Any]:
        """Job -> Workload -> admitted -> started."""
        self.api.create(JOBS, job(name, pods), NS)
        self.sync()
        self.controller.ensure_workloads()
        self.sync()
        self.controller.admit()
        self.sync()
        self.controller.start_admitted()
        self.sync()
        return self.workload()


def assigned_hosts(wl: dict[str, Any]) -> dict[str, int]:
    return {h: c for u in placed_workload(wl).tas for h, c in
            {d.values[0]: d.count for d in u.placement.domains}.items()}


@pytest.fixture
def harness() -> Harness:
    return Harness()


def test_job_becomes_a_workload(harness: Harness) -> None:
    harness.api.create(JOBS, job("train", 2), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    wl = harness.workload()
    (owner,) = wl["metadata"]["ownerReferences"]
    assert owner["kind"] == "Job" and owner["name"] == "train" and owner["controller"] is True
    assert wl["spec"]["podSets"][0]["count"] == 2
    assert wl["spec"]["podSets"][0]["topologyRequest"]["required"] == BLOCK
    assert harness.cache.workloads.get(f"{NS}/{wl['metadata']['name']}") is not None  # write-through
    harness.controller.ensure_workloads()  # idempotent: the cache already holds it
    assert len(harness.api.objects(WORKLOADS, NS)) == 1
    assert "CreatedWorkload" in harness.event_reasons()


def test_admission_is_written_and_the_job_started(harness: Harness) -> None:
    wl = harness.admitted("train", 2)
    assert st.condition_true(wl, st.QUOTA_RESERVED) and st.condition_true(wl, st.ADMITTED)
    assert wl["status"]["admission"]["clusterQueue"] == "cq"
    hosts = assigned_hosts(wl)
    assert sum(hosts.values()) == 2 and len({int(h[1:]) // 2 for h in hosts}) == 1  # one block
    started = harness.job("train")
    assert started["spec"]["suspend"] is False
    assert started["spec"]["template"]["spec"]["nodeSelector"][BLOCK] in {"b0", "b1"}
    assert ("admitted", wl["metadata"]["name"]) in harness.decisions
    assert {"QuotaReserved", "Admitted", "Started"} <= set(harness.event_reasons())


def test_a_stale_copy_gets_409_and_is_skipped(harness: Harness) -> None:
    harness.api.create(JOBS, job("train", 1), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    stale = harness.workload()
    fresh = harness.api.merge_patch(WORKLOADS, stale["metadata"]["name"], {"metadata": {"labels": {"x": "y"}}}, NS)
    assert harness.controller.writer.patch_workload_status(stale, {"conditions": []}) is None
    assert harness.workload()["metadata"]["resourceVersion"] == fresh["metadata"]["resourceVersion"]
    assert harness.controller.writer.patch_workload_status(fresh, {"conditions": []}) is not None


def test_other_api_errors_are_not_swallowed(harness: Harness) -> None:
    harness.api.create(JOBS, job("train", 1), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    harness.api.fail_next(500, "patch", "workloads")
    with pytest.raises(ApiException):
        harness.controller.writer.patch_workload_status(harness.workload(), {"conditions": []})


def test_no_write_while_not_leading(harness: Harness) -> None:
    harness.leading = False
    harness.api.create(JOBS, job("train", 1), NS)
    harness.sync()
    writes_before = len(harness.api.calls)
    harness.controller.reconcile()
    assert harness.api.calls[writes_before:] == []
    assert harness.api.objects(WORKLOADS, NS) == []
    assert harness.controller.writer.skipped_not_leading > 0
    harness.leading = True
    harness.controller.reconcile()
    assert len(harness.api.objects(WORKLOADS, NS)) == 1


def test_a_failed_node_is_replaced_inside_the_required_block(harness: Harness) -> None:
    wl = harness.admitted("train", 1)
    (failed,) = assigned_hosts(wl)
    spare = {"n0": "n1", "n1": "n0", "n2": "n3", "n3": "n2"}[failed]
    harness.api.create(PODS, {"metadata": {"name": "train-0", "namespace": NS,
                                           "annotations": {ANN_WORKLOAD: wl["metadata"]["name"]}},
                              "spec": {"nodeName": failed, "containers": []}, "status": {"phase": "Running"}}, NS)
    harness.api.merge_patch(NODES, failed, {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}}})
    harness.sync()
    harness.controller.node_failures.run()  # recorded, still inside the grace period
    assert assigned_hosts(harness.workload()) == {failed: 1}
    harness.clock.advance(5)
    harness.controller.node_failures.run()
    assert assigned_hosts(harness.workload()) == {spare: 1}
    assert harness.api.objects(PODS, NS) == []  # recreated by the Job controller, on the spare
    assert ("replaced", wl["metadata"]["name"]) in harness.decisions
    assert "NodeReplaced" in harness.event_reasons()


def test_eviction_suspends_the_job_then_releases_the_reservation(harness: Harness) -> None:
    wl = harness.admitted("train", 2)
    assert evict(harness.controller.writer, wl, "NodeFailures", "gone", harness.clock()) is not None
    harness.sync()
    harness.controller.progress_evictions()  # step 1: suspend the job
    harness.sync()
    assert harness.job("train")["spec"]["suspend"] is True
    assert st.has_reservation(harness.workload())
    harness.controller.progress_evictions()  # suspended and no pods left: release, requeue
    harness.sync()
    released = harness.workload()
    assert not st.has_reservation(released)
    assert st.find_condition(released, st.REQUEUED)["status"] == "True"
    assert st.find_condition(released, st.QUOTA_RESERVED)["reason"] == "Pending"
    assert ("requeued", wl["metadata"]["name"]) in harness.decisions
    assert "Stopped" in harness.event_reasons()


def test_a_failed_node_without_a_spare_evicts(harness: Harness) -> None:
    wl = harness.admitted("train", 2)  # the whole block
    hosts = sorted(assigned_hosts(wl))
    harness.api.merge_patch(NODES, hosts[0], {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}}})
    harness.sync()
    harness.controller.node_failures.run()
    harness.clock.advance(5)
    harness.controller.node_failures.run()
    evicted = st.find_condition(harness.workload(), st.EVICTED)
    assert evicted is not None and evicted["reason"] == "NodeFailures"
    assert evicted["message"] == ("Workload was evicted as there was no replacement for unhealthy node(s): "
                                  f"{hosts[0]}")


def test_creating_a_workload_that_exists_is_skipped_quietly(harness: Harness) -> None:
    harness.api.create(JOBS, job("train", 1), NS)
    harness.sync()
    harness.controller.ensure_workloads()
    harness.cache.workloads.replace({})  # the watch has not delivered our own Workload yet
    harness.controller.ensure_workloads()  # 409 AlreadyExists: nothing to report
    assert len(harness.api.objects(WORKLOADS, NS)) == 1
    assert "CreatedWorkloadFailed" not in harness.event_reasons()


def test_queue_status_and_finalizers_are_written(harness: Harness) -> None:
    harness.admitted("train", 1)
    harness.controller.reconcile()
    (cq,) = harness.api.objects(CLUSTER_QUEUES)
    assert "kueue.x-k8s.io/resource-in-use" in cq["metadata"]["finalizers"]
    assert cq["status"]["admittedWorkloads"] == 1
    assert st.condition_true(cq, "Active")


def test_one_pass_creates_admits_and_starts_a_job(harness: Harness) -> None:
    """The pass starts the jobs it admitted itself (issue 34: a burst's jobs started a pass late)."""
    harness.api.create(JOBS, job("train", 2), NS)
    harness.sync()
    harness.controller.reconcile()
    assert st.condition_true(harness.workload(), st.ADMITTED)
    started = harness.job("train")
    assert started["spec"]["suspend"] is False
    assert started["spec"]["template"]["spec"]["nodeSelector"][BLOCK] in {"b0", "b1"}
