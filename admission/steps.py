"""The named steps a webhook route runs, in the order its route declares (``admission/routes.py``).

A step reads the :class:`~admission.request.Review` and returns an answer (the route stops
there: a refusal, or an allow that ends it) or None (the next step runs). Guards refuse or pass;
deciders end the route with their verdict. Every step answers for its own failures: a request is
never dropped, and a managed object that could not be judged is refused (fail closed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from admission.governance import judge
from admission.kueue_objects import validate_kueue_object
from admission.mutation import mutate_job
from admission.pods import mutate_pod, pod_context, validate_pod
from admission.request import Answer, Review, field_of
from admission.restamp import restamp
from admission.suspension import unsuspend_errors
from admission.update_guards import update_errors
from admission.validation import validate_job
from admission.workload_status import status_errors
from admission.workloads import validate_workload
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.identifiers import identifiers
from scheduler.adapter.kinds.ownership import OwnerUnreadable
from scheduler.adapter.manifest.fielderrors import INVALID, Verdict
from scheduler.adapter.manifest.shape import shape_errors
from scheduler.adapter.preemption_checks import config_errors
from scheduler.core.workload import LABEL_QUEUE_NAME

log = logging.getLogger(__name__)

Step = Callable[[Review], Answer | None]


def _kind(r: Review) -> JobKind:
    assert r.job_kind is not None, "a job step on a route without a kind"
    return r.job_kind


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(field_of(meta, "name") or field_of(meta, "generateName") or "<unnamed>")


def _verdict(r: Review, verdict: Verdict) -> Answer:
    if verdict.allowed:
        return r.allow(warnings=verdict.warnings)
    return r.deny(verdict.message(), code=verdict.code, warnings=verdict.warnings)


def _owner_unreadable(r: Review, what: str, exc: OwnerUnreadable) -> Answer:
    """Whether the object is governed through its owner cannot be told now: refuse (never let
    a queued job through unsuspended), and say it is worth retrying."""
    log.warning("cannot resolve the owner of a %s: %s", what, exc)
    return r.deny(f"toposched webhook: cannot tell whether this {what} belongs to a queued owner ({exc}); nothing "
                  "was created or changed; retry", code=503)


def _could_not_validate(r: Review, kind: str, exc: Exception, managed: bool) -> Answer:
    """An object validation could not judge. A managed one is refused (fail closed: admitting it
    unchecked could let it past quota or topology rules); anyone else's is let through with a
    warning, since it is not ours to block."""
    name = _name(r.obj)
    log.error("validation of %s %s failed: %s", kind, name, exc, exc_info=not isinstance(exc, RecursionError))
    if not managed:
        return r.allow(warnings=[f"toposched webhook: validation skipped (internal error: {exc})"])
    return r.deny(f"toposched webhook could not validate {kind} {name}: {exc}. Nothing was created or changed. "
                  f"Check the object's {LABEL_QUEUE_NAME} label and its kueue.x-k8s.io annotations (metadata and "
                  "every pod template); if they are right, retry and report this message", code=500)


# ---------------------------------------------------------------------------- guards

def read_as_path_kind(r: Review) -> Answer | None:
    """The path names the kind (the object's own ``kind`` and ``apiVersion`` may be absent or,
    in a hand-made review, contradict it): read the object as that kind in every step after
    this one. A review of another kind is not ours (allowed). A kind this Configuration does not
    govern (an external framework's, or one left out of ``integrations.frameworks``) is never
    mutated here, and on the validating path meets the default deny."""
    kind = _kind(r)
    if field_of(r.req.get("kind"), "kind") not in (None, kind.kind):
        return r.allow()
    if not any(k is kind for k in r.settings.governance.kinds):
        return r.allow() if r.path == kind.mutate_path else default_deny(r) or r.allow()
    r.obj = dict(r.obj, kind=kind.kind, apiVersion=kind.api_version)
    if r.old is not None:
        r.old = dict(r.old, kind=kind.kind, apiVersion=kind.api_version)
    return None


def shape_gate(r: Review) -> Answer | None:
    """The fields the later steps read have Kubernetes' types (a body no API server sends is
    refused with the fields, before anything reads them)."""
    for part, value in (("object", r.obj), ("oldObject", r.old_as_sent)):
        errors = shape_errors(r.kind_name, value, root=f"request.{part}")
        if errors:
            return r.deny(Verdict(errors).message())
    return None


def default_deny(r: Review) -> Answer | None:
    """The default deny (admission/governance.py): a queued object of a kind toposched does not
    govern that would run pods is refused with one line naming the gap; on the catch-all route,
    one that runs none passes with its warning."""
    req = r.req
    if r.job_kind is not None:  # of the kind the path names (a hand-made review may say otherwise)
        req = dict(req, kind={"group": r.job_kind.group, "version": r.job_kind.version, "kind": r.job_kind.kind})
    try:
        verdict = judge(req, r.obj, r.old, r.view.owners if r.view else None, r.settings.governance,
                        r.settings.controller_users)
    except OwnerUnreadable as exc:
        return _owner_unreadable(r, "object", exc)
    if verdict.refusal is None:
        # Warnings come only for kinds outside the registry (a Service, a CronJob): the catch-all's
        # route, where allowing is all that is left to do.
        return r.allow(warnings=list(verdict.warnings)) if verdict.warnings and r.job_kind is None else None
    meta = r.obj.get("metadata")
    log.info("refused %s/%s: %s", field_of(meta, "namespace"), field_of(meta, "name"), verdict.refusal)
    return r.deny(verdict.refusal, code=INVALID)  # Kueue has no default deny: not "Forbidden" (hyp: "Access denied")


def unsuspend_guard(r: Review) -> Answer | None:
    """Only toposched's controller unsuspends a queued job (admission/suspension.py)."""
    if r.operation != "UPDATE":
        return None
    kind = _kind(r)
    try:
        refused = unsuspend_errors(kind, r.obj, r.old, r.user, r.settings.controller_users,
                                   r.view.owners if r.view else None)
    except OwnerUnreadable as exc:
        return _owner_unreadable(r, kind.kind, exc)
    if not refused:
        return None
    meta = r.obj.get("metadata")
    log.info("refused unsuspending %s %s/%s by %r", kind.kind, field_of(meta, "namespace"), field_of(meta, "name"),
             r.user)
    return r.deny(Verdict(refused).message())


