"""Validation: plain dicts in, a :class:`Verdict` (errors + warnings) out. No I/O.

Two families:

* Kueue's own admission checks of the topology annotations, with Kueue's exact message
  fragments (``pkg/controller/jobframework/tas_validation.go``) rendered as Kubernetes field
  errors, each followed by ``; <what to do>``.
* toposched's extra checks, which Kueue does not make at admission time because it leaves the
  job pending instead: unknown ``kueue.x-k8s.io/podset-*`` keys, the LocalQueue exists, the
  requested level exists in a Topology of a flavor the queue can use, and the job can ever fit
  the queue's quota and the largest topology domain. A job that can only fit by borrowing, or
  only on nodes that are unhealthy right now, is admitted with a warning.

Kueue objects (Topology, ResourceFlavor, ClusterQueue, LocalQueue) are checked with the texts
of Kueue's CEL rules, so a cluster whose CRDs lack a rule (older Kueue) gets the same answer.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from admission.fielderrors import OMIT, FieldError, Verdict, forbidden, invalid, plain, required
from admission.fit import empty_quota, pod_set_shape, quota_limits, topology_fit
from admission.view import ClusterView
from scheduler.core.nodes import pod_spec_requests
from scheduler.core.resources import format_quantity
from scheduler.core.workload import (
    ANN_GROUP_NAME,
    ANN_PREFERRED,
    ANN_REQUIRED,
    ANN_SLICE_CONSTRAINTS,
    ANN_SLICE_REQUIRED,
    ANN_SLICE_SIZE,
    ANN_UNCONSTRAINED,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    job_pod_count,
)

Obj = Mapping[str, Any]

HOSTNAME = "kubernetes.io/hostname"
PODSET_PREFIX = "kueue.x-k8s.io/podset-"
KNOWN_PODSET_KEYS = (
    ANN_REQUIRED, ANN_PREFERRED, ANN_UNCONSTRAINED, ANN_SLICE_REQUIRED, ANN_SLICE_SIZE,
    ANN_SLICE_CONSTRAINTS, ANN_GROUP_NAME,
)
TEMPLATE_ANNOTATIONS = "spec.template.metadata.annotations"
QUEUE_LABEL_PATH = f"metadata.labels[{LABEL_QUEUE_NAME}]"
PRIORITY_LABEL_PATH = f"metadata.labels[{LABEL_PRIORITY_CLASS}]"

_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_BOOLS = {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}  # Go ParseBool


def _key(path: str, key: str) -> str:
    return f"{path}[{key}]"


# ---- label keys (metav1validation.ValidateLabelName semantics) -------------------------
def label_key_problems(key: str) -> list[str]:
    if not key:
        return ["name part must be non-empty"]
    problems = []
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        problems.append("prefix part must be non-empty")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix)):
        problems.append("prefix part must be a lowercase RFC 1123 subdomain (e.g. 'topology.k8s.aws')")
    if len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _NAME_RE.match(name):
        problems.append("name part must consist of alphanumeric characters, '-', '_' or '.', "
                        "and must start and end with an alphanumeric character")
    return problems


def _validate_level_key(value: str, path: str) -> list[FieldError]:
    return [invalid(path, value, p, "set it to a node label key that is a level of the Topology, "
                    "e.g. \"topology.k8s.aws/network-node-layer-3\"") for p in label_key_problems(value)]


def _go_int32(text: str) -> int | None:
    if not _INT_RE.match(text):
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None


# ---- Kueue's annotation checks ----------------------------------------------------------
def validate_topology_annotations(annotations: Mapping[str, str], count: int | None,
                                  path: str = TEMPLATE_ANNOTATIONS) -> list[FieldError]:
    """Kueue's syntactic checks of one pod template's TAS annotations, plus unknown keys."""
    errs: list[FieldError] = []
    ann = annotations
    has = {k: k in ann for k in KNOWN_PODSET_KEYS}

    for key in sorted(k for k in ann if k.startswith(PODSET_PREFIX) and k not in KNOWN_PODSET_KEYS):
        close = difflib.get_close_matches(key, KNOWN_PODSET_KEYS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        errs.append(plain(_key(path, key), f"unknown Kueue pod set annotation {json.dumps(key)}",
                          f"{hint}known keys: {', '.join(KNOWN_PODSET_KEYS)}"))

    if has[ANN_REQUIRED] + has[ANN_PREFERRED] + has[ANN_UNCONSTRAINED] > 1:
        keys = ", ".join(json.dumps(k) for k in (ANN_REQUIRED, ANN_PREFERRED, ANN_UNCONSTRAINED))
        present = [k for k in (ANN_REQUIRED, ANN_PREFERRED, ANN_UNCONSTRAINED) if has[k]]
        errs.append(invalid(path, _OMIT, f"must not contain more than one topology annotation: [{keys}]",
                            f"keep exactly one of {', '.join(present)}"))

    for key in (ANN_REQUIRED, ANN_PREFERRED, ANN_SLICE_REQUIRED):
        if has[key]:
            errs.extend(_validate_level_key(ann[key], _key(path, key)))

    if has[ANN_GROUP_NAME]:
        group = ann[ANN_GROUP_NAME]
        gpath = _key(path, ANN_GROUP_NAME)
        if group.isdigit() and _go_uint64(group):
            errs.append(invalid(gpath, group, "must not be a number", "use a name such as \"leader-workers\""))
        if has[ANN_SLICE_SIZE]:
            errs.append(forbidden(gpath, f"may not be set when '{ANN_SLICE_SIZE}' is specified",
                                  "remove one of the two annotations"))
        if has[ANN_SLICE_REQUIRED]:
            errs.append(forbidden(gpath, f"may not be set when '{ANN_SLICE_REQUIRED}' is specified",
                                  "remove one of the two annotations"))
        if not has[ANN_PREFERRED] and not has[ANN_REQUIRED]:
            errs.append(forbidden(
                gpath, f"may not be set when neither '{ANN_PREFERRED}' nor '{ANN_REQUIRED}' is specified",
                f"add {ANN_REQUIRED} or {ANN_PREFERRED}, or remove the group name"))

    if has[ANN_UNCONSTRAINED] and ann[ANN_UNCONSTRAINED] not in _BOOLS:
        errs.append(invalid(_key(path, ANN_UNCONSTRAINED), ann[ANN_UNCONSTRAINED], "must be a boolean value",
                            "use \"true\" or \"false\""))

    if has[ANN_SLICE_SIZE]:
        text = ann[ANN_SLICE_SIZE]
        spath = _key(path, ANN_SLICE_SIZE)
        parsed = _go_int32(text)
        if parsed is None:
            errs.append(invalid(spath, text, "must be a numeric value",
                                "set the number of pods per slice, e.g. \"4\""))
        elif parsed < 1:
            errs.append(invalid(spath, text, "must be greater than or equal to 1",
                                "set the number of pods per slice, at least 1"))
        else:
            if count is not None and parsed > count:
                errs.append(invalid(spath, text, f"must not be greater than pod set count {count}",
                                    f"use a slice size between 1 and {count} (spec.parallelism)"))

    if has[ANN_SLICE_REQUIRED] and not has[ANN_SLICE_SIZE]:
        errs.append(required(_key(path, ANN_SLICE_SIZE), f"must be set when '{ANN_SLICE_REQUIRED}' is specified",
                             "add the number of pods per slice"))
    if not has[ANN_SLICE_REQUIRED] and has[ANN_SLICE_SIZE]:
        errs.append(forbidden(_key(path, ANN_SLICE_SIZE),
                              f"may not be set when '{ANN_SLICE_REQUIRED}' is not specified",
                              f"add {ANN_SLICE_REQUIRED} or remove the slice size"))
    if has[ANN_SLICE_CONSTRAINTS]:
        errs.extend(_validate_constraints(ann, path, has, count))
    # Group-of-pod-sets rule: a batch Job is one pod set, so a group can never have two members.
    if has[ANN_GROUP_NAME] and (has[ANN_REQUIRED] or has[ANN_PREFERRED]) and not (
            has[ANN_SLICE_SIZE] or has[ANN_SLICE_REQUIRED]):
        group = ann[ANN_GROUP_NAME]
        errs.append(invalid(_key(path, ANN_GROUP_NAME), group,
                            "can only define groups of exactly 2 pod sets, got: 1 pod set(s)",
                            "a batch Job has one pod set; remove the group name (use it with "
                            "LeaderWorkerSet, MPIJob or JobSet)"))
    return errs


_OMIT: Any = OMIT


def _go_uint64(text: str) -> bool:
    return 0 <= int(text) < 2**64


def _validate_constraints(ann: Mapping[str, str], path: str, has: Mapping[str, bool],
                          count: int | None) -> list[FieldError]:
    errs: list[FieldError] = []
    cpath = _key(path, ANN_SLICE_CONSTRAINTS)
    if has[ANN_SLICE_REQUIRED]:
        errs.append(forbidden(cpath, f"may not be set when '{ANN_SLICE_REQUIRED}' is specified",
                              "use either the constraints list or the single slice annotations"))
    if has[ANN_SLICE_SIZE]:
        errs.append(forbidden(cpath, f"may not be set when '{ANN_SLICE_SIZE}' is specified",
                              "use either the constraints list or the single slice annotations"))
    if has[ANN_GROUP_NAME]:
        errs.append(forbidden(_key(path, ANN_GROUP_NAME), f"may not be set when '{ANN_SLICE_CONSTRAINTS}' is specified",
                              "remove one of the two annotations"))
    text = ann[ANN_SLICE_CONSTRAINTS]
    fix = 'write a JSON array such as [{"topology": "topology.k8s.aws/network-node-layer-3", "size": 8}]'
    try:
        raw = json.loads(text)
        if not isinstance(raw, list):
            raise ValueError(f"cannot unmarshal {type(raw).__name__} into an array")
        items = []
        for item in raw:
            if not isinstance(item, dict):
                raise ValueError("each entry must be an object with \"topology\" and \"size\"")
            size = item.get("size", 0)
            if isinstance(size, bool) or not isinstance(size, int):
                raise ValueError(f"size must be a JSON number, got {json.dumps(size)}")
            items.append((str(item.get("topology", "")), size))
    except ValueError as exc:
        errs.append(invalid(cpath, text, f"must be a valid JSON array: {exc}", fix))
        return errs
    if not 1 <= len(items) <= 3:
        errs.append(invalid(cpath, text, "topology constraints must contain between 1 and 3 entries", fix))
        return errs
    seen: dict[str, int] = {}
    for i, (level, size) in enumerate(items):
        epath = f"{cpath}[{i}]"
        errs.extend(_validate_level_key(level, f"{epath}.topology"))
        if size < 1:
            errs.append(invalid(f"{epath}.size", size, "must be greater than or equal to 1",
                                "use a size of at least 1"))
        if level in seen:
            errs.append(FieldError(f"{epath}.topology", "Duplicate value", f"{level} (also at index {seen[level]})",
                                   fix="each layer must name a different level"))
        else:
            seen[level] = i
    for i in range(len(items) - 1):
        outer, inner = items[i][1], items[i + 1][1]
        if inner > 0 and outer % inner != 0:
            errs.append(invalid(f"{cpath}[{i + 1}].size", inner, f"must evenly divide the parent layer size {outer}",
                                f"use a divisor of {outer}"))
    if count is not None and items[0][1] > count:
        errs.append(invalid(cpath, items[0][1], f"must not be greater than pod set count {count}",
                            f"use a first-layer size between 1 and {count}"))
    return errs


# ---- the job against the cluster ----------------------------------------------------------
def _levels(topology: Obj) -> list[str]:
    return [str(lv.get("nodeLabel", "")) for lv in (topology.get("spec") or {}).get("levels") or ()]


def _cohort(cq: Obj) -> str:
    spec = cq.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def _fmt(amount: int, resource: str) -> str:
    return format_quantity(amount, resource)


class _Request:
    """The topology request of the job's single pod set, read after syntax validation."""

    def __init__(self, ann: Mapping[str, str]) -> None:
        self.required = ann.get(ANN_REQUIRED) or None
        self.preferred = None if self.required else (ann.get(ANN_PREFERRED) or None)
        self.unconstrained = ann.get(ANN_UNCONSTRAINED) in ("1", "t", "T", "TRUE", "true", "True")
        self.explicit = bool(self.required or self.preferred or ANN_UNCONSTRAINED in ann
                             or ANN_SLICE_REQUIRED in ann or ANN_SLICE_CONSTRAINTS in ann)
        self.slice_level: str | None = ann.get(ANN_SLICE_REQUIRED) or None
        self.slice_size: int | None = None
        self.slice_path = _key(TEMPLATE_ANNOTATIONS, ANN_SLICE_REQUIRED)
        if self.slice_level:
            self.slice_size = _go_int32(ann.get(ANN_SLICE_SIZE, "")) or None
        elif ANN_SLICE_CONSTRAINTS in ann:
            raw = json.loads(ann[ANN_SLICE_CONSTRAINTS])
            self.slice_level, self.slice_size = str(raw[0]["topology"]), int(raw[0]["size"])
            self.slice_path = _key(TEMPLATE_ANNOTATIONS, ANN_SLICE_CONSTRAINTS) + "[0].topology"
        self.level = self.required or self.preferred
        self.level_path = _key(TEMPLATE_ANNOTATIONS, ANN_REQUIRED if self.required else ANN_PREFERRED)

    def levels_used(self) -> list[tuple[str, str]]:
        out = []
        if self.level:
            out.append((self.level, self.level_path))
        if self.slice_level:
            out.append((self.slice_level, self.slice_path))
        return out


