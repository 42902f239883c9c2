"""Who may unsuspend a queued job: only toposched's controller, when it admits the Workload.

A managed job (an object of a suspendable governed kind carrying ``kueue.x-k8s.io/queue-name``)
is created suspended and waits in its queue; the controller unsuspends it once its Workload is admitted,
after writing the flavor's node selector and the topology assignment into its pod templates.
A user who flips ``suspend`` to false themselves would run the job past quota and topology:
Kueue re-suspends such a job after the fact; the webhook refuses the update up front, so the
pods never start. The controller is recognised by the AdmissionReview's
``request.userInfo.username`` (its ServiceAccount in a cluster, the admin certificate's CN on
the local dev cluster).

Not judged here: jobs that leave the queue in the same update (the label removed: from then on
they are not ours), and children of a queued governed parent (the JobSet controller unsuspends
its Jobs when toposched unsuspends the JobSet) - resolved, not assumed: the owner reference must
name an existing, queued object of a governed kind with that uid (``owners``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.ownership import OwnerLookup, managed_ancestor
from scheduler.adapter.kinds.registry import KINDS
from scheduler.adapter.manifest.fielderrors import FieldError, forbidden
from scheduler.core.workload import LABEL_QUEUE_NAME

DEFAULT_CONTROLLER_NAMESPACE = "toposched-system"
CONTROLLER_SERVICE_ACCOUNT = "toposched-controller"


def controller_username(namespace: str = DEFAULT_CONTROLLER_NAMESPACE,
                        service_account: str = CONTROLLER_SERVICE_ACCOUNT) -> str:
    """The username the API server gives a ServiceAccount's token (what deploy/ runs the controller as)."""
    return f"system:serviceaccount:{namespace}:{service_account}"


DEFAULT_CONTROLLER_USERS: frozenset[str] = frozenset({controller_username()})


def queue_name(obj: Mapping[str, Any]) -> str:
    """The object's queue label, "" when it has none (or a value of another type)."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    value = labels.get(LABEL_QUEUE_NAME) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) else ""


def requesting_user(request: Mapping[str, Any]) -> str:
    """``request.userInfo.username``, or "" when the review does not say (then nobody is the controller)."""
    info = request.get("userInfo")
    name = info.get("username") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) else ""


def unsuspend_errors(kind: JobKind, obj: Mapping[str, Any], old: Mapping[str, Any] | None, username: str,
                     controller_users: Collection[str], owners: OwnerLookup | None = None) -> list[FieldError]:
    """The error refusing an UPDATE that unsuspends a queued job, or none when the update may pass
    (a kind held per pod group has no suspend flag to flip)."""
    if old is None or not kind.suspendable or not kind.is_suspended(old) or kind.is_suspended(obj):
        return []
    queue = queue_name(obj)
    if not queue or username in controller_users:
        return []
    if managed_ancestor(obj, owners, KINDS).ancestor is not None:
        return []  # its queued parent is guarded; the parent's controller resumes it
    who = f"user \"{username}\"" if username else "a request without a user"
    return [forbidden(
        kind.suspend_field,
        f"only toposched's controller may unsuspend a queued {kind.kind} ({who} is not it); it does so when the "
        f"Workload is admitted by ClusterQueue quota and topology",
        f"wait for admission (kubectl get workloads -n <namespace> shows why it is pending), or remove the "
        f"{LABEL_QUEUE_NAME} label (queue \"{queue}\") to run it outside the queue (in an update of its own, "
        "while the job is still suspended: Kueue's rule, the label is immutable while it runs)")]
