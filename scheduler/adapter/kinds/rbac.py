"""What each toposched identity may do on the governed kinds, derived from the registry.
deploy/rbac/*.yaml and the Helm chart's RBAC templates are written by hand (readable, commented);
tests/unit/test_kind_registry.py checks they grant exactly this for every kind.
"""

from __future__ import annotations

from scheduler.adapter.kinds.ownership import INTERIM_KINDS
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.registry import KINDS, watched

Grants = dict[tuple[str, str], frozenset[str]]  # (API group, resource) -> verbs

# The pod integration's writes: gates released and pods labelled into their group (patch),
# pods of an evicted Workload deleted, and update on pods/finalizers for the single-pod
# Workload's owner reference (blockOwnerDeletion); get: a node failure's pods are read from the API
# server, not the watch cache, before they are deleted or waited for (docs/health.md).
POD_VERBS = frozenset({"list", "watch", "get", "patch", "delete"})


def controller_grants() -> Grants:
    """Informers on every watched kind (list, watch) and on the objects their pod sets are read
    from (a TrainJob's runtimes); suspend / start / restore patches on the suspendable ones, and
    update on their finalizers (the Workload's owner reference carries blockOwnerDeletion: the
    OwnerReferencesPermissionEnforcement plugin asks for it); the pod integration's verbs on pods."""
    out: Grants = {}
    for kind in watched(KINDS):
        out[(kind.group, kind.plural)] = frozenset({"list", "watch", *(("patch",) if kind.suspendable else ())})
        if kind.suspendable:
            out[(kind.group, f"{kind.plural}/finalizers")] = frozenset({"update"})
        for related in kind.related:
            out[(related.group, related.plural)] = frozenset({"list", "watch"})
    out[(POD.group, POD.plural)] = POD_VERBS
    out[(POD.group, f"{POD.plural}/finalizers")] = frozenset({"update"})
    return out


def webhook_grants() -> Grants:
    """A GET of the owner an owner reference names: every governed kind, and the kinds between a
    pod and its governed ancestor (ownership is resolved, not assumed)."""
    out: Grants = {(k.group, k.plural): frozenset({"get"}) for k in KINDS}
    out.update({(k.group, k.plural): frozenset({"get"}) for k in INTERIM_KINDS})
    return out


def extender_grants() -> Grants:
    """The admission gate reads the owner of a pod routed to toposched without a workload
    annotation: the suspendable kinds; the slot book watches the pods it places (and reads one
    by name when binding)."""
    out: Grants = {(k.group, k.plural): frozenset({"get"}) for k in KINDS if k.suspendable}
    out[(POD.group, POD.plural)] = frozenset({"get", "list", "watch"})
    return out


def related_resources() -> set[tuple[str, str]]:
    return {(r.group, r.plural) for k in KINDS for r in k.related}