def update_guard(r: Review) -> Answer | None:
    """What runs is what was admitted (admission/update_guards.py): the queue label on UPDATE
    as Kueue's webhooks rule it, for everyone but the controller."""
    try:
        refused = update_errors(_kind(r), r.req, r.obj, r.previous, r.view, r.settings.controller_users,
                                r.settings.gates)
    except Exception as exc:
        return _could_not_validate(r, _kind(r).kind, exc, managed=True)
    return r.deny(Verdict(refused).message()) if refused else None


# ---------------------------------------------------------------------------- deciders

def allow(r: Review) -> Answer:
    return r.allow()


def mutate_job_step(r: Review) -> Answer:
    """Kueue's job webhooks' defaulting (admission/mutation.py): suspended, toposched's
    scheduler in every pod template, the default LocalQueue."""
    kind = _kind(r)
    s = r.settings
    try:
        m = (restamp(kind, r.obj, r.old, r.view, s.scheduler_name) if r.operation == "UPDATE"
             else mutate_job(r.obj, r.operation, r.view, s.scheduler_name, s.default_queue, kind, s.gates))
    except OwnerUnreadable as exc:
        return _owner_unreadable(r, kind.kind, exc)
    except Exception as exc:  # un-mutated managed jobs would run unsuspended: refuse
        log.exception("mutation failed")
        return r.deny(f"toposched webhook: internal error while mutating the {kind.kind}: {exc}; retry, and report "
                      "it if it persists", code=500)
    return r.allow(patch=m.patch, warnings=m.warnings)


def validate_job_step(r: Review) -> Answer:
    """Kueue's job validation and toposched's "can this ever fit" (admission/validation.py)."""
    try:
        verdict = validate_job(r.obj, r.view, r.previous, r.settings.gates)
    except Exception as exc:
        queued = bool(field_of(field_of(r.obj.get("metadata"), "labels"), LABEL_QUEUE_NAME))
        return _could_not_validate(r, _kind(r).kind, exc, managed=queued)
    return _verdict(r, verdict)


def mutate_pod_step(r: Review) -> Answer:
    """Kueue's pod webhook (admission/pods.py): a queued pod, or one its Deployment or
    StatefulSet holds, is gated at creation."""
    try:
        ctx = pod_context(r.obj, r.view, r.settings.governance.external)
    except OwnerUnreadable as exc:
        return _owner_unreadable(r, "Pod", exc)
    m = mutate_pod(r.obj, r.operation, ctx, r.settings.scheduler_name)
    return r.allow(patch=m.patch, warnings=m.warnings)


def validate_pod_step(r: Review) -> Answer:
    """Kueue's pod validation, and only the controller releases a managed pod's gates."""
    previous = r.previous
    verdict = validate_pod(r.obj, previous, identifiers(r.settings.gates))
    verdict.errors.extend(update_errors(_kind(r), r.req, r.obj, previous, r.view, r.settings.controller_users,
                                        r.settings.gates))
    return _verdict(r, verdict)


def validate_workload_step(r: Review) -> Answer:
    """Kueue's Workload rules, the keys only the controller writes, priority (admission/workloads.py)."""
    if r.req.get("subResource") == "status":  # the status is the admission: only the controller admits
        return _verdict(r, Verdict(status_errors(r.obj, r.previous, r.user, r.settings.controller_users)))
    try:
        verdict = validate_workload(r.obj, r.previous, r.view, r.user, r.settings.controller_users, r.settings.gates)
    except Exception as exc:
        return _could_not_validate(r, "Workload", exc, managed=True)
    return _verdict(r, verdict)


def validate_kueue_object_step(r: Review) -> Answer:
    """Kueue's webhooks for Topology, ResourceFlavor, ClusterQueue and LocalQueue."""
    try:
        verdict = validate_kueue_object(r.kind_name, r.obj, r.previous, r.view)
    except Exception as exc:
        return _could_not_validate(r, r.kind_name, exc, managed=True)
    return _verdict(r, verdict)


def validate_preemption_config_step(r: Review) -> Answer:
    """Kueue's PreemptionConfig (v0.20's type, exactly): a field the type does not have, or a
    value its CRD refuses, is refused naming the field (the controller re-checks and does not
    apply such an object; docs/quota-and-preemption.md)."""
    return _verdict(r, Verdict(config_errors(r.obj), code=INVALID))
