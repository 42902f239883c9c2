"""The manager's MultiKueue objects -> the dispatcher's plain values (issue 43 item 2).

Reads Kueue v0.17.0's v1beta2 objects on the manager: AdmissionChecks with controllerName
``kueue.x-k8s.io/multikueue`` and their MultiKueueConfig (``spec.parameters``), Workloads'
``status.admissionChecks``, ``clusterName`` and ``nominatedClusterNames``; MultiKueueClusters'
toposched annotations (which worker has a toposched gRPC endpoint, and the Secret with its
credentials); and a worker's ``Place`` answer, reduced to "fits, in how many domains".
Every value is read as untrusted: a malformed field makes the Workload or worker unaskable,
never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scheduler.adapter.backlog import spec_demand
from scheduler.adapter.objects import FINISHED, condition_true, has_reservation
from scheduler.core.beyond.dispatch import WorkerAnswer
from scheduler.core.kueue.mk_dispatch import ALL_AT_ONCE, TOPOSCHED, ManagerWorkload
from scheduler.core.workload import WorkloadSpec

Obj = Mapping[str, Any]
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"  # kueue.MultiKueueControllerName
KUEUE_GROUP = "kueue.x-k8s.io"
# On a MultiKueueCluster (cluster-scoped, written by the manager's admins only): the worker's
# toposched gRPC endpoint and the Secret, in the dispatcher's own namespace, with its
# credentials (ca.crt, and tls.crt + tls.key and/or token). Without the endpoint the worker is
# treated as Kueue's Incremental treats every worker.
ENDPOINT_ANNOTATION = "toposched.io/grpc-endpoint"
SECRET_ANNOTATION = "toposched.io/grpc-secret"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_ENDPOINT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]{0,251}[A-Za-z0-9])?):([0-9]{1,5})$")


def multikueue_checks(admission_checks: Sequence[Obj]) -> dict[str, str]:
    """AdmissionCheck name -> its MultiKueueConfig's name, for MultiKueue's checks only."""
    out: dict[str, str] = {}
    for ac in admission_checks:
        spec = ac.get("spec") or {}
        params = spec.get("parameters") or {}
        name = (ac.get("metadata") or {}).get("name")
        if (spec.get("controllerName") == MULTIKUEUE_CONTROLLER and isinstance(name, str)
                and params.get("apiGroup") == KUEUE_GROUP and params.get("kind") == "MultiKueueConfig"
                and isinstance(params.get("name"), str)):
            out[name] = params["name"]
    return out


def config_clusters(configs: Sequence[Obj]) -> dict[str, tuple[str, ...]]:
    """MultiKueueConfig name -> its clusters in the admin's order (duplicates dropped)."""
    out: dict[str, tuple[str, ...]] = {}
    for cfg in configs:
        name = (cfg.get("metadata") or {}).get("name")
        clusters = (cfg.get("spec") or {}).get("clusters") or []
        if isinstance(name, str) and isinstance(clusters, list):
            out[name] = tuple(dict.fromkeys(c for c in clusters if isinstance(c, str)))
    return out


