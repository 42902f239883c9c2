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
from admission.governance import QUEUED_PATH, ungoverned
from admission.mutation import mutate_job
from admission.pods import mutate_pod, pod_context, validate_pod
from admission.restamp import restamp
from admission.review_size import oversize_message
from admission.shape import shape_errors
from admission.suspension import DEFAULT_CONTROLLER_USERS, requesting_user, unsuspend_errors
from admission.update_guards import update_errors
from admission.validation import validate_job, validate_kueue_object
from admission.view import ClusterView
from admission.workloads import validate_workload
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.governance import Governance
from scheduler.adapter.kinds.ownership import OwnerUnreadable
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.registry import KINDS
from scheduler.core.config import FeatureGates
from scheduler.core.workload import LABEL_QUEUE_NAME, SCHEDULER_NAME

log = logging.getLogger(__name__)

# path -> the governed kind it serves (the object's own ``kind`` may be absent in a review):
# each kind of the job-kind registry has a mutating and a validating path.
JOB_PATHS: dict[str, JobKind] = {**{k.mutate_path: k for k in KINDS}, **{k.validate_path: k for k in KINDS}}
MUTATE_PATHS = frozenset(k.mutate_path for k in KINDS)
KUEUE_KINDS = {"topology": "Topology", "resourceflavor": "ResourceFlavor",
               "clusterqueue": "ClusterQueue", "localqueue": "LocalQueue"}
KUEUE_PLURALS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors",
                 "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}


def validate_kueue_path(kind: str, version: str = "v1beta2") -> str:
    return f"/validate-kueue-x-k8s-io-{version}-{kind.lower()}"


KUEUE_PATHS = {validate_kueue_path(k, v): k for k in KUEUE_PLURALS for v in ("v1beta1", "v1beta2")}
# Workloads: Kueue's rules and the annotations only the controller writes (admission/workloads.py).
WORKLOAD_PATHS = {validate_kueue_path("Workload", v): "Workload" for v in ("v1beta1", "v1beta2")}
VALIDATE_WORKLOAD = validate_kueue_path("Workload")
PATHS = (*JOB_PATHS, *KUEUE_PATHS, *WORKLOAD_PATHS, QUEUED_PATH)

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


def _unsuspend_refusal(uid: str, kind: JobKind, req: Mapping[str, Any], obj: Mapping[str, Any],
                       old: Mapping[str, Any] | None, controller_users: Collection[str],
                       api_version: str, view: ClusterView | None) -> dict[str, Any] | None:
    """The denial of an UPDATE that unsuspends a queued job on behalf of anyone but the controller."""
    if req.get("operation") != "UPDATE":
        return None
    user = requesting_user(req)
    try:
        refused = unsuspend_errors(kind, obj, old, user, controller_users, view.owners if view else None)
    except OwnerUnreadable as exc:
        return _owner_unreadable(uid, kind, exc, api_version)
    if not refused:
        return None
    meta = obj.get("metadata")
    log.info("refused unsuspending %s %s/%s by %r", kind.kind, _field(meta, "namespace"), _field(meta, "name"), user)
    return _response(uid, False, Verdict(refused).message(), api_version=api_version)


def _owner_unreadable(uid: str, kind: JobKind, exc: OwnerUnreadable, api_version: str) -> dict[str, Any]:
    """Whether the object is governed through its owner cannot be told now: refuse (never let
    a queued job through unsuspended), and say it is worth retrying."""
    log.warning("cannot resolve the owner of a %s: %s", kind.kind, exc)
    return _response(uid, False, f"toposched webhook: cannot tell whether this {kind.kind} belongs to a queued "
                     f"owner ({exc}); nothing was created or changed; retry", code=503, api_version=api_version)


GOVERN_ALL = Governance()  # no Kueue Configuration: every kind toposched has, no external frameworks


