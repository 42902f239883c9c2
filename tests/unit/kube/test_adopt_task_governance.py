"""Adopting a cluster whose Kueue objects task governance v1.6 wrote (Kueue v0.19.2), on the
in-memory API server: namespaces ``hyperpod-ns-<team>``, ClusterQueues
``hyperpod-ns-<team>-clusterqueue`` in one cohort, LocalQueues ``hyperpod-ns-<team>-localqueue``,
WorkloadPriorityClasses ``<name>-priority``, flavors named after the instance type (node label
``node.kubernetes.io/instance-type``), Workloads admitted by Kueue v0.19 (v1beta2 topology
assignments in hostname-prefix runs), one of them owned by a HyperPodPytorchJob (created by
HyperPod's training operator, which starts it itself). ``toposched adopt`` judges it ready, and
toposched behaving as Kueue v0.19 keeps every admission field for field, never evicts, counts
their quota, and admits the pending job into what is left."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from scheduler.adapter.adoption import assess
from scheduler.core.assignment import encode_v1beta2
from scheduler.core.config import KUEUE_V019, kueue_defaults
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import (
    CLUSTER_QUEUES,
    COHORTS,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from scheduler.kube import status as st
from scheduler.kube.cache import ClusterCache
from scheduler.kube.controller import Controller
from scheduler.kube.events import EventRecorder
from scheduler.kube.settings import ControllerSettings

from .test_phases import Clock

GPU = "nvidia.com/gpu"
P5 = "ml.p5.48xlarge"
TYPE = "node.kubernetes.io/instance-type"
L3 = "topology.k8s.aws/network-node-layer-3"
HOST = "kubernetes.io/hostname"
HEALTH = "sagemaker.amazonaws.com/node-health-status"
TEAMS = ("team-a", "team-b")


def _node(i: int) -> dict[str, Any]:
    name = f"hyperpod-i-0a1b2c3d4e5f60{i:02d}"
    return {"metadata": {"name": name, "labels": {HOST: name, TYPE: P5, L3: f"nn-{i // 2}", HEALTH: "Schedulable"}},
            "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "pods": "110", GPU: "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _queues() -> list[tuple[dict[str, Any], Any]]:
    objs: list[tuple[dict[str, Any], Any]] = [
        ({"metadata": {"name": "hyperpod-default"}, "spec": {"levels": [{"nodeLabel": L3}, {"nodeLabel": HOST}]}},
         TOPOLOGIES),
        ({"metadata": {"name": P5}, "spec": {"nodeLabels": {TYPE: P5}, "topologyName": "hyperpod-default"}},
         RESOURCE_FLAVORS),
        ({"metadata": {"name": "hyperpod-cohort"}, "spec": {}}, COHORTS),
        ({"metadata": {"name": "training-priority"}, "value": 50}, WORKLOAD_PRIORITY_CLASSES),
        ({"metadata": {"name": "inference-priority"}, "value": 100}, WORKLOAD_PRIORITY_CLASSES),
    ]
    for team in TEAMS:
        ns = f"hyperpod-ns-{team}"
        objs += [
            ({"metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}}, NAMESPACES),
            ({"metadata": {"name": f"{ns}-clusterqueue"}, "spec": {
                "cohortName": "hyperpod-cohort", "namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": ns}},
                "preemption": {"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": P5, "resources": [
                    {"name": "cpu", "nominalQuota": "384"}, {"name": "memory", "nominalQuota": "4000Gi"},
                    {"name": GPU, "nominalQuota": "16", "borrowingLimit": "16"}]}]}]}}, CLUSTER_QUEUES),
            ({"metadata": {"name": f"{ns}-localqueue", "namespace": ns}, "spec": {
                "clusterQueue": f"{ns}-clusterqueue"}}, LOCAL_QUEUES),
        ]
    return objs


def _workload(name: str, team: str, pods: int, owner: tuple[str, str], hosts: list[str] | None,
              owner_uid: str) -> dict[str, Any]:
    """A Workload as Kueue v0.19.2 writes it (admitted when ``hosts`` is given)."""
    ns = f"hyperpod-ns-{team}"
    api_version, kind = owner
    wl: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"{kind.lower()}-{name}-1a2b3", "namespace": ns, "uid": f"uid-{name}",
                     "creationTimestamp": "2026-12-01T10:00:00Z",
                     "labels": {"kueue.x-k8s.io/job-uid": owner_uid},
                     "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": name,
                                          "uid": owner_uid, "controller": True}]},
        "spec": {"queueName": f"{ns}-localqueue", "priority": 50,
                 "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                      "name": "training-priority"},
                 "podSets": [{"name": "main", "count": pods, "topologyRequest": {"required": L3},
                              "template": {"spec": {"containers": [{"name": "train", "resources": {
                                  "requests": {GPU: "8", "cpu": "90"}}}]}}}]},
    }
    if hosts is not None:
        placement = PodSetPlacement("main", pods, (HOST,), tuple(DomainAssignment((h,), 1) for h in hosts))
        wl["status"] = {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": f"Quota reserved in ClusterQueue {ns}-clusterqueue",
                 "lastTransitionTime": "2026-12-01T10:00:05Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": "2026-12-01T10:00:05Z"},
                {"type": "PodsReady", "status": "True", "reason": "PodsReady", "message": "All pods reached readiness",
                 "lastTransitionTime": "2026-12-01T10:01:00Z"}],
            "admission": {"clusterQueue": f"{ns}-clusterqueue", "podSetAssignments": [{
                "name": "main", "count": pods, "flavors": {GPU: P5, "cpu": P5},
                "resourceUsage": {GPU: str(8 * pods), "cpu": str(90 * pods)},
                "topologyAssignment": encode_v1beta2(placement, split_by_hostname_prefix=True)}]}}
    return wl


HYPERPOD_JOB = ("sagemaker.amazonaws.com/v1", "HyperPodPytorchJob")
BATCH_JOB = ("batch/v1", "Job")


def _cluster() -> tuple[FakeApi, Clock, list[dict[str, Any]]]:
    clock = Clock()
    api = FakeApi(clock)
    for obj, resource in _queues():
        api.create(resource, obj, obj["metadata"].get("namespace"))
    nodes = [_node(i) for i in range(6)]  # 3 layer-3 domains of 2 nodes
    for n in nodes:
        api.create(NODES, n)
    hosts = [n["metadata"]["name"] for n in nodes]
    eval_job = api.create(JOBS, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "eval", "namespace": "hyperpod-ns-team-b",
        "labels": {"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-b-localqueue"}},
        "spec": {"suspend": False, "parallelism": 2, "completions": 2, "template": {"spec": {  # as its Workload's
            "containers": [{"name": "train", "resources": {"requests": {GPU: "8", "cpu": "90"}}}]}}}},
        "hyperpod-ns-team-b")
    admitted = [
        # HyperPod's training operator created this one (no HyperPodPytorchJob CRD here: it runs it itself)
        _workload("llama-pretrain", "team-a", 2, HYPERPOD_JOB, hosts[0:2], "uid-of-the-hyperpod-job"),
        _workload("eval", "team-b", 2, BATCH_JOB, hosts[2:4], eval_job["metadata"]["uid"]),
    ]
    for wl in admitted:
        api.create(WORKLOADS, wl, wl["metadata"]["namespace"])
    return api, clock, [copy.deepcopy(w) for w in api.objects(WORKLOADS)]


def _pass(controller: Controller, cache: ClusterCache) -> None:
    for _ in range(2):
        for informer in cache.all():
            informer.relist()
        controller.reconcile()


def test_adopt_judges_a_task_governance_cluster_ready() -> None:
    api, _clock, workloads = _cluster()
    report = assess(workloads=workloads, cluster_queues=api.objects(CLUSTER_QUEUES), webhook_configurations=[],
                    pods=[], kueue_deployments=[{"metadata": {"name": "kueue-controller-manager"},
                                                 "spec": {"replicas": 0}}],
                    kueue_lease=None, now=dt.datetime(2026, 12, 2, tzinfo=dt.UTC))
    assert report.ready and report.findings == ()
    assert report.lines()[-1].startswith("2 admitted Workloads keep their admission, 0 pending")


def test_every_admission_is_kept_and_its_quota_counted() -> None:
    api, clock, before = _cluster()
    cache = ClusterCache.create(api)
    controller = Controller(api, cache, ControllerSettings(clock=clock, config=kueue_defaults(KUEUE_V019)),
                            events=EventRecorder(api, clock=clock), is_leader=lambda: True)
    # a new team-a job after the switch: team-a's 16 GPUs are all used by the HyperPod job and
    # team-b's by its Job, so nothing is left to borrow either
    api.create(JOBS, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "finetune", "namespace": "hyperpod-ns-team-a",
        "labels": {"kueue.x-k8s.io/queue-name": "hyperpod-ns-team-a-localqueue",
                   "kueue.x-k8s.io/priority-class": "training-priority"}},
        "spec": {"suspend": True, "parallelism": 2, "completions": 2, "completionMode": "Indexed", "template": {
            "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": L3}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "resources": {
                "requests": {GPU: "8", "cpu": "90"}}}]}}}}, "hyperpod-ns-team-a")
    for _ in range(3):
        _pass(controller, cache)
        clock.advance(5)
    after = {w["metadata"]["name"]: w for w in api.objects(WORKLOADS)}
    assert len(after) == len(before) + 1  # one Workload per job: Kueue's are reused, one new
    assert api.get(JOBS, "eval", "hyperpod-ns-team-b")["spec"]["suspend"] is False  # never stopped
    for old in before:
        new = after[old["metadata"]["name"]]
        assert new["status"]["admission"] == old["status"]["admission"]  # field for field
        assert st.condition_true(new, st.QUOTA_RESERVED) and st.condition_true(new, st.ADMITTED)
        assert not st.find_condition(new, st.EVICTED)
        assert new["spec"] == old["spec"]
    # the quota Kueue's admissions hold is counted: the new job waits with Kueue's message and
    # reason (v0.19 without UnadmittedWorkloadsObservability), team-a's usage shows them
    (pending,) = [w for name, w in after.items() if name.startswith("job-finetune")]
    cond = st.find_condition(pending, st.QUOTA_RESERVED) or {}
    assert (cond.get("status"), cond.get("reason"), cond.get("message")) == (
        "False", "Pending", f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} in flavor "
                            f"{P5}, 16 more needed")
    usage = (api.get(CLUSTER_QUEUES, "hyperpod-ns-team-a-clusterqueue").get("status") or {}).get("flavorsUsage")
    assert {r["name"]: r["total"] for r in usage[0]["resources"]}[GPU] == "16"
    # team-b's Kueue-admitted Job finishes: its quota is lent to team-a, the job lands in the
    # layer-3 domain that Job leaves free, and the HyperPod job's admission is still untouched
    api.merge_patch(JOBS, "eval", {"status": {"conditions": [{"type": "Complete", "status": "True"}]}},
                    "hyperpod-ns-team-b", subresource="status")
    for _ in range(3):
        _pass(controller, cache)
        clock.advance(5)
    after = {w["metadata"]["name"]: w for w in api.objects(WORKLOADS)}
    (admitted,) = [w for name, w in after.items() if name.startswith("job-finetune")]
    assert st.condition_true(admitted, st.QUOTA_RESERVED)
    hyperpod = next(w for w in before if w["metadata"]["name"].startswith("hyperpodpytorchjob"))
    assert after[hyperpod["metadata"]["name"]]["status"]["admission"] == hyperpod["status"]["admission"]
    assert not st.find_condition(after[hyperpod["metadata"]["name"]], st.EVICTED)
