"""What a job kind declares (:class:`JobKind`), and the kind-agnostic behaviour built on it.

A kind module (``batch.py``, ``jobset.py``, ...) declares, as plain data and pure functions on
object dicts, everything the controller, the webhook, the extender, ``toposched place``,
adoption, RBAC and the chart need to know about one kind: its group/version/kind, Kueue's
framework name, where its suspend flag is, its pod sets (name, count, template, where the
template sits, rank label), when it is finished / how many pods are active / ready, which
children it creates, and the field types the webhook's shape gate checks. The rest here is
derived from that declaration once, for every kind: suspend / start / restore patches,
JSON pointers and field paths of the pod templates, webhook paths.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scheduler.core.kueue_names import GATE_TOPOLOGY
from scheduler.core.topology_request import ANN_UNCONSTRAINED
from scheduler.core.workload import ANN_WORKLOAD, LABEL_PODSET, WorkloadFormatError

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class MapKey:
    """A path step that is a key of a map the user chose (``pytorchReplicaSpecs[Master]``),
    not a field name: field paths print it in brackets."""

    name: str


PathPart = str | int | MapKey
TemplatePath = tuple[PathPart, ...]


def field_path(path: TemplatePath) -> str:
    """``spec.replicatedJobs[0].template`` / ``spec.pytorchReplicaSpecs[Master].template``:
    how field errors name a place in the object."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, MapKey):
            out += f"[{part.name}]"
        else:
            out += f".{part}" if out else part
    return out


def json_pointer(path: TemplatePath) -> str:
    """RFC 6901 pointer of a path (JSON patches of the mutating webhook)."""
    def token(part: PathPart) -> str:
        text = part.name if isinstance(part, MapKey) else str(part)
        return text.replace("~", "~0").replace("/", "~1")
    return "".join(f"/{token(p)}" for p in path)


def _step(part: PathPart) -> str | int:
    return part.name if isinstance(part, MapKey) else part


@dataclass(frozen=True)
class PodSetSource:
    """One pod set of a job as its kind defines it: what the Workload's pod set is built from,
    and where in the object its pod template sits (the webhook mutates and validates it there,
    the controller patches it there at start)."""

    name: str
    count: int
    template: Obj
    path: TemplatePath
    pod_index_label: str | None = None  # Kueue's PodIndexLabel (TAS ranks)
    sub_group: tuple[str, int] | None = None  # (index label, count) of a pod set made of child jobs
    min_count: int | None = None  # partial admission
    spec_only: bool = False  # pod-group integrations keep only the template's spec in the Workload
    # The template is the kind's default, not in the object (a RayJob's submitter without a
    # submitterPodTemplate): the start patch writes it out whole.
    defaulted: bool = False

    @property
    def template_path(self) -> str:
        return field_path(self.path)

    @property
    def annotations_path(self) -> str:
        return f"{self.template_path}.metadata.annotations"

    @property
    def annotations(self) -> Mapping[str, str]:
        return (self.template.get("metadata") or {}).get("annotations") or {}


@dataclass(frozen=True)
class FinishState:
    """Kueue's ``Finished(ctx) (message, success, finished)`` of a job: ``reason`` is the
    Workload's Finished reason (``Succeeded`` / ``Failed``) once finished."""

    finished: bool
    reason: str = ""
    message: str = ""


NOT_FINISHED = FinishState(False)


def never_finishes(_: Obj) -> FinishState:
    """A serving kind's (Deployment, StatefulSet, LeaderWorkerSet): it never finishes; its
    Workloads go with it (or with its pod groups)."""
    return NOT_FINISHED


def no_active_pods(_: Obj) -> int:
    """A serving kind's: its pods are counted through its pod groups, not by the kind."""
    return 0


def never_ready(_: Obj) -> bool:
    """A serving kind's: readiness is its pod groups', not the kind's."""
    return False


def finished(success: bool, message: str) -> FinishState:
    return FinishState(True, "Succeeded" if success else "Failed", message)


def finish_from_conditions(job: Obj, succeeded: str, failed: str, succeeded_message: str | None,
                           failed_message: str) -> FinishState:
    """Finished when the job's ``succeeded`` or ``failed`` condition is True (Kueue's Finished
    reason Succeeded / Failed, with the condition's message, or the given default; a
    ``succeeded_message`` given replaces the condition's message)."""
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("status") != "True":
            continue
        if cond.get("type") == succeeded:
            return FinishState(True, "Succeeded", succeeded_message or cond.get("message") or "succeeded")
        if cond.get("type") == failed:
            return FinishState(True, "Failed", cond.get("message") or failed_message)
    return FinishState(False)