def _flavor_names(cq: Obj) -> list[str]:
    names: list[str] = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or ():
        for fl in group.get("flavors") or ():
            if fl.get("name") not in names:
                names.append(str(fl.get("name")))
    return names


def _topology_fit(req: _Request, count: int, template: Obj, flavor_name: str, flavor: Obj,
                  topo_name: str, levels: list[str], view: ClusterView) -> tuple[str, str]:
    """("ok"|"warn"|"never", message) for the pod set in this TAS flavor: asked of the core's
    topology tree through ``admission.fit``."""
    node_labels = dict((flavor.get("spec") or {}).get("nodeLabels") or {})
    shape = pod_set_shape(template, count, flavor, req.required, req.slice_level, req.slice_size)
    return topology_fit(view.empty_trees(topo_name, tuple(levels), node_labels), shape, flavor_name, topo_name,
                        node_labels)


def _queue_checks(job: Obj, view: ClusterView, verdict: Verdict) -> tuple[str, str, Obj] | None:
    """Priority class and LocalQueue exist, the LocalQueue's ClusterQueue too (else a warning):
    (queue, ClusterQueue name, ClusterQueue) to go on with, or None."""
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    namespace = str(meta.get("namespace") or "default")
    queue = labels.get(LABEL_QUEUE_NAME)
    if not queue:
        return None
    wpc = labels.get(LABEL_PRIORITY_CLASS)
    if wpc and view.priority_class(wpc) is None:
        verdict.errors.append(plain(PRIORITY_LABEL_PATH, f"WorkloadPriorityClass \"{wpc}\" not found",
                                    "create it (kubectl get workloadpriorityclasses lists the existing ones) "
                                    "or fix the label"))
    lq = view.local_queue(namespace, queue)
    if lq is None:
        verdict.errors.append(plain(
            QUEUE_LABEL_PATH, f"LocalQueue \"{queue}\" does not exist in namespace \"{namespace}\"",
            f"create it (kind: LocalQueue, metadata.namespace: {namespace}, spec.clusterQueue: <ClusterQueue>) "
            f"or fix the label (kubectl get localqueues -n {namespace})"))
        return None
    cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
    cq = view.cluster_queue(cq_name) if cq_name else None
    if cq is None:
        verdict.warnings.append(f"LocalQueue \"{namespace}/{queue}\" points to ClusterQueue \"{cq_name}\", which "
                                "does not exist; the job stays pending until it is created")
        return None
    return str(queue), cq_name, cq


