"""The job-kind registry: every kind toposched governs, one line each, and the lookups everyone
else uses (controller, webhook, extender, ``place``, adoption, RBAC, the chart's checks).

Adding a kind: write its module next to this one (a :class:`~scheduler.adapter.kinds.base.JobKind`
declaration, pure functions on dicts) and add it to :data:`KINDS` (docs/design/job-kinds.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds.base import Holding, JobKind
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.deployment import DEPLOYMENT
from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.leaderworkerset import LEADERWORKERSET
from scheduler.adapter.kinds.mpijob import MPIJOB
from scheduler.adapter.kinds.notbuilt import NOT_BUILT, KnownKind
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.pytorchjob import PYTORCHJOB
from scheduler.adapter.kinds.ray import RAYCLUSTER, RAYJOB, RAYSERVICE
from scheduler.adapter.kinds.statefulset import STATEFULSET
from scheduler.adapter.kinds.trainjob import TRAINJOB

# The registry: one line per governed kind.
KINDS: tuple[JobKind, ...] = (BATCH_JOB, JOBSET, PYTORCHJOB, MPIJOB, LEADERWORKERSET, TRAINJOB, RAYJOB, RAYCLUSTER,
                              RAYSERVICE, HYPERPODPYTORCHJOB, POD, DEPLOYMENT, STATEFULSET)

BY_FRAMEWORK: Mapping[str, JobKind] = {k.framework: k for k in KINDS}
BY_GROUP_KIND: Mapping[tuple[str, str], JobKind] = {(k.group, k.kind): k for k in KINDS}
BY_KIND: Mapping[str, JobKind] = {k.kind: k for k in KINDS}
NOT_BUILT_BY_GROUP_KIND: Mapping[tuple[str, str], KnownKind] = {(k.group, k.kind): k for k in NOT_BUILT}


def kind_of(obj: Mapping[str, Any]) -> JobKind | None:
    """The governed kind of an object dict, by its ``apiVersion`` group and ``kind`` (any
    version: a kind is one integration whatever version the object was written in); an object
    without ``apiVersion`` by its kind alone (manifests for ``place``)."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if not isinstance(kind, str):
        return None
    if not isinstance(api_version, str):
        return BY_KIND.get(kind)
    group = api_version.rpartition("/")[0]
    return BY_GROUP_KIND.get((group, kind))


def with_kind(kind: JobKind, obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with its ``kind`` and ``apiVersion``: the items of a list response have neither
    (only watch events carry them), and :func:`kind_of` reads them."""
    if obj.get("kind") == kind.kind and obj.get("apiVersion"):
        return dict(obj)
    return {**obj, "kind": kind.kind, "apiVersion": kind.api_version}


def kind_or_job(obj: Mapping[str, Any]) -> JobKind:
    """:func:`kind_of`, or a batch Job when the object says no governed kind (the webhook's
    job paths set ``kind``; a bare job spec is a Job, as it always was)."""
    return kind_of(obj) or BATCH_JOB


def by_owner_reference(ref: Mapping[str, Any]) -> JobKind | None:
    """The governed kind an owner reference names: its ``apiVersion`` and ``kind`` exactly as
    the kind's (Kueue's ``matchingOwnerReference`` compares both)."""
    found = BY_GROUP_KIND.get((str(ref.get("apiVersion") or "").rpartition("/")[0], str(ref.get("kind") or "")))
    return found if found is not None and ref.get("apiVersion") == found.api_version else None


GVK = tuple[str, str, str]  # (group, version, kind)


def external_gvk(kind: JobKind, external: Iterable[GVK]) -> GVK | None:
    """The ``integrations.externalFrameworks`` entry naming ``kind`` (its kind or one of its
    other spellings, same group and version), or None."""
    spellings = {kind.kind, *kind.aliases}
    return next((e for e in external if e[0] == kind.group and e[1] == kind.version and e[2] in spellings), None)


def enabled_kinds(frameworks: Sequence[str], external: Iterable[GVK] = ()) -> tuple[JobKind, ...]:
    """The kinds a Kueue ``integrations.frameworks`` list enables; an empty list (no
    Configuration) keeps toposched's default: every kind it governs. Kueue's pod-level
    integrations imply ``pod`` (Kueue: enabling ``deployment`` or ``statefulset`` enables it).
    A kind Kueue knows only as an external framework (``builtin=False``) is governed natively
    unless ``external`` (``integrations.externalFrameworks``) names it: then its own controller
    creates its Workloads."""
    external = tuple(external)
    named = set(frameworks)
    if named & {DEPLOYMENT.framework, STATEFULSET.framework}:
        named.add(POD.framework)
    return tuple(k for k in KINDS
                 if (not frameworks or k.framework in named or not k.builtin) and external_gvk(k, external) is None)


def unmanaged_frameworks(frameworks: Sequence[str]) -> list[str]:
    """Frameworks the Configuration enables that toposched has no integration for."""
    return [f for f in frameworks if f not in BY_FRAMEWORK]


def suspendable(kinds: Iterable[JobKind] = KINDS) -> tuple[JobKind, ...]:
    return tuple(k for k in kinds if k.suspendable)


def watched(kinds: Iterable[JobKind] = KINDS) -> tuple[JobKind, ...]:
    """Kinds whose objects the controller reads (an informer each); the pod integration's
    kinds (Pod, Deployment) are read through their pods."""
    return tuple(k for k in kinds if k.holding is not Holding.PODS)


def with_pod_groups(kinds: Iterable[JobKind] = KINDS) -> tuple[JobKind, ...]:
    return tuple(k for k in kinds if k.pod_groups is not None)


def spelled_list(kinds: Sequence[JobKind] = KINDS, last: str = "or") -> str:
    """``a Job, JobSet, ... or LeaderWorkerSet`` for messages."""
    names = [k.kind for k in kinds]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


def parent_kinds() -> tuple[JobKind, ...]:
    """Kinds that create children they govern (the parent role)."""
    return tuple(k for k in KINDS if k.children)
