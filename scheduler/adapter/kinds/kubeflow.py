"""Kubeflow training jobs (kubeflow.org), as Kueue's kubeflow integrations build them: one pod
set per replica type present, in the kind's order (name = the type in lower case, count =
replicas, default 1), TAS ranks by ``training.kubeflow.org/replica-index``, suspended through
``spec.runPolicy.suspend``, finished by the Succeeded / Failed conditions, ready when Running.
The replica specs are a map, so a merge patch reaches each template without rewriting the
others. Each kind module (pytorchjob.py, mpijob.py) declares its own with :func:`kubeflow_kind`."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.adapter.kinds.base import (
    FinishState,
    JobKind,
    MapKey,
    Obj,
    PodSetsOf,
    PodSetSource,
    condition_true,
    finish_from_conditions,
)
from scheduler.adapter.kinds.shapes import replica_specs

KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"


def replica_pod_sets(specs_field: str, order: Sequence[str]) -> PodSetsOf:
    """The pod sets of the replica types in ``order`` that the job has (Kueue's
    ``orderedReplicaTypes``; other types get no pod set, as in Kueue)."""
    def pod_sets(job: Obj) -> list[PodSetSource]:
        specs = (job.get("spec") or {}).get(specs_field) or {}
        out = []
        for replica_type in order:
            spec = specs.get(replica_type)
            if spec is None:
                continue
            replicas = spec.get("replicas")
            out.append(PodSetSource(replica_type.lower(), 1 if replicas is None else int(replicas),
                                    spec.get("template") or {}, ("spec", specs_field, MapKey(replica_type), "template"),
                                    KUBEFLOW_REPLICA_INDEX))
        return out
    return pod_sets


def active_pods(job: Obj) -> int:
    statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    return sum(int((s or {}).get("active") or 0) for s in statuses.values())


def pods_ready(job: Obj) -> bool:
    """Kueue's Kubeflow ``PodsReady``: the job's ``Running`` condition is True."""
    return condition_true(job, "Running")


def kubeflow_kind(*, version: str, kind: str, specs_field: str, order: Sequence[str]) -> JobKind:
    failed_message = f"{kind} failed"

    def finish_state(job: Obj) -> FinishState:
        return finish_from_conditions(job, "Succeeded", "Failed", None, failed_message)

    return JobKind(
        group="kubeflow.org", version=version, kind=kind, plural=f"{kind.lower()}s",
        framework=f"kubeflow.org/{kind.lower()}", pod_sets=replica_pod_sets(specs_field, tuple(order)),
        finish_state=finish_state, active_pods=active_pods, pods_ready=pods_ready,
        shape=replica_specs(specs_field), suspend_path=("spec", "runPolicy", "suspend"),
        rank_label=KUBEFLOW_REPLICA_INDEX)
