"""Run the same scenario through the real Kueue and through toposched, each on a fresh local
control plane, and observe the outcome in engine-neutral terms.

An *engine group* is one control plane (etcd, kube-apiserver, controller-manager,
kube-scheduler, KWOK) with the group's fake nodes and queues and ONE engine:

- ``kueue``: the real Kueue v0.17.0 controller (``scheduler.devcluster.kueue.start_kueue``);
  its webhook suspends Jobs, its TopologyUngater pins gated pods with node selectors and the
  default kube-scheduler binds them to the KWOK nodes.
- ``toposched``: toposched's controller, webhook and extender (``start_toposched``).

Scenarios of a group run one after another on that control plane, with a cleanup between
(jobs and workloads deleted, deleted nodes re-created), so a group costs one start-up per
engine. Jobs are created exactly as a user would (not suspended; each engine's own webhook
suspends them) and one at a time: after each step the harness waits until every workload
has a QuotaReserved condition and nothing changed for a quiet period, so the order of jobs
is the order of decisions for both engines.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.leaderworkerset import LEADERWORKERSET
from scheduler.adapter.kinds.mpijob import MPIJOB
from scheduler.adapter.kinds.ray import RAYCLUSTER, RAYJOB, RAYSERVICE
from scheduler.adapter.kinds.statefulset import STATEFULSET
from scheduler.adapter.kinds.trainjob import TRAINJOB
from scheduler.core.assignment import decode_topology_assignment
from scheduler.core.fakecluster import generate_nodes
from scheduler.devcluster.apply import apply_objects, create_nodes, wait_nodes_settled
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, FAKE_POD_PHASE_LABEL, LocalCluster
from scheduler.devcluster.jobset import jobset_crd_file
from scheduler.devcluster.kuberay import kuberay_crd_files
from scheduler.devcluster.lws import lws_crd_file
from scheduler.devcluster.mpioperator import mpijob_crd_file
from scheduler.devcluster.peers import wait_crds_established
from scheduler.devcluster.trainer import trainer_crd_files
from scheduler.k8s.informer import JOBS, NODES, PODS, WORKLOADS, Api, Resource
from scheduler.kube.jobs import resource_of

JOBSETS = resource_of(JOBSET)
MPIJOBS = resource_of(MPIJOB)
LEADERWORKERSETS = resource_of(LEADERWORKERSET)
TRAINJOBS, STATEFULSETS = resource_of(TRAINJOB), resource_of(STATEFULSET)
RAYJOBS, RAYCLUSTERS, RAYSERVICES = resource_of(RAYJOB), resource_of(RAYCLUSTER), resource_of(RAYSERVICE)

ENGINES = ("kueue", "toposched")
LAYER = "topology.k8s.aws/network-node-layer-"
HOSTNAME = "kubernetes.io/hostname"
TOPOLOGY = "hyperpod-default"
FLAVOR = "ml.p5.48xlarge"
# Group key ``kinds``: job kinds beyond Job/JobSet whose CRD is installed and which the engine
# manages (Kueue: its integration of that name; toposched's are always on). No operator of the
# kind runs: admission is what the scenarios compare, and it needs only the object.
# ``pod`` and ``statefulset`` are built in (no CRD); Kueue's ``statefulset`` needs its ``pod``.
KINDS: dict[str, tuple[str, Resource, Callable[[], list[Path]], str]] = {
    "lws": ("LeaderWorkerSet", LEADERWORKERSETS, lambda: [lws_crd_file()], "leaderworkerset.x-k8s.io/leaderworkerset"),
    "mpijob": ("MPIJob", MPIJOBS, lambda: [mpijob_crd_file()], "kubeflow.org/mpijob"),
    "trainjob": ("TrainJob", TRAINJOBS, trainer_crd_files, "trainer.kubeflow.org/trainjob"),
    "rayjob": ("RayJob", RAYJOBS, kuberay_crd_files, "ray.io/rayjob"),
    "raycluster": ("RayCluster", RAYCLUSTERS, kuberay_crd_files, "ray.io/raycluster"),
    "rayservice": ("RayService", RAYSERVICES, kuberay_crd_files, "ray.io/rayservice"),
    "pod": ("Pod", PODS, list, "pod"),
    "statefulset": ("StatefulSet", STATEFULSETS, list, "statefulset"),
}
NEW_KINDS = ("TrainJob", "RayJob", "RayCluster", "RayService")
CLUSTER_TRAINING_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", namespaced=False)
LEVEL_ALIASES = {"layer-1": LAYER + "1", "layer-2": LAYER + "2", "layer-3": LAYER + "3", "hostname": HOSTNAME}
ANN = "kueue.x-k8s.io/podset-"


def level(name: str) -> str:
    return LEVEL_ALIASES.get(name, name)


# ---------------------------------------------------------------------------- queue objects
def team_namespace(team: str) -> str:
    return f"hyperpod-ns-{team}"


def queue_objects(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """HyperPod-shaped Kueue objects from a compact group spec::

        teams: {team-a: {gpu: 16, borrowingLimit: 8, lendingLimit: 0, cohort: shared,
                         strategy: BestEffortFIFO, withinClusterQueue: LowerPriority,
                         reclaimWithinCohort: Any, fairWeight: 2,
                         flavors: [{name: reserved, gpu: 8}, {name: spot, gpu: 8}],
                         flavorFungibility: {whenCanBorrow: TryNextFlavor},
                         namespaceSelector: {matchLabels: {x: y}}}}
        cohorts: {dept: {parent: org, gpu: 16}, org: {}}
        priorities: {high: 100, low: 10}
    CPU/memory/EFA quotas scale with the GPU quota (per GPU: 24 CPU, 256Gi, 4 EFA). ``flavors``:
    several flavors of one resource group, tried in order, each a TAS ResourceFlavor of the same
    nodes and topology (default: one flavor ``ml.p5.48xlarge`` with ``gpu``). ``cohorts``: Kueue
    ``Cohort`` objects with a parent and their own quota (in the default flavor).
    """
    objs: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": TOPOLOGY},
         "spec": {"levels": [{"nodeLabel": LAYER + "1"}, {"nodeLabel": LAYER + "2"}, {"nodeLabel": LAYER + "3"},
                             {"nodeLabel": HOSTNAME}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
         "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": FLAVOR}, "topologyName": TOPOLOGY}},
    ]
    for name, value in sorted((spec.get("priorities") or {}).items()):
        objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                     "metadata": {"name": name}, "value": int(value)})
    extra_flavors = sorted({f["name"] for t in (spec.get("teams") or {}).values() for f in t.get("flavors") or ()}
                           - {FLAVOR})
    for name in extra_flavors:
        objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
                     "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": FLAVOR}, "topologyName": TOPOLOGY}})
    for name, c in sorted((spec.get("cohorts") or {}).items()):
        cohort_spec: dict[str, Any] = {}
        if c.get("parent"):
            cohort_spec["parentName"] = c["parent"]
        if c.get("gpu") is not None:
            cohort_spec["resourceGroups"] = [_resource_group([{"name": FLAVOR, "gpu": c["gpu"]}], c)]
        objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name},
                     "spec": cohort_spec})
    for team, t in sorted((spec.get("teams") or {}).items()):
        ns = team_namespace(team)
        flavors = t.get("flavors") or [{"name": FLAVOR, "gpu": t["gpu"]}]
        cq_spec: dict[str, Any] = {
            "namespaceSelector": t.get("namespaceSelector", {"matchLabels": {"kubernetes.io/metadata.name": ns}}),
            "queueingStrategy": t.get("strategy", "BestEffortFIFO"),
            "preemption": {"withinClusterQueue": t.get("withinClusterQueue", "LowerPriority"),
                           "reclaimWithinCohort": t.get("reclaimWithinCohort", "Any")},
            "resourceGroups": [_resource_group(flavors, t)],
        }
        if t.get("flavorFungibility"):
            cq_spec["flavorFungibility"] = dict(t["flavorFungibility"])
        if t.get("cohort"):
            cq_spec["cohortName"] = t["cohort"]
        if t.get("fairWeight") is not None:
            cq_spec["fairSharing"] = {"weight": str(t["fairWeight"])}
        objs += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
             "metadata": {"name": f"{ns}-clusterqueue"}, "spec": cq_spec},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": f"{ns}-localqueue", "namespace": ns},
             "spec": {"clusterQueue": f"{ns}-clusterqueue"}},
        ]
    return objs


def _resource_group(flavors: list[Mapping[str, Any]], t: Mapping[str, Any]) -> dict[str, Any]:
    """One resource group over cpu/memory/GPU/EFA with a quota per flavor (limits on the GPU)."""
    def quota(res: str, amount: str) -> dict[str, Any]:
        q: dict[str, Any] = {"name": res, "nominalQuota": amount}
        if res == "nvidia.com/gpu":
            if t.get("borrowingLimit") is not None:
                q["borrowingLimit"] = str(t["borrowingLimit"])
            if t.get("lendingLimit") is not None:
                q["lendingLimit"] = str(t["lendingLimit"])
        return q

    return {
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"],
        "flavors": [{"name": f["name"], "resources": [
            {"name": "cpu", "nominalQuota": str(24 * int(f["gpu"]))},
            {"name": "memory", "nominalQuota": f"{256 * int(f['gpu'])}Gi"},
            quota("nvidia.com/gpu", str(int(f["gpu"]))),
            {"name": "vpc.amazonaws.com/efa", "nominalQuota": str(4 * int(f["gpu"]))},
        ]} for f in flavors],
    }


# ---------------------------------------------------------------------------- jobs
def job_object(j: Mapping[str, Any]) -> dict[str, Any]:
    """A batch Job from a compact row::

        {name: a, team: team-a, pods: 2, gpus: 8, required: layer-3 | preferred: layer-2 |
         unconstrained: true, slice: {level: layer-3, size: 2}, priority: high, queue: other-lq,
         minParallelism: 1, notReady: true, avoid_hosts: [name, ...]}
    Per pod: ``gpus`` GPUs with 24 CPU, 256Gi and 4 EFA per GPU (p5: 8 GPUs per node); ``cpu`` and
    ``memory`` override the per-pod CPU and memory.
    ``minParallelism``: Kueue's ``kueue.x-k8s.io/job-min-parallelism`` (partial admission);
    ``notReady``: the pods never become Ready (KWOK leaves pods labelled with the fake phase
    ``Pending`` alone), for waitForPodsReady.
    ``avoid_hosts``: required node affinity ``kubernetes.io/hostname NotIn`` those nodes
    (:meth:`Run.create_job` turns ``avoid_nodes: [index, ...]`` into it)."""
    gpus = int(j.get("gpus", 8))
    ns = team_namespace(j.get("team", "team-a"))
    ann: dict[str, str] = {}
    if j.get("required"):
        ann[ANN + "required-topology"] = level(j["required"])
    if j.get("preferred"):
        ann[ANN + "preferred-topology"] = level(j["preferred"])
    if j.get("unconstrained"):
        ann[ANN + "unconstrained-topology"] = "true"
    if j.get("slice"):
        ann[ANN + "slice-required-topology"] = level(j["slice"]["level"])
        ann[ANN + "slice-size"] = str(j["slice"]["size"])
    labels = {"kueue.x-k8s.io/queue-name": j.get("queue", f"{ns}-localqueue")}
    if j.get("priority"):
        labels["kueue.x-k8s.io/priority-class"] = j["priority"]
    requests = {"cpu": str(int(j.get("cpu", 24 * gpus))), "memory": str(j.get("memory", f"{256 * gpus}Gi")),
                "nvidia.com/gpu": str(gpus), "vpc.amazonaws.com/efa": str(4 * gpus)}
    if gpus == 0:
        requests = {"cpu": str(j.get("cpu", 1)), "memory": "1Gi"}
    pods = int(j.get("pods", 1))
    job_ann = {"kueue.x-k8s.io/job-min-parallelism": str(j["minParallelism"])} if j.get("minParallelism") else {}
    pod_labels = {FAKE_POD_PHASE_LABEL: "Pending"} if j.get("notReady") else {}
    pod_spec: dict[str, Any] = {}
    if j.get("avoid_hosts"):
        pod_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME, "operator": "NotIn", "values": list(j["avoid_hosts"])}]}]}}}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": j["name"], "namespace": ns, "labels": labels, "annotations": job_ann},
        "spec": {
            "parallelism": pods, "completions": pods, "completionMode": "Indexed",
            "backoffLimit": 6,
            "template": {
                "metadata": {"annotations": ann, "labels": pod_labels},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, **pod_spec,
                         "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"requests": requests, "limits": {
                                             k: v for k, v in requests.items() if k in (
                                                 "nvidia.com/gpu", "vpc.amazonaws.com/efa")}}}]},
            },
        },
    }


def jobset_object(j: Mapping[str, Any]) -> dict[str, Any]:
    """A JobSet from a compact row, one replicated job (replicas 1) per entry of ``jobs``::

        {name: g, team: team-a, jobs: [{name: leader, pods: 1, gpus: 4, required: layer-2,
                                        group: lw}, {name: workers, pods: 3, required: layer-2,
                                        group: lw}]}
    Each entry is a :func:`job_object` row; ``group`` sets ``kueue.x-k8s.io/podset-group-name``."""
    ns = team_namespace(j.get("team", "team-a"))
    replicated = []
    for row in j["jobs"]:
        job = job_object({**row, "team": j.get("team", "team-a")})
        if row.get("group"):
            job["spec"]["template"]["metadata"]["annotations"][ANN + "group-name"] = row["group"]
        replicated.append({"name": row["name"], "replicas": 1, "template": {"spec": job["spec"]}})
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": j["name"], "namespace": ns,
                     "labels": {"kueue.x-k8s.io/queue-name": j.get("queue", f"{ns}-localqueue")}},
        "spec": {"replicatedJobs": replicated},
    }


def mpijob_object(j: Mapping[str, Any]) -> dict[str, Any]:
    """An MPIJob (kubeflow.org/v2beta1) from a compact row::

        {name: m, team: team-a, launcher: {gpus: 0}, workers: {pods: 4, gpus: 8, required: layer-2}}
    Each replica type's template is a :func:`job_object` row's (``pods`` = replicas)."""
    team = j.get("team", "team-a")
    ns = team_namespace(team)
    specs = {}
    for replica_type, key in (("Launcher", "launcher"), ("Worker", "workers")):
        if key in j:
            row = {"name": j["name"], "team": team, **j[key]}
            specs[replica_type] = {"replicas": int(row.get("pods", 1)),
                                   "template": job_object(row)["spec"]["template"]}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": j["name"], "namespace": ns,
                         "labels": {"kueue.x-k8s.io/queue-name": j.get("queue", f"{ns}-localqueue")}},
            "spec": {"slotsPerWorker": 8, "mpiReplicaSpecs": specs}}


def lws_object(j: Mapping[str, Any]) -> dict[str, Any]:
    """A LeaderWorkerSet from a compact row (one Workload per group, named ``<name>-<index>`` in
    the outcomes)::

        {name: s, team: team-a, replicas: 1, size: 4, gpus: 8, required: layer-2, group: lw,
         leader: {gpus: 4, required: layer-2}}
    ``leader`` (a :func:`job_object` row) adds a leader template; ``group`` names the PodSet
    group of leader and workers."""
    team = j.get("team", "team-a")
    ns = team_namespace(team)
    worker = job_object({"name": j["name"], "team": team, **{k: v for k, v in j.items() if k != "leader"}})
    lwt: dict[str, Any] = {"size": int(j.get("size", 1)), "workerTemplate": worker["spec"]["template"]}
    if j.get("leader") is not None:
        lwt["leaderTemplate"] = job_object({"name": j["name"], "team": team, **j["leader"]})["spec"]["template"]
    for template in (lwt["workerTemplate"], lwt.get("leaderTemplate")):
        if template is not None and j.get("group"):
            template["metadata"]["annotations"][ANN + "group-name"] = j["group"]
        if template is not None:
            template["spec"]["restartPolicy"] = "Always"
    # What LWS's own defaulting webhook would fill in (no LWS controller runs here; the CRD's
    # schema requires the rollout strategy type).
    lwt["restartPolicy"] = "RecreateGroupOnPodRestart"
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": j["name"], "namespace": ns,
                         "labels": {"kueue.x-k8s.io/queue-name": j.get("queue", f"{ns}-localqueue")}},
            "spec": {"replicas": int(j.get("replicas", 1)), "leaderWorkerTemplate": lwt,
                     "startupPolicy": "LeaderCreated", "networkConfig": {"subdomainPolicy": "Shared"},
                     "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                         "maxUnavailable": 1, "maxSurge": 0, "partition": 0}}}}


def _queued(j: Mapping[str, Any], team: str) -> dict[str, str]:
    labels = {"kueue.x-k8s.io/queue-name": j.get("queue", f"{team_namespace(team)}-localqueue")}
    if j.get("priority"):
        labels["kueue.x-k8s.io/priority-class"] = j["priority"]
    return labels


def _template(j: Mapping[str, Any], team: str, row: Mapping[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = job_object({"name": j["name"], "team": team, **row})["spec"]["template"]
    return template


def trainjob_object(j: Mapping[str, Any]) -> dict[str, Any]:
    """A TrainJob whose ClusterTrainingRuntime (named after it, :func:`trainjob_runtime`) has
    one trainer step ``node`` with the row's pod template; ``pods`` = ``spec.trainer.numNodes``::

        {name: t, team: team-a, pods: 3, gpus: 8, required: layer-2}"""
    team = j.get("team", "team-a")
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": j["name"], "namespace": team_namespace(team), "labels": _queued(j, team)},
            "spec": {"runtimeRef": {"name": j["name"]}, "trainer": {"numNodes": int(j.get("pods", 1))}}}


def trainjob_runtime(j: Mapping[str, Any]) -> dict[str, Any]:
    template = _template(j, j.get("team", "team-a"), {**j, "pods": 1})
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": j["name"]},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                {"name": "node", "replicas": 1, "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": template}}}]}}}}


def _ray_cluster_spec(j: Mapping[str, Any], team: str) -> dict[str, Any]:
    head = _template(j, team, {"gpus": 0, "cpu": 1, **(j.get("head") or {})})
    workers = _template(j, team, {k: v for k, v in j.items() if k not in ("head", "submitter")})
    for template in (head, workers):
        template["spec"]["restartPolicy"] = "Always"
    return {"headGroupSpec": {"rayStartParams": {}, "template": head},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": int(j.get("pods", 1)), "rayStartParams": {},
                                  "template": workers}]}


def ray_object(kind: str) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A RayCluster / RayJob / RayService from a compact row (``head``: the head's row, default
    1 CPU; ``pods``, ``gpus``, ``required`` ...: the worker group ``workers``)::

        {name: r, team: team-a, pods: 2, gpus: 8, required: layer-3}"""
    def build(j: Mapping[str, Any]) -> dict[str, Any]:
        team = j.get("team", "team-a")
        cluster = _ray_cluster_spec(j, team)
        spec: dict[str, Any] = {"RayCluster": cluster,
                                "RayJob": {"entrypoint": "python main.py", "shutdownAfterJobFinishes": True,
                                           "submissionMode": "K8sJobMode", "rayClusterSpec": cluster},
                                "RayService": {"serveConfigV2": "applications: []", "rayClusterConfig": cluster}}[kind]
        return {"apiVersion": "ray.io/v1", "kind": kind,
                "metadata": {"name": j["name"], "namespace": team_namespace(team), "labels": _queued(j, team)},
                "spec": spec}
    return build


