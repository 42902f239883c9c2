"""``toposched migrate-preemption-limits``: copy the PreemptionLimits an earlier toposched kept in
``kueue.x-k8s.io/v1alpha1`` (a group that is Kueue's) to ``toposched.io/v1alpha1``.

The controller does the same by itself each pass (``kube/limit_migration.py``), so an upgrade
never drops a limit in force; this command is for the admin who wants to see, or do, it first:
``--dry-run`` lists what would be copied and writes nothing. One line per old object (copied,
already there, or kept because a ``toposched.io`` object of that name says otherwise). Nothing is
deleted: the old objects and their CRD stay until the admin removes them (docs/install.md).
Exit 0: done (or nothing to do); 1: the cluster could not be read or written; 2: bad input.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from scheduler.adapter.limit_migration import COPY, migration_plan
from scheduler.errors import UserError

if TYPE_CHECKING:
    from scheduler.k8s.informer import KubeApi, Obj, Resource

# Imports inside functions: the Kubernetes client loads only when the command runs, so
# `toposched --help` stays fast (scheduler.cli imports every command module to register it).


def register(sub: Any) -> None:
    p = sub.add_parser("migrate-preemption-limits",
                       help="copy PreemptionLimits from kueue.x-k8s.io/v1alpha1 to toposched.io/v1alpha1 "
                            "(docs/quota-and-preemption.md)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--dry-run", action="store_true", help="print what would be copied; write nothing")
    p.set_defaults(func=run)


def _items(api: KubeApi, resource: Resource) -> list[Obj] | None:
    """The objects of ``resource``; None when it is not served (its CRD is not installed)."""
    from kubernetes.client.exceptions import ApiException

    try:
        return list(api.list(resource).get("items", []))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def migrate(api: KubeApi, dry_run: bool) -> list[str]:
    """Copy (or, ``dry_run``, only tell) each old PreemptionLimit; the lines to print."""
    from scheduler.k8s.informer import LEGACY_PREEMPTION_LIMITS, PREEMPTION_LIMITS

    legacy = _items(api, LEGACY_PREEMPTION_LIMITS)
    if not legacy:
        return ["no PreemptionLimit in kueue.x-k8s.io/v1alpha1: nothing to migrate"]
    current = _items(api, PREEMPTION_LIMITS)
    if current is None:
        raise UserError("the toposched.io PreemptionLimit CRD is not installed: apply "
                        "deploy/crds/toposched-preemption-limits.yaml (the chart installs it) and run again",
                        exit_code=1)
    lines = []
    for step in migration_plan(legacy, current):
        if step.action == COPY and not dry_run:
            api.create(PREEMPTION_LIMITS, step.body)
        lines.append(step.line(dry_run=dry_run))
    return [*lines, "the old objects and their CRD are left in place; delete them once no older toposched reads them"]


def run(args: argparse.Namespace) -> int:
    from kubernetes.client.exceptions import ApiException

    from scheduler.k8s.client import api_client
    from scheduler.k8s.informer import Api

    try:
        lines = migrate(Api(api_client(args.kubeconfig)), args.dry_run)
    except ApiException as exc:
        raise UserError(f"cannot migrate ({exc.status} {exc.reason}); the command needs list on "
                        "preemptionlimits.kueue.x-k8s.io and list, create on preemptionlimits.toposched.io",
                        exit_code=1) from exc
    for line in lines:
        print(line)
    return 0
