"""MPIJob and LeaderWorkerSet as Kueue v0.17's mpijob and leaderworkerset integrations see them,
on plain dicts: pod sets, Workload names/labels/annotations, pod-group labels, the webhook's
mutation and its fit checks for multi-pod-set kinds, the extender's reading of group pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from admission.mutation import apply_patch, mutate_job
from admission.validation import validate_job
from admission.view import ClusterView
from scheduler.adapter.kinds.base import PodSetStart, merge_patched
from scheduler.adapter.kinds.leaderworkerset import LEADERWORKERSET, group_count
from scheduler.adapter.kinds.mpijob import MPIJOB
from scheduler.adapter.kinds.ownership import managed_ancestor
from scheduler.adapter.kinds.podgroups import group_workload, pod_group_patch
from scheduler.adapter.kinds.registry import KINDS
from scheduler.adapter.kinds.workloads import workload_for_job, workload_from_manifest, workload_pod_sets
from scheduler.adapter.manifest.checks import manifest_errors
from scheduler.core.workload import kueue_workload_name
from scheduler.extender.gate import Refusal, judge
from scheduler.extender.workload_view import RankRule, pod_ref
from tests.unit.test_admission_validation import L2, L3, cluster

R = "kueue.x-k8s.io/podset-required-topology"
G = "kueue.x-k8s.io/podset-group-name"
Q = "kueue.x-k8s.io/queue-name"
GPU = {"requests": {"nvidia.com/gpu": "8", "cpu": "1"}}


def tmpl(ann: dict[str, str] | None = None, gpu: bool = True) -> dict[str, Any]:
    return {"metadata": {"annotations": dict(ann or {})},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": GPU if gpu else {}}]}}


def mpijob(workers: int = 4, worker_ann: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "nccl", "namespace": "team-a", "uid": "u-1", "labels": {Q: "lq"}},
            "spec": {"mpiReplicaSpecs": {"Worker": {"replicas": workers, "template": tmpl(worker_ann)},
                                         "Launcher": {"replicas": 1, "template": tmpl(gpu=False)}}}}


def lws(size: int = 4, replicas: int = 2, leader: bool = True, ann: dict[str, str] | None = None) -> dict[str, Any]:
    lwt: dict[str, Any] = {"size": size, "workerTemplate": tmpl(ann)}
    if leader:
        lwt["leaderTemplate"] = tmpl(ann)
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "vllm", "namespace": "team-a", "uid": "u-2", "labels": {Q: "lq"}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt}}


# ---- MPIJob ------------------------------------------------------------------------------------
def test_mpijob_pod_sets_launcher_then_worker_ranked_by_replica_index() -> None:
    sets = workload_pod_sets(MPIJOB, mpijob(worker_ann={R: L3}))
    assert [(ps["name"], ps["count"]) for ps in sets] == [("launcher", 1), ("worker", 4)]
    assert sets[1]["topologyRequest"] == {"required": L3, "podIndexLabel": "training.kubeflow.org/replica-index"}
    wl = workload_for_job(MPIJOB, mpijob(), 0, None)
    assert wl["metadata"]["name"] == kueue_workload_name("MPIJob", "kubeflow.org", "nccl", "u-1")
    assert wl["metadata"]["name"].startswith("mpijob-nccl-")
    assert wl["metadata"]["ownerReferences"][0]["apiVersion"] == "kubeflow.org/v2beta1"


def test_mpijob_runs_and_stops_through_run_policy_and_finishes_by_conditions() -> None:
    job = mpijob()
    job["spec"]["runPolicy"] = {"suspend": True}
    integ = MPIJOB
    started = merge_patched(job, integ.start_patch(job, "wl-1", [PodSetStart("launcher", {"pool": "a"}),
                                                                 PodSetStart("worker", {"pool": "b"})]))
    assert not integ.is_suspended(started)
    assert started["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] == {"pool": "b"}
    assert started["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 4
    assert integ.is_suspended(merge_patched(started, integ.stop_patch(started)))
    started["status"] = {"conditions": [{"type": "Failed", "status": "True", "message": "boom"}]}
    state = integ.finish_state(started)
    assert (state.finished, state.reason, state.message) == (True, "Failed", "boom")


def test_mpijob_launcher_job_belongs_to_its_mpijob() -> None:
    launcher = {"kind": "Job", "metadata": {"ownerReferences": [
        {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "nccl", "controller": True}]}}
    launcher["metadata"]["ownerReferences"][0]["uid"] = "u-1"
    owners = ClusterView(owners=lambda namespace, ref: mpijob() if ref.kind == "MPIJob" else None)
    assert managed_ancestor(launcher, owners.owners, KINDS).ancestor is not None
    assert mutate_job(launcher, "CREATE", owners).patch == []


def test_webhook_suspends_an_mpijob_through_run_policy() -> None:
    out = apply_patch(mpijob(), mutate_job(mpijob(), "CREATE", None).patch)
    assert out["spec"]["runPolicy"] == {"suspend": True}
    assert {rs["template"]["spec"]["schedulerName"] for rs in out["spec"]["mpiReplicaSpecs"].values()} == {
        "toposched"}


# ---- LeaderWorkerSet ---------------------------------------------------------------------------
def test_lws_pod_sets_leader_and_workers_or_main() -> None:
    sets = workload_pod_sets(LEADERWORKERSET, lws(ann={R: L3, G: "g"}))
    assert [(ps["name"], ps["count"]) for ps in sets] == [("leader", 1), ("worker", 3)]
    assert sets[0]["topologyRequest"] == {"required": L3, "podSetGroupName": "g"}
    assert sets[1]["topologyRequest"] == {"required": L3, "podSetGroupName": "g",
                                          "podIndexLabel": "leaderworkerset.sigs.k8s.io/worker-index"}
    assert set(sets[1]["template"]) == {"spec"}  # Kueue keeps only the spec of each template
    plain = workload_pod_sets(LEADERWORKERSET, lws(size=3, leader=False))
    assert [(ps["name"], ps["count"]) for ps in plain] == [("main", 3)]
    assert plain[0]["topologyRequest"] == {"podIndexLabel": "leaderworkerset.sigs.k8s.io/worker-index"}


def test_lws_group_workload_is_kueues_prebuilt_group_workload() -> None:
    wl = group_workload(LEADERWORKERSET, lws(), 1, 0, None)
    assert wl["metadata"]["name"] == kueue_workload_name("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "vllm-1",
                                                         "u-2")
    assert wl["metadata"]["name"].startswith("leaderworkerset-vllm-1-")
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "u-2"}
    assert wl["metadata"]["annotations"] == {
        "kueue.x-k8s.io/is-group-workload": "true",
        "kueue.x-k8s.io/job-owner-gvk": "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet",
        "kueue.x-k8s.io/job-owner-name": "vllm", "kueue.x-k8s.io/component-workload-index": "1"}
    assert LEADERWORKERSET.gvk == "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"
    assert "controller" not in wl["metadata"]["ownerReferences"][0]  # SetOwnerReference, not the controller
    assert wl["spec"]["queueName"] == "lq"


def test_lws_group_count_follows_surge_during_a_rolling_update() -> None:
    obj = lws(replicas=2)
    assert group_count(obj) == 2
    obj["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"maxSurge": 1}}
    obj["status"] = {"replicas": 3, "updatedReplicas": 1}
    assert group_count(obj) == 3
    obj["status"]["updatedReplicas"] = 2
    assert group_count(obj) == 2


def pod(group: str = "0", leader_name: str | None = None) -> dict[str, Any]:
    ann = {"kueue.x-k8s.io/pod-suspending-parent": "leaderworkerset.x-k8s.io/leaderworkerset"}
    if leader_name:
        ann["leaderworkerset.sigs.k8s.io/leader-name"] = leader_name
    return {"metadata": {"name": "vllm-0", "namespace": "team-a", "annotations": ann,
                         "labels": {"leaderworkerset.sigs.k8s.io/name": "vllm",
                                    "leaderworkerset.sigs.k8s.io/group-index": group,
                                    "leaderworkerset.sigs.k8s.io/worker-index": "2"}},
            "spec": {"schedulerName": "toposched"}}


def test_lws_pods_get_kueues_pod_group_labels_and_role() -> None:
    patch = pod_group_patch(LEADERWORKERSET, pod("1", leader_name="vllm-1"), lws())
    assert patch is not None
    name = group_workload(LEADERWORKERSET, lws(), 1, 0, None)["metadata"]["name"]
    assert patch["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true", Q: "lq",
                                           "kueue.x-k8s.io/pod-group-name": name,
                                           "kueue.x-k8s.io/prebuilt-workload-name": name}
    assert patch["metadata"]["annotations"] == {"kueue.x-k8s.io/pod-group-total-count": "4",
                                                "kueue.x-k8s.io/role-hash": "worker"}
    leader = pod_group_patch(LEADERWORKERSET, pod("1"), lws())
    assert leader is not None and leader["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "leader"
    main = pod_group_patch(LEADERWORKERSET, pod("0"), lws(leader=False))
    assert main is not None and main["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "main"
    labelled = merge_patched(pod("1"), leader)
    assert pod_group_patch(LEADERWORKERSET, labelled, lws()) is None  # already labelled: nothing to do


def test_extender_holds_unlabelled_group_pods_and_reads_labelled_ones() -> None:
    verdict = judge(pod(), None)
    assert verdict is not None and verdict.reason == Refusal.GROUP_UNLABELLED
    patch = pod_group_patch(LEADERWORKERSET, pod("0", leader_name="vllm-0"), lws())
    assert patch is not None
    labelled = merge_patched(pod("0", leader_name="vllm-0"), patch)
    labelled["metadata"]["annotations"]["kueue.x-k8s.io/pod-index-offset"] = "1"
    ref = pod_ref(labelled)
    assert ref.workload == group_workload(LEADERWORKERSET, lws(), 0, 0, None)["metadata"]["name"]
    assert ref.pod_set == "worker"
    # worker-index 2 with offset 1 (the leader is index 0): rank 1 of the 3 workers
    assert RankRule("leaderworkerset.sigs.k8s.io/worker-index").rank_of(ref.labels, 3, ref.index_offset) == 1


def test_webhook_defaults_lws_templates_as_kueue_and_never_suspends() -> None:
    obj = lws(ann={R: L3})
    obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    out = apply_patch(obj, mutate_job(obj, "CREATE", None).patch)
    assert "suspend" not in out["spec"]
    lwt = out["spec"]["leaderWorkerTemplate"]
    for name in ("leaderTemplate", "workerTemplate"):
        meta = lwt[name]["metadata"]
        assert meta["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "leaderworkerset.x-k8s.io/leaderworkerset"
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-serving"] == "true"
        assert meta["labels"]["kueue.x-k8s.io/priority-class"] == "high"
        assert lwt[name]["spec"]["schedulerName"] == "toposched"
    assert lwt["workerTemplate"]["metadata"]["annotations"]["kueue.x-k8s.io/pod-index-offset"] == "1"
    assert "kueue.x-k8s.io/pod-index-offset" not in lwt["leaderTemplate"]["metadata"]["annotations"]
    grouped = lws(ann={R: L3, G: "g"})  # a PodSet group: Kueue's group scheduling handles the offset
    out = apply_patch(grouped, mutate_job(grouped, "CREATE", None).patch)
    assert "kueue.x-k8s.io/pod-index-offset" not in out["spec"]["leaderWorkerTemplate"]["workerTemplate"][
        "metadata"]["annotations"]
    again = mutate_job(out, "CREATE", None).patch
    assert again == []


def test_place_reads_one_lws_group_and_an_mpijob() -> None:
    assert [(ps.name, ps.count) for ps in workload_from_manifest(lws()).pod_sets] == [("leader", 1), ("worker", 3)]
    assert [(ps.name, ps.count) for ps in workload_from_manifest(mpijob()).pod_sets] == [("launcher", 1),
                                                                                          ("worker", 4)]


# ---- the webhook's fit checks for multi-pod-set kinds --------------------------------------------
def text(verdict: Any) -> str:
    return "\n".join(str(e) for e in verdict.errors)


def test_fit_checks_name_the_pod_set_of_an_mpijob() -> None:
    view = cluster(gpu_quota=64)
    assert validate_job(mpijob(4, {R: L3}), view).allowed
    level = validate_job(mpijob(4, {R: "topology.k8s.aws/network-node-layer-9"}), view)
    assert ('spec.mpiReplicaSpecs[Worker].template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]: '
            'level "topology.k8s.aws/network-node-layer-9" is not in Topology "hyperpod-default"') in text(level)
    big = validate_job(mpijob(5, {R: L3}), view)  # a layer-3 domain holds 4 such pods
    assert 'pod set "worker" (5 pod(s)) can never be admitted by ClusterQueue "cq-a"' in text(big)
    assert "spec.mpiReplicaSpecs[Worker].template.metadata.annotations" in text(big)


def test_fit_checks_sum_the_pod_sets_quota() -> None:
    """8 GPUs of quota: each pod set alone fits, the leader and workers together do not."""
    verdict = validate_job(lws(size=2, ann={R: L2}), cluster(gpu_quota=8))
    assert ('spec: the LeaderWorkerSet (2 pod(s)) can never be admitted by ClusterQueue "cq-a" (resourceGroups[0]): '
            'nvidia.com/gpu 16 for all pod sets together > 8') in text(verdict)


def test_fit_checks_of_a_lws_worker_template_and_warnings_per_pod_set() -> None:
    view = cluster(gpu_quota=64)
    big = validate_job(lws(size=6, ann={R: L3}), view)  # 5 workers cannot share a layer-3 domain of 4 nodes
    assert "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations" in text(big)
    assert 'pod set "worker" (5 pod(s))' in text(big)
    ok = validate_job(lws(size=4, ann={R: L3}), view)
    assert ok.allowed, text(ok)
    # 2 workers (16 GPUs) exceed the nominal 8 and fit only by borrowing: the warning names the pod set
    warned = validate_job(lws(size=3, ann={R: L3}), cluster(gpu_quota=8, cohort="co", other_gpu=64))
    assert warned.allowed, text(warned)
    assert any(w.startswith('pod set "worker": nvidia.com/gpu: 16 exceeds the nominal quota 8') for w in
               warned.warnings), warned.warnings


def test_the_examples_pass_the_webhooks_rules_and_place_as_documented() -> None:
    """examples/jobs/lws-leader-workers.yaml and mpijob-launcher-workers.yaml: no annotation or
    PodSet-group error, and one group / the MPIJob have the pod sets the docs describe."""
    root = Path(__file__).resolve().parents[2] / "examples" / "jobs"
    group = yaml.safe_load((root / "lws-leader-workers.yaml").read_text())
    assert manifest_errors(group) == []
    sets = workload_from_manifest(group).pod_sets
    assert [(ps.name, ps.count) for ps in sets] == [("leader", 1), ("worker", 3)]
    mpi = yaml.safe_load((root / "mpijob-launcher-workers.yaml").read_text())
    assert manifest_errors(mpi) == []
    assert [(ps.name, ps.count) for ps in workload_from_manifest(mpi).pod_sets] == [("launcher", 1), ("worker", 4)]


def test_fit_checks_place_a_podset_group_jointly() -> None:
    """Leader (1 node) + 4 workers (4 nodes), each pod set alone fits a layer-3 domain of 4
    nodes; as a PodSet group they must share one, and never can: denied, naming the group and
    the placement's own words. Without the group name they may split: admitted."""
    view = cluster(gpu_quota=64)
    denied = validate_job(lws(size=5, ann={R: L3, G: "g"}), view)
    (err,) = denied.errors
    assert err.path == f"spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations[{G}]"
    assert str(err).startswith(f'{err.path}: PodSet group "g" (leader: 1 pod(s), worker: 4 pod(s)) can never be '
                               'admitted by ClusterQueue "cq-a" even on an empty cluster: flavor "p5": ')
    assert "one topology.k8s.aws/network-node-layer-3 domain" in str(err)  # the fix names the level
    assert validate_job(lws(size=5, ann={R: L3}), view).allowed
    fits = validate_job(lws(size=4, ann={R: L3, G: "g"}), view)
    assert fits.allowed and not fits.warnings, (text(fits), fits.warnings)


def test_fit_checks_warn_when_a_group_fits_only_on_unhealthy_nodes() -> None:
    """The workers select rack r1 (n4-n6 Ready, n7 not): 3 workers alone fit its healthy
    nodes, the group of 4 only if n7 recovers. (As Kueue, the group is placed with the
    workers' node selector and tolerations; the leader adds only its requests.)"""
    group = lws(size=4, ann={R: L3, G: "g"})
    group["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["nodeSelector"] = {L3: "r1"}
    verdict = validate_job(group, cluster(gpu_quota=64))
    assert verdict.allowed, text(verdict)
    assert verdict.warnings == ['PodSet group "g" (leader: 1 pod(s), worker: 3 pod(s)) fits in ClusterQueue "cq-a" '
                                'only if unhealthy nodes recover'], verdict.warnings
