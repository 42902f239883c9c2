"""HyperPodPyTorchJob (sagemaker.amazonaws.com/v1, the HyperPod training operator), as the real
HyperPod CLI writes it (``hyp create hyp-pytorch-job``, sagemaker-hyperpod 3.12.0; captured in
tests/data/hyp/) and as AWS documents it for Kueue (docs/design/new-kinds.md, "HyperPodPyTorchJob").

Not a Kueue built-in: AWS lists it in ``integrations.externalFrameworks`` and the operator creates
its Workloads. toposched governs it in one of two modes (docs/design/new-kinds.md):

- **external** (``integrations.externalFrameworks`` lists it, in either spelling): the operator
  creates, owns and starts the Workload; toposched admits it and never creates one;
- **native** (not listed): toposched's webhook creates it suspended and its controller creates
  the Workload and starts it, as for any suspendable kind.

The operator is not public: what is read here comes from the CLI's model of the CRD. Pod sets:
one per ``spec.replicaSpecs[]`` entry (name = its ``name``), **count = replicas + spares** (a
spare's quota is charged, so a failed pod is replaced in place without re-admission: "If a job is
configured with 4 replicas and 2 spares, job requests resources required to run 6 pods").
Suspended through ``spec.runPolicy.suspend``; finished by the ``Complete`` / ``Failed`` conditions.
The operator's pods are pinned to their domain by the topology gate and the ungater.

Kind spelling: the CLI and so the CRD say ``HyperPodPyTorchJob``; AWS's externalFrameworks entry
says ``HyperPodPytorchJob.v1.sagemaker.amazonaws.com``: both name this kind (Kueue compares
kinds case-sensitively and would miss it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import (
    NOT_FINISHED,
    FinishState,
    JobKind,
    KindError,
    Obj,
    PodSetSource,
    as_int,
    condition_true,
    finished,
    true_condition,
)
from scheduler.adapter.kinds.shapes import METADATA, POD_TEMPLATE

GROUP = "sagemaker.amazonaws.com"
VERSION = "v1"
KIND = "HyperPodPyTorchJob"  # what the CLI writes (KIND in sagemaker/hyperpod/training/hyperpod_pytorch_job.py)
AWS_SPELLING = "HyperPodPytorchJob"  # AWS's externalFrameworks entry (lower-case t)
AWS_EXTERNAL_FRAMEWORK = f"{AWS_SPELLING}.{VERSION}.{GROUP}"
DEFAULT_REPLICA_NAME = "pod"  # the replica spec name the CLI's v1.1 template writes


def replica_specs(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    specs = (job.get("spec") or {}).get("replicaSpecs") or []
    return [s for s in specs if isinstance(s, Mapping)] if isinstance(specs, list) else []


def _count(value: Any) -> int:
    try:
        return max(as_int(value, 0), 0)
    except (TypeError, ValueError):
        return 0  # refused by the webhook (validation_errors); no pods counted meanwhile


def pod_count(replica_spec: Mapping[str, Any]) -> int:
    """replicas + spares (both default 0 in the CRD's model; the CLI writes replicas >= 1)."""
    return _count(replica_spec.get("replicas")) + _count(replica_spec.get("spares"))


def replica_name(spec: Mapping[str, Any], index: int) -> str:
    return str(spec.get("name") or (DEFAULT_REPLICA_NAME if index == 0 else f"{DEFAULT_REPLICA_NAME}-{index}"))


def pod_sets(job: Obj) -> list[PodSetSource]:
    """One pod set per replica spec, count = replicas + spares, no rank label (the operator's
    rank label is not documented: the ungater places its pods greedily)."""
    return [PodSetSource(replica_name(spec, i), pod_count(spec), spec.get("template") or {},
                         ("spec", "replicaSpecs", i, "template"))
            for i, spec in enumerate(replica_specs(job))]


def validation_errors(job: Obj, _max_pod_sets: int = 8) -> list[KindError]:
    errors: list[KindError] = []
    for i, spec in enumerate(replica_specs(job)):
        for field in ("replicas", "spares"):
            value = spec.get(field)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                errors.append((f"spec.replicaSpecs[{i}].{field}", "Invalid",
                               "must be a non-negative integer (replicas + spares pods are charged to quota)", value))
    return errors


def finish_state(job: Obj) -> FinishState:
    """The operator's ``Complete`` / ``Failed`` condition (the CRD's field doc: "Type of job
    condition, Complete or Failed")."""
    complete = true_condition(job, "Complete")
    if complete is not None:
        return finished(True, str(complete.get("message") or ""))
    failed = true_condition(job, "Failed")
    if failed is not None:
        return finished(False, str(failed.get("message") or "HyperPodPyTorchJob failed"))
    return NOT_FINISHED


def active_pods(job: Obj) -> int:
    """Whether the operator reports the job running (its status has no pod counts the CLI
    documents; depends on the operator)."""
    return int(condition_true(job, "Running"))


def pods_ready(job: Obj) -> bool:
    return condition_true(job, "Running")


HYPERPODPYTORCHJOB = JobKind(
    group=GROUP, version=VERSION, kind=KIND, plural="hyperpodpytorchjobs",
    framework="sagemaker.amazonaws.com/hyperpodpytorchjob", pod_sets=pod_sets, finish_state=finish_state,
    active_pods=active_pods, pods_ready=pods_ready,
    shape={"metadata": METADATA, "spec": {"runPolicy": {"suspend": "bool"}, "replicaSpecs": [
        {"name": "str", "replicas": "int", "spares": "int", "template": POD_TEMPLATE}]}},
    suspend_path=("spec", "runPolicy", "suspend"), topology_gate=True, validation=validation_errors,
    builtin=False, aliases=(AWS_SPELLING,),
)