def validate_job_against_cluster(job: Obj, view: ClusterView) -> Verdict:
    """toposched's checks that need the cluster: queue, priority class, level, quota and topology fit."""
    verdict = Verdict()
    found = _queue_checks(job, view, verdict)
    if found is None:
        return verdict
    queue, cq_name, cq = found
    template = (job.get("spec") or {}).get("template") or {}
    ann = (template.get("metadata") or {}).get("annotations") or {}
    count = job_pod_count(job)
    per_pod = pod_spec_requests(template.get("spec") or {})
    req = _Request(ann)
    flavor_names = _flavor_names(cq)

    # 1. the requested levels exist in a Topology of a TAS flavor of this ClusterQueue
    tas: dict[str, tuple[Obj, str, list[str]]] = {}
    missing_topology = []
    for name in flavor_names:
        flavor = view.flavor(name)
        topo_name = (flavor or {}).get("spec", {}).get("topologyName") if flavor else None
        if not topo_name:
            continue
        topo = view.topology(str(topo_name))
        if topo is None:
            missing_topology.append((name, str(topo_name)))
            continue
        tas[name] = (flavor or {}, str(topo_name), _levels(topo))
    if req.explicit and not tas:
        if missing_topology:
            verdict.warnings.append("; ".join(f"there is no Topology \"{t}\" for TAS flavor \"{f}\""
                                              for f, t in missing_topology) + "; the job stays pending")
            return verdict
        path = req.level_path if req.level else TEMPLATE_ANNOTATIONS
        verdict.errors.append(plain(
            path, f"ClusterQueue \"{cq_name}\" (LocalQueue \"{queue}\") has no topology-aware ResourceFlavor "
                  f"(flavors: {', '.join(flavor_names) or 'none'}); topology annotations cannot be honoured",
            "remove the topology annotations, or use a queue whose ClusterQueue has a ResourceFlavor with "
            "spec.topologyName"))
        return verdict
    usable = dict(tas)
    for level, path in req.levels_used():
        usable = {n: v for n, v in usable.items() if level in v[2]}
        if not usable:
            topos: dict[str, list[str]] = {t: lv for _, t, lv in tas.values()}
            listing = "; ".join(f"Topology \"{t}\" (levels: {', '.join(lv)})" for t, lv in sorted(topos.items()))
            if len(topos) == 1:
                (t, lv), = topos.items()
                detail = f"level \"{level}\" is not in Topology \"{t}\" (levels: {', '.join(lv)})"
            else:
                detail = f"level \"{level}\" is not in any Topology of ClusterQueue \"{cq_name}\" ({listing})"
            verdict.errors.append(plain(path, detail, "use one of those levels"))
            return verdict
    if req.level and req.slice_level and usable:
        for _, topo_name, lv in usable.values():
            if lv.index(req.slice_level) < lv.index(req.level):
                verdict.errors.append(plain(
                    req.slice_path, f"slice level \"{req.slice_level}\" is above the pod set level \"{req.level}\" "
                    f"in Topology \"{topo_name}\" (levels: {', '.join(lv)})",
                    "choose a slice level at or below the pod set level"))
                return verdict
    if req.slice_size and count % req.slice_size:
        verdict.warnings.append(f"{_key(TEMPLATE_ANNOTATIONS, ANN_SLICE_SIZE)}: {req.slice_size} does not divide the "
                                f"pod count {count}; the last slice will be smaller")

    # 2. quota (per resource group, best flavor) and topology fit in that flavor
    totals = {r: v * count for r, v in per_pod.items() if v > 0}
    groups = (cq.get("spec") or {}).get("resourceGroups") or ()
    covered_all = {str(r) for g in groups for r in g.get("coveredResources") or ()}
    if "pods" in covered_all:
        totals["pods"] = count
    uncovered = sorted(r for r in totals if r not in covered_all)
    if uncovered:
        verdict.errors.append(plain(
            "spec.template.spec.containers[*].resources.requests",
            f"resource(s) {', '.join(uncovered)} unavailable in ClusterQueue \"{cq_name}\" (covered: "
            f"{', '.join(sorted(covered_all)) or 'none'}); Kueue would keep the job pending forever",
            "drop those requests or ask the cluster admin to add them to the ClusterQueue's coveredResources"))
        return verdict
    quota = empty_quota(view.cluster_queues, view.cohorts, cq_name, cq)
    for g_index, group in enumerate(groups):
        covered = [str(r) for r in group.get("coveredResources") or ()]
        asked = [r for r in covered if r in totals]
        if not asked:
            continue
        best_rank, best_msgs, reasons = 3, [], []
        for fl in group.get("flavors") or ():
            fname = str(fl.get("name"))
            rank, msgs = 0, []
            for r in asked:
                nominal, borrow = quota_limits(quota, cq_name, fname, r)
                if totals[r] <= nominal:
                    continue
                if totals[r] <= nominal + borrow:
                    rank = max(rank, 1)
                    msgs.append(f"{r}: {_fmt(totals[r], r)} exceeds the nominal quota {_fmt(nominal, r)} of "
                                f"ClusterQueue \"{cq_name}\" flavor \"{fname}\" and fits only by borrowing from "
                                f"cohort \"{_cohort(cq)}\"; it may wait until the cohort has unused quota")
                else:
                    rank = 3
                    limit = f"nominal {_fmt(nominal, r)}" + (f" + borrowable {_fmt(borrow, r)}" if borrow else "")
                    reasons.append(f"flavor \"{fname}\": {r} {_fmt(totals[r], r)} > {limit}")
                    break
            if rank < 3 and req.explicit and fname in tas:
                if fname not in usable:
                    rank = 3
                    reasons.append(f"flavor \"{fname}\": its Topology has no requested level")
                else:
                    flavor, topo_name, lv = usable[fname]
                    outcome, message = _topology_fit(req, count, template, fname, flavor, topo_name, lv, view)
                    if outcome == "never":
                        rank = 3
                        reasons.append(f"flavor \"{fname}\": {message}")
                    elif outcome == "warn":
                        rank = max(rank, 1)
                        msgs.append(message)
            elif rank < 3 and req.explicit and fname not in tas:
                rank = 3
                reasons.append(f"flavor \"{fname}\" does not support TopologyAwareScheduling")
            if rank < best_rank:
                best_rank, best_msgs = rank, msgs
            if rank == 0:
                break
        if best_rank == 3:
            path = req.level_path if req.level and any("domain" in r or "Topology" in r for r in reasons) else \
                "spec.template.spec.containers[*].resources.requests"
            verdict.errors.append(plain(
                path, f"the job ({count} pod(s)) can never be admitted by ClusterQueue \"{cq_name}\" "
                      f"(resourceGroups[{g_index}]): {'; '.join(reasons)}",
                "lower spec.parallelism or the per-pod requests, choose a wider topology level, "
                "or use another queue"))
        else:
            verdict.warnings.extend(best_msgs)
    return verdict


