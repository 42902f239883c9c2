"""What toposched governs, and the one line that names the gap for what it does not.

Nothing queued runs silently outside toposched: an object carrying
``kueue.x-k8s.io/queue-name`` is either of a kind toposched governs (the job-kind registry, as
the Kueue Configuration's ``integrations.frameworks`` enables), of a kind the admin listed in
``integrations.externalFrameworks`` (an external controller creates its Workloads), governed
through a queued ancestor (a pod of a queued Job), or refused by the webhook with
:meth:`Governance.gap`'s line (the default deny, ``admission/governance.py``) - when it runs
pods. The label on an object that runs none (a Service, a ConfigMap: Kubernetes' common labels
reach them) has no effect, in Kueue as here, and is let through with :func:`no_effect`'s
warning; a CronJob's Jobs are queued by the label of its ``jobTemplate`` (:func:`cronjob_warning`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.notbuilt import NOT_BUILT
from scheduler.adapter.kinds.podshape import HOLDS_TEMPLATE_ONLY, POD_CREATING, TOO_LARGE, pod_template_path
from scheduler.adapter.kinds.registry import BY_GROUP_KIND, KINDS, enabled_kinds, external_gvk
from scheduler.core.config import KueueConfig
from scheduler.core.workload import LABEL_QUEUE_NAME

KUEUE_GROUP = "kueue.x-k8s.io"
_NOT_BUILT = {(k.group, k.kind): k for k in NOT_BUILT}

GVK = tuple[str, str, str]  # (group, version, kind)
CRONJOB = ("batch", "CronJob")

# Kubernetes' pod-creating kinds Kueue has no integration for (a Deployment's ReplicaSet passes
# through its queued Deployment before the gap is named): why, and the way to queue its pods.
_BUILTIN_GAPS = {
    ("apps", "DaemonSet"): ("Kueue does not govern DaemonSets: it runs a pod on every node it selects, outside the "
                            "queue", ""),
    ("apps", "ReplicaSet"): ("Kueue does not govern ReplicaSets: it would run its pods outside the queue",
                             "queue its pods through a Deployment (Kueue's deployment integration), or "),
    ("", "ReplicationController"): ("Kueue does not govern ReplicationControllers: it would run its pods outside "
                                    "the queue", "queue its pods through a Deployment (Kueue's deployment "
                                    "integration), or "),
}


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

    def pods_at(self, gvk: GVK, obj: Mapping[str, Any]) -> str | None:
        """Where a queued object of a kind toposched does not govern runs pods: "" for a kind
        that does (Kubernetes' pod-creating kinds, every kind Kueue integrates), the path of a
        pod template in any other kind's object (or :data:`~podshape.TOO_LARGE`), None when it
        runs none. A CronJob runs Jobs, judged on their own: None."""
        group, _, kind = gvk
        if (group, kind) == CRONJOB or (group, kind) in HOLDS_TEMPLATE_ONLY:
            return None
        if (group, kind) in POD_CREATING or (group, kind) in BY_GROUP_KIND or (group, kind) in _NOT_BUILT:
            return ""
        return pod_template_path(obj)

    def gap(self, gvk: GVK, owner: str = "", pods_at: str = "") -> str:
        """The one line refusing a queued object of a kind toposched does not govern: what is
        missing, and what to do. ``owner``: the object's controller owner, when it has one;
        ``pods_at``: where an object of a kind nobody here knows holds its pod template."""
        group, version, kind = gvk
        what = spelled(gvk) + (f" (controlled by {owner})" if owner else "")
        governed = BY_GROUP_KIND.get((group, kind))
        known = _NOT_BUILT.get((group, kind))
        builtin = _BUILTIN_GAPS.get((group, kind))
        if builtin is not None:
            why, how = builtin
            return (f"{what} is not governed by toposched ({why}): {how}remove the {LABEL_QUEUE_NAME} label to run it "
                    "outside the queue")
        if governed is not None:
            why = (f"its integration {governed.framework} is not in the Kueue Configuration's "
                   "integrations.frameworks")
            fix = f"add {governed.framework} to integrations.frameworks, or remove the {LABEL_QUEUE_NAME} label"
        else:
            why = "no integration built" + (f": {known.note}" if known is not None and known.note else "")
            if known is None:
                why = "not a kind Kueue integrates" + (
                    f", and {TOO_LARGE[1:-1]}, so it is taken to run pods" if pods_at == TOO_LARGE
                    else f", and it runs pods: {pods_at} is a pod template" if pods_at else "")
            fix = (f"remove the {LABEL_QUEUE_NAME} label to run it outside the queue, or, if a controller of its "
                   f"own creates its Workloads, list {kind_arg(gvk)} in the Kueue Configuration's "
                   "integrations.externalFrameworks")
        near = sorted(kind_arg(e) for e in self.external if e != gvk and kind_arg(e).lower() == kind_arg(gvk).lower())
        if near:
            fix += f" (listed there is {near[0]}, which differs in case: Kueue matches kinds exactly)"
        return f"{what} is not governed by toposched ({why}): {fix}"


def no_effect(gvk: GVK) -> str:
    """The warning for a queued object that runs no pods: the label does nothing on it."""
    return (f"toposched: the {LABEL_QUEUE_NAME} label has no effect on a {spelled(gvk)}: it runs no pods, so there "
            "is nothing to queue (Kueue ignores it too)")


def _queue_label(meta: Any) -> bool:
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return isinstance(labels, Mapping) and bool(labels.get(LABEL_QUEUE_NAME))


def cronjob_warning(obj: Mapping[str, Any], governance: Governance) -> str | None:
    """A queued CronJob runs Jobs, each queued by its own label, which the CronJob controller
    copies from ``spec.jobTemplate.metadata.labels`` (not from the CronJob's): the warning when
    its Jobs will not be queued, or will be refused; None when they will be queued."""
    spec = obj.get("spec")
    template = spec.get("jobTemplate") if isinstance(spec, Mapping) else None
    if not _queue_label(template.get("metadata") if isinstance(template, Mapping) else None):
        return (f"toposched: the {LABEL_QUEUE_NAME} label on a CronJob does not queue the Jobs it creates (they take "
                "their labels from spec.jobTemplate.metadata.labels) and they will run outside the queue: to queue "
                f"them, put the label in spec.jobTemplate.metadata.labels")
    if not governance.governs(("batch", "v1", "Job")):
        return (f"toposched: the Jobs this CronJob creates carry the {LABEL_QUEUE_NAME} label and will be refused: "
                "batch/job is not in the Kueue Configuration's integrations.frameworks")
    return None
