"""Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1, Trainer v2.2.0) as Kueue v0.17.0's
``trainer.kubeflow.org/trainjob`` integration reads it (``pkg/controller/jobs/trainjob/``;
docs/design/new-kinds.md).

Its pod templates are not in the object: Kueue takes the pod sets of the JobSet the Trainer
would create. :func:`render_jobset` builds that JobSet's spec from the TrainJob and its runtime's
spec (``TrainingRuntime`` or ``ClusterTrainingRuntime``, looked up by the caller: informers, a
live GET, the other documents of a file) with the Trainer's rules, and the JobSet kind reads its
pod sets (one per replicated job, ranked by completion index within child-Job index).
Suspended through ``spec.suspend``; started through the ``runtimePatches`` entry whose manager is
``kueue.x-k8s.io/manager`` (written while suspended), then unsuspended: two writes, as Kueue. The
JobSet the Trainer creates is governed through its TrainJob (a child, never queued on its own);
its pods run under the runtime's scheduler, so admitted pod sets get Kueue's topology gate and
the topology ungater pins each pod to its domain."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds.base import (
    NOT_FINISHED,
    FinishState,
    JobKind,
    Obj,
    Patch,
    PodSetSource,
    PodSetStart,
    Related,
    RelatedResource,
    as_int,
    finished,
    template_start_patch,
    true_condition,
)
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.shapes import METADATA
from scheduler.adapter.kinds.strategicpatch import strategic_merged
from scheduler.core.workload import JOB_COMPLETION_INDEX, LABEL_QUEUE_NAME, WorkloadFormatError

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
FRAMEWORK = "trainer.kubeflow.org/trainjob"
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"  # Kueue's runtimePatches entry
LABEL_ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
NODE = "node"  # the trainer step's container and the MPI runtimes' node job
CLUSTER_RUNTIME_KIND, RUNTIME_KIND = "ClusterTrainingRuntime", "TrainingRuntime"
LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RUNTIMES = (RelatedResource(GROUP, VERSION, RUNTIME_KIND, "trainingruntimes"),
            RelatedResource(GROUP, VERSION, CLUSTER_RUNTIME_KIND, "clustertrainingruntimes", namespaced=False))


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def runtime_ref(trainjob: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, name) of the runtime the TrainJob uses; the kind defaults to
    ClusterTrainingRuntime, as the Trainer's API does."""
    ref = _spec(trainjob).get("runtimeRef") or {}
    name = ref.get("name")
    if not name:
        raise WorkloadFormatError("spec.runtimeRef.name: missing")
    return str(ref.get("kind") or CLUSTER_RUNTIME_KIND), str(name)


