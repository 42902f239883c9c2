"""AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out. No sockets here.

Response rules: ``uid`` echoed; ``allowed``; denials carry ``status.code`` 403, reason
``Forbidden`` and the message; mutations carry ``patchType: JSONPatch`` and the base64 JSON
Patch (omitted when empty); ``warnings`` are shown by kubectl as ``Warning: ...``.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from typing import Any

from admission.mutation import mutate_job
from admission.validation import validate_job, validate_kueue_object
from admission.view import ClusterView
from scheduler.core.workload import SCHEDULER_NAME

log = logging.getLogger(__name__)

MUTATE_JOB = "/mutate-batch-v1-job"
VALIDATE_JOB = "/validate-batch-v1-job"
MUTATE_JOBSET = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
VALIDATE_JOBSET = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
MUTATE_PYTORCHJOB = "/mutate-kubeflow-org-v1-pytorchjob"
VALIDATE_PYTORCHJOB = "/validate-kubeflow-org-v1-pytorchjob"
# path -> the kind it serves (the object's own ``kind`` may be absent in a review)
JOB_KINDS = {MUTATE_JOB: "Job", VALIDATE_JOB: "Job", MUTATE_JOBSET: "JobSet", VALIDATE_JOBSET: "JobSet",
             MUTATE_PYTORCHJOB: "PyTorchJob", VALIDATE_PYTORCHJOB: "PyTorchJob"}
MUTATE_PATHS = (MUTATE_JOB, MUTATE_JOBSET, MUTATE_PYTORCHJOB)
KUEUE_KINDS = {"topology": "Topology", "resourceflavor": "ResourceFlavor",
               "clusterqueue": "ClusterQueue", "localqueue": "LocalQueue"}
KUEUE_PLURALS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors",
                 "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}


def validate_kueue_path(kind: str, version: str = "v1beta2") -> str:
    return f"/validate-kueue-x-k8s-io-{version}-{kind.lower()}"


KUEUE_PATHS = {validate_kueue_path(k, v): k for k in KUEUE_PLURALS for v in ("v1beta1", "v1beta2")}
PATHS = (*JOB_KINDS, *KUEUE_PATHS)

# AdmissionReview warnings: the API server keeps each one short; longer ones are cut here, the
# full text is in the denial message or the webhook log.
MAX_WARNING = 400


class ReviewError(ValueError):
    """Not a usable AdmissionReview (HTTP 400)."""


def _response(uid: str, allowed: bool, message: str = "", code: int = 403, patch: list[Any] | None = None,
              warnings: list[str] | None = None, api_version: str = "admission.k8s.io/v1") -> dict[str, Any]:
    resp: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        resp["status"] = {"code": code, "message": message, "reason": "Forbidden" if code == 403 else "InternalError"}
    if patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    if warnings:
        resp["warnings"] = [w if len(w) <= MAX_WARNING else w[: MAX_WARNING - 3] + "..." for w in warnings]
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": resp}


def handle(path: str, review: Mapping[str, Any], view: ClusterView | None,
           scheduler_name: str = SCHEDULER_NAME, default_queue: bool = True) -> dict[str, Any]:
    """Decide one AdmissionReview. Raises :class:`ReviewError` for a malformed body or unknown path."""
    if not isinstance(review, Mapping) or review.get("kind") != "AdmissionReview":
        raise ReviewError("body is not an AdmissionReview")
    req = review.get("request")
    if not isinstance(req, Mapping) or not req.get("uid"):
        raise ReviewError("AdmissionReview has no request.uid")
    uid = str(req["uid"])
    api_version = str(review.get("apiVersion") or "admission.k8s.io/v1")
    operation = str(req.get("operation") or "")
    obj = req.get("object") or {}
    old = req.get("oldObject") or None
    if operation == "DELETE" or not isinstance(obj, Mapping):
        return _response(uid, True, api_version=api_version)
    if req.get("namespace") and isinstance(obj.get("metadata"), Mapping) and not obj["metadata"].get("namespace"):
        obj = dict(obj, metadata=dict(obj["metadata"], namespace=req["namespace"]))  # CREATE with generateName
    if path in JOB_KINDS:
        kind_check = (req.get("kind") or {}).get("kind")
        if kind_check not in (None, JOB_KINDS[path]):
            return _response(uid, True, api_version=api_version)
        obj = dict(obj, kind=JOB_KINDS[path])
    if path in MUTATE_PATHS:
        try:
            m = mutate_job(obj, operation, view, scheduler_name, default_queue)
        except Exception as exc:  # un-mutated managed jobs would run unsuspended: refuse
            log.exception("mutation failed")
            return _response(uid, False, f"toposched webhook: internal error while mutating the {obj['kind']}: {exc}; "
                             "retry, and report it if it persists", code=500, api_version=api_version)
        return _response(uid, True, patch=m.patch, warnings=m.warnings, api_version=api_version)
    if path in JOB_KINDS:
        try:
            verdict = validate_job(obj, view, old if operation == "UPDATE" else None)
        except Exception as exc:  # our bug must not block users: allow, say so
            log.exception("validation failed")
            return _response(uid, True, warnings=[f"toposched webhook: validation skipped (internal error: {exc})"],
                             api_version=api_version)
    elif path in KUEUE_PATHS:
        kind = KUEUE_PATHS[path]
        try:
            verdict = validate_kueue_object(kind, obj, old if operation == "UPDATE" else None, view)
        except Exception as exc:
            log.exception("validation failed")
            return _response(uid, True, warnings=[f"toposched webhook: validation skipped (internal error: {exc})"],
                             api_version=api_version)
    else:
        raise ReviewError(f"unknown path {path!r}; serving {', '.join(PATHS)}")
    if verdict.allowed:
        return _response(uid, True, warnings=verdict.warnings, api_version=api_version)
    return _response(uid, False, verdict.message(), warnings=verdict.warnings, api_version=api_version)
