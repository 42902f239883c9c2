"""Who may write a Workload's status (``workloads/status``), besides toposched's controller.

A Workload's status is the admission itself: ``status.admission``, ``QuotaReserved`` and
``Admitted`` are what starts a job and counts quota. Kueue's webhook lets any writer with RBAC
on ``workloads/status`` set them; toposched lets only its controller (the webhook's
``matchConditions`` skip its username). Everyone else (a cluster admin's kubectl, an external
framework, a MultiKueue manager's identity on a worker: Kueue's
``create-multikueue-kubeconfig.sh`` grants it ``patch``/``update`` on ``workloads/status`` in
every namespace) may only give a Workload up, never admit it:

- set ``DeactivationTarget=True``: what Kueue v0.17's MultiKueue manager writes on a worker's
  copy when the Workload is evicted on the manager (``workload.SetDeactivationTarget``,
  reason ``WorkloadEvictedOnManagerCluster``); the controller then deactivates and evicts it;
- set ``Finished=True``: an external framework finishing its own plain Workload;
- change ``status.nominatedClusterNames``: Kueue's external-dispatcher contract (a
  dispatcher writes it on a manager).

Anything else a status write changes is refused, naming the first field it changed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from admission.owned import who
from scheduler.adapter.manifest.fielderrors import FieldError, forbidden

# Conditions a writer other than the controller may set to True (never to False, never removed).
GIVE_UP_CONDITIONS = ("DeactivationTarget", "Finished")
FREE_FIELDS = ("nominatedClusterNames", "conditions")  # conditions: checked one by one below
FIX = ("leave it as the controller wrote it; a client may only set the DeactivationTarget or Finished "
       "condition to True (to give the Workload up), and toposched's controller writes the rest")


def _status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    value = obj.get("status") if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    value = status.get("conditions")
    items = value if isinstance(value, list) else []
    return {str(c.get("type")): c for c in items if isinstance(c, Mapping)}


def status_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None, username: str,
                  controller_users: Collection[str]) -> list[FieldError]:
    """The refusal of a ``workloads/status`` write by ``username`` (empty when allowed)."""
    if username in controller_users:
        return []
    after, before = _status(obj), _status(old)
    detail = f"only toposched's controller writes a Workload's status ({who(username)} is not it)"
    for key in sorted(set(after) | set(before)):
        if key not in FREE_FIELDS and after.get(key) != before.get(key):
            return [forbidden(f"status.{key}", detail, FIX)]
    new, current = _conditions(after), _conditions(before)
    for kind in sorted(set(new) | set(current)):
        if new.get(kind) == current.get(kind):
            continue
        if kind in GIVE_UP_CONDITIONS and (new.get(kind) or {}).get("status") == "True":
            continue
        return [forbidden(f"status.conditions[{kind}]", detail, FIX)]
    return []