def _kueue_runtime_patch(trainjob: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for patch in _spec(trainjob).get("runtimePatches") or ():
        if isinstance(patch, Mapping) and patch.get("manager") == KUEUE_PATCH_MANAGER:
            found: Mapping[str, Any] = patch
            return found
    return None


def _apply_runtime_patches(trainjob: Mapping[str, Any], replicated: list[dict[str, Any]]) -> None:
    """Each ``runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[]`` entry merged
    into the replicated job of that name, in order (the Trainer's ``mergeRuntimePatches``)."""
    for patch in _spec(trainjob).get("runtimePatches") or ():
        rjob_patches = (((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}) \
            .get("replicatedJobs") or ()
        for rpatch in rjob_patches:
            if rpatch.get("template") is None:
                continue
            for rj in replicated:
                if rj.get("name") == rpatch.get("name"):
                    rj["template"] = strategic_merged(rj.get("template") or {}, rpatch["template"])


def _trainer_count(trainjob: Mapping[str, Any], ml_policy: Mapping[str, Any] | None, rj: Mapping[str, Any],
                   initial: int) -> int:
    """The pod count of one replicated job after the Trainer's ML-policy plugins: the TrainJob's
    ``spec.trainer.numNodes`` replaces it on the trainer step (torch, plainml, jax, xgboost) and, for
    an MPI runtime, on the job named ``node`` (one less when the launcher runs as a node, at least 1)."""
    num_nodes = (_spec(trainjob).get("trainer") or {}).get("numNodes")
    if num_nodes is None or ml_policy is None:
        return initial
    if ml_policy.get("mpi") is not None:
        if rj.get("name") != NODE:
            return initial
        as_node = bool((ml_policy.get("mpi") or {}).get("runLauncherAsNode"))
        return max(as_int(num_nodes, 1) - 1, 1) if as_node else as_int(num_nodes, 1)
    labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return as_int(num_nodes, 1) if labels.get(LABEL_ANCESTOR) == ANCESTOR_TRAINER else initial


def render_jobset(trainjob: Mapping[str, Any], runtime_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSet (spec.replicatedJobs with parallelism/completions set) the Trainer creates for
    ``trainjob`` from ``runtime_spec`` (the runtime object's ``spec``): the runtime patches
    merged, each replicated job's pod count = its ``parallelism`` (default 1), or, on the trainer
    step of a runtime with an ``mlPolicy``, ``mlPolicy.numNodes`` (default 1) then the TrainJob's
    ``numNodes``; the TrainJob's ``resourcesPerNode`` on the trainer step's ``node`` container."""
    template_spec = copy.deepcopy(dict(((runtime_spec.get("template") or {}).get("spec")) or {}))
    replicated: list[dict[str, Any]] = [dict(rj) for rj in template_spec.get("replicatedJobs") or ()]
    _apply_runtime_patches(trainjob, replicated)
    ml_policy = runtime_spec.get("mlPolicy")
    resources = (_spec(trainjob).get("trainer") or {}).get("resourcesPerNode")
    for rj in replicated:
        job_spec = dict(((rj.get("template") or {}).get("spec")) or {})
        count = as_int(job_spec.get("parallelism"), 1)
        labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
        is_trainer = labels.get(LABEL_ANCESTOR) == ANCESTOR_TRAINER
        if is_trainer and ml_policy is not None:
            count = as_int(ml_policy.get("numNodes"), 1)
            if resources is not None:
                pod_spec = ((job_spec.get("template") or {}).get("spec")) or {}
                for container in pod_spec.get("containers") or ():
                    if container.get("name") == NODE:
                        container["resources"] = copy.deepcopy(resources)
                        break
        count = _trainer_count(trainjob, ml_policy, rj, count)
        job_spec["parallelism"] = job_spec["completions"] = count
        rj["template"] = {**(rj.get("template") or {}), "spec": job_spec}
        rj.setdefault("replicas", 1)
    meta = trainjob.get("metadata") or {}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": meta.get("name", ""), "namespace": meta.get("namespace", "")},
            "spec": {**template_spec, "replicatedJobs": replicated}}


def runtime_of(trainjob: Mapping[str, Any], related: Related) -> Mapping[str, Any]:
    """The TrainJob's runtime object; Kueue's error when there is none (no Workload then)."""
    kind, name = runtime_ref(trainjob)
    namespace = str((trainjob.get("metadata") or {}).get("namespace") or "") if kind == RUNTIME_KIND else ""
    runtime = related(kind, namespace, name)
    if runtime is None:
        raise WorkloadFormatError(f"runtime '{name}' not found ({kind} {namespace + '/' if namespace else ''}{name})")
    return runtime


def pod_sets_from(trainjob: Obj, related: Related) -> list[PodSetSource]:
    """Kueue's TrainJob pod sets: those of the rendered JobSet."""
    return JOBSET.pod_sets(render_jobset(trainjob, runtime_of(trainjob, related).get("spec") or {}))


def _no_templates(_: Obj) -> list[PodSetSource]:
    return []  # the templates are in the runtime (pod_sets_from)


# --- create / start / restore ------------------------------------------------------------------

def kueue_runtime_patch(queue_name: str | None) -> dict[str, Any]:
    """The entry Kueue's webhook appends at creation (the queue label only when suspending a
    queued TrainJob)."""
    template: dict[str, Any] = {"spec": {}}
    if queue_name:
        template["metadata"] = {"labels": {LABEL_QUEUE_NAME: queue_name}}
    return {"manager": KUEUE_PATCH_MANAGER, "trainingRuntimeSpec": {"template": template}}


def create_defaults(trainjob: Obj, ops: list[dict[str, Any]], labels: Mapping[str, str]) -> None:
    """Kueue's TrainJob webhook at CREATE: its runtime patch appended (the JobSet then carries
    the queue label and is recognised as the TrainJob's child). ``labels``: the TrainJob's
    labels once defaulted."""
    if _kueue_runtime_patch(trainjob) is not None:
        return
    entry = kueue_runtime_patch(labels.get(LABEL_QUEUE_NAME))
    patches = _spec(trainjob).get("runtimePatches")
    if patches is None:
        ops.append({"op": "add", "path": "/spec/runtimePatches", "value": [entry]})
    else:
        ops.append({"op": "add", "path": "/spec/runtimePatches/-", "value": entry})


def _with_kueue_replicated_jobs(trainjob: Mapping[str, Any],
                                replicated: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The whole ``runtimePatches`` list (a merge patch replaces lists) with Kueue's entry's
    replicated jobs set to ``replicated`` (None clears them); the entry is added if missing."""
    out = []
    found = False
    for patch in _spec(trainjob).get("runtimePatches") or ():
        entry = copy.deepcopy(dict(patch))
        if entry.get("manager") == KUEUE_PATCH_MANAGER and not found:
            found = True
            spec = entry.setdefault("trainingRuntimeSpec", {}).setdefault("template", {}).setdefault("spec", {})
            if replicated is None:
                spec.pop("replicatedJobs", None)
            else:
                spec["replicatedJobs"] = replicated
        out.append(entry)
    if not found:
        entry = kueue_runtime_patch(None)
        if replicated is not None:
            entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = replicated
        out.append(entry)
    return out


def _pod_template_patch(template_patch: Mapping[str, Any]) -> dict[str, Any]:
    """A pod template merge patch as the Trainer's PodTemplatePatch: metadata labels and
    annotations; spec node selector, tolerations, scheduling gates (all a PodTemplatePatch takes
    of what Kueue injects)."""
    meta = template_patch.get("metadata") or {}
    spec = template_patch.get("spec") or {}
    out: dict[str, Any] = {}
    kept_meta = {k: dict(v) for k, v in meta.items() if k in ("labels", "annotations") and v}
    if kept_meta:
        out["metadata"] = kept_meta
    kept_spec = {k: copy.deepcopy(v) for k, v in spec.items()
                 if k in ("nodeSelector", "tolerations", "schedulingGates") and v}
    if kept_spec:
        out["spec"] = kept_spec
    return out


def start_patches(trainjob: Obj, workload_name: str, starts: Sequence[PodSetStart]) -> list[Patch]:
    """Kueue's ``RunWithPodSetsInfo``: one replicated-job entry per admitted pod set in Kueue's
    runtime patch (node selector, tolerations, the workload annotation and pod-set label, the
    topology gate when the pod set has a topology assignment), written while the TrainJob is
    still suspended (the Trainer's webhook refuses runtime-patch changes on a running TrainJob);
    then ``spec.suspend: false``."""
    replicated = [{"name": s.name, "template": {"spec": {"template": _pod_template_patch(
        template_start_patch({}, s, workload_name, topology_gate=True))}}} for s in starts]
    return [{"spec": {"runtimePatches": _with_kueue_replicated_jobs(trainjob, replicated)}},
            {"spec": {"suspend": False}}]


def restore_patch(trainjob: Obj, _original_pod_sets: Sequence[Obj]) -> Patch | None:
    """Kueue's ``RestorePodSetsInfo``: its runtime patch's replicated jobs cleared."""
    current = _kueue_runtime_patch(trainjob)
    rjobs = ((((current or {}).get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}) \
        .get("replicatedJobs")
    if current is None or not rjobs:
        return None
    return {"spec": {"runtimePatches": _with_kueue_replicated_jobs(trainjob, None)}}


# --- state -------------------------------------------------------------------------------------

def finish_state(trainjob: Obj) -> FinishState:
    """``Complete=True`` (succeeded) or ``Failed=True``, with the condition's message."""
    complete = true_condition(trainjob, "Complete")
    if complete is not None:
        return finished(True, str(complete.get("message") or ""))
    failed = true_condition(trainjob, "Failed")
    if failed is not None:
        return finished(False, str(failed.get("message") or ""))
    return NOT_FINISHED


def _jobs_status(trainjob: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in (trainjob.get("status") or {}).get("jobsStatus") or () if isinstance(s, Mapping)]


def active_pods(trainjob: Obj) -> int:
    """Child Jobs still active (the Trainer reports jobs, not pods: enough to know whether
    anything of the previous run is still going)."""
    return sum(as_int(s.get("active"), 0) for s in _jobs_status(trainjob))


def pods_ready(trainjob: Obj) -> bool:
    """Every replicated job's child Jobs ready or succeeded (Kueue compares their sum with the
    rendered JobSet's replicas; the status carries no replica count, so each replicated job
    that reports one counts its active Jobs as the ones that must be ready)."""
    statuses = _jobs_status(trainjob)
    return bool(statuses) and all(
        as_int(s.get("ready"), 0) + as_int(s.get("succeeded"), 0) >= max(as_int(s.get("active"), 0), 1)
        for s in statuses)


def pod_selector(trainjob: Mapping[str, Any]) -> str:
    return f"{LABEL_JOBSET_NAME}={(trainjob.get('metadata') or {}).get('name', '')}"


TRAINJOB = JobKind(
    group=GROUP, version=VERSION, kind="TrainJob", plural="trainjobs", framework=FRAMEWORK,
    pod_sets=_no_templates, finish_state=finish_state, active_pods=active_pods, pods_ready=pods_ready,
    shape={"metadata": METADATA, "spec": {"suspend": "bool", "runtimeRef": {"name": "str", "kind": "str"},
                                          "trainer": {"numNodes": "int"}, "runtimePatches": [{}]}},
    suspend_path=("spec", "suspend"), rank_label=JOB_COMPLETION_INDEX, children=(JOBSET.framework,),
    pod_sets_from=pod_sets_from, related=RUNTIMES, custom_start=start_patches, custom_restore=restore_patch,
    topology_gate=True, create_defaults=create_defaults,
)
