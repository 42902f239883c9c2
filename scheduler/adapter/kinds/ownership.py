"""Ownership resolved, not assumed: is this object governed through a queued ancestor?

A child its governed parent created (a JobSet's Jobs, an mpi-operator launcher Job) is not queued
on its own: its ancestor is. Kueue decides that with ``FindAncestorJobManagedByKueue``
(v0.17.0 pkg/controller/jobframework/reconciler.go): walk the controller owner references
while the owner is of a kind it knows, fetch each owner, and the top-most owner of a managed
kind that carries the queue label is the managed ancestor. toposched does the same, and is
stricter in one point: an owner is only honoured when the object under the reference's name
has the reference's uid. A tenant can write any owner reference; only an owner that exists,
is of a governed kind and is itself queued takes the child out of the queue. Otherwise the
child is queued like any other object (docs/security.md).

Pure: the caller passes a lookup (the webhook's live GET, the controller's informer caches).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.kinds.base import Holding, JobKind
from scheduler.adapter.kinds.registry import BY_GROUP_KIND
from scheduler.core.workload import LABEL_QUEUE_NAME

# Kueue's managedOwnersChainLimit.
MAX_OWNER_CHAIN = 10


@dataclass(frozen=True)
class OwnerRef:
    """A controller owner reference, as written on the object (untrusted)."""

    group: str
    version: str
    kind: str
    name: str
    uid: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def spelled(self) -> str:
        return f"{self.api_version} {self.kind} {self.name}"


@dataclass(frozen=True)
class InterimKind:
    """An owner kind that is not governed but may stand between a pod and its governed
    ancestor (Kueue calls apps/v1 ReplicaSet known for the same reason)."""

    group: str
    version: str
    kind: str
    plural: str


# A Deployment's ReplicaSet; a LeaderWorkerSet's StatefulSets, and the leader pod that owns its
# group's worker StatefulSet.
INTERIM_KINDS: tuple[InterimKind, ...] = (
    InterimKind("apps", "v1", "ReplicaSet", "replicasets"),
    InterimKind("apps", "v1", "StatefulSet", "statefulsets"),
    InterimKind("", "v1", "Pod", "pods"),
)
_INTERIM = {(k.group, k.version, k.kind): k for k in INTERIM_KINDS}

OwnerLookup = Callable[[str, OwnerRef], Mapping[str, Any] | None]
"""(namespace, reference) -> the object of the reference's kind under its name (any uid), None
when there is none; raises :class:`OwnerUnreadable` when it cannot be read."""


class OwnerUnreadable(Exception):
    """An owner could not be read (API unreachable, no RBAC): nothing can be decided; retry."""


def controller_ref(obj: Mapping[str, Any]) -> OwnerRef | None:
    """The object's controller owner reference (``controller: true``), of any kind."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else ():
        if not isinstance(ref, Mapping) or ref.get("controller") is not True:
            continue
        group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
        return OwnerRef(group, version, str(ref.get("kind") or ""), str(ref.get("name") or ""),
                        str(ref.get("uid") or ""))
    return None


def governed_kind(ref: OwnerRef, kinds: Collection[JobKind], pod_level: bool = False) -> JobKind | None:
    """The kind of ``kinds`` the reference names, API version included (Kueue's
    ``matchingOwnerReference``). The pod integration's kinds (Pod, Deployment) are no managing
    ancestor of a job (their pods are managed one by one, not through them) unless
    ``pod_level``: for the default deny, a Deployment's ReplicaSet is governed through it."""
    kind = BY_GROUP_KIND.get((ref.group, ref.kind))
    if kind is None or kind not in kinds or kind.version != ref.version:
        return None
    return kind if pod_level or kind.holding is not Holding.PODS else None


def interim_kind(ref: OwnerRef) -> InterimKind | None:
    return _INTERIM.get((ref.group, ref.version, ref.kind))


def is_queued(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    value = labels.get(LABEL_QUEUE_NAME) if isinstance(labels, Mapping) else None
    return isinstance(value, str) and value != ""


@dataclass(frozen=True)
class Ancestor:
    ref: OwnerRef
    obj: Mapping[str, Any]
    kind: JobKind | None  # None: an external framework's kind (integrations.externalFrameworks)

    @property
    def uid(self) -> str:
        return str((self.obj.get("metadata") or {}).get("uid") or "")

    @property
    def spelled(self) -> str:
        return self.ref.spelled


@dataclass(frozen=True)
class Resolution:
    """What the walk found: the managed ancestor (None: the object is queued on its own), and,
    when the object claimed an owner that was not honoured, why (for logs and Events)."""

    ancestor: Ancestor | None
    unhonoured: str = ""


def managed_ancestor(obj: Mapping[str, Any], lookup: OwnerLookup | None, kinds: Collection[JobKind],
                     interim: bool = False, external: Collection[tuple[str, str, str]] = (),
                     pod_level: bool = False) -> Resolution:
    """The top-most queued ancestor of a governed kind (``kinds``, or an external framework's
    (group, version, kind) in ``external``) of ``obj``, by its controller owner references, each
    owner fetched and checked to carry the reference's uid. ``interim``: walk through
    :data:`INTERIM_KINDS` too (a pod's ReplicaSet). Without a ``lookup`` nothing can be
    resolved, so nothing is honoured. Raises :class:`OwnerUnreadable` (a read failed, the chain
    is cyclic or longer than Kueue's limit): the caller fails closed."""
    namespace = str((obj.get("metadata") or {}).get("namespace") or "default")
    seen: set[str] = set()
    current, top, unhonoured = obj, None, ""
    while True:
        ref = controller_ref(current)
        if ref is None:
            return Resolution(top, unhonoured)
        kind = governed_kind(ref, kinds, pod_level)
        managed = kind is not None or (ref.group, ref.version, ref.kind) in external
        if not managed and not (interim and interim_kind(ref) is not None):
            return Resolution(top, unhonoured)  # an owner of a kind toposched does not govern
        if lookup is None:
            return Resolution(top, unhonoured or f"{ref.spelled} not checked (no owner lookup)")
        if ref.uid in seen or len(seen) >= MAX_OWNER_CHAIN:
            raise OwnerUnreadable(f"the owner chain of {namespace}/{(obj.get('metadata') or {}).get('name')} is "
                                  f"cyclic or longer than {MAX_OWNER_CHAIN}")
        seen.add(ref.uid)
        owner = lookup(namespace, ref)
        found_uid = str(((owner or {}).get("metadata") or {}).get("uid") or "")
        if owner is None or not ref.uid or found_uid != ref.uid:
            why = "does not exist" if owner is None else f"has uid {found_uid}, not {ref.uid or 'none'}"
            return Resolution(top, unhonoured or f"owner {ref.spelled} (uid {ref.uid or 'none'}) {why}")
        if managed and is_queued(owner):
            top = Ancestor(ref, owner, kind)
        elif managed and top is None and not unhonoured:
            unhonoured = f"owner {ref.spelled} is not queued (no {LABEL_QUEUE_NAME} label)"
        current = owner
