"""The default deny: a queued object of a kind toposched does not govern is refused, with one
line naming the gap (issue 31, item 5). Nothing queued runs silently outside toposched.

Served at :data:`QUEUED_PATH` by a catch-all validating webhook (admission/configs.py): every
namespaced resource of every group, CREATE and UPDATE, only objects carrying
``kueue.x-k8s.io/queue-name`` (objectSelector ``Exists``), system namespaces and toposched's
own exempt. An object passes when

* it is of a governed kind (its own webhooks judge it), of a kind the admin lists in
  ``integrations.externalFrameworks``, or one of Kueue's own objects;
* it is governed through a queued ancestor (a pod of a queued Job, a LeaderWorkerSet's
  StatefulSet and pods), resolved by uid as the webhook's mutation does
  (``scheduler/adapter/kinds/ownership.py``);
* the label was already there before this UPDATE (not ours to start refusing now), or the
  UPDATE comes from toposched's controller (it labels the pods of pod groups).

Everything else - a RayJob, a Deployment, a bare pod with the label - is refused with
:meth:`~scheduler.adapter.kinds.governance.Governance.gap`'s line. Pods are gated rather than
refused once toposched has Kueue's pod integration (the registry's ``pod`` seam).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from admission.suspension import requesting_user
from scheduler.adapter.kinds.governance import GVK, Governance
from scheduler.adapter.kinds.ownership import OwnerLookup, controller_ref, is_queued, managed_ancestor

QUEUED_PATH = "/validate-queued"


def request_gvk(req: Mapping[str, Any], obj: Mapping[str, Any]) -> GVK | None:
    """(group, version, kind) of the request (``request.kind``, what the API server decoded),
    else of the object; None when neither says."""
    kind = req.get("kind")
    if isinstance(kind, Mapping) and isinstance(kind.get("kind"), str) and kind.get("kind"):
        return str(kind.get("group") or ""), str(kind.get("version") or ""), str(kind["kind"])
    api_version, name = obj.get("apiVersion"), obj.get("kind")
    if isinstance(api_version, str) and isinstance(name, str) and name:
        group, _, version = api_version.rpartition("/")
        return group, version, name
    return None


def ungoverned(req: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None,
               owners: OwnerLookup | None, governance: Governance, controller_users: Collection[str]) -> str | None:
    """The refusal of a queued object toposched does not govern, or None when it may pass.
    Raises :class:`~scheduler.adapter.kinds.ownership.OwnerUnreadable` when its owner cannot be
    read (the caller refuses: retry)."""
    if req.get("operation") not in ("CREATE", "UPDATE") or not is_queued(obj):
        return None
    if req.get("operation") == "UPDATE" and (isinstance(old, Mapping) and is_queued(old)
                                             or requesting_user(req) in controller_users):
        return None  # labelled before; or the controller labelling a pod of a pod group
    gvk = request_gvk(req, obj)
    if gvk is None:
        return "toposched webhook: the request names no kind; refusing a queued object it cannot identify"
    if governance.governs(gvk):
        return None
    if managed_ancestor(obj, owners, governance.kinds, interim=True, external=governance.external,
                        pod_level=True).ancestor:
        return None
    ref = controller_ref(obj)
    return governance.gap(gvk, ref.spelled if ref is not None else "")