def pod_objects(j: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Plain pods from a compact row: ``pods`` pods of a pod group named ``name`` (Kueue's
    pod-group labels, ranked by the label ``rank``), or, with ``pods: 1`` and no ``group: true``,
    one single pod named ``name``::

        {name: p, team: team-a, pods: 2, gpus: 8, required: layer-3}"""
    team = j.get("team", "team-a")
    count = int(j.get("pods", 1))
    single = count == 1 and not j.get("group")
    out = []
    for i in range(count):
        template = _template(j, team, {**j, "pods": 1})
        labels = {**_queued(j, team), **template["metadata"].get("labels", {})}
        annotations = dict(template["metadata"]["annotations"])
        if not single:
            labels.update({"kueue.x-k8s.io/pod-group-name": j["name"], "rank": str(i)})
            annotations.update({"kueue.x-k8s.io/pod-group-total-count": str(count),
                                "kueue.x-k8s.io/pod-group-pod-index-label": "rank"})
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": j["name"] if single else f"{j['name']}-{i}",
                                 "namespace": team_namespace(team), "labels": labels, "annotations": annotations},
                    "spec": template["spec"]})
    return out


def statefulset_object(j: Mapping[str, Any]) -> dict[str, Any]:
    """A StatefulSet of ``pods`` replicas of the row's pod template::

        {name: s, team: team-a, pods: 2, gpus: 8, required: layer-3}"""
    team = j.get("team", "team-a")
    template = _template(j, team, {**j, "pods": 1})
    template["spec"]["restartPolicy"] = "Always"
    template["metadata"]["labels"] = {**template["metadata"].get("labels", {}), "app": j["name"]}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": j["name"], "namespace": team_namespace(team), "labels": _queued(j, team)},
            "spec": {"replicas": int(j.get("pods", 1)), "serviceName": j["name"],
                     "selector": {"matchLabels": {"app": j["name"]}}, "template": template}}


OBJECTS: dict[str, tuple[Resource, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    "Job": (JOBS, job_object), "JobSet": (JOBSETS, jobset_object),
    "MPIJob": (MPIJOBS, mpijob_object), "LeaderWorkerSet": (LEADERWORKERSETS, lws_object),
    "TrainJob": (TRAINJOBS, trainjob_object), "RayJob": (RAYJOBS, ray_object("RayJob")),
    "RayCluster": (RAYCLUSTERS, ray_object("RayCluster")), "RayService": (RAYSERVICES, ray_object("RayService")),
    "StatefulSet": (STATEFULSETS, statefulset_object)}
# Scenario step key -> the kind it creates.
STEP_KINDS = {"jobset": "JobSet", "mpijob": "MPIJob", "lws": "LeaderWorkerSet", "trainjob": "TrainJob",
              "rayjob": "RayJob", "raycluster": "RayCluster", "rayservice": "RayService", "pods": "Pod",
              "statefulset": "StatefulSet"}


# ---------------------------------------------------------------------------- observation
@dataclass
class JobOutcome:
    name: str
    admitted: bool = False
    reason: str = ""
    message: str = ""
    hosts: dict[str, int] = field(default_factory=dict)          # hostname -> pods (assignment)
    preempted: bool = False                                      # Preempted=True seen at any time
    evictions: list[str] = field(default_factory=list)           # Evicted reasons seen
    rejected: str = ""                                           # creation denied by a webhook
    flavors: list[str] = field(default_factory=list)             # assigned flavors, when not the default
    preempted_by: str = ""                   # first Preempted=True: "<reason>: <message>", UIDs masked
    pod_sets: list[list[Any]] = field(default_factory=list)      # [name, count] of the Workload (new kinds)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"admitted": self.admitted}
        if not self.admitted:
            out["reason"], out["message"] = self.reason, self.message
        if self.hosts:
            out["hosts"] = dict(sorted(self.hosts.items()))
        if self.preempted:
            out["preempted"] = True
        if self.evictions:
            out["evictions"] = sorted(set(self.evictions))
        if self.rejected:
            out["rejected"] = self.rejected
        if self.flavors:
            out["flavors"] = self.flavors
        if self.preempted_by:
            out["preempted_by"] = self.preempted_by
        if self.pod_sets:
            out["pod_sets"] = self.pod_sets
        return out


_UIDS = re.compile(r"\(UID: [^,]*, JobUID: [^)]*\)")


def mask_uids(message: str) -> str:
    """A Preempted message without the preemptor's UIDs (they differ between the two runs)."""
    return _UIDS.sub("(UID: *, JobUID: *)", message)


def _cond(wl: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def assignment_hosts(wl: Mapping[str, Any], node_labels: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    adm = (wl.get("status") or {}).get("admission") or {}
    hosts: dict[str, int] = {}
    for psa in adm.get("podSetAssignments") or []:
        ta = psa.get("topologyAssignment")
        if not ta:
            continue
        levels, domains = decode_topology_assignment(ta)
        for d in domains:
            values = dict(zip(levels, d.values, strict=True))
            host = values.get(HOSTNAME)
            if host is None:  # lowest level is not hostname: key by the lowest value path
                host = "/".join(d.values)
            hosts[host] = hosts.get(host, 0) + d.count
    return hosts


@dataclass
class Run:
    """One engine on one control plane."""

    engine: str
    cluster: LocalCluster
    api: Api
    kube: client.ApiClient
    nodes: list[dict[str, Any]]
    namespaces: list[str]
    extra: Any = None
    jobsets: bool = False  # the JobSet CRD is installed (and the engine manages JobSets)
    kinds: tuple[str, ...] = ()  # keys of KINDS installed and managed
    outcomes: dict[str, JobOutcome] = field(default_factory=dict)
    deleted_nodes: list[dict[str, Any]] = field(default_factory=list)

    # ---- helpers ------------------------------------------------------------------------
    @property
    def node_labels(self) -> dict[str, dict[str, str]]:
        return {n["metadata"]["name"]: n["metadata"]["labels"] for n in self.nodes}

    def workloads(self) -> list[dict[str, Any]]:
        out = []
        for ns in self.namespaces:
            out += self.api.list(WORKLOADS, ns).get("items", [])
        return out

    def jobs(self) -> list[dict[str, Any]]:
        out = []
        for ns in self.namespaces:
            out += self.api.list(JOBS, ns).get("items", [])
        return out

    def workload_of(self, wls: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """job name -> its Workload (by ownerReference); a LeaderWorkerSet group's is
        ``<name>-<group index>``."""
        out: dict[str, dict[str, Any]] = {}
        for wl in wls:
            for ref in (wl["metadata"].get("ownerReferences") or []):
                if ref.get("kind") == "LeaderWorkerSet":
                    index = (wl["metadata"].get("annotations") or {}).get("kueue.x-k8s.io/component-workload-index")
                    out[f"{ref['name']}-{index}"] = dict(wl)
                elif ref.get("kind") in ("Job", "JobSet", "MPIJob", "StatefulSet", *NEW_KINDS):
                    out[ref["name"]] = dict(wl)
                elif ref.get("kind") == "Pod":  # a pod's (named by the pod), a pod group's (by the group)
                    out[ref["name"] if ref.get("controller") else wl["metadata"]["name"]] = dict(wl)
        return out

    def observe(self) -> None:
        by_job = self.workload_of(self.workloads())
        for name, out in self.outcomes.items():
            wl = by_job.get(name)
            if wl is None:
                continue
            qr = _cond(wl, "QuotaReserved") or {}
            out.admitted = qr.get("status") == "True" and bool((wl.get("status") or {}).get("admission"))
            fin = _cond(wl, "Finished") or {}
            if fin.get("status") == "True":
                out.admitted = False
                out.reason, out.message = "Finished", fin.get("reason", "")
            elif not out.admitted:
                out.reason, out.message = qr.get("reason", ""), qr.get("message", "")
            out.hosts = assignment_hosts(wl, self.node_labels) if out.admitted else {}
            used = sorted({f for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments")
                           or () for f in (psa.get("flavors") or {}).values()}) if out.admitted else []
            out.flavors = used if used and used != [FLAVOR] else []
            if (wl["metadata"].get("ownerReferences") or [{}])[0].get("kind") in (*NEW_KINDS, "Pod", "StatefulSet"):
                out.pod_sets = [[ps["name"], ps["count"]] for ps in (wl.get("spec") or {}).get("podSets") or ()]
            pre = _cond(wl, "Preempted") or {}
            if pre.get("status") == "True":
                out.preempted = True
                if not out.preempted_by:
                    out.preempted_by = f"{pre.get('reason', '')}: {mask_uids(pre.get('message', ''))}"
            ev = _cond(wl, "Evicted") or {}
            if ev.get("status") == "True" and ev.get("reason"):
                out.evictions.append(ev["reason"])
            # Both engines count evictions here too (Kueue v0.17), so one that began and ended
            # between two polls is not missed.
            stats = ((wl.get("status") or {}).get("schedulingStats") or {}).get("evictions") or ()
            out.evictions.extend(e["reason"] for e in stats if e.get("reason"))

    def settle(self, quiet_s: float = 2.0, timeout_s: float = 60.0) -> None:
        """Wait until each created job has a workload with a QuotaReserved condition and no
        workload changed for ``quiet_s``; observe on every poll (evictions are transient)."""
        deadline = time.monotonic() + timeout_s
        last_sig: Any = None
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            wls = self.workloads()
            by_job = self.workload_of(wls)
            sig = sorted((w["metadata"]["name"], w["metadata"]["resourceVersion"]) for w in wls)
            ready = all(n in by_job and _cond(by_job[n], "QuotaReserved") is not None
                        for n, o in self.outcomes.items() if not o.rejected)
            self.observe()
            now = time.monotonic()
            if sig != last_sig:
                last_sig, stable_since = sig, now
            elif ready and now - stable_since >= quiet_s:
                return
            time.sleep(0.25)
        raise AssertionError(f"{self.engine}: workloads did not settle within {timeout_s}s; logs in "
                             f"{self.cluster.logs}")

    # ---- steps --------------------------------------------------------------------------
    def create_job(self, row: Mapping[str, Any], kind: str = "Job") -> None:
        if row.get("avoid_nodes"):
            row = {**row, "avoid_hosts": [self.nodes[int(i)]["metadata"]["name"] for i in row["avoid_nodes"]]}
        if kind == "Pod":
            objs, resource = pod_objects(row), PODS
        else:
            resource, build = OBJECTS[kind]
            objs = [build(row)]
        if kind == "TrainJob":
            apply_objects(self.kube, [trainjob_runtime(row)])
        names = [row["name"]]
        if kind == "LeaderWorkerSet":
            names = [f"{row['name']}-{i}" for i in range(int(row.get("replicas", 1)))]
        for name in names:
            self.outcomes.setdefault(name, JobOutcome(name))
        try:
            for obj in objs:
                self.api.create(resource, obj, obj["metadata"]["namespace"])
        except client.ApiException as exc:
            import json

            try:
                rejected = json.loads(exc.body).get("message", "")[:300]
            except (ValueError, TypeError):
                rejected = str(exc.body)[:300]
            for name in names:  # every group of a LeaderWorkerSet
                self.outcomes[name].rejected = rejected

    def finish_job(self, name: str, team: str = "team-a") -> None:
        """Make the job's running pods succeed (KWOK stage), then wait for the Job to complete."""
        ns = team_namespace(team)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pods = [p for p in self.api.list(PODS, ns, labelSelector=f"job-name={name}").get("items", [])
                    if p.get("spec", {}).get("nodeName")]
            for p in pods:
                if FAKE_POD_PHASE_LABEL not in (p["metadata"].get("labels") or {}):
                    self.api.merge_patch(PODS, p["metadata"]["name"],
                                         {"metadata": {"labels": {FAKE_POD_PHASE_LABEL: "Succeeded"}}}, ns)
            job = self.api.get(JOBS, name, ns)
            if any(c.get("type") == "Complete" and c.get("status") == "True"
                   for c in (job.get("status") or {}).get("conditions") or []):
                return
            time.sleep(0.3)
        raise AssertionError(f"{self.engine}: job {name} did not complete (pods running?)")

    def fail_node(self, name: str) -> None:
        """A node disappears (deleted, as when HyperPod replaces an instance)."""
        node = next(n for n in self.nodes if n["metadata"]["name"] == name)
        self.deleted_nodes.append(node)
        self.api.delete(NODES, name)

    def wait_pods_running(self, name: str, team: str, count: int, timeout_s: float = 60) -> None:
        ns = team_namespace(team)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pods = self.api.list(PODS, ns, labelSelector=f"job-name={name}").get("items", [])
            running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            if len(running) >= count:
                return
            time.sleep(0.3)
        raise AssertionError(f"{self.engine}: {count} pods of {name} not Running within {timeout_s}s")

    def pod_nodes(self, name: str, team: str) -> dict[str, int]:
        ns = team_namespace(team)
        out: dict[str, int] = {}
        for p in self.api.list(PODS, ns, labelSelector=f"job-name={name}").get("items", []):
            node = (p.get("spec") or {}).get("nodeName")
            if node and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                out[node] = out.get(node, 0) + 1
        return out

    def occupy(self, node_index: int, gpus: int) -> None:
        """A pod outside any queue bound straight to a node (non-TAS usage both must subtract)."""
        node = self.nodes[node_index]["metadata"]["name"]
        requests = {"cpu": str(24 * gpus), "memory": f"{256 * gpus}Gi", "nvidia.com/gpu": str(gpus),
                    "vpc.amazonaws.com/efa": str(4 * gpus)}
        self.api.create(PODS, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"occupy-{node_index}", "namespace": "default",
                         "labels": {"toposched.dev/conformance": "occupy"}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": requests, "limits": {
                                         "nvidia.com/gpu": str(gpus), "vpc.amazonaws.com/efa": str(4 * gpus)}}}]},
        }, "default")

    def wait_occupied(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pods = self.api.list(PODS, "default", labelSelector="toposched.dev/conformance=occupy").get("items", [])
            if all((p.get("status") or {}).get("phase") == "Running" for p in pods):
                return
            time.sleep(0.3)
        raise AssertionError("occupying pods did not go Running")

    def cleanup(self, timeout_s: float = 60) -> None:
        for p in self.api.list(PODS, "default", labelSelector="toposched.dev/conformance=occupy").get("items", []):
            self.api.delete(PODS, p["metadata"]["name"], "default", gracePeriodSeconds=0)
        for ns in self.namespaces:
            kinds = [KINDS[k][1] for k in self.kinds if KINDS[k][1] is not PODS]  # pods go below
            for resource in [JOBS, *([JOBSETS] if self.jobsets else []), *kinds]:
                for job in self.api.list(resource, ns).get("items", []):
                    try:
                        self.api.delete(resource, job["metadata"]["name"], ns, propagationPolicy="Background")
                    except client.ApiException as exc:
                        if exc.status != 404:
                            raise
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            wls = self.workloads()
            pods = [p for ns in self.namespaces for p in self.api.list(PODS, ns).get("items", [])]
            for wl in wls:  # orphaned workloads (GC takes a moment): delete directly
                try:
                    self.api.delete(WORKLOADS, wl["metadata"]["name"], wl["metadata"]["namespace"])
                except client.ApiException as exc:
                    if exc.status != 404:
                        raise
            if not wls and not pods:
                break
            for p in pods:
                try:
                    self.api.delete(PODS, p["metadata"]["name"], p["metadata"]["namespace"], gracePeriodSeconds=0)
                except client.ApiException as exc:
                    if exc.status != 404:
                        raise
            time.sleep(0.3)
        else:
            raise AssertionError(f"{self.engine}: cleanup did not finish")
        if self.deleted_nodes:
            create_nodes(self.kube, self.deleted_nodes, FAKE_NODE_LABEL)
            self.deleted_nodes.clear()
            self._wait_nodes_ready()
        self.outcomes = {}
        time.sleep(1.0)  # let both engines' caches see the empty cluster

    def queue_status(self) -> dict[str, dict[str, Any]]:
        """What ``kubectl get clusterqueue -o yaml`` shows of each team ClusterQueue's status."""
        from scheduler.k8s.informer import CLUSTER_QUEUES

        out = {}
        for ns in self.namespaces:
            status = self.api.get(CLUSTER_QUEUES, f"{ns}-clusterqueue").get("status") or {}
            active = _cond({"status": status}, "Active") or {}
            out[f"{ns}-clusterqueue"] = {
                "active": [active.get("status"), active.get("reason")],
                **{k: status.get(k) for k in ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads",
                                              "flavorsUsage")},
                # only when written (fair sharing on): older recordings have no such key
                **({"fairSharing": status["fairSharing"]} if "fairSharing" in status else {})}
        return out

    def settled_queue_status(self, quiet_s: float = 1.5, timeout_s: float = 20) -> dict[str, dict[str, Any]]:
        """The queue status once it stopped changing (each engine writes it a moment after the
        workload decisions it reflects)."""
        deadline = time.monotonic() + timeout_s
        last, since = self.queue_status(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.queue_status()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
        return last

    def _wait_nodes_ready(self, timeout_s: float = 30) -> None:
        # thousands of nodes (benchmarks) take KWOK and the node-lifecycle controller longer
        wait_nodes_settled(self.kube, [n["metadata"]["name"] for n in self.nodes],
                           max(timeout_s, len(self.nodes) / 10))

    def stop(self) -> None:
        self.cluster.stop()


def ensure_kueue_prerequisites() -> None:
    """Everything runs build or download on first use (binaries, CRD files, Kueue's metrics
    certificate), done once up front so runs started side by side never build the same thing
    at the same time."""
    from scheduler.devcluster import binaries
    from scheduler.devcluster.kueue import ensure_kueue, ensure_metrics_cert

    binaries.ensure_k8s_binaries()
    binaries.ensure_kwok()
    binaries.etcd_binary()
    binaries.kueue_crd_files()
    ensure_kueue()
    ensure_metrics_cert()
    for crd_file in (jobset_crd_file, lws_crd_file, mpijob_crd_file):
        crd_file()
    for kind in KINDS.values():
        kind[2]()


def start_run(engine: str, directory: Path, description: Mapping[str, Any], queues: Mapping[str, Any],
              controller_args: tuple[str, ...] = (), jobsets: bool = False,
              kueue_config: Mapping[str, Any] | None = None, kinds: tuple[str, ...] = (),
              cluster_options: Mapping[str, Any] | None = None) -> Run:
    """A fresh control plane with the group's nodes and queues, and one engine. ``jobsets``:
    install the JobSet CRD first and let the engine manage JobSets (Kueue's jobset
    integration; toposched's is always on). No JobSet controller runs: admission is what the
    scenarios compare, and it needs only the JobSet object. ``kueue_config``: the group's
    scheduling settings (``fairSharing``, ``waitForPodsReady``, ``featureGates``, ...), merged
    into Kueue's Configuration and given to toposched as ``--kueue-config``: one file, two
    engines, as an admin would run them. ``cluster_options``: keyword arguments of the
    control plane (``LocalCluster``: ``node_lease_s``, ``feature_gates``, ...), for benchmarks."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}")
    from scheduler.devcluster.kueue import KueueCluster

    # Both engines get the same control plane: the API server with its version stamped in,
    # which Kueue needs (see KueueCluster).
    cluster: LocalCluster = KueueCluster(directory, **dict(cluster_options or {})).start()
    try:
        kube = cluster.api_client()
        api = Api(kube)
        nodes = generate_nodes(description)
        create_nodes_in_parallel(cluster, nodes)
        extra: Any = None
        objs = queue_objects(queues)
        if jobsets or "trainjob" in kinds:  # Kueue's TrainJob controller owns the Trainer's JobSets
            _install_jobset_crd(kube)
        for kind in kinds:
            for path in KINDS[kind][2]():
                _install_crd(kube, path)
        if engine == "kueue":
            from scheduler.devcluster.kueue import start_kueue

            frameworks = ("batch/job", *(("jobset.x-k8s.io/jobset",) if jobsets else ()),
                          *(KINDS[k][3] for k in kinds),
                          *(("pod",) if "statefulset" in kinds and "pod" not in kinds else ()))
            extra = start_kueue(cluster, integrations=frameworks, config_overlay=kueue_config)
            apply_objects(kube, objs)
        else:
            from scheduler.devcluster.stack import StackPorts, start_toposched

            apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "toposched-system"}}])
            apply_objects(kube, objs)
            config_file = _write_kueue_config(directory, kueue_config) if kueue_config else None
            start_toposched(cluster, StackPorts.dynamic(), controller_args=controller_args, kueue_config=config_file)
        namespaces = [team_namespace(t) for t in sorted(queues.get("teams") or {})]
        run = Run(engine, cluster, api, kube, nodes, namespaces, extra, jobsets, tuple(kinds))
        run._wait_nodes_ready()
        # a team marked ``underCycle`` sits under a cohort cycle: Kueue never activates it
        _wait_queues_active(api, [f"{team_namespace(t)}-clusterqueue" for t, spec in sorted(queues["teams"].items())
                                  if not spec.get("underCycle")], engine, timeout_s=max(30, len(nodes) / 50))
    except BaseException:
        cluster.stop()
        raise
    return run


def create_nodes_in_parallel(cluster: LocalCluster, nodes: list[dict[str, Any]], workers: int = 8) -> None:
    """Create the fake nodes, ``workers`` requests at a time once there are many (5,000 one at a
    time take minutes on this machine); one API client per worker."""
    from concurrent.futures import ThreadPoolExecutor

    if len(nodes) < 200:
        create_nodes(cluster.api_client(), nodes, FAKE_NODE_LABEL)
        return
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda chunk: create_nodes(cluster.api_client(), chunk, FAKE_NODE_LABEL),
                      [nodes[i::workers] for i in range(workers)]))


def _write_kueue_config(directory: Path, overlay: Mapping[str, Any]) -> Path:
    path = directory / "kueue-config.yaml"
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **overlay}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _install_jobset_crd(kube: client.ApiClient) -> None:
    _install_crd(kube, jobset_crd_file())


def _install_crd(kube: client.ApiClient, path: Path) -> None:
    crds = list(yaml.safe_load_all(path.read_text()))
    apply_objects(kube, crds)
    wait_crds_established(kube, crds)


def _wait_queues_active(api: Api, cqs: list[str], engine: str, timeout_s: float = 30) -> None:
    """Both engines mark a ClusterQueue Active once its flavors/topology are known."""
    from scheduler.k8s.informer import CLUSTER_QUEUES as cq_res

    deadline = time.monotonic() + timeout_s
    waiting = list(cqs)
    while time.monotonic() < deadline:
        waiting = []
        for name in cqs:
            try:
                cq = api.get(cq_res, name)
            except client.ApiException:
                waiting.append(name)
                continue
            if (_cond(cq, "Active") or {}).get("status") != "True":
                waiting.append(name)
        if not waiting:
            return
        time.sleep(0.3)
    raise AssertionError(f"ClusterQueues {waiting} not Active under {engine} within {timeout_s}s")


# ---------------------------------------------------------------------------- scenario
StepFn = Callable[[Run, Mapping[str, Any]], None]


def run_scenario(run: Run, scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Run the steps; returns {job: outcome dict} plus ``_steps``: outcomes after each step."""
    snapshots: list[dict[str, Any]] = []
    failed: list[str] = []
    for step in scenario["steps"]:
        if "job" in step:
            run.create_job(step["job"])
        elif set(step) & set(STEP_KINDS):
            [key] = set(step) & set(STEP_KINDS)
            run.create_job(step[key], kind=STEP_KINDS[key])
        elif "jobs" in step:  # several at once (same cycle)
            for row in step["jobs"]:
                run.create_job(row)
        elif "finish" in step:
            team = step.get("team", "team-a")
            run.finish_job(step["finish"], team)
        elif "fail_node_of" in step:
            # the first host (sorted) of the named job's assignment
            job = step["fail_node_of"]
            hosts = sorted(run.outcomes[job].hosts)
            run.wait_pods_running(job, step.get("team", "team-a"), sum(run.outcomes[job].hosts.values()))
            run.fail_node(hosts[0])
            failed.append(hosts[0])
        elif "running" in step:
            r = step["running"]
            run.wait_pods_running(r["job"], r.get("team", "team-a"), int(r["pods"]))
        elif "occupy" in step:
            run.occupy(int(step["occupy"]["node"]), int(step["occupy"].get("gpus", 8)))
            run.wait_occupied()
        elif "sleep" in step:
            time.sleep(float(step["sleep"]))
        elif "stop" in step:  # {team: team-a, policy: Hold | HoldAndDrain | None}
            from scheduler.k8s.informer import CLUSTER_QUEUES

            cq = f"{team_namespace(step['stop']['team'])}-clusterqueue"
            run.api.merge_patch(CLUSTER_QUEUES, cq, {"spec": {"stopPolicy": step["stop"]["policy"]}})
        else:
            raise ValueError(f"unknown step {step}")
        default_quiet = 0.5 if "occupy" in step else scenario.get("quiet", 2.0)
        run.settle(quiet_s=float(step.get("quiet", default_quiet)))
        snapshots.append({n: o.to_dict() for n, o in run.outcomes.items()})
    result = {n: o.to_dict() for n, o in run.outcomes.items()}
    result["_steps"] = snapshots
    result["_queues"] = run.settled_queue_status()
    if failed:
        result["_failed_nodes"] = failed
    return result
