"""Plain pods and pod groups as Kueue v0.17.0's pod integration reads them: role hashes equal to
Kueue's (values from Kueue's own tests, pod_webhook_test.go / pod_controller_test.go, and from
Kueue's ``utilpod.GenerateRoleHash`` run on the specs below), group pod sets by role, fast
admission, the group-count errors, finish and suspension."""

from __future__ import annotations

from typing import Any

import pytest

from admission.mutation import apply_patch
from scheduler.adapter.kinds import pod as podgroups
from scheduler.adapter.kinds.base import FinishState
from scheduler.adapter.kinds.deployment import DEPLOYMENT
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.podgroups import group_workload, pod_group_patch
from scheduler.adapter.kinds.statefulset import STATEFULSET
from scheduler.adapter.kinds.workloads import workload_pod_set, workload_pod_sets

GROUP, TOTAL = "kueue.x-k8s.io/pod-group-name", "kueue.x-k8s.io/pod-group-total-count"


def requests(r: dict[str, str]) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "pause", "resources": {"requests": r}}]}


# (spec, role hash) - the first three are Kueue's test expectations, the rest were computed by
# Kueue v0.17.0's own GenerateRoleHash (a throwaway Go program against the module cache); struct
# fields in the API server's (Go's) order.
VECTORS = [
    (requests({}), "a9f06f3a"),  # MakePod: empty requests (pod_webhook_test.go)
    (requests({"cpu": "1"}), "dc85db45"),  # pod_controller_test.go
    (requests({"cpu": "1", "memory": "1Gi"}), "4ebdd4a6"),
    ({"containers": [{"name": "c", "resources": {"requests": {
        "nvidia.com/gpu": "8", "cpu": "179", "memory": "1890Gi", "vpc.amazonaws.com/efa": "32"}},
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}],
      "nodeSelector": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge", "a": "b"}}, "6755cc8c"),
    ({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                      {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}],
      "priority": 100, "runtimeClassName": "nvidia"}, "1e7c8604"),
    ({"initContainers": [{"name": "i", "resources": {"requests": {"memory": "200Mi"}}}],
      "containers": [{"name": "c", "resources": {}}, {"name": "d", "resources": {"requests": {"cpu": "500m"}}}],
      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
          {"matchExpressions": [{"key": "sagemaker.amazonaws.com/node-health-status", "operator": "In",
                                 "values": ["Schedulable"]}]}]}}}}, "8899857b"),
    ({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
      "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.k8s.aws/network-node-layer-3",
                                     "whenUnsatisfiable": "DoNotSchedule",
                                     "labelSelector": {"matchLabels": {"app": "x", "a": "y"}}}],
      "overhead": {"memory": "1Gi", "cpu": "250m"}}, "0961d6a7"),
]


@pytest.mark.parametrize(("spec", "expected"), VECTORS)
def test_role_hash_is_kueues(spec: dict[str, Any], expected: str) -> None:
    assert podgroups.role_hash(spec) == expected


