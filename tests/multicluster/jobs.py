"""Objects and waits shared by the MultiKueue tests: the jobs a tenant submits on the manager
and the reads of a Workload's conditions on either side."""

from __future__ import annotations

from typing import Any

from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.k8s.informer import WORKLOADS, Api
from scheduler.kube.jobs import resource_of

NS = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
L3 = "topology.k8s.aws/network-node-layer-3"
MANAGED_BY = "kueue.x-k8s.io/multikueue"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
FAKE_PHASE = "toposched.dev/fake-phase"
JOBSETS = resource_of(JOBSET)


def batch_job(name: str, pods: int, gpus: int, topology: str | None = L3, priority: str | None = None
              ) -> dict[str, Any]:
    """A batch Job for the manager: queued, handed to MultiKueue by ``spec.managedBy``."""
    labels = {"kueue.x-k8s.io/queue-name": QUEUE}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    annotations = {"kueue.x-k8s.io/podset-required-topology": topology} if topology else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"managedBy": MANAGED_BY, "parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "suspend": True,
                     "template": {"metadata": {"annotations": annotations}, "spec": {
                         "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox", "resources": {
                             "requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


def jobset(name: str, replicas: int, pods: int, gpus: int, topology: str | None = L3) -> dict[str, Any]:
    job = batch_job("x", pods, gpus, topology)["spec"]
    del job["managedBy"], job["suspend"]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {"managedBy": MANAGED_BY, "suspend": True,
                     "replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": job}}]}}


def condition(obj: dict[str, Any] | None, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or ())


def workload_of(api: Api, owner_kind: str, owner: str) -> dict[str, Any] | None:
    """The Workload that a job owns on this cluster (the manager's), or None."""
    for wl in api.list(WORKLOADS, NS)["items"]:
        if any(r.get("kind") == owner_kind and r.get("name") == owner
               for r in wl["metadata"].get("ownerReferences") or ()):
            return dict(wl)
    return None


def remote_workload(api: Api, name: str) -> dict[str, Any] | None:
    """The manager's Workload ``name`` as copied to a worker (same name), or None."""
    for wl in api.list(WORKLOADS, NS)["items"]:
        if wl["metadata"]["name"] == name:
            return dict(wl)
    return None
