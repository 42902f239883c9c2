"""AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out. No sockets here.

Response rules: ``uid`` echoed; ``allowed``; denials carry ``status.code`` 403, reason
``Forbidden`` and the message; mutations carry ``patchType: JSONPatch`` and the base64 JSON
Patch (omitted when empty); ``warnings`` are shown by kubectl as ``Warning: ...``.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Collection, Mapping
from typing import Any

from admission.annotations import NO_OVERRIDES
from admission.fielderrors import Verdict
from admission.mutation import mutate_job
from admission.shape import shape_errors
from admission.suspension import DEFAULT_CONTROLLER_USERS, requesting_user, unsuspend_errors
from admission.validation import validate_job, validate_kueue_object
from admission.view import ClusterView
from scheduler.core.config import FeatureGates
from scheduler.core.workload import LABEL_QUEUE_NAME, SCHEDULER_NAME

log = logging.getLogger(__name__)

MUTATE_JOB = "/mutate-batch-v1-job"
VALIDATE_JOB = "/validate-batch-v1-job"
MUTATE_JOBSET = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
VALIDATE_JOBSET = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
MUTATE_PYTORCHJOB = "/mutate-kubeflow-org-v1-pytorchjob"
VALIDATE_PYTORCHJOB = "/validate-kubeflow-org-v1-pytorchjob"
MUTATE_MPIJOB = "/mutate-kubeflow-org-v2beta1-mpijob"
VALIDATE_MPIJOB = "/validate-kubeflow-org-v2beta1-mpijob"
MUTATE_LWS = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
VALIDATE_LWS = "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
# path -> the kind it serves (the object's own ``kind`` may be absent in a review)
JOB_KINDS = {MUTATE_JOB: "Job", VALIDATE_JOB: "Job", MUTATE_JOBSET: "JobSet", VALIDATE_JOBSET: "JobSet",
             MUTATE_PYTORCHJOB: "PyTorchJob", VALIDATE_PYTORCHJOB: "PyTorchJob",
             MUTATE_MPIJOB: "MPIJob", VALIDATE_MPIJOB: "MPIJob",
             MUTATE_LWS: "LeaderWorkerSet", VALIDATE_LWS: "LeaderWorkerSet"}
MUTATE_PATHS = (MUTATE_JOB, MUTATE_JOBSET, MUTATE_PYTORCHJOB, MUTATE_MPIJOB, MUTATE_LWS)
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


# A Kubernetes object nests about 20 levels deep (a pod template's affinity terms are the
# deepest); an AdmissionReview adds two. Anything deeper is not an object we serve, and
# refusing it up front keeps every recursive walk below (validation, copies) far from
# Python's recursion limit.
MAX_JSON_DEPTH = 100


class ReviewError(ValueError):
    """Not a usable AdmissionReview (HTTP 400)."""


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of a decoded JSON value, walked iteratively; stops counting past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _field(mapping: Any, key: str) -> Any:
    """``mapping[key]`` when ``mapping`` is an object, else None: a review's parts may be anything."""
    return mapping.get(key) if isinstance(mapping, Mapping) else None


_STATUS_REASONS = {403: "Forbidden", 400: "BadRequest", 413: "RequestEntityTooLarge", 503: "ServiceUnavailable"}


def _response(uid: str, allowed: bool, message: str = "", code: int = 403, patch: list[Any] | None = None,
              warnings: list[str] | None = None, api_version: str = "admission.k8s.io/v1") -> dict[str, Any]:
    resp: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        resp["status"] = {"code": code, "message": message, "reason": _STATUS_REASONS.get(code, "InternalError")}
    if patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    if warnings:
        resp["warnings"] = [w if len(w) <= MAX_WARNING else w[: MAX_WARNING - 3] + "..." for w in warnings]
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": resp}


