"""What migrating PreemptionLimits from ``kueue.x-k8s.io/v1alpha1`` (where toposched before
issue 41 kept them, a group that is Kueue's) to toposched's own ``toposched.io/v1alpha1`` does,
as pure data, for the controller (``kube/limit_migration.py``) and the command
(``toposched migrate-preemption-limits``) alike.

Each old object whose name has no PreemptionLimit in ``toposched.io`` is copied: its name,
labels, annotations and spec as written (the status is not: its counts are recounted by the
controller), with the annotation :data:`ANN_MIGRATED_FROM` saying where it came from. One that
has a namesake already is left alone and told apart: the same spec (migrated before), or a
different one (the ``toposched.io`` object wins: an admin wrote it after the move). Nothing is
ever deleted: the old objects and their CRD stay until the admin removes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from scheduler.models.preemption_limit import API_VERSION, LEGACY_API_VERSION

ANN_MIGRATED_FROM = "toposched.io/migrated-from"
Action = Literal["copy", "already-migrated", "kept-existing"]
COPY: Final = "copy"
DONE: Final = "already-migrated"
DIFFERS: Final = "kept-existing"

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class MigrationStep:
    name: str
    action: Action
    body: Mapping[str, Any] = field(default_factory=dict)  # the object to create (COPY only)

    def line(self, *, dry_run: bool = False) -> str:
        old = f"PreemptionLimit {self.name} ({LEGACY_API_VERSION})"
        if self.action == COPY:
            verb = "would be copied" if dry_run else "copied"
            return f"{old}: {verb} to {API_VERSION} with its spec; the old object is left in place"
        if self.action == DONE:
            return f"{old}: already in {API_VERSION} with the same spec; nothing to do"
        return (f"{old}: {API_VERSION} has a PreemptionLimit {self.name} with another spec; it is kept and "
                "the old object is not copied")


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def copy_of(legacy: Obj) -> dict[str, Any]:
    """The ``toposched.io`` object for one old PreemptionLimit (spec kept as written)."""
    meta = _meta(legacy)
    name = str(meta.get("name") or "")
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    annotations[ANN_MIGRATED_FROM] = f"{LEGACY_API_VERSION}/preemptionlimits/{name}"
    new_meta: dict[str, Any] = {"name": name, "annotations": annotations}
    if meta.get("labels"):
        new_meta["labels"] = dict(meta["labels"])
    return {"apiVersion": API_VERSION, "kind": "PreemptionLimit", "metadata": new_meta,
            "spec": dict(legacy.get("spec") or {})}


def migration_plan(legacy: Sequence[Obj], current: Sequence[Obj]) -> tuple[MigrationStep, ...]:
    """One step per old object, by name."""
    have = {str(_meta(o).get("name") or ""): o for o in current}
    steps = []
    for obj in sorted(legacy, key=lambda o: str(_meta(o).get("name") or "")):
        name = str(_meta(obj).get("name") or "")
        if not name:
            continue
        existing = have.get(name)
        if existing is None:
            steps.append(MigrationStep(name, COPY, copy_of(obj)))
        elif dict(existing.get("spec") or {}) == dict(obj.get("spec") or {}):
            steps.append(MigrationStep(name, DONE))
        else:
            steps.append(MigrationStep(name, DIFFERS))
    return tuple(steps)


__all__ = ["ANN_MIGRATED_FROM", "COPY", "DIFFERS", "DONE", "MigrationStep", "copy_of", "migration_plan"]
