"""The Kubeflow Trainer v2.2.0 and KubeRay ray-operator v1.6.0 peers (built from the Go module
proxy at the versions Kueue v0.17.0's go.mod requires) run on a real local control plane and do
what Kueue's integrations rely on: a suspended TrainJob gets a suspended JobSet and no pods, an
unsuspended one the JobSet its runtime describes; a RayCluster gets its head and worker pods, a
suspended one none; a suspended RayJob no RayCluster. The examples in examples/jobs/ are accepted
by the peers' own webhooks and schemas. toposched does not run here: these are the peers the
TrainJob and Ray integrations are tested against (tests/e2e/test_trainjob_ray.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.ray import RAYCLUSTER
from scheduler.adapter.kinds.trainjob import TRAINJOB
from scheduler.adapter.kinds.workloads import workload_pod_sets
from scheduler.devcluster.apply import apply_objects, load_documents
from scheduler.devcluster.binaries import repo_root
from scheduler.devcluster.controlplane import LocalCluster
from scheduler.devcluster.kuberay import start_kuberay
from scheduler.devcluster.trainer import start_trainer, torch_runtime

pytestmark = pytest.mark.cluster
NS = "hyperpod-ns-team-a"
EXAMPLES = repo_root() / "examples" / "jobs"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    started = LocalCluster(Path(tmp_path_factory.mktemp("peers"))).start()
    try:
        start_trainer(started)
        start_kuberay(started)
        apply_objects(started.api_client(), [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
        yield started
    finally:
        started.stop()


def wait(predicate: Callable[[], Any], timeout_s: float = 60, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"{what}: not met within {timeout_s}s")


def custom(cluster: LocalCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


def pods(cluster: LocalCluster, selector: str) -> list[client.V1Pod]:
    return list(client.CoreV1Api(cluster.api_client()).list_namespaced_pod(NS, label_selector=selector).items)


def jobsets(cluster: LocalCluster, name: str) -> list[dict[str, Any]]:
    items = custom(cluster).list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets")["items"]
    return [j for j in items if j["metadata"]["name"] == name]


def created_trainjob(cluster: LocalCluster, name: str) -> dict[str, Any]:
    got: dict[str, Any] = custom(cluster).get_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS,
                                                                        "trainjobs", name)
    return got


def rendered(trainjob: dict[str, Any], runtime_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """toposched's pod sets of a TrainJob, its runtime given as the controller's informer would."""
    return workload_pod_sets(TRAINJOB, trainjob, lambda *_: {"spec": runtime_spec})


def same_pod_sets(ours: list[dict[str, Any]], real: list[dict[str, Any]]) -> bool:
    """Names, counts and topology requests equal (the templates differ by what the Trainer adds:
    env, labels)."""
    def key(pod_sets: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(ps["name"], ps["count"], ps.get("topologyRequest")) for ps in pod_sets]
    assert key(ours) == key(real)
    return True


def test_a_suspended_trainjob_has_a_suspended_jobset_and_no_pods_then_runs_when_resumed(cluster: LocalCluster) -> None:
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "tj-suspend", "namespace": NS},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": True,
                         "trainer": {"numNodes": 3}}}
    custom(cluster).create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", trainjob)
    [jobset] = wait(lambda: jobsets(cluster, "tj-suspend"), what="the TrainJob's JobSet")
    assert jobset["spec"]["suspend"] is True
    assert [(r["name"], r["replicas"], r["template"]["spec"]["parallelism"])
            for r in jobset["spec"]["replicatedJobs"]] == [("node", 1, 3)]
    assert same_pod_sets(rendered(created_trainjob(cluster, "tj-suspend"), torch_runtime()["spec"]),
                         workload_pod_sets(JOBSET, jobset))
    time.sleep(2)
    assert pods(cluster, "jobset.sigs.k8s.io/jobset-name=tj-suspend") == []
    custom(cluster).patch_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", "tj-suspend",
                                                   {"spec": {"suspend": False}})
    wait(lambda: len(pods(cluster, "jobset.sigs.k8s.io/jobset-name=tj-suspend")) == 3, 90,
         "the 3 pods of the resumed TrainJob")


def test_the_trainjob_example_is_accepted_and_rendered_with_its_topology_annotation(cluster: LocalCluster) -> None:
    docs = load_documents(EXAMPLES / "trainjob-torch.yaml")
    runtime, trainjob = docs
    apply_objects(cluster.api_client(), [runtime])
    trainjob = {**trainjob, "spec": {**trainjob["spec"], "suspend": True}}  # no Kueue here to suspend it
    custom(cluster).create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", trainjob)
    [jobset] = wait(lambda: jobsets(cluster, "llama-finetune"), what="the example TrainJob's JobSet")
    [node] = jobset["spec"]["replicatedJobs"]
    assert (node["name"], node["replicas"], node["template"]["spec"]["parallelism"]) == ("node", 1, 4)
    pod_template = node["template"]["spec"]["template"]
    assert pod_template["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == \
        "topology.k8s.aws/network-node-layer-3"
    [container] = [c for c in pod_template["spec"]["containers"] if c["name"] == "node"]
    assert container["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    # toposched's rendering of the TrainJob = the real Trainer's JobSet, pod set by pod set
    ours = rendered(created_trainjob(cluster, "llama-finetune"), runtime["spec"])
    assert same_pod_sets(ours, workload_pod_sets(JOBSET, jobset))
    [ours_node] = ours
    assert ours_node["template"]["spec"]["containers"][0]["resources"] == container["resources"]


def test_a_raycluster_gets_head_and_workers_and_a_suspended_one_none(cluster: LocalCluster) -> None:
    [example] = load_documents(EXAMPLES / "raycluster.yaml")
    running = {**example, "metadata": {"name": "rc-run", "namespace": NS}}
    suspended = {**example, "metadata": {"name": "rc-held", "namespace": NS},
                 "spec": {**example["spec"], "suspend": True}}
    for obj in (running, suspended):
        custom(cluster).create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", obj)

    def kinds(name: str) -> list[str]:
        return sorted(p.metadata.labels.get("ray.io/node-type", "") for p in pods(cluster, f"ray.io/cluster={name}"))

    assert wait(lambda: kinds("rc-run") == ["head"] + ["worker"] * 4, 60, "head + 4 workers") is True
    # the pod sets toposched charges are the pods KubeRay creates: head 1, group gpu 4
    created = custom(cluster).get_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", "rc-run")
    by_group: dict[str, int] = {}
    for p in pods(cluster, "ray.io/cluster=rc-run"):
        group = "head" if p.metadata.labels["ray.io/node-type"] == "head" else p.metadata.labels["ray.io/group"]
        by_group[group] = by_group.get(group, 0) + 1
    charged = {ps["name"]: ps["count"] for ps in workload_pod_sets(RAYCLUSTER, created)}
    assert charged == by_group == {"head": 1, "gpu": 4}
    worker = next(p for p in pods(cluster, "ray.io/cluster=rc-run")
                  if p.metadata.labels["ray.io/node-type"] == "worker")
    assert worker.metadata.labels["ray.io/group"] == "gpu"
    assert worker.metadata.annotations["kueue.x-k8s.io/podset-required-topology"] == \
        "topology.k8s.aws/network-node-layer-3"
    time.sleep(2)
    assert kinds("rc-held") == []


def test_a_suspended_rayjob_creates_no_cluster(cluster: LocalCluster) -> None:
    [example] = load_documents(EXAMPLES / "rayjob.yaml")
    held = {**example, "spec": {**example["spec"], "suspend": True}}
    custom(cluster).create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", held)
    # KubeRay v1.6.0 walks a new suspended RayJob through Initializing and Suspending before
    # Suspended; a cluster created on any of those steps would be work outside quota
    seen: list[str] = []
    clusters_seen: set[str] = set()

    def suspended() -> bool:
        status = custom(cluster).get_namespaced_custom_object(
            "ray.io", "v1", NS, "rayjobs", "ray-batch-inference").get("status", {}).get("jobDeploymentStatus")
        if status and (not seen or seen[-1] != status):
            seen.append(status)
        clusters = custom(cluster).list_namespaced_custom_object("ray.io", "v1", NS, "rayclusters")["items"]
        clusters_seen.update(c["metadata"]["name"] for c in clusters
                             if c["metadata"]["name"].startswith("ray-batch-inference"))
        return status == "Suspended"

    wait(suspended, 60, "the RayJob Suspended")
    assert set(seen) <= {"Initializing", "Suspending", "Suspended"}, seen
    assert not clusters_seen, clusters_seen