def _is_managed(obj: Mapping[str, Any]) -> bool:
    """Queued for toposched (the queue label set, by the user or by LocalQueue defaulting)."""
    return bool(_field(_field(obj.get("metadata"), "labels"), LABEL_QUEUE_NAME))


def _validation_failed(uid: str, obj: Mapping[str, Any], kind: str, exc: Exception, api_version: str,
                       managed: bool) -> dict[str, Any]:
    """An object validation could not judge. A managed one is refused (fail closed: admitting it
    unchecked could let it past quota or topology rules); anyone else's is let through with a
    warning, since it is not ours to block."""
    name = _field(obj.get("metadata"), "name") or _field(obj.get("metadata"), "generateName") or "<unnamed>"
    log.error("validation of %s %s failed: %s", kind, name, exc, exc_info=not isinstance(exc, RecursionError))
    if not managed:
        return _response(uid, True, warnings=[f"toposched webhook: validation skipped (internal error: {exc})"],
                         api_version=api_version)
    return _response(uid, False, f"toposched webhook could not validate {kind} {name!s}: {exc}. Nothing was "
                     f"created or changed. Check the object's {LABEL_QUEUE_NAME} label and its kueue.x-k8s.io "
                     "annotations (metadata and every pod template); if they are right, retry and report this "
                     "message", code=500, api_version=api_version)


def _unsuspend_refusal(uid: str, kind: str, req: Mapping[str, Any], obj: Mapping[str, Any],
                       old: Mapping[str, Any] | None, controller_users: Collection[str],
                       api_version: str) -> dict[str, Any] | None:
    """The denial of an UPDATE that unsuspends a queued job on behalf of anyone but the controller."""
    if req.get("operation") != "UPDATE":
        return None
    user = requesting_user(req)
    refused = unsuspend_errors(kind, obj, old, user, controller_users)
    if not refused:
        return None
    meta = obj.get("metadata")
    log.info("refused unsuspending %s %s/%s by %r", kind, _field(meta, "namespace"), _field(meta, "name"), user)
    return _response(uid, False, Verdict(refused).message(), api_version=api_version)