def condition_true(job: Obj, condition: str) -> bool:
    return any(c.get("type") == condition and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


def true_condition(obj: Obj, condition: str) -> Mapping[str, Any] | None:
    """The object's condition of that type when it is True (its message is read), else None."""
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == condition and cond.get("status") == "True":
            return cond
    return None


def as_int(value: Any, default: int) -> int:
    """A count field: absent -> ``default``; JSON numbers and numeric strings accepted (the
    HyperPod CLI writes integers where Kubernetes types would have strings)."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class PodSetStart:
    """What the controller injects into one pod set's template when it starts the job."""

    name: str
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # e.g. the unconstrained-topology annotation Kueue adds for implicit TAS, so the pods are
    # recognised as TAS pods (counted once, from the assignment) and not as foreign usage.
    annotations: Mapping[str, str] = field(default_factory=dict)
    count: int | None = None  # the admitted pod count (partial admission may have reduced it)
    # Admitted with a topology assignment: kinds placed by the topology ungater get Kueue's
    # ``kueue.x-k8s.io/topology`` scheduling gate in this template (``podset.FromAssignment``).
    topology_assigned: bool = False


def template_start_patch(template: Obj, start: PodSetStart, workload_name: str,
                         topology_gate: bool = False) -> dict[str, Any]:
    """Merge patch of one pod template at start: the flavor's (and required domain's) node
    selector, its tolerations, the workload annotation and the pod-set label; with
    ``topology_gate`` and a topology assignment, Kueue's topology scheduling gate too (the list
    is sent whole)."""
    selector = {**((template.get("spec") or {}).get("nodeSelector") or {}), **start.node_selector}
    spec_patch: dict[str, Any] = {"nodeSelector": selector}
    if start.tolerations:
        existing = list((template.get("spec") or {}).get("tolerations") or [])
        spec_patch["tolerations"] = existing + [dict(t) for t in start.tolerations if dict(t) not in existing]
    if topology_gate and start.topology_assigned:
        gates = list((template.get("spec") or {}).get("schedulingGates") or [])
        if not any(g.get("name") == GATE_TOPOLOGY for g in gates):
            spec_patch["schedulingGates"] = gates + [{"name": GATE_TOPOLOGY}]
    return {"metadata": {"annotations": {**start.annotations, ANN_WORKLOAD: workload_name},
                         "labels": {LABEL_PODSET: start.name}},
            "spec": spec_patch}


def template_restore_patch(current: Obj, original: Obj) -> dict[str, Any] | None:
    """Merge patch that undoes :func:`template_start_patch` (Kueue restores from the Workload's
    pod set templates), or None when there is nothing to restore."""
    ospec, cspec = original.get("spec") or {}, current.get("spec") or {}
    cmeta = current.get("metadata") or {}
    spec_patch: dict[str, Any] = {}
    current_selector, original_selector = cspec.get("nodeSelector") or {}, ospec.get("nodeSelector") or {}
    if current_selector != original_selector:
        # a merge patch merges maps: the keys the start added are removed one by one
        spec_patch["nodeSelector"] = {**{k: None for k in current_selector if k not in original_selector},
                                      **original_selector} if original_selector else None
    if (cspec.get("tolerations") or []) != (ospec.get("tolerations") or []):
        spec_patch["tolerations"] = ospec.get("tolerations") or None
    if (cspec.get("schedulingGates") or []) != (ospec.get("schedulingGates") or []):
        spec_patch["schedulingGates"] = ospec.get("schedulingGates") or None
    meta_patch: dict[str, Any] = {}
    original_ann = (original.get("metadata") or {}).get("annotations") or {}
    stale = {k: None for k in (cmeta.get("annotations") or {})
             if k in (ANN_WORKLOAD, ANN_UNCONSTRAINED) and k not in original_ann}
    if stale:
        meta_patch["annotations"] = stale
    if LABEL_PODSET in (cmeta.get("labels") or {}):
        meta_patch["labels"] = {LABEL_PODSET: None}
    patch: dict[str, Any] = {}
    if spec_patch:
        patch["spec"] = spec_patch
    if meta_patch:
        patch["metadata"] = meta_patch
    return patch or None


def merge_patched(obj: Obj, patch: Obj) -> dict[str, Any]:
    """``obj`` with a JSON merge patch (RFC 7386) applied: what the API server would store.
    Used where the patched object sits inside a list (a merge patch replaces lists whole)."""
    out = copy.deepcopy(dict(obj))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_patched(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _get(obj: Any, path: Sequence[str | int]) -> Any:
    for step in path:
        if isinstance(step, int):
            obj = obj[step] if isinstance(obj, list) and step < len(obj) else None
        else:
            obj = obj.get(step) if isinstance(obj, Mapping) else None
    return obj


def _merged_at(value: Any, path: Sequence[str | int], patch: Obj) -> Any:
    """``value`` with ``patch`` merged at ``path`` (lists copied whole, entries merged)."""
    if not path:
        return merge_patched(value if isinstance(value, Mapping) else {}, patch)
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        items = list(value) if isinstance(value, list) else []
        items[step] = _merged_at(items[step], rest, patch)
        return items
    out = dict(value) if isinstance(value, Mapping) else {}
    out[step] = _merged_at(out.get(step), rest, patch)
    return out


def _nested(path: Sequence[str | int], leaf: Any) -> Any:
    for step in reversed(path):
        leaf = {step: leaf}
    return leaf


def templates_merge_patch(obj: Obj, patches: Sequence[tuple[TemplatePath, Obj]]) -> dict[str, Any]:
    """One JSON merge patch of ``obj`` applying each template patch at its path. A merge patch
    replaces lists whole, so below the first list on a path the patch carries the whole list
    (every entry, the patched ones merged); maps are patched key by key."""
    out: dict[str, Any] = {}
    for path, patch in patches:
        steps = [_step(p) for p in path]
        first_list = next((i for i, s in enumerate(steps) if isinstance(s, int)), len(steps))
        if first_list == len(steps):
            out = merge_patched(out, _nested(steps, dict(patch)))
            continue
        head = steps[:first_list]
        current = _get(out, head)
        if current is None:
            current = copy.deepcopy(_get(obj, head))
        out = merge_patched(out, _nested(head, _merged_at(current, steps[first_list:], patch)))  # list: whole
    return out


Patch = dict[str, Any]
PodSetsOf = Callable[[Obj], list[PodSetSource]]


def _never(_: Obj) -> bool:
    return True


@dataclass(frozen=True)
class PodGroups:
    """A kind held per pod group instead of suspended (Kueue's pod-group integrations: the
    LeaderWorkerSet, the StatefulSet). One Workload per group, prebuilt by the controller; the
    pods get the group's labels from :attr:`pod_role` and are held until their group's Workload
    is admitted."""

    # The name of the object owning a pod (None: not one of its pods).
    owner_name: Callable[[Obj], str | None]
    # How many groups (Workloads) the object has now.
    group_count: Callable[[Obj], int]
    # (group index, role = pod set name, group size) of one of its pods; None: not yet known.
    pod_role: Callable[[Obj, Obj], tuple[int, str, int] | None]
    # The mutating webhook's JSON patch ops on the pod templates at CREATE (Kueue's webhook).
    template_defaults: Callable[[Obj, list[dict[str, Any]], str | None], None]
    # One group per object, named like a job's Workload (a StatefulSet): no group index.
    single_group: bool = False
    # Annotations each pod of a group gets besides the group's total count and role.
    pod_annotations: Mapping[str, str] = field(default_factory=dict)


class Holding(StrEnum):
    """How a kind's pods are held until its Workload is admitted."""

    SUSPEND = "suspend"  # created suspended, unsuspended with the admission (``suspend_path``)
    POD_GROUPS = "pod groups"  # prebuilt Workloads per group, pods labelled into them (``pod_groups``)
    PODS = "pods"  # the pod integration: pods gated at creation, a Workload per pod or pod group


@dataclass(frozen=True)
class RelatedResource:
    """An object a kind's pod sets are read from (a TrainJob's ``TrainingRuntime``)."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True


# (kind, namespace, name) -> the related object, or None when there is none.
Related = Callable[[str, str, str], "Obj | None"]
# (field path, Kubernetes error type, detail, the value refused) of a webhook refusal
KindError = tuple[str, str, str, Any]


def _no_errors(_: Obj, __: int) -> list[KindError]:
    return []


def _not_skipped(_: Obj) -> bool:
    return False


@dataclass(frozen=True)
class JobKind:
    """One job kind toposched governs, as Kueue's jobframework integration for it.

    The callables are pure functions on the object dict. A kind is either suspendable
    (``suspend_path``: the webhook creates it suspended, the controller unsuspends it when its
    Workload is admitted) or held per pod group (``pod_groups``)."""

    group: str
    version: str
    kind: str
    plural: str
    framework: str  # Kueue's integrations.frameworks name, e.g. "batch/job"
    pod_sets: PodSetsOf
    finish_state: Callable[[Obj], FinishState]
    active_pods: Callable[[Obj], int]
    pods_ready: Callable[[Obj], bool]
    shape: Mapping[str, Any]  # field types of the webhook's shape gate (scheduler/adapter/manifest/shape.py)
    suspend_path: tuple[str, ...] | None = ("spec", "suspend")
    pod_groups: PodGroups | None = None
    # The rank label of its pods (Kueue's PodIndexLabel), per pod set name; documentation and
    # `place`; the pod sets carry it.
    rank_label: str | None = None
    # Parent role: the kinds (Kueue framework names) of the children it creates and governs
    # through itself (a JobSet's Jobs); such children are never queued on their own.
    children: tuple[str, ...] = ()
    # Kueue's single-pod-set rules (a batch Job: no PodSet groups; partial admission).
    single_pod_set: bool = False
    # Kind-specific parts of start / restore (a batch Job's parallelism under partial admission).
    start_extra: Callable[[Obj, Sequence[PodSetStart]], Patch] | None = None
    restore_extra: Callable[[Obj, Sequence[Obj]], Patch] | None = None
    restorable: Callable[[Obj], bool] = _never  # besides "suspended and no pods active"
    # Kinds whose pod templates are not in the object (a TrainJob's are in its runtime): the pod
    # sets read with the related objects, which the caller looks up (informers, a live GET, the
    # other documents of a file).
    pod_sets_from: Callable[[Obj, Related], list[PodSetSource]] | None = None
    related: tuple[RelatedResource, ...] = ()
    # What Kueue v0.19 adds to the pod sets' templates for the containers the kind's operator
    # injects at pod creation (KubeRay's submitter sidecar, autoscaler, Redis clean-up Job), so
    # quota is charged for them: applied by ``kinds/charging.py`` under ``--kueue-version v0.19``.
    injected_charges: Callable[[Obj, list[PodSetSource]], list[PodSetSource]] | None = None
    # Kinds whose start / restore is not the template patch at each pod set's path (a TrainJob
    # writes its templates into a runtime patch, then unsuspends: two writes, in order).
    custom_start: Callable[[Obj, str, Sequence[PodSetStart]], list[Patch]] | None = None
    custom_restore: Callable[[Obj, Sequence[Obj]], Patch | None] | None = None
    # Its pods run under whichever scheduler their controller names: admitted pod sets get
    # Kueue's topology gate in their templates and the topology ungater pins each pod to its
    # domain (docs/design/new-kinds.md).
    topology_gate: bool = False
    # Objects of the kind that are not managed although queued (a RayJob on an existing cluster).
    skipped: Callable[[Obj], bool] = _not_skipped
    # Kind-specific refusals of the validating webhook on a queued object (Kueue's messages),
    # given the release's cap on a Workload's pod sets (``workload_checks.max_pod_sets``): a kind
    # whose Kueue webhook counts its pod sets (Ray's worker groups) refuses with that count.
    validation: Callable[[Obj, int], list[KindError]] = _no_errors
    # Extra JSON patch ops of the mutating webhook at CREATE of a queued object (a TrainJob's
    # Kueue runtime patch; a Deployment's pod-template stamp).
    # ``(object, ops, its labels once defaulted)``.
    create_defaults: Callable[[Obj, list[dict[str, Any]], Mapping[str, str]], None] | None = None
    # Kueue has an integration of this name (``integrations.frameworks``); False: Kueue knows the
    # kind only as an external framework (the HyperPodPyTorchJob), so toposched governs it
    # natively unless ``integrations.externalFrameworks`` lists it.
    builtin: bool = True
    aliases: tuple[str, ...] = ()  # other spellings of ``kind`` in externalFrameworks entries

    # ---- identity
    @property
    def holding(self) -> Holding:
        if self.suspend_path is not None:
            return Holding.SUSPEND
        return Holding.POD_GROUPS if self.pod_groups is not None else Holding.PODS

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gvk(self) -> str:
        """Go's ``schema.GroupVersionKind.String()`` (Kueue's job-owner-gvk annotation)."""
        return f"{self.group}/{self.version}, Kind={self.kind}"

    @property
    def spelled(self) -> str:
        """How messages name the kind: ``jobset.x-k8s.io/v1alpha2 JobSet``."""
        return f"{self.api_version} {self.kind}"

    @property
    def webhook_suffix(self) -> str:
        """``batch-v1-job``: the tail of the kind's webhook paths (controller-runtime's)."""
        return f"{self.group.replace('.', '-')}-{self.version}-{self.kind.lower()}"

    @property
    def mutate_path(self) -> str:
        return f"/mutate-{self.webhook_suffix}"

    @property
    def validate_path(self) -> str:
        return f"/validate-{self.webhook_suffix}"

    def template_paths(self, obj: Obj) -> list[tuple[str, Obj]]:
        """(JSON pointer, template) of every pod template in the object the controller creates
        a pod set for."""
        return [(json_pointer(ps.path), ps.template) for ps in self.pod_sets(obj) if not ps.defaulted]

    def read_pod_sets(self, obj: Obj, related: Related | None = None) -> list[PodSetSource]:
        """The pod sets the Workload gets: from the object, or, for a kind whose templates live
        in other objects, from those (``related``). Raises :class:`WorkloadFormatError` when
        they are needed and cannot be had."""
        if self.pod_sets_from is None:
            return self.pod_sets(obj)
        if related is None:
            wanted = " or ".join(r.kind for r in self.related)
            raise WorkloadFormatError(f"a {self.kind}'s pod sets come from its {wanted}: give it too (in the same "
                                      "file for toposched place)")
        return self.pod_sets_from(obj, related)

    # ---- suspension (Kueue's GenericJob IsSuspended / Suspend / RunWithPodSetsInfo / RestorePodSetsInfo)
    @property
    def suspendable(self) -> bool:
        return self.suspend_path is not None

    @property
    def suspend_field(self) -> str:
        return ".".join(self.suspend_path or ())

    def is_suspended(self, obj: Obj) -> bool:
        value: Any = obj
        for step in self.suspend_path or ():
            value = value.get(step) if isinstance(value, Mapping) else None
        return value is True

    def _suspend(self, flag: bool) -> Patch:
        return _nested(list(self.suspend_path or ()), flag)  # type: ignore[no-any-return]

    def stop_patch(self, obj: Obj) -> Patch:
        """Suspend only: a batch Job's template may not change while it has a startTime; the
        templates are restored once nothing of the run is left (:meth:`restore_patch`)."""
        return self._suspend(True)

    def start_patch(self, obj: Obj, workload_name: str, starts: Sequence[PodSetStart]) -> Patch:
        """Unsuspend with each admitted pod set's node selector, tolerations, the workload
        annotation and the pod-set label: one merge patch, applied while the job is still
        suspended, which is when its templates may change."""
        by_name = {s.name: s for s in starts}
        patches = []
        for ps in self.pod_sets(obj):
            if ps.name not in by_name:
                continue
            patch = template_start_patch(ps.template, by_name[ps.name], workload_name, self.topology_gate)
            patches.append((ps.path, merge_patched(ps.template, patch) if ps.defaulted else patch))
        patch = merge_patched(templates_merge_patch(obj, patches), self._suspend(False))
        if self.start_extra is not None:
            patch = merge_patched(patch, self.start_extra(obj, starts))
        return patch

    def start_writes(self, obj: Obj, workload_name: str, starts: Sequence[PodSetStart]) -> list[Patch]:
        """The merge patches that start the job, in order (one, but for a kind with a custom start)."""
        if self.custom_start is not None:
            return self.custom_start(obj, workload_name, starts)
        return [self.start_patch(obj, workload_name, starts)]

    def restore_patch(self, obj: Obj, original_pod_sets: Sequence[Obj]) -> Patch | None:
        """Undo the start patch from the Workload's pod set templates (Kueue's
        RestorePodSetsInfo); None when there is nothing to restore."""
        if self.custom_restore is not None:
            return self.custom_restore(obj, original_pod_sets)
        originals = {ps.get("name"): ps.get("template") or {} for ps in original_pod_sets}
        patches = []
        for ps in self.pod_sets(obj):
            if ps.name not in originals:
                continue
            undo = template_restore_patch(ps.template, originals[ps.name])
            if undo:
                patches.append((ps.path, undo))
        patch = templates_merge_patch(obj, patches) if patches else {}
        if self.restore_extra is not None:
            patch = merge_patched(patch, self.restore_extra(obj, original_pod_sets))
        return patch or None

    def can_restore(self, obj: Obj) -> bool:
        """Suspended, no pods left, and whatever else the kind needs before its templates may
        change: nothing of the previous run is still going."""
        return self.is_suspended(obj) and self.active_pods(obj) == 0 and self.restorable(obj)
