"""What toposched governs, and the one line that names the gap for what it does not.

Nothing queued runs silently outside toposched: an object carrying
``kueue.x-k8s.io/queue-name`` is either of a kind toposched governs (the job-kind registry, as
the Kueue Configuration's ``integrations.frameworks`` enables), of a kind the admin listed in
``integrations.externalFrameworks`` (an external controller creates its Workloads), governed
through a queued ancestor (a pod of a queued Job), or refused by the webhook with
:meth:`Governance.gap`'s line (the default deny, ``admission/governance.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.notbuilt import NOT_BUILT
from scheduler.adapter.kinds.registry import BY_GROUP_KIND, KINDS, enabled_kinds, external_gvk
from scheduler.core.config import KueueConfig
from scheduler.core.workload import LABEL_QUEUE_NAME

KUEUE_GROUP = "kueue.x-k8s.io"
_NOT_BUILT = {(k.group, k.kind): k for k in NOT_BUILT}

GVK = tuple[str, str, str]  # (group, version, kind)


def spelled(gvk: GVK) -> str:
    group, version, kind = gvk
    return f"{group}/{version} {kind}" if group else f"{version} {kind}"


def kind_arg(gvk: GVK) -> str:
    """How ``integrations.externalFrameworks`` spells it: ``Kind.version.group``."""
    group, version, kind = gvk
    return f"{kind}.{version}.{group}"


@dataclass(frozen=True)
class Governance:
    kinds: tuple[JobKind, ...] = KINDS
    external: frozenset[GVK] = frozenset()

    @classmethod
    def from_config(cls, config: KueueConfig) -> Governance:
        """The kinds the Configuration governs. An externalFrameworks entry naming a registry
        kind in another spelling (AWS's ``HyperPodPytorchJob.v1.sagemaker.amazonaws.com`` for the
        CLI's ``HyperPodPyTorchJob``) stands for that kind as the API server spells it."""
        external = set(config.external_frameworks)
        for kind in KINDS:
            found = external_gvk(kind, config.external_frameworks)
            if found is not None:
                external.add((kind.group, kind.version, kind.kind))
        return cls(enabled_kinds(config.frameworks, config.external_frameworks), frozenset(external))

    def external_kinds(self) -> tuple[JobKind, ...]:
        """Registry kinds whose Workloads an external controller creates (never toposched)."""
        return tuple(k for k in KINDS if (k.group, k.version, k.kind) in self.external)

    def governs(self, gvk: GVK) -> bool:
        """Its queued objects are toposched's (a governed kind, at any version: its own webhook
        judges it), the admin's external controller's, or Kueue's own objects."""
        group, version, kind = gvk
        return (group == KUEUE_GROUP or gvk in self.external
                or any(k.group == group and k.kind == kind for k in self.kinds))

    def gap(self, gvk: GVK, owner: str = "") -> str:
        """The one line refusing a queued object of a kind toposched does not govern: what is
        missing, and what to do. ``owner``: the object's controller owner, when it has one."""
        group, version, kind = gvk
        what = spelled(gvk) + (f" (controlled by {owner})" if owner else "")
        governed = BY_GROUP_KIND.get((group, kind))
        known = _NOT_BUILT.get((group, kind))
        if governed is not None:
            why = (f"its integration {governed.framework} is not in the Kueue Configuration's "
                   "integrations.frameworks")
            fix = f"add {governed.framework} to integrations.frameworks, or remove the {LABEL_QUEUE_NAME} label"
        else:
            why = "no integration built" + (f": {known.note}" if known is not None and known.note else "")
            if known is None:
                why = "not a kind Kueue integrates"
            fix = (f"remove the {LABEL_QUEUE_NAME} label to run it outside the queue, or, if a controller of its "
                   f"own creates its Workloads, list {kind_arg(gvk)} in the Kueue Configuration's "
                   "integrations.externalFrameworks")
        near = sorted(kind_arg(e) for e in self.external if e != gvk and kind_arg(e).lower() == kind_arg(gvk).lower())
        if near:
            fix += f" (listed there is {near[0]}, which differs in case: Kueue matches kinds exactly)"
        return f"{what} is not governed by toposched ({why}): {fix}"
