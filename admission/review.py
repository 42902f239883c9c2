"""AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out. No sockets here.

:func:`answer` decodes one HTTP body and never raises; :func:`handle` reads the request once
(``admission/request.py``), finds the route of its path (``admission/routes.py``) and runs the
route's steps (``admission/steps.py``) in their declared order until one answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from typing import Any

from admission.request import Answer, ReviewError, WebhookSettings, field_of, parse, refusal
from admission.review_size import oversize_message
from admission.routes import PATHS, ROUTES
from admission.suspension import DEFAULT_CONTROLLER_USERS
from admission.view import ClusterView
from scheduler.adapter.kinds.governance import Governance
from scheduler.adapter.manifest.annotations import NO_OVERRIDES
from scheduler.core.config import FeatureGates
from scheduler.core.workload import SCHEDULER_NAME

__all__ = ["GOVERN_ALL", "MAX_JSON_DEPTH", "ReviewError", "answer", "handle", "json_depth", "refusal"]

log = logging.getLogger(__name__)

GOVERN_ALL = Governance()  # no Kueue Configuration: every kind toposched has, no external frameworks

# A Kubernetes object nests about 20 levels deep (a pod template's affinity terms are the
# deepest); an AdmissionReview adds two. Anything deeper is not an object we serve, and
# refusing it up front keeps every recursive walk below (validation, copies) far from
# Python's recursion limit.
MAX_JSON_DEPTH = 100


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


def decide(path: str, review: Mapping[str, Any], view: ClusterView | None, settings: WebhookSettings) -> Answer:
    """Decide one AdmissionReview. Raises :class:`ReviewError` for a malformed body or unknown path."""
    r = parse(path, review, view, settings)
    if r.operation == "DELETE":
        return r.allow()
    route = ROUTES.get(path)
    if route is None:
        raise ReviewError(f"unknown path {path!r}; serving {', '.join(PATHS)}")
    r.kind_name, r.job_kind = route.kind_name, route.job_kind
    for step in route.steps:
        result = step(r)
        if result is not None:
            return result
    raise AssertionError(f"route {path} ended without an answer")  # every route ends with a decider


def handle(path: str, review: Mapping[str, Any], view: ClusterView | None,
           scheduler_name: str = SCHEDULER_NAME, default_queue: bool = True,
           controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
           gates: FeatureGates = NO_OVERRIDES, governance: Governance = GOVERN_ALL) -> Answer:
    """:func:`decide` with the settings spelled out (see :class:`~admission.request.WebhookSettings`)."""
    return decide(path, review, view, WebhookSettings(scheduler_name, default_queue, controller_users, gates,
                                                      governance))


def answer(path: str, raw: bytes, view: ClusterView | None, scheduler_name: str = SCHEDULER_NAME,
           default_queue: bool = True, controller_users: Collection[str] = DEFAULT_CONTROLLER_USERS,
           gates: FeatureGates = NO_OVERRIDES, governance: Governance = GOVERN_ALL) -> tuple[int, Answer]:
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
        return 400, refusal(f"request body nests deeper than {MAX_JSON_DEPTH} levels", 400)
    except ValueError as exc:
        return 400, refusal(f"request body is not JSON: {exc}", 400)
    uid = str(field_of(field_of(body, "request"), "uid") or "")
    if json_depth(body) > MAX_JSON_DEPTH:
        return 400, refusal(f"request body nests deeper than {MAX_JSON_DEPTH} levels", 400, uid)
    try:
        return 200, handle(path, body, view, scheduler_name, default_queue, controller_users, gates, governance)
    except ReviewError as exc:
        return 400, refusal(str(exc), 400, uid)
    except Exception as exc:  # a bug of ours: refuse, and say so
        log.exception("deciding %s uid=%s failed", path, uid)
        return 200, refusal(f"internal error ({type(exc).__name__}: {exc}); nothing was created or changed; retry, "
                            "and report it if it persists", 500, uid)