def _str_list(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def manager_workload(wl: Obj, checks: Mapping[str, str]) -> tuple[ManagerWorkload, str | None]:
    """What the dispatchers read of a Workload, and the name of its MultiKueue check."""
    meta = wl.get("metadata") or {}
    status = wl.get("status") or {}
    state: str | None = None
    check: str | None = None
    for entry in status.get("admissionChecks") or []:
        if isinstance(entry, Mapping) and entry.get("name") in checks:
            check, state = str(entry["name"]), str(entry.get("state"))
            break
    cluster = status.get("clusterName")
    return ManagerWorkload(
        key=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        deleted=bool(meta.get("deletionTimestamp")),
        finished=condition_true(dict(wl), FINISHED),
        quota_reserved=has_reservation(dict(wl)),
        mk_check_state=state,
        cluster_name=cluster if isinstance(cluster, str) and cluster else None,
        nominated=_str_list(status.get("nominatedClusterNames")),
    ), check


@dataclass(frozen=True)
class WorkerEndpoint:
    cluster: str
    target: str  # host:port
    secret: str | None


def worker_endpoints(clusters: Sequence[Obj]) -> tuple[dict[str, WorkerEndpoint], dict[str, str]]:
    """MultiKueueClusters -> the toposched endpoints; and, per cluster, why an annotation was
    refused (the worker is then treated as one without an endpoint, and the message logged)."""
    found: dict[str, WorkerEndpoint] = {}
    refused: dict[str, str] = {}
    for mkc in clusters:
        meta = mkc.get("metadata") or {}
        name, ann = meta.get("name"), meta.get("annotations") or {}
        target, secret = ann.get(ENDPOINT_ANNOTATION), ann.get(SECRET_ANNOTATION)
        if not isinstance(name, str) or target is None:
            continue
        if not isinstance(target, str) or not _ENDPOINT.match(target) or not 0 < int(target.rsplit(":", 1)[1]) < 65536:
            refused[name] = (f"metadata.annotations[{ENDPOINT_ANNOTATION}]: must be HOST:PORT (a DNS name or an "
                             "IP address and a port 1-65535)")
            continue
        if secret is not None and (not isinstance(secret, str) or not _DNS_SUBDOMAIN.match(secret)):
            refused[name] = (f"metadata.annotations[{SECRET_ANNOTATION}]: must be the name of a Secret in the "
                             "dispatcher's namespace (a DNS subdomain)")
            continue
        found[name] = WorkerEndpoint(name, target, secret)
    return found, refused


def requested_level(spec: WorkloadSpec, levels: Sequence[str]) -> str | None:
    """The level compactness is judged at: the first pod set's required, else preferred,
    level; without one, the narrowest level above the hostname (HyperPod's layer 3)."""
    for ps in spec.pod_sets:
        if ps.topology is not None and (ps.topology.required or ps.topology.preferred):
            return ps.topology.required or ps.topology.preferred
    inner = [lv for lv in levels if lv != "kubernetes.io/hostname"]
    return inner[-1] if inner else None


def demand(spec: WorkloadSpec) -> int:
    """The job's size in the unit free capacity is counted in: GPUs when it asks for any, else pods."""
    asks = spec_demand(spec)
    return asks.gpus if asks.gpus > 0 else asks.pods


def answer(cluster: str, fits: bool, pod_set_domains: Sequence[Mapping[str, Sequence[str]]], level: str | None,
           free: int, backlog: int = 0) -> WorkerAnswer:
    """A Place answer -> fits and the number of distinct domains of ``level`` the pod sets
    touch (a placement without that level, or none, counts as spanning every pod set's).
    ``backlog``: the worker's own queued demand in the same unit as ``free`` (0: not reported)."""
    backlog = max(0, backlog)
    if not fits:
        return WorkerAnswer(cluster, False, 0, free, backlog=backlog)
    values: set[str] = set()
    for per_level in pod_set_domains:
        values.update(per_level.get(level, ()) if level is not None else ())
    return WorkerAnswer(cluster, True, len(values) if values else max(1, len(pod_set_domains)), free,
                        backlog=backlog)


def with_whole_capacity(now: WorkerAnswer, whole: WorkerAnswer, capacity: int) -> WorkerAnswer:
    """``now`` with what the worker answers on its whole healthy capacity (``whole``: the same
    question with nothing admitted) and that capacity, in the answers' unit."""
    return replace(now, ever_fits=whole.fits, ever_domains=whole.domains, capacity=max(0, capacity))


def dispatcher_name(configuration: Obj) -> str:
    """The manager's Kueue Configuration ``multiKueue.dispatcherName``, with Kueue v0.17.0's
    default (apis/config/v1beta2/defaults.go: AllAtOnce)."""
    mk = configuration.get("multiKueue")
    name = mk.get("dispatcherName") if isinstance(mk, Mapping) else None
    return name if isinstance(name, str) and name else ALL_AT_ONCE


def dispatcher_refusal(configuration: Obj, where: str) -> str | None:
    """Why the dispatcher must not run against this manager (Kueue's own dispatcher would
    overwrite or ignore its nominations), or None."""
    name = dispatcher_name(configuration)
    if name == TOPOSCHED:
        return None
    return (f"multiKueue.dispatcherName: the manager's Kueue Configuration ({where}) names {name!r}; set it to "
            f"{TOPOSCHED!r} and restart Kueue's controller manager, so that Kueue's own dispatcher stands aside")


# Kueue's field manager for admission status (constants.AdmissionName) and the conditions its
# admission patch carries (pkg/workload/workload.go admissionManagedConditions, v0.17.0).
ADMISSION_FIELD_MANAGER = "kueue-admission"
ADMISSION_MANAGED_CONDITIONS = ("QuotaReserved", "BlockedOnPreemptionGates", "Evicted", "Admitted", "Preempted",
                                "Requeued", "DeactivationTarget", "Finished")


def nomination_apply(wl: Obj, nominated: Sequence[str]) -> dict[str, Any]:
    """The server-side apply body that nominates ``nominated``, as Kueue's own dispatchers
    write it (PatchAdmissionStatus -> PrepareWorkloadPatch at v0.17.0, under the field manager
    :data:`ADMISSION_FIELD_MANAGER`). It must be that manager and carry every field that
    manager owns: when a worker admits, MultiKueue records ``clusterName`` and clears the
    nominations in one apply of that manager, which clears only what the manager owns (with
    another owner Kueue's apply fails: "clusterName and nominatedClusterNames are mutually
    exclusive"), and an apply that left out a field the manager owns would remove it."""
    meta = wl.get("metadata") or {}
    status = wl.get("status") or {}
    # resourceVersion too (Kueue's strict apply): a Workload changed since it was read is a 409,
    # left to the next pass, never overwritten
    out_meta = {k: meta[k] for k in ("uid", "name", "namespace", "generation", "annotations", "labels",
                                     "resourceVersion") if k in meta}
    body: dict[str, Any] = {}
    if status.get("admission") is not None:
        body["admission"] = status["admission"]
        body["resourceRequests"] = []
    elif status.get("resourceRequests"):
        body["resourceRequests"] = status["resourceRequests"]
    requeue = status.get("requeueState")
    if isinstance(requeue, Mapping) and (requeue.get("count") is not None or requeue.get("requeueAt") is not None):
        body["requeueState"] = requeue
    conditions = [c for name in ADMISSION_MANAGED_CONDITIONS for c in (status.get("conditions") or [])
                  if isinstance(c, Mapping) and c.get("type") == name]
    if conditions:
        body["conditions"] = conditions
    for key in ("accumulatedPastExecutionTimeSeconds", "clusterName", "unhealthyNodes", "preemptionGates"):
        if status.get(key) is not None:
            body[key] = status[key]
    evictions = (status.get("schedulingStats") or {}).get("evictions")
    if status.get("schedulingStats") is not None:
        body["schedulingStats"] = {"evictions": evictions} if evictions else {}
    if status.get("admissionChecks") is not None:
        body["admissionChecks"] = status["admissionChecks"]
    body["nominatedClusterNames"] = list(nominated)
    return {"apiVersion": f"{KUEUE_GROUP}/v1beta2", "kind": "Workload", "metadata": out_meta, "status": body}
