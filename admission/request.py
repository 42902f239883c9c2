"""One AdmissionReview (admission.k8s.io/v1) request, read once, and the answers a route gives.

Response rules: ``uid`` echoed; ``allowed``; denials carry ``status.code`` (403 by default),
its reason (``Forbidden``...) and the message; mutations carry ``patchType: JSONPatch`` and the
base64 JSON Patch (omitted when empty); ``warnings`` are shown by kubectl as ``Warning: ...``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from admission.suspension import DEFAULT_CONTROLLER_USERS, requesting_user
from admission.view import ClusterView
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.governance import Governance
from scheduler.adapter.manifest.annotations import NO_OVERRIDES
from scheduler.core.config import FeatureGates
from scheduler.core.workload import SCHEDULER_NAME

Answer = dict[str, Any]  # an AdmissionReview with its response

# AdmissionReview warnings: the API server keeps each one short; longer ones are cut here, the
# full text is in the denial message or the webhook log.
MAX_WARNING = 400
STATUS_REASONS = {403: "Forbidden", 400: "BadRequest", 413: "RequestEntityTooLarge", 422: "Invalid",
                  503: "ServiceUnavailable"}


class ReviewError(ValueError):
    """Not a usable AdmissionReview (HTTP 400)."""


@dataclass(frozen=True)
class WebhookSettings:
    """What the webhook is configured with. ``controller_users``: the usernames of toposched's
    controller (the only one that may unsuspend a queued job or release its pods' gates);
    ``gates``: the feature gates of the Kueue Configuration the controller runs with;
    ``governance``: the kinds its ``integrations`` govern (the default deny refuses the rest);
    ``default_queue``: LocalQueue defaulting (a LocalQueue named ``default``)."""

    scheduler_name: str = SCHEDULER_NAME
    default_queue: bool = True
    controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS
    gates: FeatureGates = NO_OVERRIDES
    governance: Governance = field(default_factory=Governance)


@dataclass
class Review:
    """The request being decided, as every step of its route reads it. ``obj`` and ``old`` are
    the object as the route reads it (of the kind its path names; ``old`` only on UPDATE)."""

    path: str
    req: Mapping[str, Any]
    uid: str
    api_version: str
    operation: str
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None
    view: ClusterView | None
    settings: WebhookSettings
    old_as_sent: Any = None  # ``request.oldObject`` as sent, for the shape check (it may be anything)
    kind_name: str = ""  # the kind the path serves ("Job", "Pod", "Workload", "ClusterQueue"...)
    job_kind: JobKind | None = None  # the registry kind the path serves, None for Kueue's objects

    @property
    def user(self) -> str:
        return requesting_user(self.req)

    @property
    def by_controller(self) -> bool:
        return self.user in self.settings.controller_users

    @property
    def previous(self) -> Mapping[str, Any] | None:
        """The object before an UPDATE; None on CREATE."""
        return self.old if self.operation == "UPDATE" else None

    def allow(self, patch: list[Any] | None = None, warnings: list[str] | None = None) -> Answer:
        return response(self.uid, True, patch=patch, warnings=warnings, api_version=self.api_version)

    def deny(self, message: str, code: int = 403, warnings: list[str] | None = None) -> Answer:
        return response(self.uid, False, message, code=code, warnings=warnings, api_version=self.api_version)


def field_of(mapping: Any, key: str) -> Any:
    """``mapping[key]`` when ``mapping`` is an object, else None: a review's parts may be anything."""
    return mapping.get(key) if isinstance(mapping, Mapping) else None


def parse(path: str, review: Any, view: ClusterView | None, settings: WebhookSettings) -> Review:
    """The request of an AdmissionReview body. Raises :class:`ReviewError` for a body no API
    server sends (not a review, no uid, an object that is not a Kubernetes object)."""
    if not isinstance(review, Mapping) or review.get("kind") != "AdmissionReview":
        raise ReviewError("body is not an AdmissionReview")
    req = review.get("request")
    if not isinstance(req, Mapping) or not req.get("uid") or not isinstance(req["uid"], str):
        raise ReviewError("AdmissionReview has no request.uid")
    obj = req.get("object")
    obj = {} if obj is None else obj
    operation = str(req.get("operation") or "")
    if operation != "DELETE":
        if not isinstance(obj, Mapping) or not isinstance(obj.get("metadata") or {}, Mapping):
            raise ReviewError("request.object is not a Kubernetes object (an object with a metadata object)")
        if not isinstance(req.get("namespace") or "", str):
            raise ReviewError("request.namespace is not a string")
        if req.get("namespace") and isinstance(obj.get("metadata"), Mapping) and not obj["metadata"].get("namespace"):
            obj = dict(obj, metadata=dict(obj["metadata"], namespace=req["namespace"]))  # CREATE with generateName
    old = req.get("oldObject") or None
    return Review(path, req, str(req["uid"]), str(review.get("apiVersion") or "admission.k8s.io/v1"), operation,
                  obj if isinstance(obj, Mapping) else {}, old if isinstance(old, Mapping) else None, view, settings,
                  old)


def response(uid: str, allowed: bool, message: str = "", code: int = 403, patch: list[Any] | None = None,
             warnings: list[str] | None = None, api_version: str = "admission.k8s.io/v1") -> Answer:
    resp: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        resp["status"] = {"code": code, "message": message, "reason": STATUS_REASONS.get(code, "InternalError")}
    if patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    if warnings:
        resp["warnings"] = [w if len(w) <= MAX_WARNING else w[: MAX_WARNING - 3] + "..." for w in warnings]
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": resp}


def refusal(message: str, code: int, uid: str = "") -> Answer:
    """An AdmissionReview refusing a request we could not decide (bad body, over a limit)."""
    return response(uid, False, f"toposched webhook: {message}", code=code)
