"""Only toposched's controller writes the annotations it owns (docs/security.md).

The controller records some decisions on Workloads (``scheduler.adapter.owned.CONTROLLER_OWNED``:
the sticky preemption target, the domain a compact wait holds, the previous domains, the
node-failure retries). A tenant who may create or update Workloads could otherwise choose
which other team's job is preempted, or hold a free block against everyone. So on CREATE and
UPDATE, any identity but the controller's (``--controller-user``, the same as for unsuspending)
that adds, changes or removes one of them is refused with a field error naming the key and why.
An update that keeps the controller's value as it is passes (``kubectl apply`` of a manifest
without the key keeps it). The controller re-checks what it reads anyway (it honours only
values it signed), since a webhook can be down, misconfigured or bypassed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from scheduler.adapter.manifest.fielderrors import FieldError, forbidden
from scheduler.adapter.owned import CONTROLLER_OWNED


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    value = meta.get("annotations") if isinstance(meta, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def who(username: str) -> str:
    return f"user \"{username}\"" if username else "a request without a user"


def owned_key_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None, username: str,
                     controller_users: Collection[str]) -> list[FieldError]:
    """One Forbidden error per controller-owned annotation that ``username`` adds, changes or
    removes (none for the controller itself)."""
    if username in controller_users:
        return []
    after, before = _annotations(obj), _annotations(old)
    errors = []
    for key, records in CONTROLLER_OWNED.items():
        if after.get(key) == before.get(key):
            continue
        if key not in before:
            verb, fix = "set", "remove it from the object; the controller writes it when it decides"
        elif key not in after:
            verb, fix = "remove", "keep the annotation as it is (leave it out of your patch, or copy it unchanged)"
        else:
            verb, fix = "change", "keep the annotation as it is (leave it out of your patch, or copy it unchanged)"
        errors.append(forbidden(
            f"metadata.annotations[{key}]",
            f"only toposched's controller may {verb} this annotation ({who(username)} is not it): it records "
            f"{records}, and a value written by anyone else would steer other workloads", fix))
    return errors