def handle(path: str, review: Mapping[str, Any], view: ClusterView | None,
           scheduler_name: str = SCHEDULER_NAME, default_queue: bool = True,
           controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
           gates: FeatureGates = NO_OVERRIDES) -> dict[str, Any]:
    """Decide one AdmissionReview. Raises :class:`ReviewError` for a malformed body or unknown path.
    ``controller_users``: the usernames of toposched's controller, the only one that may unsuspend
    a queued job. ``gates``: the feature gates of the Kueue Configuration the controller runs with."""
    if not isinstance(review, Mapping) or review.get("kind") != "AdmissionReview":
        raise ReviewError("body is not an AdmissionReview")
    req = review.get("request")
    if not isinstance(req, Mapping) or not req.get("uid") or not isinstance(req["uid"], str):
        raise ReviewError("AdmissionReview has no request.uid")
    uid = str(req["uid"])
    api_version = str(review.get("apiVersion") or "admission.k8s.io/v1")
    operation = str(req.get("operation") or "")
    obj = req.get("object")
    obj = {} if obj is None else obj
    old = req.get("oldObject") or None
    if operation == "DELETE":
        return _response(uid, True, api_version=api_version)
    if not isinstance(obj, Mapping) or not isinstance(obj.get("metadata") or {}, Mapping):
        raise ReviewError("request.object is not a Kubernetes object (an object with a metadata object)")
    if not isinstance(req.get("namespace") or "", str):
        raise ReviewError("request.namespace is not a string")
    if req.get("namespace") and isinstance(obj.get("metadata"), Mapping) and not obj["metadata"].get("namespace"):
        obj = dict(obj, metadata=dict(obj["metadata"], namespace=req["namespace"]))  # CREATE with generateName
    if path in JOB_KINDS:
        kind_check = _field(req.get("kind"), "kind")
        if kind_check not in (None, JOB_KINDS[path]):
            return _response(uid, True, api_version=api_version)
        obj = dict(obj, kind=JOB_KINDS[path])
    kind = JOB_KINDS.get(path) or KUEUE_PATHS.get(path)
    if kind is None:
        raise ReviewError(f"unknown path {path!r}; serving {', '.join(PATHS)}")
    for part, value in (("object", obj), ("oldObject", old)):
        errors = shape_errors(kind, value, root=f"request.{part}")
        if errors:  # a body no API server sends: refuse with the fields, before anything reads them
            return _response(uid, False, Verdict(errors).message(), api_version=api_version)
    if path in MUTATE_PATHS:
        try:
            m = mutate_job(obj, operation, view, scheduler_name, default_queue, gates)
        except Exception as exc:  # un-mutated managed jobs would run unsuspended: refuse
            log.exception("mutation failed")
            return _response(uid, False, f"toposched webhook: internal error while mutating the {obj['kind']}: {exc}; "
                             "retry, and report it if it persists", code=500, api_version=api_version)
        return _response(uid, True, patch=m.patch, warnings=m.warnings, api_version=api_version)
    if path in JOB_KINDS:
        refusal = _unsuspend_refusal(uid, JOB_KINDS[path], req, obj, old, controller_users, api_version)
        if refusal is not None:
            return refusal
        try:
            verdict = validate_job(obj, view, old if operation == "UPDATE" else None, gates)
        except Exception as exc:
            return _validation_failed(uid, obj, JOB_KINDS[path], exc, api_version, managed=_is_managed(obj))
    elif path in KUEUE_PATHS:
        kind = KUEUE_PATHS[path]
        try:
            verdict = validate_kueue_object(kind, obj, old if operation == "UPDATE" else None, view)
        except Exception as exc:
            return _validation_failed(uid, obj, kind, exc, api_version, managed=True)
    else:
        raise ReviewError(f"unknown path {path!r}; serving {', '.join(PATHS)}")
    if verdict.allowed:
        return _response(uid, True, warnings=verdict.warnings, api_version=api_version)
    return _response(uid, False, verdict.message(), warnings=verdict.warnings, api_version=api_version)


def answer(path: str, raw: bytes, view: ClusterView | None, scheduler_name: str = SCHEDULER_NAME,
           default_queue: bool = True, controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
           gates: FeatureGates = NO_OVERRIDES) -> tuple[int, dict[str, Any]]:
    """One HTTP request body in, (HTTP status, AdmissionReview) out; never raises.

    A body that is not a usable AdmissionReview gets HTTP 400 with an AdmissionReview whose
    response names the problem (the API server logs it); any failure of ours while deciding is
    a denial with code 500 that says what happened, never a dropped connection."""
    try:
        body = json.loads(raw)
    except RecursionError:
        return 400, _bad_request("", f"request body nests deeper than {MAX_JSON_DEPTH} levels")
    except ValueError as exc:
        return 400, _bad_request("", f"request body is not JSON: {exc}")
    uid = str(_field(_field(body, "request"), "uid") or "")
    if json_depth(body) > MAX_JSON_DEPTH:
        return 400, _bad_request(uid, f"request body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return 200, handle(path, body, view, scheduler_name, default_queue, controller_users, gates)
    except ReviewError as exc:
        return 400, _bad_request(uid, str(exc))
    except Exception as exc:  # a bug of ours: refuse, and say so
        log.exception("deciding %s uid=%s failed", path, uid)
        return 200, _response(uid, False, f"toposched webhook: internal error ({type(exc).__name__}: {exc}); "
                              "nothing was created or changed; retry, and report it if it persists", code=500)


def _bad_request(uid: str, message: str) -> dict[str, Any]:
    return refusal(message, 400, uid)


def refusal(message: str, code: int, uid: str = "") -> dict[str, Any]:
    """An AdmissionReview refusing a request we could not decide (bad body, over a limit)."""
    return _response(uid, False, f"toposched webhook: {message}", code=code)