def validate_job(job: Obj, view: ClusterView | None = None, old: Obj | None = None) -> Verdict:
    """The validating webhook's decision for a batch/v1 Job carrying the queue label.

    On UPDATE (``old`` given) only changed topology annotations are checked, never the cluster:
    the controller's own updates (unsuspend, node selectors) must not be blocked because a
    queue was deleted after the job was accepted.
    """
    if job.get("kind") in ("JobSet", "PyTorchJob"):
        return validate_multi_pod_set_job(job, view, old)
    verdict = Verdict()
    template = (job.get("spec") or {}).get("template") or {}
    ann = (template.get("metadata") or {}).get("annotations") or {}
    if old is not None:
        old_ann = (((old.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}
        if {k: v for k, v in old_ann.items() if k.startswith(PODSET_PREFIX)} == \
                {k: v for k, v in ann.items() if k.startswith(PODSET_PREFIX)}:
            return verdict
    verdict.errors.extend(validate_topology_annotations(ann, job_pod_count(job)))
    if verdict.errors or old is not None or view is None:
        return verdict
    verdict.extend(validate_job_against_cluster(job, view))
    return verdict


def _pod_set_annotations(obj: Obj, kind: str) -> list[tuple[str, Mapping[str, str], int]]:
    """(annotations path, pod template annotations, pod count) per pod set of a JobSet
    (replicated jobs) or a PyTorchJob (replica types)."""
    out = []
    spec = obj.get("spec") or {}
    if kind == "PyTorchJob":
        for replica_type, rs in sorted((spec.get("pytorchReplicaSpecs") or {}).items()):
            ann = (((rs or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}
            replicas = (rs or {}).get("replicas")
            out.append((f"spec.pytorchReplicaSpecs[{replica_type}].template.metadata.annotations", ann,
                        1 if replicas is None else int(replicas)))
        return out
    for i, rj in enumerate(spec.get("replicatedJobs") or ()):
        job_spec = (rj.get("template") or {}).get("spec") or {}
        ann = ((job_spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}
        count = int(rj.get("replicas", 1) or 0) * job_pod_count({"spec": job_spec})
        out.append((f"spec.replicatedJobs[{i}].template.spec.template.metadata.annotations", ann, count))
    return out


def validate_multi_pod_set_job(job: Obj, view: ClusterView | None = None, old: Obj | None = None) -> Verdict:
    """A JobSet or PyTorchJob carrying the queue label: Kueue's annotation checks on every pod
    set's template, and that the priority class, LocalQueue and ClusterQueue exist. The level,
    quota and topology fit checks of :func:`validate_job_against_cluster` cover one pod set and
    are not run for these (yet): one that cannot fit stays pending with Kueue's message."""
    verdict = Verdict()
    kind = str(job.get("kind"))
    pod_sets = _pod_set_annotations(job, kind)
    if old is not None:
        before = {path: {k: v for k, v in ann.items() if k.startswith(PODSET_PREFIX)}
                  for path, ann, _ in _pod_set_annotations(old, kind)}
        pod_sets = [(path, ann, count) for path, ann, count in pod_sets
                    if before.get(path) != {k: v for k, v in ann.items() if k.startswith(PODSET_PREFIX)}]
    for path, ann, count in pod_sets:
        verdict.errors.extend(validate_topology_annotations(ann, count, path))
    if verdict.errors or old is not None or view is None:
        return verdict
    _queue_checks(job, view, verdict)
    return verdict


# ---- Kueue objects ----------------------------------------------------------------------------
def validate_topology(obj: Obj, old: Obj | None = None) -> Verdict:
    verdict = Verdict()
    levels = _levels(obj)
    path = "spec.levels"
    if not levels:
        verdict.errors.append(required(path, "at least one level is required",
                                       "list the node label keys from widest to narrowest"))
        return verdict
    if len(levels) > 16:
        verdict.errors.append(FieldError(path, "Too many", f"{len(levels)}: must have at most 16 items",
                                         fix="drop levels"))
    for i, level in enumerate(levels):
        for p in label_key_problems(level):
            verdict.errors.append(invalid(f"{path}[{i}].nodeLabel", level, p, "use a node label key"))
    if len(set(levels)) != len(levels):
        dups = sorted({lv for lv in levels if levels.count(lv) > 1})
        verdict.errors.append(invalid(path, _OMIT, "must be unique", f"remove the repeated level(s) {', '.join(dups)}"))
    if HOSTNAME in levels and levels[-1] != HOSTNAME:
        verdict.errors.append(invalid(path, _OMIT, "the kubernetes.io/hostname label can only be used at the lowest "
                                                   "level of topology", f"move {HOSTNAME} to the end of spec.levels"))
    if old is not None:
        old_levels = _levels(old)
        both_host = old_levels and old_levels[-1] == HOSTNAME and levels[-1] == HOSTNAME
        if old_levels != levels and not both_host:
            verdict.errors.append(invalid(path, _OMIT, "field is immutable",
                                          "create a new Topology and point the ResourceFlavor at it"))
    return verdict


def validate_resource_flavor(obj: Obj, view: ClusterView | None = None, old: Obj | None = None) -> Verdict:
    verdict = Verdict()
    spec = obj.get("spec") or {}
    topo = spec.get("topologyName")
    if topo and not spec.get("nodeLabels"):
        verdict.errors.append(invalid("spec", _OMIT, "at least one nodeLabel is required when topology is set",
                                      "add spec.nodeLabels selecting the flavor's nodes, e.g. "
                                      "{\"node.kubernetes.io/instance-type\": \"ml.p5.48xlarge\"}"))
    if old is not None:
        old_spec = old.get("spec") or {}
        if old_spec.get("topologyName") and old_spec.get("topologyName") != topo:
            verdict.errors.append(invalid("spec", _OMIT, "topologyName is immutable when topologyName is set",
                                          "create a new ResourceFlavor"))
        elif old_spec.get("topologyName") and old_spec.get("nodeLabels") != spec.get("nodeLabels"):
            verdict.errors.append(invalid("spec", _OMIT, "nodeLabels are immutable when topologyName is set",
                                          "create a new ResourceFlavor"))
    if topo and view is not None and view.topology(str(topo)) is None:
        verdict.warnings.append(f"spec.topologyName: Topology \"{topo}\" does not exist yet; ClusterQueues using this "
                                "flavor stay inactive (TopologyNotFound) until it is created")
    return verdict


def validate_cluster_queue(obj: Obj, view: ClusterView | None = None) -> Verdict:
    verdict = Verdict()
    spec = obj.get("spec") or {}
    cohort = spec.get("cohortName") or spec.get("cohort")
    cohort_field = "spec.cohortName" if "cohortName" in spec or obj.get("apiVersion", "").endswith("v1beta2") \
        else "spec.cohort"
    for g, group in enumerate(spec.get("resourceGroups") or ()):
        covered = [str(r) for r in group.get("coveredResources") or ()]
        gpath = f"spec.resourceGroups[{g}]"
        for f, flavor in enumerate(group.get("flavors") or ()):
            fpath = f"{gpath}.flavors[{f}]"
            names = [str(r.get("name")) for r in flavor.get("resources") or ()]
            if len(names) != len(covered) or sorted(names) != sorted(covered):
                verdict.errors.append(invalid(
                    gpath, _OMIT, "flavors must have the same number of resources as the coveredResources",
                    f"{fpath} (\"{flavor.get('name')}\") lists [{', '.join(names)}]; list exactly the covered "
                    f"resources [{', '.join(covered)}]"))
            for r, res in enumerate(flavor.get("resources") or ()):
                rpath = f"{fpath}.resources[{r}]"
                for limit in ("borrowingLimit", "lendingLimit"):
                    if res.get(limit) is not None and not cohort:
                        verdict.errors.append(invalid(
                            f"{rpath}.{limit}", res.get(limit), f"{limit} must be nil when cohort is empty",
                            f"set {cohort_field} or remove {limit}"))
            if view is not None and flavor.get("name") and view.flavor(str(flavor.get("name"))) is None:
                verdict.warnings.append(f"{fpath}.name: ResourceFlavor \"{flavor.get('name')}\" does not exist "
                                        "yet; the "
                                        "ClusterQueue stays inactive (FlavorNotFound) until it is created")
    return verdict


def validate_local_queue(obj: Obj, view: ClusterView | None = None, old: Obj | None = None) -> Verdict:
    verdict = Verdict()
    cq = (obj.get("spec") or {}).get("clusterQueue")
    if old is not None and (old.get("spec") or {}).get("clusterQueue") != cq:
        verdict.errors.append(invalid("spec.clusterQueue", cq, "field is immutable",
                                      "delete and recreate the LocalQueue"))
    if cq and view is not None and view.cluster_queue(str(cq)) is None:
        verdict.warnings.append(f"spec.clusterQueue: ClusterQueue \"{cq}\" does not exist yet; jobs sent to this "
                                "LocalQueue stay pending until it is created")
    return verdict


KIND_VALIDATORS = ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")


def validate_kueue_object(kind: str, obj: Obj, old: Obj | None, view: ClusterView | None) -> Verdict:
    if kind == "Topology":
        return validate_topology(obj, old)
    if kind == "ResourceFlavor":
        return validate_resource_flavor(obj, view, old)
    if kind == "ClusterQueue":
        return validate_cluster_queue(obj, view)
    if kind == "LocalQueue":
        return validate_local_queue(obj, view, old)
    return Verdict()


def known_podset_keys() -> Sequence[str]:
    return KNOWN_PODSET_KEYS
