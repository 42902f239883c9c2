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

Of everything else, what runs pods - a kind Kueue integrates that toposched does not build (an
AppWrapper), a kind the Configuration leaves out, a DaemonSet, a bare ReplicaSet, a CRD whose
object holds a pod template - is refused with
:meth:`~scheduler.adapter.kinds.governance.Governance.gap`'s line. What runs none (a Service, a
ConfigMap, a Secret: Helm charts and kustomizations put common labels on every object) passes
with a warning that the label has no effect; a CronJob passes too, with a warning when its Jobs
will not be queued (the label is not in its ``jobTemplate``). Pods are gated rather than
refused (Kueue's pod integration, the registry's ``pod`` seam).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from admission.suspension import requesting_user
from scheduler.adapter.kinds.governance import CRONJOB, GVK, Governance, cronjob_warning, no_effect
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


@dataclass(frozen=True)
class DenyVerdict:
    """The default deny's answer: refused with ``refusal``, or let through with ``warnings``."""

    refusal: str | None = None
    warnings: tuple[str, ...] = ()


def judge(req: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None,
          owners: OwnerLookup | None, governance: Governance, controller_users: Collection[str]) -> DenyVerdict:
    """The default deny on one request. Raises
    :class:`~scheduler.adapter.kinds.ownership.OwnerUnreadable` when the owner of an object that
    runs pods cannot be read (the caller refuses: retry)."""
    if req.get("operation") not in ("CREATE", "UPDATE") or not is_queued(obj):
        return DenyVerdict()
    user = requesting_user(req)
    # labelled before (not ours to start refusing now), or the controller labelling a pod of a pod group
    relabel = req.get("operation") == "UPDATE" and (isinstance(old, Mapping) and is_queued(old)
                                                    or user in controller_users)
    gvk = request_gvk(req, obj)
    if gvk is None:
        return DenyVerdict(None if relabel else
                           "toposched webhook: the request names no kind; refusing a queued object it cannot identify")
    if governance.governs(gvk):
        return DenyVerdict()
    # Warned on every write a user makes (each kubectl apply of the chart), never to a controller
    # copying its owner's labels: nobody reads those.
    warn = user not in controller_users and controller_ref(obj) is None
    if (gvk[0], gvk[2]) == CRONJOB:
        warning = cronjob_warning(obj, governance)
        return DenyVerdict(warnings=(warning,) if warning and warn else ())
    pods_at = governance.pods_at(gvk, obj)
    if pods_at is None:  # runs no pods: the label does nothing, here as in Kueue
        return DenyVerdict(warnings=(no_effect(gvk),) if warn else ())
    if relabel:
        return DenyVerdict()
    if managed_ancestor(obj, owners, governance.kinds, interim=True, external=governance.external,
                        pod_level=True).ancestor:
        return DenyVerdict()
    ref = controller_ref(obj)
    return DenyVerdict(governance.gap(gvk, ref.spelled if ref is not None else "", pods_at))

