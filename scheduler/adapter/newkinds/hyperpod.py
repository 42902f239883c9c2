"""HyperPodPyTorchJob (sagemaker.amazonaws.com/v1, the HyperPod training operator), as the real
HyperPod CLI writes it (``hyp create hyp-pytorch-job``, sagemaker-hyperpod 3.12.0; captured in
tests/data/hyp/) and as AWS documents it for Kueue (docs/design/new-kinds.md).

The operator is not public: what is read here comes from the CLI's model of the CRD. Pod sets:
one per ``spec.replicaSpecs[]`` entry (name = its ``name``), **count = replicas + spares** (a
spare's quota is charged, so a failed pod is replaced in place without re-admission: "If a job is
configured with 4 replicas and 2 spares, job requests resources required to run 6 pods").
Suspended through ``spec.runPolicy.suspend``; finished by the ``Complete`` / ``Failed`` conditions.

Kind spelling: the CLI and so the CRD say ``HyperPodPyTorchJob``; AWS's
``integrations.externalFrameworks`` entry says ``HyperPodPytorchJob.v1.sagemaker.amazonaws.com``.
:func:`external_framework_matches` accepts both for this kind (Kueue itself compares kinds
case-sensitively and would miss it)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.newkinds.common import NOT_FINISHED, FinishState, as_int, condition_true, finished, pod_set
from scheduler.adapter.newkinds.mergepatch import merge_patched
from scheduler.core.workload import WorkloadFormatError

GROUP = "sagemaker.amazonaws.com"
VERSION = "v1"
KIND = "HyperPodPyTorchJob"  # what the CLI writes (KIND in sagemaker/hyperpod/training/hyperpod_pytorch_job.py)
PLURAL = "hyperpodpytorchjobs"
AWS_EXTERNAL_FRAMEWORK = "HyperPodPytorchJob.v1.sagemaker.amazonaws.com"  # AWS's spelling (lower-case t)
KIND_SPELLINGS = frozenset({KIND, "HyperPodPytorchJob"})
DEFAULT_REPLICA_NAME = "pod"  # the replica spec name the CLI's v1.1 template writes


def _spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return job.get("spec") or {}


def replica_specs(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    specs = _spec(job).get("replicaSpecs") or []
    if not isinstance(specs, list):
        raise WorkloadFormatError("spec.replicaSpecs: must be a list")
    return [s for s in specs if isinstance(s, Mapping)]


def pod_count(replica_spec: Mapping[str, Any]) -> int:
    """replicas + spares (both default 0 in the CRD's model; the CLI writes replicas >= 1)."""
    try:
        replicas, spares = as_int(replica_spec.get("replicas"), 0), as_int(replica_spec.get("spares"), 0)
    except (TypeError, ValueError) as exc:
        raise WorkloadFormatError(f"spec.replicaSpecs[{replica_spec.get('name')}]: replicas and spares must be "
                                  f"integers ({exc})") from exc
    if replicas < 0 or spares < 0:
        raise WorkloadFormatError(f"spec.replicaSpecs[{replica_spec.get('name')}]: replicas and spares must not be "
                                  "negative")
    return replicas + spares


def pod_sets(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One pod set per replica spec, count = replicas + spares, no rank label (the operator's
    rank label is not documented)."""
    out = []
    for i, spec in enumerate(replica_specs(job)):
        name = str(spec.get("name") or (DEFAULT_REPLICA_NAME if i == 0 else f"{DEFAULT_REPLICA_NAME}-{i}"))
        out.append(pod_set(name, pod_count(spec), spec.get("template") or {}))
    return out


def is_suspended(job: Mapping[str, Any]) -> bool:
    return bool((_spec(job).get("runPolicy") or {}).get("suspend"))


def stop_patch(job: Mapping[str, Any]) -> dict[str, Any]:
    return {"spec": {"runPolicy": {"suspend": True}}}


def templates(job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {ps["name"]: spec.get("template") or {} for ps, spec in zip(pod_sets(job), replica_specs(job), strict=True)}


def _with_templates(job: Mapping[str, Any], patches: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """``replicaSpecs`` (a list: the merge patch carries it whole) with the patched templates."""
    names = [ps["name"] for ps in pod_sets(job)]
    if not any(name in patches for name in names):
        return None
    out = []
    for name, spec in zip(names, replica_specs(job), strict=True):
        entry = copy.deepcopy(dict(spec))
        if name in patches:
            entry["template"] = merge_patched(entry.get("template") or {}, patches[name])
        out.append(entry)
    return out


def start_patch(job: Mapping[str, Any], patches: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"runPolicy": {"suspend": False}}
    replicas = _with_templates(job, patches)
    if replicas is not None:
        spec["replicaSpecs"] = replicas
    return {"spec": spec}


def restore_patch(job: Mapping[str, Any], patches: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    replicas = _with_templates(job, patches)
    return {"spec": {"replicaSpecs": replicas}} if replicas is not None else None


def finish_state(job: Mapping[str, Any]) -> FinishState:
    complete = condition_true(job, "Complete")
    if complete is not None:
        return finished(True, str(complete.get("message") or ""))
    failed = condition_true(job, "Failed")
    if failed is not None:
        return finished(False, str(failed.get("message") or "HyperPodPyTorchJob failed"))
    return NOT_FINISHED


def parse_external_framework(name: str) -> tuple[str, str, str] | None:
    """``Kind.version.group`` -> (kind, version, group) as Kueue's ``schema.ParseKindArg`` splits
    it (at least two dots; the first two split off kind and version); None otherwise (Kueue:
    "must be format, 'Kind.version.group.com'")."""
    if name.count(".") < 2:
        return None
    kind, version, group = name.split(".", 2)
    return kind, version, group


def external_framework_matches(name: str) -> bool:
    """Whether an ``externalFrameworks`` entry names the HyperPodPyTorchJob, in either spelling."""
    parsed = parse_external_framework(name)
    return parsed is not None and parsed[0] in KIND_SPELLINGS and parsed[1:] == (VERSION, GROUP)