def _ungoverned_refusal(uid: str, req: Mapping[str, Any], obj: Mapping[str, Any], old: Any, view: ClusterView | None,
                        controller_users: Collection[str], governance: Governance,
                        api_version: str) -> dict[str, Any]:
    """The default deny (admission/governance.py): a queued object of a kind toposched does not
    govern is refused with one line naming the gap."""
    try:
        gap = ungoverned(req, obj, old if isinstance(old, Mapping) else None, view.owners if view else None,
                         governance, controller_users)
    except OwnerUnreadable as exc:
        log.warning("cannot resolve the owner of a queued object: %s", exc)
        return _response(uid, False, f"toposched webhook: cannot tell whether this object belongs to a queued "
                         f"owner ({exc}); nothing was created or changed; retry", code=503, api_version=api_version)
    if gap is None:
        return _response(uid, True, api_version=api_version)
    meta = obj.get("metadata")
    log.info("refused %s/%s: %s", _field(meta, "namespace"), _field(meta, "name"), gap)
    return _response(uid, False, gap, api_version=api_version)


def _pod_review(uid: str, path: str, req: Mapping[str, Any], obj: Mapping[str, Any], old: Any,
                view: ClusterView | None, scheduler_name: str, controller_users: Collection[str],
                governance: Governance, api_version: str) -> dict[str, Any]:
    """Kueue's pod webhook (admission/pods.py): a queued pod, or one its Deployment or
    StatefulSet holds, is gated at creation; its pod-group metadata is validated; only the
    controller may release its gates."""
    operation = str(req.get("operation") or "")
    if path == POD.mutate_path:
        try:
            ctx = pod_context(obj, view, governance.external)
        except OwnerUnreadable as exc:
            return _owner_unreadable(uid, POD, exc, api_version)
        m = mutate_pod(obj, operation, ctx, scheduler_name)
        return _response(uid, True, patch=m.patch, warnings=m.warnings, api_version=api_version)
    previous = old if operation == "UPDATE" and isinstance(old, Mapping) else None
    verdict = validate_pod(obj, previous)
    verdict.errors.extend(update_errors(POD, req, obj, previous, view, controller_users))
    if verdict.allowed:
        return _response(uid, True, warnings=verdict.warnings, api_version=api_version)
    return _response(uid, False, verdict.message(), warnings=verdict.warnings, api_version=api_version)