def test_role_hash_ignores_what_admission_does_not_read() -> None:
    a = requests({"cpu": "1"})
    b = {"containers": [{"name": "other", "image": "x", "command": ["run"], "resources": {
        "requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}], "restartPolicy": "Always"}
    assert podgroups.role_hash(a) == podgroups.role_hash(b)
    assert podgroups.role_hash(a) != podgroups.role_hash(requests({"cpu": "2"}))


def pod(name: str, r: dict[str, str], group: str | None = "g", total: str | None = "3", phase: str = "Pending",
        **annotations: str) -> dict[str, Any]:
    labels = {GROUP: group} if group else {}
    ann = dict(annotations)
    if total is not None:
        ann[TOTAL] = total
    return {"metadata": {"name": name, "uid": f"uid-{name}", "labels": labels, "annotations": ann},
            "spec": requests(r), "status": {"phase": phase}}


def test_group_pod_sets_one_per_role_sorted_failed_pods_left_out() -> None:
    pods = [pod("a", {"cpu": "1"}), pod("b", {"cpu": "1", "memory": "1Gi"}), pod("c", {"cpu": "1"}),
            pod("d", {"cpu": "1"}, phase="Failed")]
    pod_sets = [workload_pod_set(ps) for ps in podgroups.group_pod_sets(pods)]
    assert [(ps["name"], ps["count"]) for ps in pod_sets] == [("4ebdd4a6", 1), ("dc85db45", 2)]
    assert pod_sets[1]["template"] == {"spec": pods[0]["spec"]}  # spec only
    assert pod_sets[1]["topologyRequest"] == {"podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}


def test_role_hash_annotation_wins_and_fast_admission_counts_the_total() -> None:
    pods = [pod("a", {"cpu": "1"}, total="4", **{"kueue.x-k8s.io/role-hash": "main",
                                                 "kueue.x-k8s.io/pod-group-fast-admission": "true"})]
    assert [(ps.name, ps.count) for ps in podgroups.group_pod_sets(pods)] == [("main", 4)]


def test_single_pod_is_main_of_one_with_its_topology_request() -> None:
    single = pod("solo", {"cpu": "1"}, group=None, total=None,
                 **{"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"})
    [ps] = workload_pod_sets(POD, single)
    assert (ps["name"], ps["count"]) == ("main", 1)
    assert ps["topologyRequest"] == {"required": "topology.k8s.aws/network-node-layer-3",
                                     "podIndexLabel": "kueue.x-k8s.io/pod-group-pod-index"}
    assert podgroups.workload_name(single).startswith("pod-solo-")
    assert podgroups.workload_name(pod("m", {})) == "g"


@pytest.mark.parametrize(("total", "message"), [
    (None, "failed to extract 'kueue.x-k8s.io/pod-group-total-count' annotation"),
    ("x", 'strconv.Atoi: parsing "x": invalid syntax'),
    ("0", "incorrect annotation value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be "
          "greater than zero"),
])
def test_group_total_count_errors_are_kueues(total: str | None, message: str) -> None:
    with pytest.raises(podgroups.PodGroupError) as raised:
        podgroups.group_total_count(pod("a", {}, total=total))
    assert str(raised.value) == message


def test_group_finishes_when_all_succeeded_or_an_unretriable_group_stops() -> None:
    done = [pod(n, {}, total="2", phase="Succeeded") for n in "ab"]
    assert podgroups.group_finish_state(done) == FinishState(True, "Succeeded", "Pods succeeded: 2/2.")
    half = [pod("a", {}, total="2", phase="Succeeded"), pod("b", {}, total="2", phase="Running")]
    assert not podgroups.group_finish_state(half).finished
    stopped = [pod("a", {}, total="2", phase="Succeeded"),
               pod("b", {}, total="2", phase="Failed", **{"kueue.x-k8s.io/retriable-in-group": "false"})]
    assert podgroups.group_finish_state(stopped).message == "Pods succeeded: 1/2."
    serving = [pod(n, {}, total="2", phase="Succeeded", **{"kueue.x-k8s.io/pod-group-serving": "true"}) for n in "ab"]
    assert not podgroups.group_finish_state(serving).finished
    single = pod("s", {}, group=None, total=None, phase="Failed")
    single["status"]["message"] = "OOM"
    assert podgroups.group_finish_state([single]) == FinishState(True, "Failed", "OOM")


def test_suspended_while_gated_or_terminated_active_while_running() -> None:
    gated = pod("a", {})
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    running = pod("b", {}, phase="Running")
    assert podgroups.is_suspended([gated, running]) and not podgroups.is_suspended([running])
    assert podgroups.any_running([running], now=100.0, deletion_time={})
    running["metadata"]["deletionGracePeriodSeconds"] = 30
    assert not podgroups.any_running([running], now=100.0, deletion_time={"b": 10.0})  # stuck terminating
    assert podgroups.any_running([running], now=100.0, deletion_time={"b": 90.0})


def test_statefulset_workload_and_pod_group_stamp() -> None:
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                        "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"replicas": 3, "template": {
               "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "l3"}, "labels": {"a": "b"}},
               "spec": requests({"cpu": "1"})}}}
    [ps] = workload_pod_sets(STATEFULSET, sts)
    assert (ps["name"], ps["count"], ps["template"]) == ("main", 3, {"spec": requests({"cpu": "1"})})
    assert ps["topologyRequest"] == {"required": "l3", "podIndexLabel": "apps.kubernetes.io/pod-index"}
    wl = group_workload(STATEFULSET, sts, 0, 0, None)
    assert wl["metadata"]["name"].startswith("statefulset-web-") and wl["spec"]["queueName"] == "lq"
    assert wl["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true",
                                             "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
                                             "kueue.x-k8s.io/job-owner-name": "web"}
    member = {"metadata": {"name": "web-0", "labels": {}, "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u1", "controller": True}]},
        "spec": requests({"cpu": "1"})}
    assert STATEFULSET.pod_groups is not None and STATEFULSET.pod_groups.owner_name(member) == "web"
    stamp = pod_group_patch(STATEFULSET, member, sts)
    assert stamp is not None
    assert stamp["metadata"]["labels"][GROUP] == wl["metadata"]["name"]
    assert stamp["metadata"]["annotations"][TOTAL] == "3"
    assert stamp["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-fast-admission"] == "true"
    joined = {"metadata": {"labels": {**stamp["metadata"]["labels"]}, "annotations": stamp["metadata"]["annotations"]},
              "spec": requests({"cpu": "1"})}
    assert pod_group_patch(STATEFULSET, joined, sts) is None
    assert [(p.name, p.count) for p in podgroups.group_pod_sets([joined])] == [("main", 3)]
    assert STATEFULSET.pod_groups.group_count({**sts, "spec": {"replicas": 0}}) == 0  # scaled to 0: no Workload


def test_deployment_and_statefulset_template_stamps() -> None:
    dep = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": "p"}},
           "spec": {"template": {"spec": requests({})}}}
    ops: list[dict[str, Any]] = []
    assert DEPLOYMENT.create_defaults is not None
    DEPLOYMENT.create_defaults(dep, ops, dep["metadata"]["labels"])
    assert apply_patch(dep, ops)["spec"]["template"]["metadata"] == {
        "annotations": {"kueue.x-k8s.io/pod-suspending-parent": "deployment"},
        "labels": {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "lq",
                   "kueue.x-k8s.io/priority-class": "p"}}
    ops = []
    assert STATEFULSET.pod_groups is not None
    STATEFULSET.pod_groups.template_defaults(dep, ops, None)
    assert apply_patch(dep, ops)["spec"]["template"]["metadata"] == {
        "annotations": {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"},
        "labels": {"kueue.x-k8s.io/managed": "true"}}
