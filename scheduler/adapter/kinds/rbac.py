"""What each toposched identity may do on the governed kinds, derived from the registry.
deploy/rbac/*.yaml and the Helm chart's RBAC templates are written by hand (readable, commented);
tests/unit/test_kind_registry.py checks they grant exactly this for every kind.
"""

from __future__ import annotations

from scheduler.adapter.kinds.ownership import INTERIM_KINDS
from scheduler.adapter.kinds.registry import KINDS

Grants = dict[tuple[str, str], frozenset[str]]  # (API group, resource) -> verbs


def controller_grants() -> Grants:
    """Informers on every kind (list, watch); suspend / start / restore patches on the
    suspendable ones, and update on their finalizers (the Workload's owner reference carries
    blockOwnerDeletion: the OwnerReferencesPermissionEnforcement plugin asks for it)."""
    out: Grants = {}
    for kind in KINDS:
        out[(kind.group, kind.plural)] = frozenset({"list", "watch", *(("patch",) if kind.suspendable else ())})
        if kind.suspendable:
            out[(kind.group, f"{kind.plural}/finalizers")] = frozenset({"update"})
    return out


def webhook_grants() -> Grants:
    """A GET of the owner an owner reference names: every governed kind, and the kinds between a
    pod and its governed ancestor (ownership is resolved, not assumed)."""
    out: Grants = {(k.group, k.plural): frozenset({"get"}) for k in KINDS}
    out.update({(k.group, k.plural): frozenset({"get"}) for k in INTERIM_KINDS})
    return out


def extender_grants() -> Grants:
    """The admission gate reads the owner of a pod routed to toposched without a workload
    annotation: the suspendable kinds."""
    return {(k.group, k.plural): frozenset({"get"}) for k in KINDS if k.suspendable}
