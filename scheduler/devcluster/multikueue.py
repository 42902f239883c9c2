"""MultiKueue on local control planes: a manager running the real Kueue v0.17.0 and workers
(toposched or Kueue) it reaches through kubeconfig Secrets, as an admin sets them up
(docs/multicluster.md).

- ``manager_identity(worker)``: the user the manager acts as on a worker: a client certificate
  of its own (not in ``system:masters``), bound on the worker to the ClusterRole Kueue's
  ``create-multikueue-kubeconfig.sh`` grants, and a kubeconfig with the data inline (Kueue
  v0.17 refuses file paths, tokenFile and insecure TLS in a MultiKueueCluster's kubeconfig).
- ``register_workers(manager, workers)``: on the manager, per worker a kubeconfig Secret in
  ``kueue-system`` and a MultiKueueCluster; one MultiKueueConfig listing them and the
  ``kueue.x-k8s.io/multikueue`` AdmissionCheck that names it.
- ``MANAGER_OVERLAY``: the manager Kueue's Configuration additions (its ``multiKueue`` section).
- ``MANAGER_FEATURE_GATES``: the manager's Kubernetes gates (the Job validation Kueue v0.17.0 knows).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from scheduler.devcluster import certs
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.controlplane import LocalCluster

MANAGER_USER = "multikueue-manager"  # the manager's identity on every local worker
ADMISSION_CHECK = "multikueue"
MULTIKUEUE_CONFIG = "multikueue"
CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"
SECRET_NAMESPACE = "kueue-system"  # where the manager's Kueue reads the Secrets (its namespace)
# The manager's Configuration: short garbage collection so a test sees orphans go; the origin
# label value names this manager on the workers (Kueue's default is "multikueue").
MANAGER_OVERLAY: dict[str, Any] = {"multiKueue": {"gcInterval": "30s", "origin": "multikueue",
                                                  "workerLostTimeout": "5m"}}
# The manager's control plane validates Jobs as Kubernetes 1.35 did. Since 1.36
# (MutableSchedulingDirectivesForSuspendedJobs, beta, on) a suspended Job's template may change
# only while its status.active is 0. The manager's Job status is a copy of the worker's, so a job
# evicted while running keeps active=1 on the manager whenever the remote Job is removed before a
# copy with 0 arrives; Kueue v0.17.0 then retries "restore info: ... field is immutable" forever
# and the Workload keeps its quota. Kueue fixed this in v0.17.4 (kubernetes-sigs/kueue#11649);
# the Go module proxy here serves v0.17.0 only. A worker cannot prevent it: the race is the
# manager's (seen in CI: the eviction test held the manager's quota for 60 s on 2026-12-07).
MANAGER_FEATURE_GATES: dict[str, bool] = {"MutableSchedulingDirectivesForSuspendedJobs": False}


def _rule(group: str, resources: Sequence[str], verbs: Sequence[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}


_OBJECT_VERBS = ("create", "delete", "get", "list", "watch")
# What Kueue's site/static/examples/multikueue/create-multikueue-kubeconfig.sh (v0.17.0) grants
# the manager on a worker, for the kinds the local clusters serve.
MANAGER_RULES: list[dict[str, Any]] = [
    _rule("batch", ("jobs",), _OBJECT_VERBS), _rule("batch", ("jobs/status",), ("get",)),
    _rule("jobset.x-k8s.io", ("jobsets",), _OBJECT_VERBS), _rule("jobset.x-k8s.io", ("jobsets/status",), ("get",)),
    _rule("kueue.x-k8s.io", ("workloads",), _OBJECT_VERBS),
    _rule("kueue.x-k8s.io", ("workloads/status",), ("get", "patch", "update")),
    _rule("", ("pods",), _OBJECT_VERBS), _rule("", ("pods/status",), ("get",)),
]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def manager_identity(worker: LocalCluster, user: str = MANAGER_USER) -> bytes:
    """Issue ``user``'s client certificate on ``worker``, bind it to :data:`MANAGER_RULES` and
    return the kubeconfig the manager's Secret holds (server, CA and key inline)."""
    ca = certs.KeyPair(worker.pki / "ca.crt", worker.pki / "ca.key")
    pair = certs.issue(ca, worker.pki, user, user, client=True)
    role = f"{user}-role"
    apply_objects(worker.api_client(), [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
         "rules": MANAGER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ])
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "worker", "cluster": {
            "server": worker.server, "certificate-authority-data": _b64(ca.cert.read_bytes())}}],
        "users": [{"name": user, "user": {"client-certificate-data": _b64(pair.cert.read_bytes()),
                                          "client-key-data": _b64(pair.key.read_bytes())}}],
        "contexts": [{"name": "worker", "context": {"cluster": "worker", "user": user}}],
        "current-context": "worker",
    }
    return yaml.safe_dump(config, sort_keys=False).encode()


def worker_objects(name: str, kubeconfig: bytes) -> list[dict[str, Any]]:
    """The manager's objects for one worker: its kubeconfig Secret and MultiKueueCluster."""
    secret = f"{name}-kubeconfig"
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret, "namespace": SECRET_NAMESPACE},
         "data": {"kubeconfig": _b64(kubeconfig)}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": name},
         "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}},
    ]


def register_workers(manager: LocalCluster, workers: Mapping[str, bytes]) -> None:
    """On the manager: each worker's Secret and MultiKueueCluster (in the mapping's order, which
    is the MultiKueueConfig's), the MultiKueueConfig and the AdmissionCheck."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SECRET_NAMESPACE}}]
    for name, kubeconfig in workers.items():
        objects += worker_objects(name, kubeconfig)
    objects += [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": MULTIKUEUE_CONFIG},
         "spec": {"clusters": list(workers)}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": ADMISSION_CHECK},
         "spec": {"controllerName": CONTROLLER_NAME, "parameters": {
             "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG}}},
    ]
    apply_objects(manager.api_client(), objects)


def with_admission_check(queues: Iterable[Mapping[str, Any]], check: str = ADMISSION_CHECK) -> list[dict[str, Any]]:
    """The manager's copy of a queue set: each ClusterQueue gets the MultiKueue admission check
    (quota is checked on the manager, topology on the worker)."""
    out: list[dict[str, Any]] = []
    for obj in queues:
        obj = dict(obj)
        if obj.get("kind") == "ClusterQueue":
            obj["spec"] = {**obj.get("spec", {}), "admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}
        out.append(obj)
    return out