def handle(path: str, review: Mapping[str, Any], view: ClusterView | None,
           scheduler_name: str = SCHEDULER_NAME, default_queue: bool = True,
           controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
           gates: FeatureGates = NO_OVERRIDES, governance: Governance = GOVERN_ALL) -> dict[str, Any]:
    """Decide one AdmissionReview. Raises :class:`ReviewError` for a malformed body or unknown path.
    ``controller_users``: the usernames of toposched's controller, the only one that may unsuspend
    a queued job. ``gates``: the feature gates of the Kueue Configuration the controller runs with;
    ``governance``: the kinds its ``integrations`` govern (the default deny refuses the rest)."""
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
    if path == QUEUED_PATH:
        return _ungoverned_refusal(uid, req, obj, old, view, controller_users, governance, api_version)
    job_kind = JOB_PATHS.get(path)
    if job_kind is not None:
        kind_check = _field(req.get("kind"), "kind")
        if kind_check not in (None, job_kind.kind):
            return _response(uid, True, api_version=api_version)
        if not any(k is job_kind for k in governance.kinds):
            # Not governed under this Configuration: an external framework's (its controller's own
            # webhook suspends it) or one left out of integrations.frameworks (the default deny
            # refuses it when queued, here: the catch-all vqueued leaves the registry's kinds to
            # their own validating webhook): never suspended here, never run half-managed.
            if path in MUTATE_PATHS:
                return _response(uid, True, api_version=api_version)
            return _ungoverned_refusal(uid, _as_kind(req, job_kind), obj, old, view, controller_users, governance,
                                       api_version)
        # The path names the kind (the object's own kind and apiVersion may be absent or, in a
        # hand-made review, contradict it): read the object as that kind, everywhere below.
        obj = dict(obj, kind=job_kind.kind, apiVersion=job_kind.api_version)
        if isinstance(old, Mapping):
            old = dict(old, kind=job_kind.kind, apiVersion=job_kind.api_version)
    kind = job_kind.kind if job_kind is not None else KUEUE_PATHS.get(path) or WORKLOAD_PATHS.get(path)
    if kind is None:
        raise ReviewError(f"unknown path {path!r}; serving {', '.join(PATHS)}")
    for part, value in (("object", obj), ("oldObject", old)):
        errors = shape_errors(kind, value, root=f"request.{part}")
        if errors:  # a body no API server sends: refuse with the fields, before anything reads them
            return _response(uid, False, Verdict(errors).message(), api_version=api_version)
    if job_kind is POD:
        return _pod_review(uid, path, req, obj, old, view, scheduler_name, controller_users, governance,
                           api_version)
    if job_kind is not None and path in MUTATE_PATHS:
        try:
            m = (restamp(job_kind, obj, old, view, scheduler_name) if operation == "UPDATE"
                 else mutate_job(obj, operation, view, scheduler_name, default_queue, job_kind, gates))
        except OwnerUnreadable as exc:
            return _owner_unreadable(uid, job_kind, exc, api_version)
        except Exception as exc:  # un-mutated managed jobs would run unsuspended: refuse
            log.exception("mutation failed")
            return _response(uid, False, f"toposched webhook: internal error while mutating the {obj['kind']}: {exc}; "
                             "retry, and report it if it persists", code=500, api_version=api_version)
        return _response(uid, True, patch=m.patch, warnings=m.warnings, api_version=api_version)
    if job_kind is not None:
        # The default deny first (the catch-all vqueued leaves the registry's kinds to this path):
        # a kind the Configuration does not enable is refused with the line naming the gap.
        governed = _ungoverned_refusal(uid, _as_kind(req, job_kind), obj, old, view, controller_users, governance,
                                       api_version)
        if not governed["response"]["allowed"]:
            return governed
        refusal = _unsuspend_refusal(uid, job_kind, req, obj, old, controller_users, api_version, view)
        if refusal is not None:
            return refusal
        try:
            verdict = validate_job(obj, view, old if operation == "UPDATE" else None, gates)
            verdict.errors.extend(update_errors(job_kind, req, obj, old, view, controller_users))
        except Exception as exc:
            return _validation_failed(uid, obj, job_kind.kind, exc, api_version, managed=_is_managed(obj))
    elif path in WORKLOAD_PATHS:
        try:
            verdict = validate_workload(obj, old if operation == "UPDATE" else None, view, requesting_user(req),
                                        controller_users)
        except Exception as exc:
            return _validation_failed(uid, obj, "Workload", exc, api_version, managed=True)
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


def _as_kind(req: Mapping[str, Any], job_kind: JobKind) -> dict[str, Any]:
    """The review as the default deny reads it: of the kind the path names (a hand-made review's
    own ``kind`` may be absent or contradict it)."""
    return dict(req, kind={"group": job_kind.group, "version": job_kind.version, "kind": job_kind.kind})


def answer(path: str, raw: bytes, view: ClusterView | None, scheduler_name: str = SCHEDULER_NAME,
           default_queue: bool = True, controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
           gates: FeatureGates = NO_OVERRIDES, governance: Governance = GOVERN_ALL) -> tuple[int, dict[str, Any]]:
    """One HTTP request body in, (HTTP status, AdmissionReview) out; never raises.

    A body that is not a usable AdmissionReview gets HTTP 400 with an AdmissionReview whose
    response names the problem (the API server logs it); any failure of ours while deciding is
    a denial with code 500 that says what happened, never a dropped connection."""
    oversize = oversize_message(len(raw))
    if oversize is not None:  # refused before parsing: parsing is what costs (admission/review_size.py)
        return 413, refusal(oversize, 413)
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
        return 200, handle(path, body, view, scheduler_name, default_queue, controller_users, gates, governance)
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
